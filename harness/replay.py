"""Replay a reproducer and say what it shows of the recorded bug (harness.status.Status: its exit status is what
`git bisect run` wants, 0 good, 1 bad, 125 cannot test).

Used by `harness repro`, by reproducers/test_reproducers.py, by bisect, by
`harness minimize` (`minimize`: shrink a recorded case and save it in place), and by a campaign that reruns
its new reproducers under compute-sanitizer (`sanitized`: the replay's worker runs under the tool).
1 means the recorded bug is here: some run fails the way a compiler bug fails (MISMATCH,
NONFINITE, COMPILE_ERROR, CRASH, HANG). Without a GPU a compile error replays, and so does a hang
whose recorded message names the code-scan check that explains it (the check is then the evidence).
125 means this machine cannot say: no GPU for a numerical bug, TileLang does not import, the case
is unsupported here, or the harness itself erred (a HARNESS_ERROR is never evidence against the
compiler).
"""
from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from harness import oracle, reproducer_building, reproducer_files, reproducer_loading, sanitizer
from harness.environment import environment, gpu_count, importable
from harness.pool import Pool, Timeouts
from harness.result import Result
from harness.status import SKIP, Status


@dataclass
class Replay:
    status: Status
    verdict: str                  # REPRODUCED, NOT REPRODUCED or CANNOT TEST, with the reason
    evidence: list[str] = field(default_factory=list)  # one line per run
    results: list[Result] = field(default_factory=list)


def target(rep, env, arch="sm_90a", compile_only=False) -> tuple[str | None, str]:
    """(target, "") to replay `rep` here, or (None, why not). A compile error needs no GPU, nor
    does anything `compile_only` (triage compiles and traces, it does not run)."""
    if not importable(env):
        return None, f"tilelang {env['tilelang']}"
    if gpu_count():
        return "auto", ""
    if compile_only or not rep.needs_gpu:
        return arch, ""
    return None, "no GPU here (numerics need one)"


def _judge_by_scan(rep, results, evidence) -> Replay:
    """A recorded hang, or a failure with a witness, replayed without a GPU: reproduced when a compile shows the
    check that explains it or stands for it (predicted, not run)."""
    checks, n, verdict = set(rep.scan_checks), len(results), rep.result.verdict
    shown = [r for r in results if oracle.shows(r, checks)]
    evidence = evidence + sorted({f"  scan:      {f}" for r in shown for f in r.hazards if f.check in checks})
    what = "the recorded hang's cause" if verdict == "HANG" and rep.result.predicted else f"the recorded {verdict}'s witness"
    if shown:
        return Replay(Status.REPRODUCED, f"REPRODUCED: {len(shown)}/{n} compiles show {', '.join(sorted(checks))}, {what} "
                      "(compile-only: predicted, not run)", evidence, results)
    failing = [r for r in results if r.failed]
    if failing:
        return Replay(Status.FAILS_DIFFERENTLY, f"REPRODUCED: {len(failing)}/{n} compiles fail; signature differs",
                      evidence, results)
    other = next((r for r in results if r.verdict != "COMPILED"), None)
    if other:
        return Replay(Status.CANNOT_TEST, f"CANNOT TEST: {other.describe()}", evidence, results)
    return Replay(Status.NOT_REPRODUCED, f"NOT REPRODUCED: {n}/{n} compiles without {', '.join(sorted(checks))} (recorded "
                  f"{verdict}; compile-only)", evidence, results)


def where(env) -> str:
    return f"tilelang {env.get('tilelang', '?')} {env.get('tilelang_commit', '')}".rstrip() + f", {env.get('gpu', '?')}"


def runs_of(case, tgt, logs, runs, timeouts, fresh=False) -> list[Result]:
    """`runs` results of `case`: one worker compiles once and runs it each time (races at run
    time), or, `fresh`, every run compiles in a new worker with an empty kernel cache (bugs in
    which code a compile emits: 80929a5b6a72, bb5de5939ba0). A crash or hang is a verdict."""
    if not fresh:
        with Pool(1, tgt, logs, timeouts) as pool:
            return [pool.run_one(case) for _ in range(runs)]
    results = []
    for i in range(runs):
        with tempfile.TemporaryDirectory() as cache, \
                Pool(1, tgt, Path(logs) / f"fresh-{i}", timeouts, env=dict(os.environ, TILELANG_CACHE_DIR=cache)) as pool:
            results.append(pool.run_one(case))
    return results


def kernels_moved(rep, env) -> list[str]:
    """A warning line when harness/kernels/ is not what the reproducer was recorded with: its case
    then compiles another program (none for reproducers recorded before the digest existed)."""
    then, now = rep.environment.get("kernels_digest"), env.get("kernels_digest")
    if not then or not now or then == now:
        return []
    return [f"  kernels:  harness/kernels/ differs from the recorded one (digest {then} at harness "
            f"{rep.environment.get('harness_commit', 'unknown')}, now {now} at {env.get('harness_commit', 'unknown')}): "
            "the case may compile another program than the one that failed"]


def replay(rep, logs, runs=1, arch="sm_90a", timeouts: Timeouts | None = None, env=None, fresh=False) -> Replay:
    """Run `rep.case` `runs` times (`fresh`: a compile each time) and judge what that says about the bug."""
    env = env or environment()
    tgt, reason = target(rep, env, arch)
    if tgt is None:
        return Replay(Status.CANNOT_TEST, f"CANNOT TEST: {reason}")
    return judged(rep, runs_of(rep.case, tgt, Path(logs) / rep.id, max(runs, 1), timeouts, fresh), tgt, env)


