"""The release matrix: every reproducer (or a campaign's cases) on every release listed.

Where a bisect walks from one endpoint to the other, the matrix replays everything everywhere: which
recorded bugs each release has, and which releases a campaign's cases compile on. Each cell runs in
that release's environment (harness.bisect.environments); a release that cannot be had here is a
column of "cannot test", not an error.
"""
from __future__ import annotations

from pathlib import Path

from harness.bisect import environments
from harness.status import Status


def examples_tree(examples: Path, version) -> Path | None:
    """The examples tree under `examples` that runs on TileLang `version` (its own, or the newest there is
    for a release without them), as `harness examples fetch --to examples` leaves it; None if there is none."""
    from harness.outside import source

    for release in (str(version), source.NEWEST_EXAMPLES.get(str(version))):
        if release and (examples / f"tilelang-{release}").is_dir():
            return examples / f"tilelang-{release}"
    return None


def matrix(reproducers: list[Path], versions: list, releases: environments.Releases, runs=1, log=print, jobs=1,
           fresh=False, examples: Path | None = None) -> str:
    """Every reproducer replayed on every release (`jobs` at a time; an outside kernel's with that release's
    tree under `examples`): a markdown table of REPRODUCED / not reproduced / fails differently (another
    signature) / cannot test."""
    from concurrent.futures import ThreadPoolExecutor

    from harness import kernels, reproducer_loading

    # A failure with another signature is another bug (known or new), not this one.
    words = {Status.REPRODUCED: "**REPRODUCED**", Status.FAILS_DIFFERENTLY: "fails differently",
             Status.NOT_REPRODUCED: "not reproduced", Status.CANNOT_TEST: "cannot test"}
    reps = [reproducer_loading.load(p) for p in reproducers]
    outside = {p for p, rep in zip(reproducers, reps) if kernels.family(rep.case.family).runner.module}
    rows = ["| reproducer | " + " | ".join(map(str, versions)) + " |", "|---|" + "---|" * len(versions)]
    cells = {}
    for v in versions:
        target, why = releases.get(v)

        def cell(path, v=v, target=target, why=why):
            tree = examples_tree(examples, v) if path in outside else None
            if target is None:
                return Status.CANNOT_TEST, why
            return environments.replay_in(target, path, runs, releases.root / "logs" / f"matrix-{v}", fresh, tree)

        with ThreadPoolExecutor(jobs) as pool:
            for rep, out in zip(reps, pool.map(cell, reproducers)):
                cells[rep.id, v] = out
                log(f"  {v} {rep.id}: {out[1]}")
    for rep in reps:
        rows.append(f"| {rep.id} | " + " | ".join(words[cells[rep.id, v][0]] for v in versions) + " |")
    return "\n".join(rows) + "\n"


def cases_matrix(cases: Path, versions: list, releases: environments.Releases, out: Path, log=print,
                 examples: Path | None = None) -> str:
    """A campaign's cases run on every release (compile-only without a GPU; outside kernels with that
    release's tree under `examples`): verdict counts per release, then each case that fails somewhere and its
    verdict on every release (`per_case`)."""
    rows = ["| release | verdicts |", "|---|---|"]
    for v in versions:
        target, why = releases.get(v)
        tree = examples and examples_tree(examples, v)
        cell = (environments.campaign_in(target, cases, out / f"tilelang-{v}", tree) if target is not None
                else f"cannot test: {why}")
        log(f"  {v}: {cell}")
        rows.append(f"| {v} | {cell} |")
    return "\n".join(rows) + "\n\n" + per_case({v: out / f"tilelang-{v}" / "results.jsonl" for v in versions})


def per_case(results: dict) -> str:
    """{release: its results.jsonl} -> a table of the cases that fail on some release: their verdict on each
    ("-": not run there), the releases in order; and a last line counting those that fail everywhere they ran,
    those that fail on older releases only (fixed since) or on newer ones only (broken since), and the rest (back
    and forth)."""
    from harness import untrusted
    from harness.result import Result

    verdicts: dict = {}   # case id -> {release: verdict}
    for v, path in results.items():
        if path.exists():
            for line in path.read_text().splitlines():
                if line.strip():
                    r = Result.from_dict(untrusted.loads(line))
                    verdicts.setdefault(r.case_id, {})[v] = r.verdict
    failing = {c: by for c, by in verdicts.items() if any(x.failed for x in by.values())}
    versions = list(results)
    rows = ["| case | " + " | ".join(map(str, versions)) + " |", "|---|" + "---|" * len(versions)]
    counts = {"everywhere": 0, "fixed since": 0, "broken since": 0, "back and forth": 0}
    for c, by in sorted(failing.items()):
        rows.append(f"| {c} | " + " | ".join(by[v].value if v in by else "-" for v in versions) + " |")
        failed = [by[v].failed for v in versions if v in by]
        if all(failed):
            counts["everywhere"] += 1
        elif failed == sorted(failed, reverse=True):   # failures first, then passes: fixed in a later release
            counts["fixed since"] += 1
        elif failed == sorted(failed):
            counts["broken since"] += 1
        else:   # fails, passes, fails again (or the reverse): a race or an input that varies, not a release's change
            counts["back and forth"] += 1
    summary = f"{len(failing)} of {len(verdicts)} cases fail on some release: " + \
        ", ".join(f"{n} {what}" for what, n in counts.items())
    return "\n".join(rows) + "\n\n" + summary + "\n"
