"""What a campaign of generated programs found, per 1,000 programs: the measure of the search, not of the kernels.

    python benchmarks/search.py RUN_DIR [RUN_DIR ...] [--wall S,S,...] [--reproducers reproducers]

For each run directory (a `harness run --families program` output: results.jsonl; `--wall`: the seconds the run
printed, "N cases in S s", one per directory) prints: distinct programs, cases, programs per second, the verdicts,
distinct failure classes (signatures without the statement kinds: `result.unscoped`) and those no recorded
reproducer covers, the hazard relations the programs hold (harness.programs.relations) and the distinct CUDA
features of the kernels (the `features` each result carries); each count also per 1,000 programs.
"""
import argparse
import json
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness import reproducer_files  # noqa: E402
from harness.case import CaseError  # noqa: E402
from harness.result import Result, alike, unscoped  # noqa: E402


def _readable(lines):
    """The results whose case still validates, and how many do not (a program that breaks a rule added since the run)."""
    out, unreadable = [], 0
    for line in lines:
        try:
            out.append(Result.from_dict(json.loads(line)))
        except CaseError:
            unreadable += 1
    return out, unreadable


def measure(run: Path, known: dict, wall=None) -> dict:
    results, unreadable = _readable(x for x in (run / "results.jsonl").read_text().splitlines() if x.strip())
    programs = {r.case.program for r in results}
    failed = [r for r in results if r.failed]
    classes = {unscoped(r.signature) for r in failed}
    new = {unscoped(r.signature) for r in failed if r.signature not in known and not alike(r.signature, known)}
    out = {"programs": len(programs), "cases": len(results), "verdicts": dict(Counter(r.verdict.value for r in results)),
           "failure classes": len(classes), "classes no reproducer covers": len(new)}
    if unreadable:
        out["cases whose program breaks today's rules (left out)"] = unreadable
    try:
        from harness.programs import relations
        held = Counter(name for p in programs for name in relations.held(p))
        out["relations held"] = len(held)
    except ImportError:
        pass
    features = {f for r in results for f in r.extra.get("features") or ()}
    if features:
        out["CUDA features"] = len(features)
    if wall:
        out["programs/s"] = round(len(programs) / wall, 2)
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("runs", nargs="+", type=Path)
    p.add_argument("--wall", default="", help="each run's seconds, comma-separated (programs per second)")
    p.add_argument("--reproducers", type=Path, default=Path("reproducers"))
    a = p.parse_args()
    known = reproducer_files.known_signatures(a.reproducers)
    walls = [float(w) for w in a.wall.split(",") if w] or [None] * len(a.runs)
    for run, wall in zip(a.runs, walls):
        m = measure(run, known, wall)
        per = {k: round(1000 * v / m["programs"], 1) for k, v in m.items()
               if isinstance(v, int) and k not in ("programs", "cases")}
        print(f"{run}: {json.dumps(m)}")
        print(f"  per 1,000 programs: {json.dumps(per)}")


if __name__ == "__main__":
    main()
