"""The code each kernel program generates, digested: did a refactor of the kernel programs move any kernel?

    python benchmarks/kernel_digests.py cases --families fwd,bwd --out cases.jsonl   # covering rows, default forms
    python benchmarks/kernel_digests.py digest --cases cases.jsonl --out after.json [--tree DIR] [--code cuda] [--jobs N]
    python benchmarks/kernel_digests.py compare before.json after.json

`cases` writes each family's covering array (harness.pairwise, seed 0, lengths drawn as `harness run`
draws them) with the program forms left at their defaults, so an older tree without forms can build
every row. `digest` builds every case's kernels in the harness of `--tree` (e.g. `git archive
<commit> harness | tar -x -C DIR`; default: this one) with the installed TileLang, with
tilelang.compile replaced by a stand-in that keeps, per prim_func, its TVMScript (`--code tir`, the
default: seconds per kernel) or the CUDA TileLang generates for it (`--code cuda`: tilelang.lower
under the compile's pass configs and target, no nvcc, no GPU); the digest is the worker's `code`
digest over those texts. `compare` prints how many match and names those that do not.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import multiprocessing
import os
import shutil
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def cases(families: list[str], out: Path) -> None:
    from harness import case as case_mod
    from harness import pairwise, strategies

    rows = {case_mod.to_json(c.replace(forms=())) for fam in families
            for c in strategies.draw(fam, len(pairwise.covering(fam, seed=0)), seed=0, cover=True)}
    out.write_text("".join(line + "\n" for line in sorted(rows)))
    print(f"{len(rows)} kernels (default forms) of {', '.join(families)} -> {out}")


def _traced(code: str):
    """A stand-in for tilelang.compile that keeps what `code` digests of each prim_func it is handed:
    its TVMScript, or the CUDA TileLang generates for it (tilelang.lower under the same pass configs
    and target: everything a compile does before nvcc)."""
    import tilelang
    import tvm

    class Lowered:  # what harness.compat.kernel_sources reads from a compiled kernel
        def __init__(self, source):
            self.source = source

        def get_kernel_source(self):
            return self.source

    def compile(func, target=None, pass_configs=None, **_):
        if code == "tir":
            return Lowered(func.script())
        with tvm.transform.PassContext(opt_level=3, config=pass_configs or {}), target:
            return Lowered(tilelang.lower(func, target=target).kernel_source)

    tilelang.compile = compile


def _digest_chunk(tree: str, code: str, lines: list[str], part: Path) -> None:
    """Digest `lines` in order in this process, one line of `part` per kernel as it is done."""
    sys.path.insert(0, tree)
    _traced(code)
    from harness import case as case_mod
    from harness import compat, kernels

    with part.open("w") as f:
        for line in lines:
            c = case_mod.from_json(line)
            try:
                fam = kernels.family(c.family)
                # A tree from before Family was split into its records has build on the Family itself.
                built = getattr(fam, "runner", fam).build(c, "sm_90a")
                # The worker's `code` digest (harness.worker.scan), over what the stand-in kept.
                value = hashlib.sha256("\n".join(compat.kernel_sources(built)).encode()).hexdigest()[:16]
            except Exception as e:  # a program this tree cannot write: named, never a match
                value = f"error: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:200]
            f.write(json.dumps([c.id, value]) + "\n")
            f.flush()


def _parts(out: Path) -> Path:
    return out.with_name(out.name + ".parts")


def load(out: Path) -> dict[str, str]:
    """A digest file, or what its parts hold of a run cut short."""
    if out.exists():
        return json.loads(out.read_text())
    return dict(json.loads(line) for part in sorted(_parts(out).glob("*.jsonl")) for line in part.read_text().splitlines())


def digest(cases_file: Path, out: Path, tree: Path, code: str, jobs: int) -> None:
    lines = cases_file.read_text().splitlines()
    jobs = max(1, min(jobs, len(lines)))  # no process that would import TileLang for nothing
    # One TileLang per process, one thread each (lowering is CPU-bound; thread pools per process would
    # oversubscribe the cores). The chunks are fixed, so two trees lower their kernels in the same order
    # in the same processes (a release that numbers generated names across a process's compiles
    # still compares). Each process writes its part as it goes: a run cut short keeps what it did.
    os.environ.update(OMP_NUM_THREADS="1", TVM_NUM_THREADS="1")
    out.unlink(missing_ok=True)
    parts = _parts(out)
    shutil.rmtree(parts, ignore_errors=True)
    parts.mkdir(parents=True)
    t0 = time.monotonic()
    with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
        list(pool.map(_digest_chunk, [str(tree)] * jobs, [code] * jobs, [lines[i::jobs] for i in range(jobs)],
                      [parts / f"{i}.jsonl" for i in range(jobs)]))
    digests = load(out)
    out.write_text(json.dumps(digests, indent=1, sort_keys=True))
    shutil.rmtree(parts)
    errors = sum(v.startswith("error") for v in digests.values())
    print(f"{len(digests)} kernels digested ({code}) in {time.monotonic() - t0:.0f} s, {errors} failed -> {out}")


def compare(a: Path, b: Path) -> int:
    before, after = load(a), load(b)
    common = sorted(set(before) & set(after))
    same = [k for k in common if before[k] == after[k] and not before[k].startswith("error")]
    print(f"{len(same)} / {len(common)} kernels digest the same ({len(before)} before, {len(after)} after)")
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
    d.add_argument("--tree", type=Path, default=ROOT, help="a directory holding the harness package to build (default: this one)")
    d.add_argument("--code", choices=("tir", "cuda"), default="tir", help="what to digest (default: tir)")
    d.add_argument("--jobs", type=int, default=1, help="processes")
    m = sub.add_parser("compare")
    m.add_argument("before", type=Path)
    m.add_argument("after", type=Path)
    args = p.parse_args()
    if args.cmd == "cases":
        sys.path.insert(0, str(ROOT))
        cases(args.families.split(","), args.out)
    elif args.cmd == "digest":
        digest(args.cases, args.out, args.tree.resolve(), args.code, args.jobs)
    else:
        return compare(args.before, args.after)
    return 0


if __name__ == "__main__":
    sys.exit(main())
