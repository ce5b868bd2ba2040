"""What generated programs cost: writing them, interpreting them, and (from a run's results) compiling and judging.

    python benchmarks/programs.py --programs 300                        # generator and interpreter, on this CPU
    python benchmarks/programs.py --results reports/programs/results.jsonl --wall 257.6

Prints programs written per second, the interpreter's seconds per program (the float64 reference and the float32
baseline, as the judge runs them), and for a run: programs per second over its wall time, compiles per program
(distinct kernels, and the knob-free controls of twins that must be held bit for bit), and worker seconds by
stage. The whole campaign's cold and warm numbers come from benchmarks/campaign.py --families program.
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

from harness import case as case_mod  # noqa: E402
from harness import kernels  # noqa: E402
from harness.programs import generate, interpret  # noqa: E402


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
    controls = {kernels.kernel_key(c.replace(knobs=())) for c in cases if c.knobs and fam.exact(c)} - keys
    stages = Counter()
    for r in lines:
        stages.update(r.get("seconds") or {})
    print(f"{len(cases)} programs, {len(keys)} kernels and {len(controls)} twin controls: "
          f"{(len(keys) + len(controls)) / len(cases):.2f} compiles per program")
    if wall:
        print(f"{len(cases) / wall:.2f} programs/s over {wall:g} s")
    total = sum(stages.values())
    print("worker seconds: " + ", ".join(f"{k} {v:.0f} ({v / total:.0%})" for k, v in stages.most_common()))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--programs", type=int, default=200)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--results", type=Path, help="a program campaign's results.jsonl")
    p.add_argument("--wall", type=float, help="that run's wall seconds (its last line)")
    args = p.parse_args()
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
