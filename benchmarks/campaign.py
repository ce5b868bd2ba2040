"""Benchmark `harness run` twice on the same cases: cold (empty kernel cache) and warm (the same
disk cache, new workers).

    python benchmarks/campaign.py --families fwd,bwd --cases 300 --per-kernel 10 --per-row 10 --workers 15

Each run is the command a user types (`harness run --cases-from`), timed from outside (its clock
span is printed, to set beside `nvidia-smi -lms`). Prints the process's wall time and its run
loop's (from the workers' start to the last result, as `harness run` reports it), cases per second
of each, kernel loads (compiles or disk-cache loads, the forms and twin checks' control kernels
included) per distinct kernel and compile seconds, the GPU's busy share of the loop (the kernels' own
seconds), the judge's milliseconds per case, and where the workers' seconds went (start: spawn to
ready; compile, control kernels included; inputs, run, judge; other: idle or between cases). With
several GPUs, each one's share, and with --one-gpu the same runs on the first alone. Without a GPU
it benchmarks compile-only (sm_90a).

`--server` runs cold and warm through one `harness serve`, whose workers outlive each run, then warm again
with a pool of its own. `--cache DIR` keeps TileLang's disk cache there (the first run is cold only on an empty
one): benchmarks of two checkouts on one cache compare their warm runs. `--cases-from FILE` runs a given cases
file instead of drawing; `--harness DIR` runs the harness of another checkout (a `git worktree` of an older
commit) on the same cases: before and after. A harness that builds control kernels in the judge (before the
scheduler knew them) counts no control loads.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness import campaign as campaign_mod  # noqa: E402
from harness import kernels, report  # noqa: E402
from harness.environment import gpu_count  # noqa: E402
from harness.pool import control_key, device_names  # noqa: E402

LOOP = re.compile(r"^(\d+) cases in ([\d.]+) s ", re.M)  # harness run's own account of its run loop


def run_env(cache_dir, threads=None, devices=None, bands=True, harness=ROOT) -> dict:
    """The environment of a run (and of the server it uses: the server refuses a run unlike it)."""
    env = dict(os.environ, TILELANG_CACHE_DIR=str(cache_dir), HARNESS_BANDS="on" if bands else "off")
    env["PYTHONPATH"] = os.pathsep.join([str(harness), *filter(None, [os.environ.get("PYTHONPATH")])])
    if threads:
        env["OMP_NUM_THREADS"] = str(threads)
    if devices:
        env["CUDA_VISIBLE_DEVICES"] = devices
    return env


def serve(sock, workers, env, harness, stop=False):
    """Start `harness serve` at `sock` (and return once it listens), or stop it."""
    argv = ["--stop"] if stop else ["--detach", "--workers", str(workers)]
    p = subprocess.run([sys.executable, "-m", "harness.cli", "serve", str(sock), *argv], cwd=harness, env=env,
                       capture_output=True, text=True)
    if p.returncode:
        sys.exit(f"harness serve exited {p.returncode}: {(p.stdout + p.stderr)[-2000:]}")


def campaign(cases_file, workers, out, cache_dir, known, threads=None, devices=None, bands=True, harness=ROOT,
             server=None):
    env = run_env(cache_dir, threads, devices, bands, harness)
    pool = ["--server", str(server)] if server else ["--workers", str(workers)]
    t0, started = time.perf_counter(), time.strftime("%H:%M:%S")
    p = subprocess.run([sys.executable, "-m", "harness.cli", "run", "--cases-from", str(cases_file), "--out", str(out),
                        *pool, "--reproducers", str(known)], cwd=harness, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    (out / "stdout.txt").write_text(p.stdout + p.stderr)
    loop = LOOP.search(p.stdout)
    if p.returncode not in (0, 1) or loop is None:
        sys.exit(f"harness run exited {p.returncode}; see {out / 'stdout.txt'}:\n{(p.stdout + p.stderr)[-2000:]}")
    results = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines() if line.strip()]
    loop_s = float(loop.group(2))
    # A kernel load: a case's own kernel, or the control kernel its forms or twin check compares with
    # (seconds["control"]), compiled or loaded from the disk cache by its worker.
    compiles = [r["seconds"][k] for r in results for k in ("compile", "control") if k in (r.get("seconds") or {})]
    stages = {s: sum((r.get("seconds") or {}).get(s, 0) for r in results) for s in report.STAGES}
    stages["compile"] += sum((r.get("seconds") or {}).get("control", 0) for r in results)
    judged = [r["seconds"]["judge"] for r in results if "judge" in (r.get("seconds") or {})]
    per_gpu = Counter()  # kernel seconds per GPU, when the run spread over several
    for r in results:
        if "gpu" in r:
            per_gpu[r["gpu"]] += (r.get("seconds") or {}).get("run", 0)
    return {"span": f"{started}-{time.strftime('%H:%M:%S')}", "gpu_share": {g: s / loop_s for g, s in sorted(per_gpu.items())},
            "wall_s": wall, "loop_s": loop_s, "cases": len(results), "builds": len(compiles),
            "compile_s": sum(compiles), "verdicts": dict(Counter(r["verdict"] for r in results)),
            "judge_ms": 1e3 * sum(judged) / max(len(judged), 1),
            "run_share": stages["run"] / loop_s, "stages": stages, "workers": workers}


def breakdown(r) -> str:
    """Where the workers' time went: each stage's seconds summed over cases, and the rest (idle
    workers, the pool's messages) as the remainder of loop seconds x workers."""
    total = r["loop_s"] * r["workers"]
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
    p.add_argument("--keep", help="copy each run's summary.md and results.jsonl here (RUN-NAME/)")
    p.add_argument("--bands-off", action="store_true", help="two more warm runs: guard bands off, then on again; "
                                                             "prints what the bands cost")
    p.add_argument("--one-gpu", action="store_true", help="with several GPUs: the same runs again on the first "
                                                          "alone (its own cold cache), and the speed-up of all over one")
    p.add_argument("--cases-from", type=Path, help="run these cases (a cases.jsonl) instead of drawing")
    p.add_argument("--harness", type=Path, default=ROOT, help="the checkout whose harness runs (default: this one)")
    p.add_argument("--cache", type=Path, help="TileLang's disk cache for every run, kept (default: a new one, so that "
                                              "the first run is cold); several benchmarks on one cache compare warm runs")
    p.add_argument("--server", action="store_true", help="cold and warm through one `harness serve` (its workers "
                                                          "outlive each run), then warm again with a pool of its own")
    a = p.parse_args()
    gpus = gpu_count()
    target = "auto" if gpus else "sm_90a"
    cases = campaign_mod.load_cases(a.cases_from) if a.cases_from else \
        campaign_mod.draw(a.families.split(","), a.cases, a.seed, a.per_kernel, per_row=a.per_row)
    drawn = {kernels.kernel_key(c) for c in cases}
    controls = {control_key(c) for c in cases} - {None} - drawn if gpus else set()  # built on a GPU only
    distinct = len(drawn) + len(controls)
    families = ",".join(dict.fromkeys(c.family for c in cases))
    print(f"families {families}, target {target}, {len(cases)} cases, {distinct} distinct kernels ({len(drawn)} "
          f"drawn, {len(controls)} more that forms or twin checks compare with), {a.workers} workers, harness "
          f"{a.harness}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        cases_file = tmp / "cases.jsonl"
        campaign_mod.write_cases(cases_file, cases)
        known = tmp / "reproducers"  # a copy (of the harness run): the runs know the recorded bugs and add nothing there
        shutil.copytree(a.harness / "reproducers", known)
        runs = {}
        caches = a.cache.resolve() if a.cache else tmp
        # The same disk cache: the warm runs find every kernel compiled.
        plan = [("cold", a.workers, a.threads), ("warm", a.workers, a.threads)] + warm_runs(a.warm_workers, a.threads)
        plan = [(name, workers, threads, "cache", None, True) for name, workers, threads in plan]
        sock = tmp / "serve.sock" if a.server else None
        if sock:
            serve(sock, a.workers, run_env(caches / "cache", a.threads, harness=a.harness.resolve()), a.harness.resolve())
            plan.insert(2, ("warm, new workers", a.workers, a.threads, "cache", None, True))
        if a.bands_off:
            plan += [("warm, bands off", a.workers, a.threads, "cache", None, False),
                     ("warm again, bands on", a.workers, a.threads, "cache", None, True)]
        if a.one_gpu and gpus > 1:  # the GPU the pool gives its first worker
            first = device_names([0], os.environ)[0]
            plan += [(f"{name} on GPU {first} alone", a.workers, a.threads, "cache-one", first, True)
                     for name in ("cold", "warm")]
        for name, workers, threads, cache, devices, bands in plan:
            served = sock if name in ("cold", "warm") else None
            r = runs[name] = campaign(cases_file, workers, tmp / f"run-{len(runs)}", caches / cache, known, threads, devices,
                                      bands, a.harness.resolve(), served)
            via = ", the server's" if served else ""
            print(f"{name} ({workers} workers{via}, {threads or 'cores/workers'} threads; {r['span']}): "
                  f"process {r['wall_s']:.1f} s, {r['cases'] / r['wall_s']:.2f} cases/s; "
                  f"run loop {r['loop_s']:.1f} s, {r['cases'] / r['loop_s']:.2f} cases/s; {r['builds']} kernel loads "
                  f"(compile or disk-cache hit; {r['builds'] / distinct:.2f} per distinct kernel; {r['compile_s']:.1f} s "
                  f"summed over workers), GPU busy at most {100 * r['run_share']:.0f}% of the loop (kernel seconds, "
                  f"launches included), judge {r['judge_ms']:.0f} ms a case, verdicts {r['verdicts']}", flush=True)
            print(f"  worker-seconds: {breakdown(r)}", flush=True)
            if a.keep:
                kept = Path(a.keep) / re.sub(r"\W+", "-", name)
                kept.mkdir(parents=True, exist_ok=True)
                for f in ("summary.md", "results.jsonl"):
                    shutil.copy(tmp / f"run-{len(runs) - 1}" / f, kept / f)
            if r["gpu_share"]:
                print("  GPU busy (kernel seconds / loop): " +
                      ", ".join(f"GPU {g} {100 * v:.0f}%" for g, v in r["gpu_share"].items()), flush=True)
        if sock:
            serve(sock, a.workers, run_env(caches / "cache", a.threads, harness=a.harness.resolve()), a.harness.resolve(),
                  stop=True)
    cold, warm = runs["cold"], runs["warm"]
    print(f"disk-cache speed-up: {cold['loop_s'] / warm['loop_s']:.1f}x run loop, "
          f"compile seconds {cold['compile_s']:.1f} -> {warm['compile_s']:.1f}")
    if a.bands_off:
        on = [runs[n]["cases"] / runs[n]["loop_s"] for n in ("warm", "warm again, bands on")]
        off = runs["warm, bands off"]["cases"] / runs["warm, bands off"]["loop_s"]
        print(f"guard bands: warm {min(on):.2f}-{max(on):.2f} cases/s on, {off:.2f} off: "
              f"{100 * (off / (sum(on) / 2) - 1):+.1f}% slower with bands (mean of the two runs with bands)")
    for name in ("cold", "warm"):
        one = next((r for n, r in runs.items() if n.startswith(f"{name} on GPU")), None)
        if one:
            print(f"{name}: {gpus} GPUs {runs[name]['cases'] / runs[name]['loop_s']:.2f} cases/s, one "
                  f"{one['cases'] / one['loop_s']:.2f}: {one['loop_s'] / runs[name]['loop_s']:.2f}x run loop, "
                  f"{one['wall_s'] / runs[name]['wall_s']:.2f}x process")


if __name__ == "__main__":
    main()
