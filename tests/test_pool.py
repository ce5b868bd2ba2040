"""The pool's side of the worker protocol: one handler per event, an unknown event is the harness's
error for its case, and a budget of worker replacements after which the pool stops (and a
campaign with it) instead of restarting workers in a loop. Workers misbehave through the fake
family (tests/fake_family.py: heads 3 dies compiling, 4 hangs running, 5 dies running, 6 faults)."""
import json
import sys
import time

import pytest

from harness import campaign, reproducer_files
from harness import pool as pool_mod
from harness.case import Case
from harness.pool import Pool, RestartsExhausted, Timeouts


def fake(behaviour, **kw):
    return Case(family="fake", heads=behaviour, **kw)


# A worker out of step with the pool: it answers heads 1 as harness.worker would, and the others
# with what the pool cannot handle.
OUT_OF_STEP = r"""
import json, sys
from harness import oracle, worker
from harness.result import Result
for line in sys.stdin:
    case, _ = worker.request(line)
    reply = {1: {"event": "result", **Result.of(case, "COMPILED", "compile").to_dict()},
             2: {"event": "progress", "percent": 50},
             3: "half a line of something",
             4: {"event": "stage"}}[case.heads]
    print(reply if isinstance(reply, str) else json.dumps(reply), flush=True)
"""


def test_a_request_is_a_named_event_as_a_reply_is():
    """The pool asks "run" or "build" in a JSON event holding the case; a line that is no such event is refused."""
    from harness import worker
    from harness.case import CaseError
    from harness.programs import generate

    case, program = fake(1, variant="other"), Case(family="program", program=generate.template("reduce"))
    for asked, build in [(case, False), (case, True), (program, False)]:
        line = worker.request_line(asked, build)
        assert json.loads(line)["event"] == ("build" if build else "run") and line.endswith("\n")
        assert worker.request(line) == (asked, build)
    for line in ("build " + json.dumps(json.loads(worker.request_line(case, False))["case"]), '{"event": "stage"}', "[]"):
        with pytest.raises(CaseError):
            worker.request(line)


def test_a_worker_event_the_pool_does_not_know_is_a_harness_error(tmp_path, monkeypatch):
    monkeypatch.setattr(pool_mod, "WORKER", [sys.executable, "-c", OUT_OF_STEP])
    with Pool(1, "sm_90a", tmp_path, Timeouts(compile=20, run=3)) as pool:
        results = list(pool.run([fake(2), fake(1), fake(3), fake(4), fake(1, variant="other")]))
        started = pool.started
    by = {(r.case.heads, r.case.variant): r for r in results}
    assert len(results) == 5
    assert [by[1, v].verdict for v in ("default", "other")] == ["COMPILED", "COMPILED"]
    for heads, what in [(2, "an unknown event 'progress'"), (3, "a line that is no event"),
                        (4, "a malformed 'stage' event (KeyError: 'stage')")]:
        r = by[heads, "default"]
        assert (r.verdict, r.stage) == ("HARNESS_ERROR", "protocol"), r
        assert r.message.startswith(f"worker sent {what} (known events: stage, refused, result): "), r
        assert r.message.endswith("pool and worker are out of step, so the worker was ended")
    # A worker out of step is ended (its later lines would answer the wrong case); one that answered lives on.
    assert started == 4


def test_workers_lost_past_the_budget_stop_the_pool(tmp_path):
    """max_restarts 2: a death and a hang are replaced, and the third loss in a row (a device fault: the worker
    exits) stops the run before the next case, after every verdict so far was yielded. A kernel that ran on a
    worker that lived starts the count again: crashes among passing cases are findings, not a broken machine."""
    cases = [fake(6), fake(1), fake(5), fake(4), fake(6, variant="other"), fake(1, variant="other")]
    results = []
    with Pool(1, "auto", tmp_path, Timeouts(compile=20, run=3), max_restarts=2) as pool:
        with pytest.raises(RestartsExhausted) as stop:
            for r in pool.run(cases):
                results.append(r)
        assert [(r.case.heads, r.verdict) for r in results] == [(6, "CRASH"), (1, "PASS"), (5, "CRASH"),
                                                                         (4, "HANG"), (6, "CRASH")]
        assert (pool.started, pool.restarts) == (4, 3)
        assert str(stop.value) == (f"a worker died or hung (CRASH at run of case {fake(6, variant='other').id}) and 2 were "
                                   "replaced in a row (no case ran a kernel between), the most allowed")
        # Stopped: nothing more runs, whatever is asked.
        with pytest.raises(RestartsExhausted, match="2 were replaced in a row"):
            pool.run_one(fake(1))
        assert pool.started == 4 and not pool.busy


