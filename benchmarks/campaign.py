"""Benchmark a campaign twice: cold (empty kernel cache) and warm (same disk cache, new workers).

    python benchmarks/campaign.py --families fwd,bwd --cases 300 --per-kernel 10 --per-row 10 --workers 15

Prints distinct kernels compiled, compile seconds, cases per second, the GPU's busy share of the
wall time (the kernels' own seconds), where the workers' seconds went (compile, inputs, run, judge,
other), and the warm run's speed-up from TileLang's disk cache. Without a GPU it benchmarks compile-only (sm_90a).
"""
import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness import campaign as campaign_mod  # noqa: E402
from harness import case as case_mod  # noqa: E402
from harness import report  # noqa: E402
from harness.environment import gpu_count  # noqa: E402
from harness.pool import Pool  # noqa: E402


def campaign(cases, workers, target, gpus, cache_dir, log_dir, threads=None):
    env = dict(os.environ, TILELANG_CACHE_DIR=str(cache_dir))
    if threads:
        env["OMP_NUM_THREADS"] = str(threads)
    t0 = time.perf_counter()
    with Pool(workers, target, log_dir, gpus=gpus, env=env) as pool:
        results = list(pool.run(cases))
    wall = time.perf_counter() - t0
    compiles = [r["seconds"]["compile"] for r in results if "compile" in (r.get("seconds") or {})]
    stages = {s: sum((r.get("seconds") or {}).get(s, 0) for r in results) for s in report.STAGES}
    verdicts = {}
    for r in results:
        verdicts[r["verdict"]] = verdicts.get(r["verdict"], 0) + 1
    return {"wall_s": wall, "cases": len(results), "builds": len(compiles), "compile_s": sum(compiles),
            "cases_per_s": len(results) / wall, "verdicts": verdicts, "run_share": stages["run"] / wall,
            "stages": stages, "workers": workers}


def breakdown(r) -> str:
    """Where the workers' time went: each stage's seconds summed over cases, and the rest (worker
    start, disk-cache checks, the pool's messages, idle workers) as the remainder of wall x workers."""
    total = r["wall_s"] * r["workers"]
    parts = {**r["stages"], "other": total - sum(r["stages"].values())}
    return ", ".join(f"{k} {v:.1f} s ({100 * v / total:.0f}%)" for k, v in parts.items())


def warm_runs(spec, threads):
    """--warm-workers "15:16,8" -> [("warm/15:16", 15, 16), ("warm/8", 8, threads)]."""
    runs = []
    for item in filter(None, (spec or "").split(",")):
        workers, _, own = item.partition(":")
        runs.append((f"warm/{item}", int(workers), int(own) if own else threads))
    return runs


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--families", default="fwd", help="comma-separated; cases drawn as `harness run` draws them")
    p.add_argument("--cases", type=int, default=100)
    p.add_argument("--per-kernel", type=int, default=4, help="lengths per randomly drawn kernel")
    p.add_argument("--per-row", type=int, default=1, help="lengths per covering-array kernel (as `harness run`)")
    p.add_argument("--workers", type=int, default=max(1, (os.cpu_count() or 2) - 1))
    p.add_argument("--seed", type=int, default=12345)
    p.add_argument("--threads", type=int, help="CPU threads per worker (default: the pool's, cores / workers)")
    p.add_argument("--warm-workers", help="more warm runs (same disk cache), comma-separated: WORKERS or "
                                          "WORKERS:THREADS (CPU threads per worker)")
    a = p.parse_args()
    gpus = gpu_count()
    target = "auto" if gpus else "sm_90a"
    cases = campaign_mod.draw(a.families.split(","), a.cases, a.seed, a.per_kernel, per_row=a.per_row)
    kernels_n = len({case_mod.static_key(c) for c in cases})
    print(f"families {a.families}, target {target}, {len(cases)} cases, {kernels_n} distinct kernels, "
          f"{a.workers} workers", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        runs = {}
        # The same disk cache: the warm runs find every kernel compiled.
        plan = [("cold", a.workers, a.threads), ("warm", a.workers, a.threads)] + warm_runs(a.warm_workers, a.threads)
        for name, workers, threads in plan:
            r = runs[name] = campaign(cases, workers, target, list(range(gpus)) or None, tmp / "cache",
                                      tmp / f"logs-{len(runs)}", threads)
            print(f"{name} ({workers} workers, {threads or 'cores/workers'} threads): "
                  f"{r['wall_s']:.1f} s wall, {r['cases_per_s']:.2f} cases/s, {r['builds']} kernel loads "
                  f"(compile or disk-cache hit; {r['compile_s']:.1f} s summed over workers), "
                  f"GPU busy at most {100 * r['run_share']:.0f}% of wall (kernel seconds, launches included), "
                  f"verdicts {r['verdicts']}", flush=True)
            print(f"  worker-seconds: {breakdown(r)}", flush=True)
    cold, warm = runs["cold"], runs["warm"]
    print(f"disk-cache speed-up: {cold['wall_s'] / warm['wall_s']:.1f}x wall, "
          f"compile seconds {cold['compile_s']:.1f} -> {warm['compile_s']:.1f} "
          f"({cold['compile_s'] / max(warm['compile_s'], 1e-9):.1f}x)")


if __name__ == "__main__":
    main()
