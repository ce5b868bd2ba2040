"""harness run | repro | minimize | env"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from harness import case as case_mod
from harness import kernels, oracle, record, report
from harness.environment import environment, importable


def gpu_count() -> int:
    try:
        import torch
        return torch.cuda.device_count() if torch.cuda.is_available() else 0
    except Exception:
        return 0


def cmd_env(args) -> int:
    for k, v in environment().items():
        print(f"{k:16} {v}")
    return 0


def cmd_run(args) -> int:
    from harness import strategies
    from harness.execute import Pool, Timeouts

    families = args.families.split(",")
    unknown = [f for f in families if f not in kernels.names()]
    if unknown:
        print(f"harness run: unknown family {', '.join(unknown)}; known: {', '.join(kernels.names())}", file=sys.stderr)
        return 2
    env = environment()
    if not importable(env):  # every case would fail the same way: not a finding about kernels
        print(f"harness run: cannot test here: tilelang {env['tilelang']}", file=sys.stderr)
        return 125
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    gpus = gpu_count()
    target = "auto" if gpus else args.arch
    if not gpus:
        print(f"no GPU: compile-only campaign for {args.arch} (numerics need a GPU)", file=sys.stderr)
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
    known = record.known_signatures(args.reproducers)
    text = report.write(out, previous + results, known)
    print(text)
    elapsed = time.monotonic() - t0
    print(f"{len(results)} cases in {elapsed:.1f} s ({len(results) / max(elapsed, 1e-9):.2f} cases/s), "
          f"{pool.started} worker processes; results in {results_path}")
    pool.close()  # its workers hold the GPUs; minimizing starts its own
    record_failures(previous + results, args, target)
    # Known bugs (a reproducer has their signature) are reported, not counted: the exit status
    # says whether this run found something new.
    new = [r for r in report.failures(previous + results) if oracle.signature(r) not in known]
    return 1 if new else 0


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


# ----------------------------------------------------------------------------- reproducers
class Evaluator:
    """evaluate(case) -> result through a pool, keeping every result (minimize, triage).

    With `confirm` > 1 and a `target` signature, a case showing the target is run again, up to
    `confirm` times, and the first run that differs is returned: a minimizing step of a flaky
    failure (a race) is accepted only when it reproduces every time.
    """

    def __init__(self, pool, confirm=1, target=None):
        self.pool, self.results, self.confirm, self.target = pool, [], confirm, target

    def __call__(self, case) -> dict:
        for _ in range(self.confirm):
            self.results.append(self.pool.run_one(case))
            if self.target is None or oracle.signature(self.results[-1]) != self.target:
                break
        return self.results[-1]

    def last(self, case, signature) -> dict:
        """The latest result of `case` that showed `signature`."""
        return next(r for r in reversed(self.results) if r["case_id"] == case.id and oracle.signature(r) == signature)


def shrink(result, evaluate, budget, runs):
    """Minimize a failing result's case, then triage it: (case, its result, flaky or None)."""
    from harness import minimize

    case, sig = case_mod.from_dict(result["case"]), oracle.signature(result)
    small, steps = minimize.minimize(case, sig, evaluate, budget, log=lambda s: print(f"  {s}", file=sys.stderr))
    flaky = minimize.triage(small, evaluate, runs, sig) if runs else None
    print(f"  {len(steps)} steps" + (f"; flaky {flaky}" if flaky else ""), file=sys.stderr)
    return small, (evaluate.last(small, sig) if steps else result), flaky


def record_failures(results, args, target) -> list:
    """One reproducer per failure signature not yet in args.reproducers; print the paths."""
    from harness.execute import Pool, Timeouts

    firsts = {}
    for r in results:
        if r["verdict"] in oracle.FAILURES:
            firsts.setdefault(oracle.signature(r), r)
    known = record.known_signatures(args.reproducers)
    new = {sig: r for sig, r in firsts.items() if sig not in known}
    for sig in firsts.keys() & known.keys():
        print(f"reproducer (already recorded): {known[sig]}")
    if not new:
        return []
    env = environment()
    paths = []
    with Pool(1, target, Path(args.out) / "logs" / "minimize",
              Timeouts(args.compile_timeout, args.run_timeout)) as pool:
        for sig, r in new.items():
            original = None
            if args.minimize:
                print(f"minimizing {r['case_id']}: {' '.join(sig[2:6])}", file=sys.stderr)
                small, r, _ = shrink(r, Evaluator(pool, 2, sig), args.minimize_budget, 0)
                original = case_mod.from_dict(firsts[sig]["case"]) if small.id != firsts[sig]["case_id"] else None
            paths.append(record.write(r, env, args.reproducers, minimized_from=original))
            print(f"reproducer (new): {paths[-1]}")
    return paths


def _replay_args(p):
    p.add_argument("--arch", default="sm_90a", help="compile target for replaying a compile error without a GPU")
    p.add_argument("--dir", default="reproducers", help="where reproducers live")
    p.add_argument("--logs", default="reports/repro", help="worker logs go here")
    p.add_argument("--compile-timeout", type=float, default=600)
    p.add_argument("--run-timeout", type=float, default=60)