def sanitized(rep, tool: str, logs, arch="sm_90a", timeouts: Timeouts | None = None, env=None
              ) -> tuple[Replay, sanitizer.Report | None]:
    """`rep` replayed once with its worker under compute-sanitizer `tool` (PyTorch's caching allocator and the
    guard bands off, memcheck padded: else a write just past a tensor lands in memory the tool counts as valid),
    and the tool's report, read from its log file once the worker has ended (None if nothing ran).
    SanitizerError, before anything runs, for an unknown tool or no compute-sanitizer here."""
    log = Path(logs) / rep.id / f"compute-sanitizer-{tool}.log"
    wrap, extra = sanitizer.command(tool, [], log_file=log)
    env = env or environment()
    tgt, reason = target(rep, env, arch)
    if tgt is None:
        return Replay(Status.CANNOT_TEST, f"CANNOT TEST: {reason}"), None
    log.parent.mkdir(parents=True, exist_ok=True)
    log.unlink(missing_ok=True)
    timeouts = timeouts or Timeouts()
    with Pool(1, tgt, log.parent, timeouts, env={**os.environ, **extra}, wrap=wrap, bands=False) as pool:
        results = [pool.run_one(rep.case)]
        pool.finish(timeouts.run)  # the tool writes its summary when the worker exits
    report = sanitizer.parse(log.read_text(errors="replace") if log.exists() else "", tool)
    return judged(rep, results, tgt, env), report


def judged(rep, results: list[Result], tgt: str, env) -> Replay:
    """What `results`, runs of `rep.case` for target `tgt`, say about the recorded bug."""
    evidence = [f"now:       {r.describe()}  [{where(env)}]" for r in results] + kernels_moved(rep, env)
    if tgt != "auto" and rep.scan_checks:
        return _judge_by_scan(rep, results, evidence)
    n = len(results)
    good = "PASS" if tgt == "auto" else "COMPILED"
    failing = [r for r in results if r.failed]
    if failing:
        same = sum(r.signature == tuple(rep.signature) for r in results)
        verdict = (f"REPRODUCED: {len(failing)}/{n} runs fail; signature "
                   + (f"matches in {same}/{n} runs" if same else "differs"))
        if same < n:
            evidence.append(f"  recorded signature: {list(rep.signature)}")
            evidence += [f"  now:                {list(r.signature)}" for r in results]
        return Replay(Status.REPRODUCED if same else Status.FAILS_DIFFERENTLY, verdict, evidence, results)
    other = next((r for r in results if r.verdict != good), None)
    if other:  # UNSUPPORTED here, or our own HARNESS_ERROR: no evidence either way
        return Replay(Status.CANNOT_TEST, f"CANNOT TEST: {other.describe()}", evidence, results)
    return Replay(Status.NOT_REPRODUCED, f"NOT REPRODUCED: {n}/{n} runs {good} (recorded {rep.result.verdict})",
                  evidence, results)


def replay_test(json_path, tmp_path) -> None:
    """The body of reproducers/test_reproducers.py, one test per reproducer file: the case must behave correctly.
    Without a GPU a compile error still replays (compiled for sm_90a); anything else skips."""
    import pytest

    out = replay(reproducer_loading.load(json_path), tmp_path)
    if out.status is Status.CANNOT_TEST:
        pytest.skip(out.verdict)
    assert out.status is Status.NOT_REPRODUCED, "\n".join([out.verdict, *out.evidence])


def minimize(rep, path: Path, logs: Path, timeouts: Timeouts, arch="sm_90a", confirm=2, budget=600.0, runs=3,
             tries=1, log=print) -> tuple[int, str]:
    """Shrink `rep`'s case while its signature stays (harness.minimize) and save the smaller reproducer
    over `path`, keeping its id, links and a title written by hand: (status, the line to print).
    The status is the command's exit: SKIP where it cannot be tested here, or where the bug does not reproduce
    in `tries` replays (nothing to shrink here: BAD would read as "reproduced" to a caller that knows repro's
    statuses), else 0."""
    import dataclasses

    from harness.minimize import Evaluator, shrink

    env = environment()
    tgt, reason = target(rep, env, arch)
    if tgt not in (None, "auto") and rep.result.verdict != "HANG" and rep.witness:
        tgt, reason = None, "no GPU here: a witness judges a replay, but shrinking needs the failure itself"
    if tgt is None:
        return SKIP, f"CANNOT TEST: {reason}"
    view = (lambda r: oracle.as_predicted(r, rep.scan_checks, timeouts.run)) if tgt != "auto" else (lambda r: r)
    with Pool(1, tgt, logs, timeouts) as pool:
        evaluate = Evaluator(pool, confirm, rep.signature, view)
        for _ in range(tries):  # a race may pass a replay or two before it fails again
            first = evaluate(rep.case)
            if first.signature == rep.signature:
                break
        else:
            within = f" in {tries} replays" if tries > 1 else ""
            return SKIP, f"NOT REPRODUCED{within}, nothing to minimize: now {first.describe()}"
        small, result, flaky = shrink(first, evaluate, budget, runs, log=log)
    if small == rep.case:
        return 0, f"already minimal: {path}"
    # A default title and description follow the smaller case; words written by hand stay.
    hand = rep.title != reproducer_building.default_title(rep.result)
    new = reproducer_building.build(result, env, rep.title if hand else None, flaky, rep.minimized_from or rep.case,
                                    id=rep.id, description=rep.description if hand else None)
    # What was learned about the bug (links, release matrix, witness, triage, the report's words) stays with it.
    kept = dataclasses.replace(new, links=rep.links, releases=rep.releases, triage=rep.triage, upstream=rep.upstream,
                               kind=rep.kind, witness=rep.witness)
    return 0, f"minimized: {reproducer_files.save_as(kept, path)}"