def test_the_budget_counts_replacements_not_losses_nor_abandoned_workers(tmp_path):
    with Pool(1, "sm_90a", tmp_path, Timeouts(compile=60, run=3), max_restarts=0) as pool:
        # A worker that a time box abandoned was ended by the pool, not lost: replacing it is free.
        t0 = time.monotonic()
        assert list(pool.run([fake(2)], deadline=t0 + 3)) == []  # hangs compiling until the deadline
        assert pool.run_one(fake(1)).verdict == "COMPILED"
        # A loss with nothing left to run replaces nothing; the next case needs a replacement.
        assert pool.run_one(fake(3)).verdict == "CRASH"
        with pytest.raises(RestartsExhausted, match=r"\(CRASH at compile of case .*\) and 0 were replaced"):
            pool.run_one(fake(1, batch=2))
        assert (pool.started, pool.restarts) == (2, 0)


def test_a_campaign_stopped_by_the_budget_keeps_its_results_and_resumes(tmp_path, capsys):
    """harness run --max-worker-restarts: one line says why it stopped, exit 1; what was answered is
    in results.jsonl and its reproducer recorded; the same command continues the run."""
    from harness import cli
    campaign.write_cases(tmp_path / "c.jsonl", [fake(3, seqlen_q=q) for q in range(1, 5)])  # each dies compiling
    argv = ["run", "--cases-from", str(tmp_path / "c.jsonl"), "--out", str(tmp_path / "out"), "--workers", "1",
            "--reproducers", str(tmp_path / "r"), "--max-worker-restarts", "1"]
    assert cli.main(argv) == 1
    err = capsys.readouterr().err.splitlines()
    stopped = [line for line in err if line.startswith("harness run: stopped")]
    assert len(stopped) == 1 and "--max-worker-restarts 1" in stopped[0] and "CRASH at compile" in stopped[0], err
    lines = (tmp_path / "out" / "results.jsonl").read_text().splitlines()
    assert [json.loads(line)["verdict"] for line in lines] == ["CRASH", "CRASH"]
    assert len(reproducer_files.paths(tmp_path / "r")) == 1  # one signature, recorded as it failed
    # The same command goes on from there: two cases left, one replacement allowed again.
    assert cli.main(argv) == 0  # the crash is a known bug now
    assert len((tmp_path / "out" / "results.jsonl").read_text().splitlines()) == 4


def test_a_time_box_signals_every_abandoned_worker_before_waiting_for_any(tmp_path, monkeypatch):
    """Each worker a time box abandons is killed at once, not one after another's exit: a worker with a CUDA context
    takes a while to exit, and a run on many GPU slots overran its time box by that much per worker."""
    calls = []
    signal, kill = pool_mod._Worker.signal, pool_mod._Worker.kill
    monkeypatch.setattr(pool_mod._Worker, "signal", lambda w: (calls.append("signal"), signal(w)))
    monkeypatch.setattr(pool_mod._Worker, "kill", lambda w: (calls.append("wait"), kill(w)))
    with Pool(2, "sm_90a", tmp_path, Timeouts(compile=60, run=3)) as pool:
        assert list(pool.run([fake(2), fake(2, variant="other")], deadline=time.monotonic() + 3)) == []
        abandoned = calls[:calls.index("wait") + 1]
    assert abandoned.count("signal") >= 2 and abandoned[-1] == "wait"
