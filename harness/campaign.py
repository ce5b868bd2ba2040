"""A campaign: draw (or load) cases, run them through a pool, keep every result, record new bugs.

The drawn cases are written to <out>/cases.jsonl before anything runs, so a campaign can be rerun
exactly anywhere (`--cases-from`), whatever Hypothesis version draws there; mutants of a program campaign's corpus
(harness.corpus) are appended there as they are drawn, before they run. Results are appended
to <out>/results.jsonl as each case ends: a killed run loses nothing and the same --out resumes.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import sys
import time
from collections import Counter
from concurrent.futures import Future
from dataclasses import dataclass
from functools import partial
from itertools import zip_longest
from pathlib import Path

from tqdm import tqdm

from harness import case as case_mod
from harness import corpus, kernels, oracle, report, reproducer_building, reproducer_files, reproducer_loading, untrusted
from harness.environment import environment, gpu_count, importable, in_background
from harness.minimize import Evaluator, shrink
from harness.pool import Pool, PoolError, RestartsExhausted, Timeouts, Workers, default_max_restarts, default_size
from harness.result import HARNESS_ERROR_STATUS, Result, alike, unscoped
from harness.server import Remote, ServerError


class CampaignError(ValueError):
    """Bad input to a campaign; the message is one line."""


@dataclass
class Options:
    out: Path
    families: tuple[str, ...] = ("fwd",)
    cases: int = 100
    seed: int = 0
    per_kernel: int = 4
    per_row: int = 1                 # lengths per covering-array kernel
    cases_from: Path | None = None
    workers: int = 0                 # 0: CPU cores - 1
    arch: str = "sm_90a"             # compile target without a GPU
    timeouts: Timeouts = None
    time: float = 0                  # end the cases after this many seconds (0: no limit)
    reproducers: Path = Path("reproducers")
    minimize: bool = False
    minimize_budget: float = 300
    pairwise: bool = True            # the first kernels cover every pair of static feature values
    shard: tuple[int, int] = (1, 1)  # (i, n): run the i-th of n disjoint parts, split by kernel
    stop_after: int = 0              # stop starting cases after this many new failures (0: never)
    sanitize: str | None = None      # rerun each new reproducer once under this compute-sanitizer tool
    peer: bool = False               # the kernels' own test shapes (Offer.peer) instead of drawn cases
    max_worker_restarts: int | None = None  # dead or hung workers replaced, then the run stops (None: 4 per worker)
    server: Path | None = None       # the socket of a `harness serve` whose workers run the cases (None: its own)
    mutate: float = corpus.SHARE     # of drawn program campaigns' cases: mutants of their corpus (harness.corpus)
    bands: bool = True               # the workers guard the buffers they run on (harness.bands)


def _err(*lines):
    for line in lines:
        print(line, file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------- cases
def draw(families, n, seed, per_kernel, cover=True, per_row=1) -> list[case_mod.Case]:
    """n cases shared among the families, dealt in turn (one family's case, the next family's, ...)
    so that a run cut short by --time has tested every family, not the first few."""
    from harness import strategies

    per_family = [strategies.draw(f, n // len(families) + (i < n % len(families)), seed + i, per_kernel, cover, per_row)
                  for i, f in enumerate(families)]
    return [c for turn in zip_longest(*per_family) for c in turn if c is not None]


def write_cases(path: Path, cases) -> None:
    path.write_text("".join(case_mod.to_json(c) + "\n" for c in cases))


def append_cases(path: Path, cases) -> None:
    with open(path, "a") as f:
        f.write("".join(case_mod.to_json(c) + "\n" for c in cases))


def mutants(opts: Options) -> int:
    """How many of the campaign's cases are to be mutants of its corpus (harness.corpus): a share of a fresh,
    unsharded draw that holds generated programs."""
    drawn = not (opts.cases_from or opts.peer) and opts.shard == (1, 1) and "program" in opts.families
    return int(opts.cases * opts.mutate) if drawn else 0


def load_cases(path: Path) -> list[case_mod.Case]:
    """Cases from a JSON-lines file, each validated; CampaignError names the line."""
    try:
        text = Path(path).read_bytes().decode("utf-8")
    except OSError as e:
        raise CampaignError(f"{path}: cannot read: {e.strerror or e}") from None
    except UnicodeDecodeError:
        raise CampaignError(f"{path}: not UTF-8 text") from None
    cases, lines = [], {}
    for n, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                case = reproducer_loading.checked_case(untrusted.loads(line))
            except json.JSONDecodeError as e:
                raise CampaignError(f"{path} line {n}: case is not valid JSON: {e}") from None
            except (case_mod.CaseError, ValueError) as e:  # CaseError, or too large or deep
                raise CampaignError(f"{path} line {n}: {e}") from None
            if case.id in lines:
                raise CampaignError(f"{path} lines {lines[case.id]} and {n}: the same case twice ({case.id})")
            lines[case.id] = n
            cases.append(case)
    if not cases:
        raise CampaignError(f"{path}: no cases")
    return cases


def shard_of(case: case_mod.Case, n: int) -> int:
    """Which of n shards (1..n) runs `case`: decided by its kernel (static fields), so a kernel is
    compiled on one runner only, and the same on every machine."""
    key = json.dumps([_held(name, getattr(case, name)) for name in kernels.kernel_fields(case)], default=list).encode()
    return int(hashlib.sha1(key).hexdigest(), 16) % n + 1


def _held(name, value):
    """A kernel field's value as a Case once held it, so that a case keeps its shard: a program as its text ("" for
    none), forms as "block=form" names."""
    if name == "program":
        return "" if value is None else value.text
    return case_mod.form_names(value) if name == "forms" else value


def plan(opts: Options) -> list[case_mod.Case]:
    """The campaign's cases (this shard's), checked against what <out> already holds: its
    cases.jsonl must list the same cases, its results.jsonl only results of these cases (a run of
    this campaign, to resume). Writes nothing."""
    if opts.cases_from:
        cases = load_cases(opts.cases_from)
    elif opts.peer:
        from harness import strategies

        cases = [c for f in opts.families for c in strategies.peer(f)]
    else:
        cases = draw(opts.families, opts.cases - mutants(opts), opts.seed, opts.per_kernel, opts.pairwise, opts.per_row)
    i, n = opts.shard
    cases = [c for c in cases if shard_of(c, n) == i]
    if not cases:
        raise CampaignError(f"shard {i}/{n} holds none of the cases")
    path = opts.out / "cases.jsonl"
    if path.exists():
        there = load_cases(path)
        # After the drawn cases, the mutants its corpus added (harness.corpus), if it mutates.
        if [c.id for c in there[:len(cases) if mutants(opts) else None]] != [c.id for c in cases]:
            raise CampaignError(f"{opts.out} holds another campaign ({len(there)} cases in {path}): "
                                f"resume it with --cases-from {path}, or choose another --out")
        cases = there
    path, ids = opts.out / "results.jsonl", {c.id for c in cases}
    results = read_results(path, resume=False)[0]
    foreign = [r.case_id for r in results if r.case_id not in ids]
    if foreign:
        raise CampaignError(f"{opts.out} holds results of another campaign ({path}: {len(foreign)} of {len(results)} "
                            f"are of cases not in this one, e.g. {foreign[0]}): choose another --out")
    return cases


# ----------------------------------------------------------------------------- results
def read_results(path: Path, resume: bool = True) -> tuple[list[Result], list[str]]:
    """(results, notes). An unreadable line is skipped. A last line cut short (a kill mid-write,
    a full disk) is too; to `resume`, it is also removed from the file, and its case runs again
    (as any skipped line's). A case with several lines (two runs into one --out) counts once: its
    first. Notes say so."""
    if not path.exists():
        return [], []
    data, notes = path.read_bytes(), []
    again = ", its case runs again" if resume else ""
    if data and not data.endswith(b"\n"):
        keep = data.rfind(b"\n") + 1
        notes.append(f"{path}: last line cut short ({len(data) - keep} bytes): {'dropped' if resume else 'skipped'}{again}")
        if resume:
            with open(path, "r+b") as f:
                f.truncate(keep)
        data = data[:keep]
    results, seen, twice = [], set(), []
    for n, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), 1):
        if not line.strip():
            continue
        try:
            r = untrusted.loads(line)
            if not (isinstance(r, dict) and isinstance(r.get("case_id"), str) and r.get("verdict") in oracle.VERDICTS):
                raise ValueError
            result = Result.from_dict(r)  # CaseError (a ValueError) for a case that is none
        except (ValueError, TypeError):
            notes.append(f"{path}: line {n} is not a result: skipped{again}")
            continue
        if result.case_id in seen:
            twice.append(n)
            continue
        seen.add(result.case_id)
        results.append(result)
    if twice:
        notes.append(f"{path}: {len(twice)} line(s) repeat a case already read (first: line {twice[0]}): "
                     "each case counted once")
    return results, notes


# ----------------------------------------------------------------------------- the campaign
def run(opts: Options) -> int:
    """0 nothing new failed, 1 a new failure (or workers died or hung past max_worker_restarts: the
    run stopped), 4 (HARNESS_ERROR) the harness's own error in some case, 125 TileLang does not import."""
    # --time counts from here: loading thousands of cases and results (tens of seconds on a busy host) is inside
    # the box a wrapper's own timeout is sized by; only the report and the new reproducers come after it.
    started = time.monotonic()
    if opts.out.exists() and not opts.out.is_dir():
        raise CampaignError(f"--out {opts.out} is a file, not a directory")
    results_path = opts.out / "results.jsonl"
    # Bad input writes nothing, not even <out>/logs: cases from a file, a shard, and an <out> that
    # already holds a campaign are planned (and refused) now; a fresh draw while the workers start.
    early = (opts.cases_from or opts.peer or opts.shard != (1, 1) or results_path.exists()
             or (opts.out / "cases.jsonl").exists())
    cases = plan(opts) if early else None
    with _pool(opts) as pool:
        target, workers, restarts = pool.target, pool.n, pool.max_restarts
        # First the workers (each imports torch and TileLang: seconds), then everything else while
        # they start: the environment probe (a child importing TileLang; the first result waits
        # for it), and the cases to draw. cases/s counts from the workers' start.
        t0 = time.monotonic()
        pool.start(min(workers, len(cases) if cases else opts.cases))
        probed = pool.probe()
        if cases is None:  # inside the time box, and minutes for tens of thousands of programs: say so first
            _err(f"drawing {opts.cases} cases, {opts.per_kernel} per kernel (seed {opts.seed})")
            cases = plan(opts)
            _err(f"drawn in {time.monotonic() - t0:.0f} s")
        if not (opts.out / "cases.jsonl").exists():
            write_cases(opts.out / "cases.jsonl", cases)
        previous, notes = read_results(results_path)
        done = {r.case_id for r in previous}
        todo = [c for c in cases if c.id not in done]
        if target != "auto":
            _err(f"no GPU: compile-only campaign for {target} (numerics need a GPU)")
        _err(*notes)
        _err(f"{len(cases)} cases ({len(cases) - len(todo)} already in {results_path}), "
             f"{len({kernels.kernel_key(c) for c in todo})} kernels, {workers} workers, target {target}")
        try:
            deadline = started + opts.time if opts.time else None
            in_background(report.plotting)  # for the report, while the cases run
            feedback = _feedback(opts, cases, previous, workers)
            results, known = _run_cases(pool, todo, probed, opts, results_path, deadline, feedback)
        except Untestable as e:  # every case would fail the same way: not a finding about kernels
            _err(f"harness run: cannot test here: tilelang {e}")
            return 125
        except RestartsExhausted as e:  # workers that keep dying or hanging: a stop, not a loop of restarts
            _err(f"harness run: stopped: {e} (--max-worker-restarts {restarts}); the results so far are in "
                 f"{results_path}, and the same command continues the run")
            return 1
        except PoolError as e:  # the workers can no longer be reached (a server gone): the results so far are kept
            _err(f"harness run: {e}; the results so far are in {results_path}, and the same command continues the run")
            return HARNESS_ERROR_STATUS
        elapsed = time.monotonic() - t0
    # The pool is closed: its workers held the GPUs, and minimizing starts its own.
    everything = previous + results
    print(report.write(opts.out, everything, known, about=about(opts, target, probed.result(), cases)))
    where = f"results in {results_path}" if results_path.exists() else "no case finished, so no results file yet"
    print(f"{len(results)} cases in {elapsed:.1f} s ({len(results) / max(elapsed, 1e-9):.2f} cases/s), "
          f"{pool.started} worker processes; {where}")
    ours = [r for r in everything if r.verdict == "HARNESS_ERROR"]
    if ours:
        print(f"HARNESS_ERROR in {len(ours)} cases: the harness's own bug, not recorded "
              f"(first: {ours[0].case_id}: {ours[0].message})")
    for path in record_failures(everything, opts, target, known):
        if opts.sanitize:
            print(f"{path.stem} under compute-sanitizer {opts.sanitize}: {sanitized(path, opts)}")
    # Known bugs (a reproducer has their signature) are reported, not counted: the exit status
    # says whether this run found something new, or the harness itself went wrong.
    new = [r for r in everything if r.is_new(known)]
    return 1 if new else HARNESS_ERROR_STATUS if ours else 0


def _pool(opts: Options) -> Workers:
    """The run's workers: the server's at opts.server (its workers and their kernels outlive the command), or a
    pool of its own. CampaignError if that server is not there or refuses this command."""
    if opts.server:
        if opts.workers:
            raise CampaignError("--workers does not go with --server: the server's workers run the cases")
        try:
            pool = Remote(opts.server, opts.timeouts)
        except ServerError as e:
            raise CampaignError(str(e)) from None
    else:
        gpus = gpu_count()
        pool = Pool(opts.workers or default_size(), "auto" if gpus else opts.arch, opts.out / "logs", opts.timeouts,
                    gpus=list(range(gpus)) or None, bands=opts.bands)
    opts.out.mkdir(parents=True, exist_ok=True)
    pool.max_restarts = default_max_restarts(pool.n) if opts.max_worker_restarts is None else opts.max_worker_restarts
    return pool


def about(opts: Options, target: str, env: dict, cases) -> dict:
    """What the report's first line says of the run (report.describe)."""
    gpu = target == "auto"
    return {"tilelang": env.get("tilelang"), "target": env.get("capability") if gpu else target,
            "gpu": env.get("gpu") if gpu else None, "compile_only": not gpu,
            "families": list(dict.fromkeys(c.family for c in cases)),
            "seed": None if opts.cases_from or opts.peer else opts.seed,
            "cases_from": opts.cases_from and str(opts.cases_from), "peer": opts.peer,
            "shard": "/".join(map(str, opts.shard)) if opts.shard != (1, 1) else None}


class Untestable(Exception):
    """TileLang does not import here; the message says why."""


def _tested_on(probe: Future) -> dict:
    env = probe.result()
    if not importable(env):
        raise Untestable(env["tilelang"])
    return env


def _feedback(opts: Options, cases, previous, workers: int) -> corpus.Feedback:
    """The rounds that feed <out>/corpus and draw mutants from it, with the results already in <out> offered first."""
    kept = corpus.Corpus(opts.out / "corpus")
    done = {r.case_id: r for r in previous}
    for c in cases:
        if c.id in done:
            kept.offer(done[c.id])
    budget = max(0, opts.cases - len(cases)) if mutants(opts) else 0
    return corpus.Feedback(kept, opts.mutate if mutants(opts) else 0, budget, opts.seed, opts.per_kernel, workers,
                           {c.id for c in cases}, partial(append_cases, opts.out / "cases.jsonl"))


def _run_cases(pool: Workers, todo, probe: Future, opts: Options, results_path: Path,
               deadline: float | None, feedback: corpus.Feedback) -> tuple[list[Result], dict]:
    """Run `todo`, appending each result to `results_path` and recording each new failure
    signature as it comes (a run killed midway keeps its reproducers): (results, known).
    Untestable, with nothing written, if the environment `probe` finds no TileLang."""
    if not todo:
        _tested_on(probe)
    results, counts, new_failures = [], Counter(), 0
    broken = []
    # Known bugs (reported, never counted as new), read while the first cases run: a second at a warm server.
    known_bugs = in_background(partial(reproducer_files.known_signatures, opts.reproducers, broken))
    known = None
    # Off a terminal (CI logs) tqdm redraws rarely instead of once per case.
    every = 0.2 if sys.stderr.isatty() else 30
    recorded, sink, on_disk = set(), None, None
    with contextlib.ExitStack() as stack:
        bar = stack.enter_context(tqdm(total=len(todo) + feedback.left, unit="case", file=sys.stderr, mininterval=every,
                                       maxinterval=max(every, 10)))
        for r in feedback.run(pool, todo, deadline):
            if sink is None:  # the first result: the probe, run meanwhile, must have found TileLang
                env = _tested_on(probe)
                known = _read(known_bugs, opts, broken)
                sink = stack.enter_context(open(results_path, "a"))
            sink.write(json.dumps(r.to_dict()) + "\n")
            sink.flush()
            results.append(r)
            counts[r.verdict] += 1
            bar.set_postfix_str(" ".join(f"{k} {v}" for k, v in sorted(counts.items())), refresh=False)
            bar.update()
            new = r.is_new(known)
            if new and r.signature not in recorded:
                recorded.add(r.signature)
                on_disk = reproducer_building.recorded(opts.reproducers) if on_disk is None else on_disk
                path = reproducer_building.write(r, env, opts.reproducers, on_disk=on_disk)
                bar.write(f"reproducer (new, not yet minimized): {path}", file=sys.stderr)
            new_failures += new
            if opts.stop_after and new_failures >= opts.stop_after:
                break  # leaving the loop closes the pool: cases in flight are dropped, not recorded
    known = known if known is not None else _read(known_bugs, opts, broken)
    if deadline is not None and len(results) < len(todo):
        _err(f"--time {opts.time:g} s reached: {len(todo) - len(results)} of {len(todo)} cases not run "
             f"(the same command continues the run)")
    return results, known


def _read(known_bugs: Future, opts: Options, broken: list) -> dict:
    known = known_bugs.result()
    if broken:
        _err(reproducer_files.skipped_line(opts.reproducers, broken))
    return known


def sanitized(path: Path, opts: Options) -> str:
    """What the tool found when the reproducer at `path` replayed under compute-sanitizer (harness.replay.sanitized;
    slow, opt-in): its report (the count, then each hazard) on one line, or why it did not run."""
    from harness import replay, sanitizer

    try:
        out, found = replay.sanitized(reproducer_loading.load(path), opts.sanitize, opts.out / "logs" / "sanitize", opts.arch,
                                      opts.timeouts)
    except sanitizer.SanitizerError as e:
        return str(e)
    return " | ".join(found.describe().splitlines()) if found else out.verdict


def record_failures(results, opts: Options, target, known: dict) -> list[Path]:
    """One reproducer per compiler-failure signature not in `known` (the reproducers before the
    run), minimized when asked (replacing the unminimized one written when it failed); print the paths."""
    firsts = {}
    for r in results:
        if r.failed:
            firsts.setdefault(r.signature, r)
    new = {sig: r for sig, r in firsts.items() if sig not in known}
    for sig in firsts.keys() & known.keys():
        print(f"reproducer (already recorded): {known[sig]}")
    if not new:
        return []
    env = environment()
    paths, on_disk = [], reproducer_building.recorded(opts.reproducers)
    logs = opts.out / "logs" / "minimize"
    # Pools start workers on first use: the compile-only one only for a hang its scan explains.
    with Pool(1, target, logs, opts.timeouts, bands=opts.bands) as pool, \
            Pool(1, opts.arch, logs / "compile-only", opts.timeouts) as scan:
        for sig, r in new.items():
            original = None
            if opts.minimize:
                _err(f"minimizing {r.case_id}: {' '.join(sig[2:6])}")
                r = _minimized(r, sig, pool, scan, opts)
                original = firsts[sig].case if r.case_id != firsts[sig].case_id else None
            paths.append(reproducer_building.write(r, env, opts.reproducers, minimized_from=original, on_disk=on_disk))
            like = alike(sig, known)
            print(f"reproducer (new): {paths[-1]}" + (f" (the same failure as {Path(like).stem} through other statements: "
                                                       "likely one bug)" if like else ""))
    return paths


def _minimized(r: Result, sig, pool, scan, opts: Options) -> Result:
    """The failure's smallest case's result. A hang that its code scan explains shrinks compile-only
    (a step takes a compile, not a run timeout), then runs once here: the shrunk case is kept only
    if it hangs the same way."""
    checks = r.predicted if r.verdict == "HANG" and pool.target == "auto" else None
    if not checks:
        return shrink(r, Evaluator(pool, 2, sig), opts.minimize_budget, 0, log=_err)[1]
    view = partial(oracle.as_predicted, checks=checks, limit=(opts.timeouts or Timeouts()).run)
    small, _, _ = shrink(r, Evaluator(scan, 1, sig, view), opts.minimize_budget, 0, log=_err)
    if small.id == r.case_id:
        return r
    ran = pool.run_one(small)
    _err(f"  the shrunk case on the GPU: {ran.describe()}")
    return ran if unscoped(ran.signature) == unscoped(sig) else r
