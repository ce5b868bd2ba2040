"""The pool survives hangs and crashes: each becomes a verdict and the run goes on."""
import dataclasses
import os

import pytest

from harness.case import Case
from harness.environment import gpu_count
from harness.pool import Pool, Timeouts, threads_per_worker
from harness.result import Result, ScanFinding


@pytest.fixture(scope="module")
def timeouts(tmp_path_factory):
    """Timeouts measured from this machine as loaded as it is now, not fixed: ten times what a worker took to
    start and compile the passing fake kernel, and to make its inputs, run and judge it (at least 10 s and 3 s).
    A hang is still killed; a worker the load slows is not taken for one."""
    with Pool(1, "auto", tmp_path_factory.mktemp("measured"), Timeouts(compile=600, run=600)) as pool:
        s = pool.run_one(fake(1)).seconds
    return Timeouts(compile=max(10.0, 10 * (s["start"] + s["compile"])),
                    run=max(3.0, 10 * (s["inputs"] + s["run"] + s["judge"])))


def fake(behaviour, **kw):
    return Case(family="fake", heads=behaviour, **kw)


def run_all(cases, target, tmp_path, timeouts, workers=2):
    with Pool(workers, target, tmp_path, timeouts) as pool:
        results = {r.case.heads: r for r in pool.run(cases)}
        return results, pool.started


def test_compile_hang_and_crash_become_verdicts(tmp_path, timeouts):
    results, _ = run_all([fake(1), fake(2), fake(3)], "sm_90a", tmp_path, timeouts)
    assert results[1].verdict == "COMPILED"
    assert (results[2].verdict, results[2].stage) == ("HANG", "compile")
    assert (results[3].verdict, results[3].stage) == ("CRASH", "compile")
    assert "status 3" in results[3].message


def test_workers_spread_over_the_gpus_this_process_may_use(tmp_path, timeouts):
    # gpus index the devices CUDA_VISIBLE_DEVICES leaves visible: a runner given GPUs 5 and 7 must
    # not have its workers on 0 and 1. Each result names its worker's GPU.
    with Pool(2, "sm_90a", tmp_path, timeouts, gpus=[0, 1],
              env=dict(os.environ, CUDA_VISIBLE_DEVICES="5,7")) as pool:
        results = list(pool.run([fake(1), fake(1, variant="other")]))
    assert sorted((r.gpu, r.verdict) for r in results) == [("5", "COMPILED"), ("7", "COMPILED")]
    with Pool(1, "sm_90a", tmp_path, timeouts) as pool:
        assert "gpu" not in pool.run_one(fake(1)).to_dict()  # one GPU (or none): nothing to tell apart


def test_run_hang_death_and_cuda_fault_do_not_stop_the_run(tmp_path, timeouts):
    # One worker: every failure must be followed by a fresh worker that runs the next case.
    cases = [fake(4), fake(1, batch=2), fake(5), fake(1, batch=3), fake(6), fake(1, batch=4)]
    with Pool(1, "auto", tmp_path, timeouts) as pool:
        results = list(pool.run(cases))
    verdicts = sorted((r.case.heads, r.case.batch, r.verdict, r.stage) for r in results)
    assert verdicts == [(1, 2, "PASS", "judge"), (1, 3, "PASS", "judge"), (1, 4, "PASS", "judge"),
                        (4, 1, "HANG", "run"), (5, 1, "CRASH", "run"), (6, 1, "CRASH", "run")]
    # A kernel that hangs or kills its worker keeps what the generated-code scan found.
    for r in results:
        assert len(r.code) == 16 and r.hazards == (), r
    fault = next(r for r in results if r.case.heads == 6)
    assert fault.message == "LaunchError: fake_kernel: CUDA error: an illegal memory access was encountered"
    # Cases run grouped by kernel (4, 1 1 1, 5, 6): the first worker, one after the hang and one
    # after the death; the faulting worker was killed and, with nothing left to run, not replaced.
    assert pool.started == 3


