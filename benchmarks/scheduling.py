"""The pool's scheduling policy (harness.schedule) on a simulated clock: kernel loads, compiles and the
run's length for a campaign's cases, without compiling anything.

    python benchmarks/scheduling.py --families fwd,bwd --cases 2000 --per-kernel 25 --per-row 25 --workers 15
    python benchmarks/scheduling.py --cases-from reports/run/cases.jsonl --before b89cb34

The cases are drawn as `harness run` draws them (or read from a cases file). Each policy hands them to
`--workers` simulated workers: a worker holds what it compiled or loaded; a case costs the compile of each
kernel it needs that is not on disk yet (its own, and the default-forms or knob-free kernel its forms or
twin check runs), a disk-cache load of each one on disk that the worker does not hold, then the case itself.
A kernel lands on disk when its first compile ends; a worker that needs it earlier compiles it too (a
double compile). Times are the model's (`--compile`, `--load`, `--case`, `--start`; the defaults are about what
one H100 host with 15 workers showed), so the run's length is a comparison between policies, not a
prediction. `--before REV` adds the policy of harness/schedule.py at that git revision (which knows no
partner kernels).
"""
import argparse
import heapq
import importlib.util
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness import campaign as campaign_mod  # noqa: E402
from harness import kernels, schedule  # noqa: E402
from harness.pool import control_key as partner_key  # noqa: E402


def policy_at(rev: str):
    """harness.schedule's Scheduler as it was at git revision `rev`."""
    text = subprocess.run(["git", "show", f"{rev}:harness/schedule.py"], cwd=ROOT, capture_output=True, text=True,
                          check=True).stdout
    path = Path(tempfile.mkdtemp()) / "schedule_before.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location("schedule_before", path)
    module = sys.modules["schedule_before"] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.Scheduler


def simulate(sched, cases, workers: int, compile_s: dict, load_s: float, case_s: float, start_s: float,
             warm: bool = False) -> dict:
    """Run `cases` through `sched` on a simulated clock: loads, compiles (double ones too) and the end."""
    keys = {id(c): kernels.kernel_key(c) for c in cases}
    partners = {id(c): partner_key(c) for c in cases}
    family = {keys[id(c)]: c.family for c in cases} | {partners[id(c)]: c.family for c in cases if partners[id(c)]}
    groups = sched.group(cases)
    held = {s: set() for s in range(workers)}
    disk: dict = dict.fromkeys(family, 0.0) if warm else {}  # kernel -> when its first compile ends
    busy: dict = {}            # slot -> (end, case)
    heap: list = []
    started, t = set(), 0.0
    count = Counter()
    while groups or busy:
        for job in sched.dispatch(groups, len(cases), set(busy), started):
            s, case = job.slot, job.case
            now = t + (start_s if s not in started else 0.0)
            started.add(s)
            for k in (keys[id(case)], partners[id(case)]):
                if k is None or k in held[s]:
                    continue
                if disk.get(k, float("inf")) <= now:
                    now += load_s
                    count["loads"] += 1
                else:
                    count["double compiles" if k in disk else "compiles"] += 1
                    now += compile_s.get(family[k], max(compile_s.values()))
                    disk[k] = min(disk.get(k, float("inf")), now)
                held[s].add(k)
            now += case_s
            busy[s] = (now, case)
            heapq.heappush(heap, (now, s))
        if not busy:
            break
        t, s = heapq.heappop(heap)
        sched.finished(busy.pop(s)[1])
    distinct = len(set(keys.values()) | {p for p in partners.values() if p})
    builds = count["compiles"] + count["double compiles"] + count["loads"]
    return {"end": t, "distinct": distinct, "builds": builds, **count}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--families", default="fwd,bwd")
    p.add_argument("--cases", type=int, default=2000)
    p.add_argument("--per-kernel", type=int, default=25)
    p.add_argument("--per-row", type=int, default=25)
    p.add_argument("--seed", type=int, default=12345)
    p.add_argument("--cases-from", type=Path, help="a run's cases.jsonl instead of drawing")
    p.add_argument("--workers", type=int, default=15)
    p.add_argument("--compile", default="fwd=11,bwd=26", help="seconds per compile by family, FAMILY=S,...")
    p.add_argument("--load", type=float, default=1.5, help="seconds per disk-cache load")
    p.add_argument("--case", type=float, default=0.2, help="seconds per case once its kernels are held")
    p.add_argument("--start", type=float, default=8.0, help="seconds for a worker to start")
    p.add_argument("--steal-at", default=f"1,{schedule.STEAL_AT}", help="the current policy at each of these steal_at")
    p.add_argument("--before", help="also the policy at this git revision")
    p.add_argument("--warm", action="store_true", help="every kernel on disk already (a warm run)")
    a = p.parse_args()
    cases = campaign_mod.load_cases(a.cases_from) if a.cases_from else \
        campaign_mod.draw(a.families.split(","), a.cases, a.seed, a.per_kernel, per_row=a.per_row)
    compile_s = {f: float(s) for f, _, s in (item.partition("=") for item in a.compile.split(","))}
    drawn = len({kernels.kernel_key(c) for c in cases})
    extra = len({partner_key(c) for c in cases if partner_key(c)} - {kernels.kernel_key(c) for c in cases})
    print(f"{len(cases)} cases, {drawn} kernels drawn, {extra} more that forms or twin checks compare with; "
          f"{a.workers} workers; model: compile {a.compile} s, load {a.load:g} s, case {a.case:g} s, start {a.start:g} s")
    policies = [(f"before ({a.before})", policy_at(a.before)(a.workers, kernels.kernel_key))] if a.before else []
    policies += [(f"steal_at {n}", schedule.Scheduler(a.workers, kernels.kernel_key, partner_key, steal_at=int(n)))
                 for n in a.steal_at.split(",")]
    for name, sched in policies:
        r = simulate(sched, cases, a.workers, compile_s, a.load, a.case, a.start, a.warm)
        print(f"{name}: {r['builds']} kernel builds for {r['distinct']} distinct kernels "
              f"({r['builds'] / r['distinct']:.2f} each: {r.get('compiles', 0)} compiles, "
              f"{r.get('double compiles', 0)} double compiles, {r.get('loads', 0)} disk-cache loads); "
              f"simulated end {r['end']:.0f} s", flush=True)


if __name__ == "__main__":
    main()
