"""Bad input, as a new user would try it: one line on stderr, exit 2, nothing recorded.
And a campaign end to end on the CPU, through the test double family (compile-only)."""
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness import campaign, cli, record
from harness import case as case_mod
from harness.case import Case
from harness.oracle import result


def harness(*argv, cwd=None):
    """`harness ...` as a command: (exit status, stdout, stderr)."""
    p = subprocess.run([sys.executable, "-m", "harness.cli", *map(str, argv)], capture_output=True, text=True,
                       timeout=600, cwd=cwd)
    return p.returncode, p.stdout, p.stderr


def one_line_error(code, err, *, prefix, contains):
    assert code == 2, err
    assert err.count("\n") == 1 and err.startswith(prefix) and contains in err, err


@pytest.fixture
def reproducer(tmp_path):
    failing = result(Case(heads=4, kv_heads=2, seqlen_q=130, seqlen_k=77), "MISMATCH", "judge",
                     "O: max error 0.5 > tolerance 0.004", tensor="O", region="interior", checks=[])
    return record.write(failing, {"tilelang": "0.1.15"}, tmp_path / "reproducers")


def test_repro_of_a_file_that_is_not_utf8(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_bytes(b'{"schema": 1, "title": "\xff\xfe"}')
    code, out, err = harness("repro", bad)
    one_line_error(code, err, prefix="harness repro:", contains="not UTF-8 text")
    assert out == ""


def test_repro_of_a_case_missing_fields(reproducer):
    d = json.loads(reproducer.read_text())
    d["case"] = {"family": "fwd"}
    reproducer.write_text(json.dumps(d))
    code, out, err = harness("repro", reproducer)
    one_line_error(code, err, prefix="harness repro:", contains="missing case field(s): variant, batch, heads")


def test_repro_of_an_absurd_case(reproducer):
    d = json.loads(reproducer.read_text())
    d["case"]["seqlen_q"] = 10**30
    reproducer.write_text(json.dumps(d))
    code, _, err = harness("repro", reproducer)
    one_line_error(code, err, prefix="harness repro:", contains="seqlen_q must be in [1, 1048576]")


def test_repro_of_an_unknown_family(reproducer):
    d = json.loads(reproducer.read_text())
    d["case"]["family"] = "nope"
    reproducer.write_text(json.dumps(d))
    code, _, err = harness("repro", reproducer)
    one_line_error(code, err, prefix="harness repro:", contains="unknown kernel family 'nope'")


@pytest.mark.parametrize("argv, contains", [
    (["--per-kernel", "0"], "--per-kernel: must be > 0, got 0"),
    (["--cases", "0"], "--cases: must be > 0, got 0"),
    (["--cases", "-3"], "--cases: must be > 0, got -3"),
    (["--workers", "0"], "--workers: must be > 0, got 0"),
    (["--time", "0"], "--time: must be > 0, got 0"),
    (["--time", "-1"], "--time: must be > 0, got -1"),
    (["--compile-timeout", "-1"], "--compile-timeout: must be > 0, got -1"),
    (["--run-timeout", "0"], "--run-timeout: must be > 0, got 0"),
    (["--seed", "-1"], "--seed: must be >= 0, got -1"),
    (["--cases", "many"], "--cases: expected a int, got 'many'"),
    (["--shard", "3/2"], "--shard: expected I/N with 1 <= I <= N, got '3/2'"),
    (["--shard", "0/2"], "--shard: expected I/N with 1 <= I <= N, got '0/2'"),
    (["--shard", "1"], "--shard: expected I/N with 1 <= I <= N, got '1'"),
])
def test_run_rejects_bad_numbers(argv, contains, tmp_path):
    code, _, err = harness("run", *argv, "--out", tmp_path / "out", "--reproducers", tmp_path / "r")
    one_line_error(code, err, prefix="harness run:", contains=contains)
    assert not (tmp_path / "out").exists() and not (tmp_path / "r").exists()


def test_run_rejects_an_out_that_is_a_file(tmp_path):
    out = tmp_path / "out"
    out.write_text("not a directory")
    code, _, err = harness("run", "--cases", "1", "--out", out)
    one_line_error(code, err, prefix="harness run:", contains="is a file, not a directory")


def test_run_rejects_a_bad_cases_file(tmp_path):
    cases = tmp_path / "cases.jsonl"
    cases.write_text(case_mod.to_json(Case()) + "\n" + '{"family": "fwd"}\n')
    code, _, err = harness("run", "--cases-from", cases, "--out", tmp_path / "out")
    one_line_error(code, err, prefix="harness run:", contains="cases.jsonl line 2: missing case field(s)")
    code, _, err = harness("run", "--cases-from", tmp_path / "absent.jsonl", "--out", tmp_path / "out")
    one_line_error(code, err, prefix="harness run:", contains="cannot read")


def test_read_results_drops_a_line_cut_short(tmp_path):
    path = tmp_path / "results.jsonl"
    whole = [json.dumps(result(Case(seqlen_q=n), "PASS", "judge")) for n in (1, 2)]
    path.write_text(whole[0] + "\n" + whole[1] + "\n" + whole[1][:40])
    results, notes = campaign.read_results(path)
    assert [r["case"]["seqlen_q"] for r in results] == [1, 2]
    assert notes == [f"{path}: last line cut short (40 bytes): dropped, its case runs again"]
    assert path.read_text() == whole[0] + "\n" + whole[1] + "\n"  # appending goes on after a whole line
    path.write_text(whole[0] + "\n{oops\n" + whole[1] + "\n")
    results, notes = campaign.read_results(path)
    assert len(results) == 2 and notes == [f"{path}: line 2 is not a result: skipped, its case runs again"]


def fake_cases(path, n):
    cases = [Case(family="fake", heads=1, seqlen_q=q) for q in range(1, n + 1)]
    campaign.write_cases(path, cases)
    return cases


def test_a_campaign_runs_exactly_the_cases_of_a_file_and_resumes(tmp_path):
    cases = fake_cases(tmp_path / "mine.jsonl", 3)
    out = tmp_path / "out"
    argv = ["run", "--cases-from", tmp_path / "mine.jsonl", "--out", out, "--workers", "1",
            "--reproducers", tmp_path / "r"]
    code, stdout, err = harness(*argv)
    assert code == 0, err
    assert (out / "cases.jsonl").read_text() == (tmp_path / "mine.jsonl").read_text()
    lines = (out / "results.jsonl").read_text().splitlines()
    assert sorted(json.loads(line)["case_id"] for line in lines) == sorted(c.id for c in cases)
    assert "COMPILED" in stdout or "PASS" in stdout
    # A kill mid-write: the last result is cut short. The rerun says so and runs that case again.
    (out / "results.jsonl").write_text("\n".join(lines[:2]) + "\n" + lines[2][:30])
    code, _, err = harness(*argv)
    assert code == 0, err
    assert "last line cut short (30 bytes): dropped, its case runs again" in err
    assert "3 cases (2 already in" in err
    assert len((out / "results.jsonl").read_text().splitlines()) == 3
    # Another campaign into the same directory is refused, not mixed in.
    fake_cases(tmp_path / "other.jsonl", 2)
    code, _, err = harness("run", "--cases-from", tmp_path / "other.jsonl", "--out", out)
    one_line_error(code, err, prefix="harness run:", contains="holds another campaign")
    assert not (tmp_path / "r").exists()  # nothing failed: nothing recorded


def test_a_time_box_ends_the_campaign_with_its_report(tmp_path):
    """--time bounds the cases, compiles in flight included (heads 2 hangs while compiling, under a
    600 s compile timeout): the cases answered are reported, the rest named, nothing failed."""
    import time
    campaign.write_cases(tmp_path / "c.jsonl", [Case(family="fake", heads=1), Case(family="fake", heads=2)])
    t0 = time.monotonic()
    code, stdout, err = harness("run", "--cases-from", tmp_path / "c.jsonl", "--out", tmp_path / "out",
                                "--workers", "2", "--reproducers", tmp_path / "r", "--time", "20")
    assert code == 0, err
    assert time.monotonic() - t0 < 60
    assert "--time 20 s reached: 1 of 2 cases not run (the same command continues the run)" in err
    assert "1 cases in" in stdout and (tmp_path / "out" / "summary.md").exists()
    assert len((tmp_path / "out" / "results.jsonl").read_text().splitlines()) == 1


def test_a_harness_error_exits_1_and_is_not_recorded(tmp_path):
    campaign.write_cases(tmp_path / "c.jsonl", [Case(family="fake", heads=8)])  # a Python bug in its builder
    code, stdout, _ = harness("run", "--cases-from", tmp_path / "c.jsonl", "--out", tmp_path / "out",
                              "--workers", "1", "--reproducers", tmp_path / "r")
    assert code == 1
    assert "HARNESS_ERROR in 1 cases: the harness's own bug, not recorded" in stdout
    assert not (tmp_path / "r").exists()


def test_a_campaign_stops_after_n_failures(tmp_path):
    # heads 9: the compiler rejects the program (COMPILE_ERROR), one worker, so one at a time.
    cases = [Case(family="fake", heads=9, seqlen_q=q) for q in range(1, 6)]
    campaign.write_cases(tmp_path / "c.jsonl", cases)
    code, _, _ = harness("run", "--cases-from", tmp_path / "c.jsonl", "--out", tmp_path / "out", "--workers", "1",
                         "--reproducers", tmp_path / "r", "--stop-after-failures", "2")
    assert code == 1
    verdicts = [json.loads(line)["verdict"] for line in (tmp_path / "out" / "results.jsonl").read_text().splitlines()]
    assert verdicts == ["COMPILE_ERROR", "COMPILE_ERROR"]
    # Now recorded (tmp_path / "r"): a known bug does not count, and every case runs.
    code, _, _ = harness("run", "--cases-from", tmp_path / "c.jsonl", "--out", tmp_path / "again", "--workers", "1",
                         "--reproducers", tmp_path / "r", "--stop-after-failures", "1")
    assert code == 0
    assert len((tmp_path / "again" / "results.jsonl").read_text().splitlines()) == 5


def test_a_new_failure_is_recorded_while_the_campaign_still_runs(tmp_path):
    """So a campaign killed midway keeps its reproducers. heads 9 fails at once (COMPILE_ERROR);
    heads 2 then hangs in its compile until the pool's 40 s limit (no worker outlives the test)."""
    campaign.write_cases(tmp_path / "c.jsonl", [Case(family="fake", heads=9), Case(family="fake", heads=2)])
    p = subprocess.Popen([sys.executable, "-m", "harness.cli", "run", "--cases-from", str(tmp_path / "c.jsonl"),
                          "--out", str(tmp_path / "out"), "--workers", "1", "--reproducers", str(tmp_path / "r"),
                          "--compile-timeout", "40"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    t0 = time.monotonic()
    while not list((tmp_path / "r").glob("*.json")) and p.poll() is None:
        time.sleep(0.2)
    seen_after = time.monotonic() - t0
    p.wait(timeout=120)
    assert seen_after < 30  # while the hang was still being waited for, not after the run
    assert sorted(record.load(p).observed["verdict"] for p in (tmp_path / "r").glob("*.json")) == ["COMPILE_ERROR", "HANG"]


def test_repro_statuses_follow_git_bisect_run(tmp_path):
    """A recorded compile error replays on the CPU: 1 while it reproduces, 0 once the case
    compiles, 125 when the harness itself fails on it."""
    rejected = result(Case(family="fake", heads=9), "COMPILE_ERROR", "compile",
                      "InternalError: Check failed: (continuous % (vector_size * 2) == 0) is false")
    path = record.write(rejected, {"tilelang": "0.1.15"}, tmp_path / "r")
    code, out, _ = harness("repro", path, "--logs", tmp_path / "logs")
    assert code == 1 and "REPRODUCED: 1/1 runs fail; signature matches in 1/1 runs" in out
    for heads, status, says in ((1, 0, "NOT REPRODUCED: 1/1 runs COMPILED"),
                                (8, 125, "CANNOT TEST: HARNESS_ERROR (compile)")):
        d = json.loads(path.read_text())
        d["case"]["heads"] = heads
        path.write_text(json.dumps(d))
        code, out, _ = harness("repro", path, "--logs", tmp_path / "logs")
        assert code == status and says in out, out


def test_help_is_not_an_error(capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["run", "--help"])
    assert e.value.code == 0 and "--cases-from" in capsys.readouterr().out


def test_the_property_tests_cases_log_is_a_cases_file_harness_run_reads(tmp_path):
    """pytest --cases-log: the cases a pool is given, appended before they run (benchmarks/pytest_vs_run.py)."""
    import importlib.util

    from harness import campaign, strategies
    spec = importlib.util.spec_from_file_location("cases_conftest", Path(__file__).parent.parent / "cases" / "conftest.py")
    conftest = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(conftest)

    class Pool:
        def run(self, cases):
            return [{"case_id": c.id} for c in cases]

    log = tmp_path / "cases.jsonl"
    pool = conftest._Logged(Pool(), log)
    first, second = strategies.draw("fwd", 3, seed=1), strategies.draw("bwd", 2, seed=1)
    assert [r["case_id"] for r in pool.run(first)] == [c.id for c in first]
    pool.run(second)
    assert [c.id for c in campaign.load_cases(log)] == [c.id for c in first + second]
