"""Results (JSON lines) -> pandas tables -> markdown, CSV, and one self-contained HTML page with plots."""
from __future__ import annotations

import json
from html import escape
from pathlib import Path

import pandas as pd

from harness import case as case_mod
from harness import pairwise, untrusted
from harness.programs import relations
from harness.result import Result, alike, normalize

STAGES = ("start", "compile", "inputs", "run", "judge")  # a worker's timed stages (harness.worker; start: its first case only)
COLUMNS = ["case_id", "family", "variant", "verdict", "stage", "tensor", "region", "message",
           *(f"{s}_s" for s in STAGES), "seqlen_q", "seqlen_k", "head_dim", "error_ratio", "gpu"]


def frame(results: list[Result]) -> pd.DataFrame:
    """One row per case; error_ratio is the largest error / tolerance over its judged tensors."""
    rows = [{"case_id": r.case_id, "family": r.case.family, "variant": r.case.variant,
             "verdict": r.verdict.value, "stage": r.stage, "tensor": r.tensor, "region": r.region, "message": r.message,
             **{f"{s}_s": (r.seconds or {}).get(s) for s in STAGES},
             "seqlen_q": r.case.seqlen_q, "seqlen_k": r.case.seqlen_k, "head_dim": r.case.head_dim,
             "error_ratio": max((c["error"] / c["tolerance"] for c in r.checks or [] if c["tolerance"] > 0),
                                default=None),
             "gpu": r.gpu}  # set when the pool spread its workers over several GPUs
            for r in results]
    return pd.DataFrame(rows, columns=COLUMNS)


def verdict_table(df: pd.DataFrame) -> pd.DataFrame:
    if df.empty:
        return pd.DataFrame()
    t = df.pivot_table(index=["family", "variant"], columns="verdict", values="case_id", aggfunc="count", fill_value=0)
    t["total"] = t.sum(axis=1)
    t.columns.name = None  # else the pivot's "verdict" label becomes an empty first column in HTML
    return t.reset_index()


def time_table(df: pd.DataFrame, by: str = "family") -> pd.DataFrame:
    """Worker seconds per family (or GPU) and stage, summed over its cases: where a run's time went."""
    if df.empty:
        return pd.DataFrame()
    t = df.groupby(by)[[f"{s}_s" for s in STAGES]].sum().round(1)
    t.insert(0, "cases", df.groupby(by).size())
    return t.reset_index()


def failures(results: list[Result]) -> list[Result]:
    return [r for r in results if r.failed or r.verdict == "HARNESS_ERROR"]


def failure_table(results: list[Result], known: dict | None = None) -> pd.DataFrame:
    """One row per distinct failure signature: count, one example case, the reproducer already recorded for it
    (`known`: signature -> path) or "like ID" for one alike (harness.result.alike), and the code-scan checks its
    cases carried ("scan"): a race the scan predicted is attributed by its check, whatever the region it showed in."""
    rows, scans = {}, {}
    for r in failures(results):
        sig = r.signature
        # A shared kernel's signature names no family: the first case's family stands for it.
        row = rows.setdefault(sig, {"family": sig[0] or r.case.family, "variant": sig[1], "verdict": sig[2].value,
                                    "stage": sig[3],
                                    "tensor": sig[4], "region": sig[5], "message": r.message[:120],
                                    "count": 0, "example": r.case_id,
                                    "known": _known(sig, known or {})})
        row["count"] += 1
        scans.setdefault(sig, set()).update(f.check for f in r.hazards or ())
    for sig, row in rows.items():
        row["scan"] = " ".join(sorted(scans[sig]))
    return pd.DataFrame(list(rows.values()))


def _known(sig, known: dict) -> str:
    """The recorded reproducer of a signature, or "like ID" for one alike (harness.result.alike), or ""."""
    if sig in known:
        return Path(known[sig]).stem
    like = alike(sig, known)
    return f"like {Path(like).stem}" if like else ""


def hazard_table(results: list[Result]) -> pd.DataFrame:
    """Distinct generated-code hazards (compile-only checks), with how many cases showed each."""
    rows = {}
    for r in results:
        for f in r.hazards or ():
            text = normalize(str(f))
            row = rows.setdefault(text, {"hazard": str(f)[:160], "cases": 0, "example": r.case_id})
            row["cases"] += 1
    return pd.DataFrame(list(rows.values()))


def markdown(df: pd.DataFrame) -> str:
    if df.empty:
        return "(none)\n"
    cols = [str(c) for c in df.columns]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for row in df.itertuples(index=False):
        lines.append("| " + " | ".join(str(v).replace("|", "\\|") for v in row) + " |")
    return "\n".join(lines) + "\n"


def coverage_table(results: list[Result]) -> pd.DataFrame:
    """Pairwise coverage of the static features the run's cases reached (harness.pairwise)."""
    return pairwise.summary([r.case for r in results])


