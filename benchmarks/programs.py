"""What generated programs cost: writing them, interpreting them, and compiling and judging them in a run.

    python benchmarks/programs.py --programs 300                        # generator and interpreter, on this CPU
    python benchmarks/programs.py --run 300 --per-kernel 3 --workers 15 # harness run on them, cold then warm
    python benchmarks/programs.py --results reports/programs/results.jsonl --wall 257.6

Prints programs written per second, the interpreter's seconds per program (the float64 reference and the float32
baseline, as the judge runs them), and for a run: programs per second over its wall time, compiles per program
(distinct kernels, and the knob-free controls of twins that must be held bit for bit), and worker seconds by
stage. `--run N` draws N program cases as `harness run` draws them and runs them as benchmarks/campaign.py does,
cold (an empty kernel cache) and warm (the same cache, new workers): programs/s by the process and run-loop
clocks, kernel loads per program (the twins' controls included), the interpreter on those programs, and the
worker-seconds; `--cases-from` and `--harness` as there (before and after on the same programs).
"""
import argparse
import json
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hypothesis import HealthCheck, Phase, given, settings  # noqa: E402
from hypothesis import seed as hypothesis_seed  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from harness import campaign as campaign_mod  # noqa: E402
from harness import case as case_mod  # noqa: E402
from harness import kernels  # noqa: E402
from harness.programs import generate, interpret  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import campaign as bench  # noqa: E402  (benchmarks/campaign.py: one run of harness run, timed)


def written(count: int, seed: int) -> list:
    out = []

    @hypothesis_seed(seed)
    @settings(max_examples=count, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(generate.programs(st), st.integers(1, 200))
    def collect(p, n):
        out.append((p, n))
    collect()
    return out


def interpreted(programs) -> list[float]:
    import torch
    seconds = []
    for p, n in programs:
        initial = interpret.initial(p, n, 0)
        t0 = time.perf_counter()
        interpret.run(p, n, initial)
        interpret.run(p, n, initial, torch.float32)
        seconds.append(time.perf_counter() - t0)
    return seconds


def from_results(path: Path, wall: float | None) -> None:
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    cases = [case_mod.from_dict(r["case"]) for r in lines]
    fam = kernels.family("program")
    keys = {kernels.kernel_key(c) for c in cases}
    controls = {kernels.kernel_key(c.replace(knobs=())) for c in cases if c.knobs and fam.judge.exact(c)} - keys
    stages = Counter()
    for r in lines:
        stages.update(r.get("seconds") or {})
    print(f"{len(cases)} programs, {len(keys)} kernels and {len(controls)} twin controls: "
          f"{(len(keys) + len(controls)) / len(cases):.2f} compiles per program")
    if wall:
        print(f"{len(cases) / wall:.2f} programs/s over {wall:g} s")
    total = sum(stages.values())
    print("worker seconds: " + ", ".join(f"{k} {v:.0f} ({v / total:.0%})" for k, v in stages.most_common()))


def run(count, seed, per_kernel, workers, cases_from=None, harness=bench.ROOT) -> None:
    """`harness run` on drawn programs, cold then warm: programs/s, loads per program, the interpreter."""
    import shutil
    import tempfile

    cases = campaign_mod.load_cases(cases_from) if cases_from else \
        campaign_mod.draw(["program"], count, seed, per_kernel, per_row=per_kernel)
    programs = len({kernels.kernel_key(c) for c in cases})
    seconds = interpreted([(c.program, c.seqlen_q) for c in cases])
    print(f"{len(cases)} cases of {programs} programs, {workers} workers; interpreter on them: median "
          f"{statistics.median(seconds) * 1e3:.1f} ms, mean {statistics.mean(seconds) * 1e3:.1f} ms a case (float64 "
          f"reference and float32 baseline)", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        campaign_mod.write_cases(tmp / "cases.jsonl", cases)
        shutil.copytree(Path(harness) / "reproducers", tmp / "reproducers")
        for i, name in enumerate(("cold", "warm")):
            r = bench.campaign(tmp / "cases.jsonl", workers, tmp / f"run-{i}", tmp / "cache", tmp / "reproducers",
                               harness=Path(harness).resolve())
            print(f"{name}: process {r['wall_s']:.1f} s, {r['cases'] / r['wall_s']:.2f} cases/s "
                  f"({programs / r['wall_s']:.2f} programs/s); run loop {r['loop_s']:.1f} s, "
                  f"{r['cases'] / r['loop_s']:.2f} cases/s; {r['builds']} kernel loads ({r['builds'] / programs:.2f} per "
                  f"program, twins' controls included), judge {r['judge_ms']:.0f} ms a case, verdicts {r['verdicts']}",
                  flush=True)
            print(f"  worker-seconds: {bench.breakdown(r)}", flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--programs", type=int, default=200)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--results", type=Path, help="a program campaign's results.jsonl")
    p.add_argument("--wall", type=float, help="that run's wall seconds (its last line)")
    p.add_argument("--run", type=int, metavar="N", help="harness run on N drawn program cases, cold then warm")
    p.add_argument("--per-kernel", type=int, default=3, help="lengths per program (--run)")
    p.add_argument("--workers", type=int, default=15, help="workers (--run)")
    p.add_argument("--cases-from", type=Path, help="--run these program cases instead of drawing")
    p.add_argument("--harness", type=Path, default=bench.ROOT, help="--run the harness of this checkout")
    args = p.parse_args()
    if args.run or args.cases_from:
        run(args.run, args.seed, args.per_kernel, args.workers, args.cases_from, args.harness)
        return
    t0 = time.perf_counter()
    programs = written(args.programs, args.seed)
    took = time.perf_counter() - t0
    print(f"{len(programs)} programs written in {took:.1f} s ({len(programs) / took:.0f}/s)")
    seconds = interpreted(programs)
    print(f"interpreter: median {statistics.median(seconds) * 1e3:.1f} ms, max {max(seconds) * 1e3:.0f} ms per program "
          f"(float64 reference and float32 baseline)")
    if args.results:
        from_results(args.results, args.wall)


if __name__ == "__main__":
    main()
