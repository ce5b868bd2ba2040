"""The TIR each kernel program traces to, digested: did a refactor of the kernel programs move any kernel?

    python benchmarks/tir_digests.py cases --families fwd,bwd --out cases.jsonl   # covering rows, default forms
    python benchmarks/tir_digests.py digest --cases cases.jsonl --out after.json [--tree DIR]
    python benchmarks/tir_digests.py compare before.json after.json

`cases` writes each family's covering array (harness.pairwise, seed 0, lengths drawn as `harness run`
draws them) with the program forms left at their defaults, so an older tree without forms can build
every row. `digest` traces every case's kernels in the harness of `--tree` (e.g. `git archive
<commit> harness | tar -x -C DIR`; default: this one) with the installed TileLang, nothing compiled:
harness.compat.compile is replaced by a recorder of the prim_funcs it is handed, and their TVMScript
is hashed. `compare` prints how many match and names those that do not. The same TIR gives the same
CUDA from one release, so this stands in for the compiled code's digest at a fraction of the time
(no nvcc, no GPU; TileLang must import).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path


def cases(families: list[str], out: Path) -> None:
    from harness import case as case_mod
    from harness import pairwise, strategies

    rows = {case_mod.to_json(c.replace(forms=())) for fam in families
            for c in strategies.draw(fam, len(pairwise.covering(fam, seed=0)), seed=0, cover=True)}
    out.write_text("".join(line + "\n" for line in sorted(rows)))
    print(f"{len(rows)} kernels (default forms) of {', '.join(families)} -> {out}")


def digest(cases_file: Path, out: Path) -> None:
    from harness import case as case_mod
    from harness import compat, kernels

    traced: list[str] = []

    def record(func, *args, **kwargs):
        traced.append(func.script())
        return func

    compat.compile = record
    digests = {}
    for line in cases_file.read_text().splitlines():
        c = case_mod.from_json(line)
        traced.clear()
        try:
            kernels.family(c.family).build(c, "sm_90a")
            digests[c.id] = hashlib.sha256("\n".join(traced).encode()).hexdigest()[:16]
        except Exception as e:  # a program this tree cannot write: named, never a match
            digests[c.id] = f"error: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:200]
    out.write_text(json.dumps(digests, indent=1, sort_keys=True))
    errors = sum(v.startswith("error") for v in digests.values())
    print(f"{len(digests)} kernels traced, {errors} failed to trace -> {out}")


def compare(a: Path, b: Path) -> int:
    before, after = json.loads(a.read_text()), json.loads(b.read_text())
    common = sorted(set(before) & set(after))
    same = [k for k in common if before[k] == after[k] and not before[k].startswith("error")]
    print(f"{len(same)} / {len(common)} kernels trace to the same TIR ({len(before)} before, {len(after)} after)")
    for k in common:
        if k not in same:
            print(f"  {k}: {before[k]} -> {after[k]}")
    return 0 if len(same) == len(common) else 1


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("cases")
    c.add_argument("--families", required=True)
    c.add_argument("--out", type=Path, required=True)
    d = sub.add_parser("digest")
    d.add_argument("--cases", type=Path, required=True)
    d.add_argument("--out", type=Path, required=True)
    d.add_argument("--tree", type=Path, help="a directory holding the harness package to trace (default: this one)")
    m = sub.add_parser("compare")
    m.add_argument("before", type=Path)
    m.add_argument("after", type=Path)
    args = p.parse_args()
    sys.path.insert(0, str(args.tree.resolve()) if getattr(args, "tree", None) else str(Path(__file__).resolve().parents[1]))
    if args.cmd == "cases":
        cases(args.families.split(","), args.out)
    elif args.cmd == "digest":
        digest(args.cases, args.out)
    else:
        return compare(args.before, args.after)
    return 0


if __name__ == "__main__":
    sys.exit(main())