def test_a_fault_surfacing_in_the_judge_is_a_crash(tmp_path, timeouts):
    with Pool(1, "auto", tmp_path, timeouts) as pool:
        r = pool.run_one(fake(7))
        assert (r.verdict, r.stage, r.message) == ("CRASH", "judge", "RuntimeError: CUDA error: misaligned address")
        assert pool.run_one(fake(1)).verdict == "PASS"
        assert pool.started == 2  # the faulted worker was not reused


def test_workers_share_the_cores_out(tmp_path):
    # torch in every worker would otherwise take every core (the warm campaign ran 1.5x slower so).
    assert Pool(4, "sm_90a", tmp_path).env["OMP_NUM_THREADS"] == str(threads_per_worker(4))
    assert Pool(4, "sm_90a", tmp_path, env={"OMP_NUM_THREADS": "3"}).env["OMP_NUM_THREADS"] == "3"
    assert threads_per_worker(10**6) == 1


def test_xdist_processes_share_the_cores_out(monkeypatch):
    # Under pytest-xdist each process has its own pool: 15 one-worker pools on 16 cores, each
    # worker taking 16 threads: inputs took 0.1 to 0.4 s a case there, 5 ms in harness run.
    monkeypatch.setattr("os.cpu_count", lambda: 16)
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "15")
    assert threads_per_worker(1) == 1
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "2")
    assert threads_per_worker(2) == 4


def test_workers_outlive_a_run(tmp_path, timeouts):
    with Pool(1, "auto", tmp_path, timeouts) as pool:
        first = pool.run_one(fake(1))
        again = pool.run_one(fake(1, batch=2))
        assert (first.verdict, again.verdict) == ("PASS", "PASS") and pool.started == 1
        # Each stage is timed (benchmarks/campaign.py adds them up); the worker's start (spawn to
        # ready) goes with its first case; the second case compiles nothing.
        assert set(first.seconds) == {"start", "compile", "inputs", "run", "judge"}
        assert set(again.seconds) == {"inputs", "run", "judge"}
        assert first.seconds["start"] > 0


def test_workers_started_ahead_are_the_ones_that_run(tmp_path, timeouts):
    with Pool(2, "sm_90a", tmp_path, timeouts) as pool:
        pool.start(5)
        assert pool.started == 2
        results = list(pool.run([fake(1), fake(1, batch=2), fake(1, batch=3)]))
        assert [r.verdict for r in results] == ["COMPILED"] * 3 and pool.started == 2


def test_kernels_built_ahead_serve_the_cases_that_come_later(tmp_path, timeouts):
    with Pool(2, "auto", tmp_path, timeouts) as pool:
        pool.prepare([fake(1), fake(1, batch=2), fake(9)])  # two kernels: 1 passes, 9 fails to compile
        assert len(pool.busy) == 2 and not pool.builds  # both building at once, before any run()
        r = pool.run_one(fake(1, batch=5))
        # The worker that built the kernel ran the case: nothing compiled for it.
        assert r.verdict == "PASS" and "compile" not in r.seconds and "start" in r.seconds
        # A failed build is reported by the cases that need the kernel, not by prepare().
        assert pool.run_one(fake(9)).verdict == "COMPILE_ERROR"
        assert pool.started == 2


def test_a_build_ahead_that_hangs_is_killed_and_the_case_reports_it(tmp_path, timeouts):
    # The compile deadline covers the worker's start too: `timeouts` measured it.
    with Pool(2, "sm_90a", tmp_path, timeouts) as pool:
        pool.prepare([fake(2)])  # hangs while compiling
        assert pool.run_one(fake(1)).verdict == "COMPILED"  # the other worker is free meanwhile
        r = pool.run_one(fake(2, batch=2))
        assert (r.verdict, r.stage) == ("HANG", "compile")


def test_a_deadline_ends_the_run_and_abandons_the_cases_in_flight(tmp_path):
    """A time box bounds the run: a compile still going at the deadline is killed, not awaited (awaited, it
    would end as a HANG result at the compile timeout, a day here)."""
    import time
    with Pool(2, "sm_90a", tmp_path, Timeouts(compile=86_400, run=60)) as pool:
        assert pool.run_one(fake(1)).verdict == "COMPILED"  # worker 0 ready, its kernel built
        results = list(pool.run([fake(2), fake(1, batch=2)], deadline=time.monotonic() + 5))  # 2 hangs compiling
        assert [(r.case.heads, r.verdict) for r in results] == [(1, "COMPILED")]
        assert not pool.busy and pool.workers[1].proc.poll() is not None  # the hung worker was killed


