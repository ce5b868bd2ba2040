"""What a worker's start costs, three ways: fresh processes (the pool's way), the same pool's workers again
(a pool that outlives a run), and processes forked from a parent that imported once.

    python benchmarks/worker_start.py --workers 4

1. fresh: a Pool starts `--workers` workers at once and hands each a case that needs no kernel (UNSUPPORTED
   at its plan), so that each answers as soon as it is ready: each worker's start seconds (spawn to ready:
   the interpreter, torch, the kernel modules, and on a GPU the CUDA context and the first judge), and the
   wall seconds until all answered.
2. again: the same pool, another run of as many such cases: the workers are up; what is left is the
   round trip.
3. forked: this process imports what a worker imports (CUDA untouched: a CUDA context does not survive a
   fork), then forks `--workers` children that finish the worker's warm-up (harness.worker.warm_up) and
   report: the parent's import seconds, each child's seconds from fork to ready, and the wall seconds.
   TileLang is imported in the parent too (`--no-tilelang`: left to the children, as a worker leaves it to
   its first compile).
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.case import Case  # noqa: E402
from harness.pool import Pool  # noqa: E402


def unsupported(i: int) -> Case:
    """A case every worker answers at its plan (a head_dim fwd does not take), each its own kernel: the pool
    hands each to another worker."""
    dims = [d for d in range(8, 8 * 400, 8) if d not in (32, 64, 96, 128, 256)]
    return Case(family="fwd", head_dim=dims[i], head_dim_v=dims[i])


def fresh(workers: int, target: str, logs: Path) -> None:
    t0 = time.perf_counter()
    with Pool(workers, target, logs) as pool:
        pool.start(workers)
        results = list(pool.run([unsupported(i) for i in range(workers)]))
        wall = time.perf_counter() - t0
        starts = [r.seconds["start"] for r in results if r.seconds and "start" in r.seconds]
        print(f"fresh: {len(starts)} workers, start {statistics.mean(starts):.2f} s mean, {max(starts):.2f} s max "
              f"(spawn to ready); all answered after {wall:.2f} s", flush=True)
        t0 = time.perf_counter()
        again = list(pool.run([unsupported(i) for i in range(workers)]))
        print(f"again (the same pool, a second run): {len(again)} answers after {time.perf_counter() - t0:.3f} s, "
              f"{sum(1 for r in again if r.seconds and 'start' in r.seconds)} workers started", flush=True)


def forked(workers: int, target: str, tilelang: bool) -> None:
    t0 = time.perf_counter()
    import torch  # noqa: F401

    from harness import kernels
    for name in kernels.FAMILIES:
        kernels.family(name)
    if tilelang:
        import tilelang  # noqa: F401
    imported = time.perf_counter() - t0
    from harness import worker

    pipes, t1 = [], time.perf_counter()
    for _ in range(workers):
        r, w = os.pipe()
        if os.fork() == 0:  # the child: finish the warm-up, say how long it took, and go
            os.close(r)
            start = time.perf_counter()
            worker.warm_up(target)  # it keeps quiet about a failure: on a GPU, check that CUDA works here
            ok = target != "auto" or _cuda_works()
            os.write(w, f"{time.perf_counter() - start!r} {ok}".encode())
            os._exit(0)
        os.close(w)
        pipes.append(r)
    ready, broken = [], 0
    for r in pipes:
        seconds, ok = (os.read(r, 64).decode() or "nan False").split()
        ready.append(float(seconds))
        broken += ok != "True"
        os.close(r)
    for _ in pipes:
        os.wait()
    print(f"forked: parent imports {imported:.2f} s (TileLang {'in' if tilelang else 'not in'} them), then "
          f"{workers} children ready {statistics.mean(ready):.3f} s mean, {max(ready):.3f} s max after the fork; "
          f"all ready {time.perf_counter() - t1:.2f} s after the first fork, {time.perf_counter() - t0:.2f} s "
          f"after the imports began{f'; CUDA failed in {broken} children' if broken else ''}", flush=True)


def _cuda_works() -> bool:
    import torch
    try:
        return bool((torch.ones(4, device="cuda") * 2).sum().item() == 8)
    except Exception:
        return False


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workers", type=int, default=max(1, (os.cpu_count() or 2) - 1))
    p.add_argument("--no-tilelang", action="store_true", help="forked: leave TileLang's import to the children")
    p.add_argument("--mode", choices=("fresh", "forked"), help="one way only, in this process (else each in its own)")
    a = p.parse_args()
    if a.mode is None:  # each way in a process of its own: the forked parent's imports are not this one's
        for mode in ("fresh", "forked"):
            subprocess.run([sys.executable, __file__, *sys.argv[1:], "--mode", mode], check=True)
        return
    # Counted in a child: harness.environment.gpu_count initializes CUDA (cuInit), which a fork must not inherit.
    count = subprocess.run([sys.executable, "-c", "from harness.environment import gpu_count; print(gpu_count())"],
                           cwd=ROOT, capture_output=True, text=True, check=True).stdout
    target = "auto" if int(count) else "sm_90a"
    if a.mode == "fresh":
        print(f"{a.workers} workers, target {target}, {os.cpu_count()} cores", flush=True)
        with tempfile.TemporaryDirectory() as tmp:
            fresh(a.workers, target, Path(tmp))
    else:
        forked(a.workers, target, not a.no_tilelang)


if __name__ == "__main__":
    main()