def _setup(args, command):
    """(reproducer, path, env, target) to replay here, or the exit status: 2 for a bad file
    (one line on stderr), 125 when it cannot be tested here."""
    try:
        path = record.find(args.reproducer, args.dir)
        rep = record.load(path)
    except record.RecordError as e:
        print(f"harness {command}: {e}", file=sys.stderr)
        return 2
    if command == "repro":
        recorded = {"case": case_mod.to_dict(rep.case), **rep.observed}
        print(f"reproducer {rep.id} ({path}): {rep.title}")
        print(f"recorded:  {record.describe(recorded)}  [{_where(rep.environment)}]")
    env = environment()
    target, reason = _target(rep, env, args.arch)
    if reason:
        print(f"CANNOT TEST: {reason}")
        return 125
    return rep, path, env, target


def _target(rep, env, arch) -> tuple[str | None, str]:
    """(target, "") to replay `rep` here, or (None, why not). A compile error needs no GPU."""
    if not importable(env):
        return None, f"tilelang {env['tilelang']}"
    if gpu_count():
        return "auto", ""
    if rep.observed["verdict"] == "COMPILE_ERROR":
        return arch, ""
    return None, "no GPU here (numerics need one)"


def _good(target) -> str:
    """The verdict of correct behaviour: PASS on a GPU, COMPILED in a compile-only replay."""
    return "PASS" if target == "auto" else "COMPILED"


def _where(env) -> str:
    return f"tilelang {env.get('tilelang', '?')} {env.get('tilelang_commit', '')}".rstrip() + f", {env.get('gpu', '?')}"


def _pool(rep, args, target):
    """One worker: a crash or hang becomes a verdict, not our death."""
    from harness.execute import Pool, Timeouts

    return Pool(1, target, Path(args.logs) / rep.id, Timeouts(args.compile_timeout, args.run_timeout))


def cmd_repro(args) -> int:
    from harness import minimize

    setup = _setup(args, "repro")
    if isinstance(setup, int):
        return setup
    rep, path, env, target = setup
    with _pool(rep, args, target) as pool:
        evaluate = Evaluator(pool)
        flaky = minimize.triage(rep.case, evaluate, max(args.runs, 1), rep.signature)
    for r in evaluate.results:
        print(f"now:       {record.describe(r)}  [{_where(env)}]")
    n = flaky["runs"]
    failing = [r for r in evaluate.results if r["verdict"] in oracle.FAILURES]
    if failing:
        same = flaky["reproduced"]
        print(f"REPRODUCED: {len(failing)}/{n} runs fail; signature "
              + (f"matches in {same}/{n} runs" if same else "differs"))
        if same < n:
            print(f"  recorded signature: {list(rep.signature)}")
            for r in evaluate.results:
                print(f"  now:                {list(oracle.signature(r))}")
        return 1
    other = next((r for r in evaluate.results if r["verdict"] != _good(target)), None)
    if other:
        print(f"CANNOT TEST: {record.describe(other)}")
        return 125
    print(f"NOT REPRODUCED: {n}/{n} runs {_good(target)} (recorded {rep.observed['verdict']})")
    return 0


def cmd_minimize(args) -> int:
    import dataclasses

    setup = _setup(args, "minimize")
    if isinstance(setup, int):
        return setup
    rep, path, env, target = setup
    with _pool(rep, args, target) as pool:
        evaluate = Evaluator(pool, args.confirm, rep.signature)
        first = evaluate(rep.case)
        if oracle.signature(first) != rep.signature:
            print(f"NOT REPRODUCED, nothing to minimize: now {record.describe(first)}")
            return 1
        small, result, flaky = shrink(first, evaluate, args.budget, args.runs)
    if small == rep.case:
        print(f"already minimal: {path}")
        return 0
    recorded = {"case": case_mod.to_dict(rep.case), **rep.observed}
    title = None if rep.title == record.default_title(recorded) else rep.title
    new = record.build(result, env, title, flaky, rep.minimized_from or rep.case, id=rep.id)
    out = record.save(dataclasses.replace(new, links=rep.links), path.parent)
    print(f"minimized: {out}")
    return 0


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
    r.add_argument("--reproducers", default="reproducers", help="where to record one reproducer per new failure")
    r.add_argument("--minimize", action="store_true", help="minimize each new failure before recording it")
    r.add_argument("--minimize-budget", type=float, default=300, help="seconds per failure")
    r.set_defaults(func=cmd_run)
    rp = sub.add_parser("repro", help="replay a reproducer: exit 0 correct, 1 bug reproduced, 125 cannot test")
    rp.add_argument("reproducer", help="a reproducer file, or an id (or unique id prefix) in --dir")
    rp.add_argument("--runs", type=int, default=1, help="run it this many times (flakiness)")
    _replay_args(rp)
    rp.set_defaults(func=cmd_repro)
    m = sub.add_parser("minimize", help="shrink a reproducer's case while its failure signature stays the same")
    m.add_argument("reproducer", help="a reproducer file, or an id (or unique id prefix) in --dir")
    m.add_argument("--budget", type=float, default=600, help="seconds to spend shrinking")
    m.add_argument("--confirm", type=int, default=2, help="a step is kept only if it reproduces this many times in a row")
    m.add_argument("--runs", type=int, default=3, help="runs of the minimized case to triage flakiness (0: none)")
    _replay_args(m)
    m.set_defaults(func=cmd_minimize)
    e = sub.add_parser("env", help="what TileLang, torch, CUDA and GPU this machine has")
    e.set_defaults(func=cmd_env)
    args = p.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