def relation_table(results: list[Result]) -> pd.DataFrame:
    """The hazard relations the run's generated programs held (harness.programs.relations): per relation, the
    programs holding it and one case of them, then the line `relations covered: X / Y`; none if no program ran."""
    programs = {}
    for r in results:
        if r.case.program:
            programs.setdefault(r.case.program, r.case_id)
    if not programs:
        return pd.DataFrame()
    rows, covered = relations.coverage([(case_id, p) for p, case_id in programs.items()])
    return pd.DataFrame(rows + [{"relation": covered, "programs": "", "example": ""}])


def tables(results: list[Result], known: dict | None = None, df: pd.DataFrame | None = None) -> list[tuple[str, pd.DataFrame]]:
    """The report's tables, titled, in order (the markdown summary and the HTML page show the same);
    `df`: frame(results), if the caller has it."""
    df = frame(results) if df is None else df
    by_gpu = [("Worker seconds by GPU", time_table(df, "gpu"))] if df["gpu"].nunique() > 1 else []
    return [("Verdicts", verdict_table(df)), ("Distinct failures", failure_table(results, known)),
            ("Generated-code hazards", hazard_table(results)), ("Worker seconds by stage", time_table(df)),
            *by_gpu, ("Pairwise coverage", coverage_table(results)), ("Hazard relations", relation_table(results))]


def describe(about: dict | None) -> str:
    """The run in one line (campaign.about: what it compiled with, for which arch, from which cases)."""
    if not about:
        return "Run: not recorded (no run.json)"
    where = (f"compile-only for {about.get('target')} (no GPU: numerics not run)" if about.get("compile_only")
             else f"on {about.get('gpu')} ({about.get('target')})")
    cases = (f"cases from {about['cases_from']}" if about.get("cases_from") else "the kernels' own test shapes"
             if about.get("peer") else f"seed {about.get('seed')}")
    shard = f", shard {about['shard']}" if about.get("shard") else ""
    return (f"Run: TileLang {about.get('tilelang')}, {where}, {cases}{shard}, "
            f"families {', '.join(about.get('families') or ())}")


def feature_growth(results: list[Result]) -> list[tuple[int, int, int]]:
    """(programs, distinct CUDA features, distinct pairs of them) after each new generated program, in the order the
    results came (harness.cuda_features: a result's `features`; the corpus keeps programs for new ones)."""
    programs, features, pairs, out = set(), set(), set(), []
    for r in results:
        if r.case.program and r.features is not None and r.case.program not in programs:
            programs.add(r.case.program)
            features |= set(r.features)
            pairs |= {(a, b) for a in r.features for b in r.features if a < b}
            out.append((len(programs), len(features), len(pairs)))
    return out


FEATURES_PLOT = "features.png"  # beside summary.md: CUDA features seen against programs run


def _features_line(growth) -> list[str]:
    if not growth:
        return []
    programs, features, pairs = growth[-1]
    return [f"CUDA features seen: {features} (pairs: {pairs}) in {programs} programs\n",
            f"![CUDA features and pairs seen against programs run]({FEATURES_PLOT})\n"]


def summary(results: list[Result], known: dict | None = None, about: dict | None = None, titled=None) -> str:
    """The markdown report; `titled`: tables(results, known), if the caller has them."""
    titled = tables(results, known) if titled is None else titled
    return "\n".join([f"{describe(about)}\n", *_features_line(feature_growth(results)),
                      *(f"## {title}\n\n{markdown(t)}" for title, t in titled)])


RUN = "run.json"  # in a run's directory: campaign.about, the report's first line (harness report reads it again)


def write(out_dir, results: list[Result], known: dict | None = None, about: dict | None = None) -> str:
    """summary.md, results.csv and report.html in `out_dir`, and run.json with `about`, the run
    they report (without it, the one run.json holds, if any); returns the markdown."""
    out_dir = Path(out_dir)
    if about is not None:
        (out_dir / RUN).write_text(json.dumps(about, indent=1) + "\n")
    elif (out_dir / RUN).is_file():
        try:
            about = untrusted.loads((out_dir / RUN).read_text())
        except ValueError:
            about = None
    about = about if isinstance(about, dict) else None
    df = frame(results)
    titled = tables(results, known, df)  # once for the markdown and the page: the coverage table takes seconds
    text = summary(results, known, about, titled)
    (out_dir / "summary.md").write_text(text)
    growth = feature_growth(results)
    if growth:
        features_plot(growth, out_dir / FEATURES_PLOT)
    df.to_csv(out_dir / "results.csv", index=False)
    (out_dir / "report.html").write_text(html(df, titled, about))
    return text


# Correct behaviour green, the compiler's failures warm, our own error black.
COLORS = {"PASS": "#2ca02c", "COMPILED": "#98df8a", "UNSUPPORTED": "#c7c7c7", "MISMATCH": "#d62728",
          "NONFINITE": "#ff7f0e", "COMPILE_ERROR": "#9467bd", "CRASH": "#8c564b", "HANG": "#e377c2",
          "ACCEPTS_INVALID": "#bcbd22", "REFUSES_INVALID": "#dbdb8d", "HARNESS_ERROR": "#000000"}