def test_a_case_the_worker_cannot_read_is_a_harness_error(tmp_path, monkeypatch, timeouts):
    """Parent and worker out of step (code edited mid-run): the worker refuses the case and lives."""
    from harness import pool as pool_mod

    real = pool_mod.request_line
    # block_m has no "off" value, so a case without it cannot be read (knobs, say, would load as off).
    monkeypatch.setattr(pool_mod, "request_line", lambda c, build: real(c, build).replace('"block_m": 64, ', "")
                        if c.heads == 7 else real(c, build))
    with Pool(1, "sm_90a", tmp_path, timeouts) as pool:
        r = pool.run_one(fake(7))
        assert (r.verdict, r.stage) == ("HARNESS_ERROR", "protocol")
        assert "worker cannot read the case: missing case field(s): block_m" in r.message
        assert pool.run_one(fake(1)).verdict == "COMPILED" and pool.started == 1


def test_a_fresh_replay_compiles_every_run(tmp_path, timeouts):
    """`harness repro --fresh`: a bug in which code a compile emits needs a compile per run."""
    from harness.replay import runs_of
    once = runs_of(fake(1), "sm_90a", tmp_path / "once", 3, timeouts)
    fresh = runs_of(fake(1), "sm_90a", tmp_path / "fresh", 3, timeouts, fresh=True)
    assert [r.verdict for r in once + fresh] == ["COMPILED"] * 6
    assert ["compile" in r.seconds for r in once] == [True, False, False]
    assert ["compile" in r.seconds for r in fresh] == [True, True, True]


@pytest.mark.skipif(gpu_count() > 0, reason="judges the compile-only replay (a GPU would run the fake kernel)")
def test_a_hang_the_code_scan_explains_replays_without_a_gpu(tmp_path, monkeypatch, timeouts):
    """A recorded HANG whose message names a code-scan check is judged compile-only by that check:
    what lets `harness bisect` place 0.1.10's setmaxnreg hang (835c5df46cb3) on a CPU machine."""
    from harness import oracle, reproducer_building
    from harness.replay import replay
    from harness.status import Status
    hang = oracle.hang(fake(15), 60, "run", [ScanFinding("register_budget", "x")])
    rep = reproducer_building.build(hang, {})
    bad = replay(rep, tmp_path / "bad", timeouts=timeouts)
    assert bad.status is Status.REPRODUCED and "1/1 compiles show register_budget" in bad.verdict, bad
    assert any("95232 registers" in line for line in bad.evidence)
    monkeypatch.setenv("FAKE_SETMAXNREG", "160")  # the release that fixed it
    good = replay(rep, tmp_path / "good", timeouts=timeouts)
    assert (good.status, good.verdict) == (Status.NOT_REPRODUCED, "NOT REPRODUCED: 1/1 compiles without register_budget "
                                                 "(recorded HANG; compile-only)")
    plain = reproducer_building.build(oracle.hang(fake(15), 60, "run"), {})
    assert replay(plain, tmp_path / "plain").verdict == "CANNOT TEST: no GPU here (numerics need one)"


