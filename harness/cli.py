"""harness run | env"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from harness import kernels, oracle, report


def gpu_count() -> int:
    try:
        import torch
        return torch.cuda.device_count() if torch.cuda.is_available() else 0
    except Exception:
        return 0


def cmd_env(args) -> int:
    for k, v in environment().items():
        print(f"{k:10} {v}")
    return 0


def environment() -> dict:
    import platform
    import shutil
    import subprocess

    env = {"python": platform.python_version()}
    try:
        import tilelang
        env["tilelang"] = f"{tilelang.__version__} ({os.path.dirname(tilelang.__file__)})"
    except Exception as e:  # an old release without a driver fails to import: say so
        env["tilelang"] = f"not importable: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    import torch
    env["torch"] = torch.__version__
    env["cuda"] = str(torch.version.cuda)
    if torch.cuda.is_available():
        p = torch.cuda.get_device_properties(0)
        env["gpu"] = f"{p.name} sm_{p.major}{p.minor} x{torch.cuda.device_count()}"
    else:
        env["gpu"] = "none (compile-only: numerics need a GPU)"
    nvcc = shutil.which("nvcc")
    env["nvcc"] = (subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout.strip().splitlines()[-1]
                   if nvcc else "not found")
    return env


def cmd_run(args) -> int:
    from harness import strategies
    from harness.execute import Pool, Timeouts

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    gpus = gpu_count()
    target = "auto" if gpus else args.arch
    if not gpus:
        print(f"no GPU: compile-only campaign for {args.arch} (numerics need a GPU)", file=sys.stderr)
    families = args.families.split(",")
    for f in families:
        kernels.family(f)
    results_path = out / "results.jsonl"
    previous = report.load(results_path)
    done = {r["case_id"] for r in previous}
    cases = []
    for i, f in enumerate(families):
        n = args.cases // len(families) + (i < args.cases % len(families))
        cases += strategies.draw(f, n, args.seed + i, args.per_kernel)
    todo = [c for c in cases if c.id not in done]
    workers = args.workers or max(1, (os.cpu_count() or 2) - 1)
    print(f"{len(cases)} cases ({len(cases) - len(todo)} already in {results_path}), "
          f"{len({kernels.family(c.family).static_key(c) for c in todo})} kernels, "
          f"{workers} workers, target {target}", file=sys.stderr)
    pool = Pool(workers, target, out / "logs", Timeouts(args.compile_timeout, args.run_timeout),
                gpus=list(range(gpus)) or None)
    deadline = time.monotonic() + args.time if args.time else None
    results = []
    t0 = time.monotonic()
    with open(results_path, "a") as sink:
        for r in pool.run(todo, deadline):
            sink.write(json.dumps(r) + "\n")
            sink.flush()
            results.append(r)
            progress(results, len(todo), time.monotonic() - t0)
    print(file=sys.stderr)
    text = report.write(out, previous + results)
    print(text)
    elapsed = time.monotonic() - t0
    print(f"{len(results)} cases in {elapsed:.1f} s ({len(results) / max(elapsed, 1e-9):.2f} cases/s), "
          f"{pool.started} worker processes; results in {results_path}")
    failed = [r for r in previous + results if r["verdict"] in oracle.FAILURES or r["verdict"] == "HARNESS_ERROR"]
    return 1 if failed else 0


def progress(results, total, elapsed):
    counts = {}
    for r in results:
        counts[r["verdict"]] = counts.get(r["verdict"], 0) + 1
    width = 30
    filled = width * len(results) // max(total, 1)
    text = " ".join(f"{k} {v}" for k, v in sorted(counts.items()))
    line = (f"[{'#' * filled}{'.' * (width - filled)}] {len(results)}/{total} {text} "
            f"{len(results) / max(elapsed, 1e-9):.2f}/s")
    if sys.stderr.isatty():
        print("\r" + line, end="", file=sys.stderr, flush=True)
    elif len(results) % max(1, total // 10) == 0 or len(results) == total:  # logs: ten lines, not one per case
        print(line, file=sys.stderr, flush=True)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="harness", description="Correctness harness for TileLang attention kernels")
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="generate cases, run them, judge, report")
    r.add_argument("--families", default="fwd", help=f"comma-separated, from {', '.join(kernels.names())}")
    r.add_argument("--cases", type=int, default=100, help="number of distinct cases")
    r.add_argument("--time", type=float, default=0, help="stop starting new cases after this many seconds")
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--per-kernel", type=int, default=4, help="length variants per compiled kernel")
    r.add_argument("--out", default="reports/run")
    r.add_argument("--workers", type=int, default=0, help="worker processes (default: CPU cores - 1)")
    r.add_argument("--arch", default="sm_90a", help="compile target when there is no GPU")
    r.add_argument("--compile-timeout", type=float, default=600)
    r.add_argument("--run-timeout", type=float, default=60)
    r.set_defaults(func=cmd_run)
    e = sub.add_parser("env", help="what TileLang, torch, CUDA and GPU this machine has")
    e.set_defaults(func=cmd_env)
    args = p.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