def _png(fig) -> str:
    import base64
    import io

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    return f'<img alt="" src="data:image/png;base64,{base64.b64encode(buf.getvalue()).decode()}">'


def plotting():
    """matplotlib's pyplot, drawing to files (half a second to import: a run imports it while its cases run)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def plots(df: pd.DataFrame) -> list[str]:
    """error / tolerance against sequence length and head dim, verdicts per family, time per kernel."""
    plt = plotting()

    out = []
    judged = df.dropna(subset=["error_ratio"])
    if not judged.empty:
        fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
        for family, part in judged.groupby("family"):
            axes[0].scatter(part["seqlen_q"], part["error_ratio"], s=10, label=family)
            axes[1].scatter(part["head_dim"], part["error_ratio"], s=10, label=family)
        for ax, name in zip(axes, ("seqlen_q", "head_dim")):
            ax.axhline(1.0, color="red", linewidth=1)  # the tolerance
            ax.set_yscale("log")
            ax.set_xlabel(name)
            ax.set_ylabel("max error / tolerance")
            ax.legend(fontsize=8)
        out.append(_png(fig))
        plt.close(fig)
    if not df.empty:
        fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
        counts = df.pivot_table(index="family", columns="verdict", values="case_id", aggfunc="count", fill_value=0)
        counts.plot.bar(ax=axes[0], stacked=True, rot=0, color=[COLORS.get(v, "#999999") for v in counts.columns])
        axes[0].set_ylabel("cases")
        axes[0].legend(title="verdict", fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
        fig.subplots_adjust(wspace=0.45)  # room for that legend between the two plots
        times = df.dropna(subset=["compile_s"])
        times = times[times["compile_s"] > 0]
        if not times.empty:
            # Log bins: a load from TileLang's disk cache (under a second) and a cold compile (tens of
            # seconds) are both "building a kernel", and a linear axis crushes the first into one bar.
            import numpy as np
            bins = np.geomspace(times["compile_s"].min(), times["compile_s"].max() * 1.01, 25)
            axes[1].hist([part["compile_s"] for _, part in times.groupby("family")], bins=bins,
                         label=list(times.groupby("family").groups), stacked=True)
            axes[1].set_xscale("log")
            axes[1].set_xlabel("seconds to build one kernel in a worker (compile, or load from the disk cache)")
            axes[1].set_ylabel("kernels")
            axes[1].legend(fontsize=8)
        out.append(_png(fig))
        plt.close(fig)
    return out


def features_plot(growth, path: Path) -> None:
    """Distinct CUDA features and pairs of them against the generated programs run (feature_growth), to `path`."""
    plt = plotting()
    fig, ax = plt.subplots(figsize=(7, 3.8))
    programs = [g[0] for g in growth]
    ax.plot(programs, [g[1] for g in growth], label="features")
    ax.set_xlabel("generated programs run")
    ax.set_ylabel("distinct CUDA features")
    pairs = ax.twinx()
    pairs.plot(programs, [g[2] for g in growth], color="#ff7f0e", label="pairs of features")
    pairs.set_ylabel("distinct pairs")
    ax.legend(handles=ax.lines + pairs.lines, loc="upper left", fontsize=8)
    fig.savefig(path, dpi=90, bbox_inches="tight")
    plt.close(fig)


def html(df: pd.DataFrame, titled, about: dict | None = None) -> str:
    """The page: the report's tables (`titled`, as tables() gives them) and the plots of frame() `df`."""
    body = "".join(f"<h2>{title}</h2>" + (t.to_html(index=False, border=0) if not t.empty else "<p>(none)</p>")
                   for title, t in titled)
    style = ("body{font-family:sans-serif;margin:2em;max-width:1100px} table{border-collapse:collapse;font-size:13px}"
             "td,th{padding:3px 8px;border-bottom:1px solid #ddd;text-align:left} img{max-width:100%}")
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>harness report</title><style>{style}</style>"
            f"</head><body><h1>Harness report: {len(df)} cases</h1><p>{escape(describe(about))}</p>{body}"
            f"<h2>Plots</h2>{''.join(plots(df))}"
            "</body></html>\n")


def explain(result: Result) -> str:
    """A failed result in a few lines: verdict, where, and each tensor's error against its tolerance."""
    lines = [f"{result.verdict} at {result.stage}: {result.message}",
             f"case {result.case_id}: {case_mod.to_json(result.case)}"]
    for c in result.checks or []:
        lines.append(f"  {c['tensor']:6} {'ok ' if c['ok'] else 'BAD'} error {c['error']:.4g} "
                     f"tolerance {c['tolerance']:.4g} (baseline {c['base_error']:.4g}, atol {c['atol']:.4g})"
                     + (f" region {c['region']} {c['where']}" if not c["ok"] else ""))
    return "\n".join(lines)
