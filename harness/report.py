"""Results (JSON lines) -> pandas tables -> markdown and CSV."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from harness import oracle


def frame(results: list[dict]) -> pd.DataFrame:
    rows = [{"case_id": r["case_id"], "family": r["case"]["family"], "variant": r["case"]["variant"],
             "verdict": r["verdict"], "stage": r["stage"], "tensor": r.get("tensor", ""),
             "region": r.get("region", ""), "message": r.get("message", ""),
             "compile_s": (r.get("seconds") or {}).get("compile"), "run_s": (r.get("seconds") or {}).get("run")}
            for r in results]
    return pd.DataFrame(rows, columns=["case_id", "family", "variant", "verdict", "stage", "tensor", "region",
                                       "message", "compile_s", "run_s"])


def verdict_table(df: pd.DataFrame) -> pd.DataFrame:
    if df.empty:
        return pd.DataFrame()
    t = df.pivot_table(index=["family", "variant"], columns="verdict", values="case_id", aggfunc="count", fill_value=0)
    t["total"] = t.sum(axis=1)
    return t.reset_index()


def failures(results: list[dict]) -> list[dict]:
    return [r for r in results if r["verdict"] in oracle.FAILURES or r["verdict"] == "HARNESS_ERROR"]


def failure_table(results: list[dict], known: dict | None = None) -> pd.DataFrame:
    """One row per distinct failure signature: count, one example case, and the reproducer
    already recorded for it (`known`: signature -> path), if any."""
    rows = {}
    for r in failures(results):
        sig = oracle.signature(r)
        row = rows.setdefault(sig, {"family": sig[0], "variant": sig[1], "verdict": sig[2], "stage": sig[3],
                                    "tensor": sig[4], "region": sig[5], "message": r.get("message", "")[:120],
                                    "count": 0, "example": r["case_id"],
                                    "known": Path((known or {})[sig]).stem if sig in (known or {}) else ""})
        row["count"] += 1
    return pd.DataFrame(list(rows.values()))


def hazard_table(results: list[dict]) -> pd.DataFrame:
    """Distinct generated-code hazards (compile-only checks), with how many cases showed each."""
    rows = {}
    for r in results:
        for h in r.get("hazards") or []:
            text = oracle.normalize(h)
            row = rows.setdefault(text, {"hazard": h[:160], "cases": 0, "example": r["case_id"]})
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


def summary(results: list[dict], known: dict | None = None) -> str:
    df = frame(results)
    return ("## Verdicts\n\n" + markdown(verdict_table(df)) +
            "\n## Distinct failures\n\n" + markdown(failure_table(results, known)) +
            "\n## Generated-code hazards\n\n" + markdown(hazard_table(results)))


def write(out_dir, results: list[dict], known: dict | None = None) -> str:
    out_dir = Path(out_dir)
    text = summary(results, known)
    (out_dir / "summary.md").write_text(text)
    frame(results).to_csv(out_dir / "results.csv", index=False)
    return text


def explain(result: dict) -> str:
    """A failed result in a few lines: verdict, where, and each tensor's error against its tolerance."""
    lines = [f"{result['verdict']} at {result['stage']}: {result.get('message', '')}",
             f"case {result['case_id']}: {json.dumps(result['case'], sort_keys=True)}"]
    for c in result.get("checks") or []:
        lines.append(f"  {c['tensor']:6} {'ok ' if c['ok'] else 'BAD'} error {c['error']:.4g} "
                     f"tolerance {c['tolerance']:.4g} (baseline {c['base_error']:.4g}, atol {c['atol']:.4g})"
                     + (f" region {c['region']} {c['where']}" if not c["ok"] else ""))
    return "\n".join(lines)