@pytest.mark.skipif(gpu_count() > 0, reason="judges the compile-only replay (a GPU would run the fake kernel)")
def test_a_failure_with_a_witness_replays_without_a_gpu(tmp_path, monkeypatch, timeouts, capsys):
    """A MISMATCH whose generated code shows a code-scan check exactly where it fails (its `witness`, checked against
    the release matrix) is judged compile-only by that check: what lets a commit bisect place a numerical bug on a
    CPU machine. It says so; it does not shrink without a GPU."""
    from harness import cli, reproducer_building, reproducer_files
    from harness.replay import replay
    from harness.status import Status
    wrong = Result.of(fake(15), "MISMATCH", "judge", "O: max error 1 > tolerance 0 at [0, 0]")
    plain = reproducer_building.build(wrong, {})
    assert replay(plain, tmp_path / "plain").verdict == "CANNOT TEST: no GPU here (numerics need one)"
    rep = dataclasses.replace(plain, witness=("register_budget",))
    assert not rep.needs_gpu and rep.scan_checks == ["register_budget"]
    bad = replay(rep, tmp_path / "bad", timeouts=timeouts)
    assert (bad.status, bad.verdict) == (Status.REPRODUCED, "REPRODUCED: 1/1 compiles show register_budget, the recorded "
                                         "MISMATCH's witness (compile-only: predicted, not run)"), bad
    monkeypatch.setenv("FAKE_SETMAXNREG", "160")
    good = replay(rep, tmp_path / "good", timeouts=timeouts)
    assert (good.status, good.verdict) == (Status.NOT_REPRODUCED, "NOT REPRODUCED: 1/1 compiles without register_budget "
                                           "(recorded MISMATCH; compile-only)")
    path = reproducer_files.save_as(rep, tmp_path / "r.json")
    assert cli.main(["minimize", str(path)]) == 125
    assert "no GPU here: a witness judges a replay, but shrinking needs the failure itself" in capsys.readouterr().out


@pytest.mark.skipif(gpu_count() > 0, reason="minimizes compile-only (a GPU would run the fake kernel)")
def test_a_hang_the_code_scan_explains_minimizes_without_a_gpu(tmp_path, capsys):
    """`harness minimize` without a GPU: a compile showing the recorded hang's cause counts as that
    hang (replay.as_predicted), so the case shrinks while the deadlock stays predicted."""
    from harness import cli, oracle, reproducer_building, reproducer_files, reproducer_loading, reproducer_model
    hang = oracle.hang(fake(15, batch=3, seqlen_q=90, seqlen_k=90), 60, "run", [ScanFinding("register_budget", "x")])
    learned = {"links": reproducer_model.Links(notes=("a note",)),
               "releases": {"0.1.10": reproducer_model.Release("reproduced")},
               "triage": reproducer_model.Triage(reproducer_model.Culprit("tl.Pass")),
               "upstream": reproducer_model.Upstream(title="[BUG] words")}
    path = reproducer_files.save(dataclasses.replace(reproducer_building.build(hang, {}), **learned), tmp_path / "reps")
    assert cli.main(["minimize", str(path), "--budget", "60", "--runs", "0", "--logs", str(tmp_path / "logs")]) == 0
    rep = reproducer_loading.load(path)
    assert {k: getattr(rep, k) for k in learned} == learned  # what was learned about the bug stays with it
    assert (rep.case.batch, rep.case.seqlen_q, rep.case.heads) == (1, 1, 15)  # the fake's setmaxnreg needs heads 15
    assert rep.signature == reproducer_building.build(hang, {}).signature and rep.minimized_from.batch == 3
    assert "minimized:" in capsys.readouterr().out


def test_a_campaign_shrinks_a_hang_its_scan_explains_compile_only(tmp_path, monkeypatch, timeouts):
    """On a GPU a hang costs a run timeout per step; one the code scan explains shrinks compile-only,
    and the shrunk case is kept only if it then hangs the same way when run."""
    from harness import campaign, oracle, reproducer_loading
    hang = oracle.hang(fake(15, batch=3, seqlen_q=90, seqlen_k=90), 3, "run", [ScanFinding("register_budget", "x")])
    opts = campaign.Options(out=tmp_path, reproducers=tmp_path / "reps", minimize=True, minimize_budget=60,
                            timeouts=timeouts)
    [path] = campaign.record_failures([hang], opts, "auto", known={})
    rep = reproducer_loading.load(path)
    assert (rep.case.batch, rep.case.seqlen_q, rep.case.heads) == (1, 1, 15) and rep.minimized_from.batch == 3
    assert rep.signature == hang.signature and rep.observed["stage"] == "run"
    assert (tmp_path / "logs" / "minimize" / "compile-only").is_dir()  # the steps compiled only
    # A shrunk case that does not hang when run (the scan predicted wrongly) is not kept.
    monkeypatch.setenv("FAKE_GRANTED", "1")
    opts.reproducers = tmp_path / "reps2"
    [path] = campaign.record_failures([hang], opts, "auto", known={})
    rep = reproducer_loading.load(path)
    assert rep.case.batch == 3 and rep.minimized_from is None
