"""Bad input, as a new user would try it: one line on stderr, exit 2, nothing recorded.
And a campaign end to end on the CPU, through the test double family (compile-only)."""
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness import campaign, cli, reproducer_building, reproducer_files, reproducer_loading
from harness import case as case_mod
from harness.case import Case
from harness.result import Result

# The test double, registered for a command as any family of one's own is (tests/conftest.py registers it here).
FAKE = "--register=fake=fake_family:FAMILY"


def harness(*argv, cwd=None):
    """`harness ...` as a command, the fake family registered: (exit status, stdout, stderr)."""
    p = subprocess.run([sys.executable, "-m", "harness.cli", FAKE, *map(str, argv)], capture_output=True, text=True,
                       timeout=600, cwd=cwd)
    return p.returncode, p.stdout, p.stderr


def one_line_error(code, err, *, prefix, contains):
    assert code == 2, err
    assert err.count("\n") == 1 and err.startswith(prefix) and contains in err, err


@pytest.fixture
def reproducer(tmp_path):
    failing = Result.of(Case(heads=4, kv_heads=2, seqlen_q=130, seqlen_k=77), "MISMATCH", "judge",
                     "O: max error 0.5 > tolerance 0.004", tensor="O", region="interior", checks=[])
    return reproducer_building.write(failing, {"tilelang": "0.1.15"}, tmp_path / "reproducers")


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
    (["--cases", "many"], "--cases: expected an int, got 'many'"),
    (["--cases", "1000000000"], "--cases: must be <= 100000, got 1000000000"),
    (["--time", "1e9"], "--time: must be <= 604800, got 1e9"),
    (["--time", "inf"], "--time: must be <= 604800, got inf"),
    (["--time", "nan"], "--time: must be > 0, got nan"),
    (["--compile-timeout", "inf"], "--compile-timeout: must be <= 86400, got inf"),
    (["--run-timeout", "1e6"], "--run-timeout: must be <= 86400, got 1e6"),
    (["--per-kernel", "1e9"], "--per-kernel: expected an int, got '1e9'"),
    (["--per-kernel", "1000000000"], "--per-kernel: must be <= 256, got 1000000000"),
    (["--workers", "100000"], "--workers: must be <= 256, got 100000"),
    (["--arch", "sm_bogus"], "--arch: unknown arch 'sm_bogus'; known: sm_90a, sm_100a"),
    (["--families", "fwd,fwd"], "fwd given twice in --families 'fwd,fwd'"),
    (["--families", "fwd,bwd,fwd,bwd"], "bwd, fwd given twice in --families 'fwd,bwd,fwd,bwd'"),
    (["--families", "fwd,"], "empty family name in --families 'fwd,'"),
    (["--families", ""], "empty family name in --families ''"),
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


def _write(text):
    return lambda path: path.write_text(text)


@pytest.mark.parametrize("make, contains", [
    (_write(case_mod.to_json(Case()) + "\n" + '{"family": "fwd"}\n'), "cases.jsonl line 2: missing case field(s)"),
    (_write("garbage\n"), "cases.jsonl line 1: case is not valid JSON"),
    (_write(""), "cases.jsonl: no cases"),
    (_write("\n".join(case_mod.to_json(Case(seqlen_q=q)) for q in (1, 2, 1, 3)) + "\n"),
     f"cases.jsonl lines 1 and 3: the same case twice ({Case(seqlen_q=1).id})"),
    (lambda path: path.mkdir(), "cases.jsonl is a directory, not a file"),
    (lambda path: None, "argument --cases-from: no file "),
], ids=["bad-line", "garbage", "empty", "duplicate", "directory", "missing"])
def test_run_rejects_a_bad_cases_file_and_writes_nothing(make, contains, tmp_path):
    make(tmp_path / "cases.jsonl")
    code, _, err = harness("run", "--cases-from", tmp_path / "cases.jsonl", "--out", tmp_path / "out",
                           "--reproducers", tmp_path / "r")
    one_line_error(code, err, prefix="harness run:", contains=contains)
    assert not (tmp_path / "out").exists() and not (tmp_path / "r").exists()  # not even out/logs/worker-0.log


@pytest.fixture
def read_only(tmp_path):
    """lock(directory): no file can be made in it any more, root included (who ignores permission
    bits: the directory is made immutable instead). Unlocked at the end, so tmp_path can go."""
    locked = []

    def lock(d):
        d.mkdir(parents=True, exist_ok=True)
        if os.geteuid() != 0:
            d.chmod(0o555)
        elif subprocess.run(["chattr", "+i", str(d)], capture_output=True).returncode != 0:
            pytest.skip("root, and chattr +i is not available here: no directory root cannot write")
        locked.append(d)
        return d
    yield lock
    for d in locked:
        if os.geteuid() == 0:
            subprocess.run(["chattr", "-i", str(d)])
        d.chmod(0o755)


@pytest.mark.parametrize("argv", [["run", "--cases", "1"], ["determinism", "--cases-from", "cases.jsonl"]])
def test_an_out_that_cannot_be_written_is_bad_input(argv, tmp_path, read_only):
    fake_cases(tmp_path / "cases.jsonl", 1)
    ro = read_only(tmp_path / "ro")
    for out in (ro, ro / "out"):
        code, _, err = harness(*argv, "--out", out, "--reproducers", tmp_path / "r", cwd=tmp_path)
        one_line_error(code, err, prefix=f"harness {argv[0]}: argument --out: cannot write in {ro}: ",
                       contains="")
    assert list(ro.iterdir()) == [] and not (tmp_path / "r").exists()


def test_an_out_holding_another_campaigns_results_is_refused(tmp_path):
    """No cases.jsonl there to compare: the results' cases must be among this campaign's (then it is
    a run of it, and resumes). Nothing is written: not even its cut-short last line is dropped."""
    out = tmp_path / "out"
    out.mkdir()
    theirs = [json.dumps(Result.of(Case(family="fake", heads=1, seqlen_q=q), "COMPILED", "compile").to_dict()) for q in (5, 6)]
    (out / "results.jsonl").write_text(theirs[0] + "\n" + theirs[1][:20])
    fake_cases(tmp_path / "mine.jsonl", 3)
    for argv in (["--cases-from", tmp_path / "mine.jsonl"], ["--families", "fake", "--cases", "2"]):
        code, _, err = harness("run", *argv, "--out", out, "--reproducers", tmp_path / "r")
        one_line_error(code, err, prefix="harness run:", contains=f"{out} holds results of another campaign "
                       f"({out / 'results.jsonl'}: 1 of 1 are of cases not in this one, e.g. "
                       f"{Case(family='fake', heads=1, seqlen_q=5).id}): choose another --out")
    assert sorted(p.name for p in out.iterdir()) == ["results.jsonl"] and not (tmp_path / "r").exists()
    assert (out / "results.jsonl").read_text() == theirs[0] + "\n" + theirs[1][:20]


@pytest.mark.parametrize("command", ["repro", "minimize", "triage", "upstream"])
def test_a_reproducer_command_rejects_an_unknown_arch(command, reproducer, tmp_path):
    code, out, err = harness(command, reproducer, "--arch", "sm_bogus", cwd=tmp_path)
    one_line_error(code, err, prefix=f"harness {command}: argument --arch: ",
                   contains="unknown arch 'sm_bogus'; known: sm_90a, sm_100a")
    assert out == "" and sorted(p.name for p in tmp_path.iterdir()) == ["reproducers"]


def test_repro_of_a_missing_file_names_it_once(tmp_path):
    code, _, err = harness("repro", "loop.json", cwd=tmp_path)
    one_line_error(code, err, prefix="harness repro:", contains="no reproducer file 'loop.json'")
    assert ".json.json" not in err


@pytest.mark.parametrize("seeds, contains", [
    ("-1", "a PYTHONHASHSEED must be in [0, 4294967295], got -1"),
    ("0,4294967296", "a PYTHONHASHSEED must be in [0, 4294967295], got 4294967296"),
    ("0,x", "expected comma-separated ints, got '0,x'"),  # not int()'s 'invalid literal'
    ("7,7", "needs two different seeds or more, got '7,7'"),
])
def test_determinism_rejects_bad_hash_seeds(seeds, contains, tmp_path):
    fake_cases(tmp_path / "cases.jsonl", 1)
    code, _, err = harness("determinism", "--cases-from", tmp_path / "cases.jsonl", "--hash-seeds", seeds,
                           "--out", tmp_path / "out")
    one_line_error(code, err, prefix="harness determinism: argument --hash-seeds: ", contains=contains)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("make, contains", [
    (_write("garbage"), "is not a bisect state file: not UTF-8 JSON"),
    (_write("[1, 2]"), "is not a bisect state file: a JSON array, not an object"),
    (_write('{"reproducer": "x.json"}'), "is not a bisect state file: no steps, or steps without a status"),
    (lambda path: path.mkdir(), "argument --state: {} is a directory, not a file"),
], ids=["garbage", "list", "no-steps", "directory"])
def test_bisect_rejects_a_state_that_is_not_one(make, contains, reproducer, tmp_path):
    make(tmp_path / "state")
    code, _, err = harness("bisect", reproducer, "--good", "0.1.10", "--bad", "0.1.15", "--state", tmp_path / "state",
                           "--envs", tmp_path / "envs")
    one_line_error(code, err, prefix="harness bisect: ", contains=contains.format(tmp_path / "state"))
    assert not (tmp_path / "envs").exists()


@pytest.mark.parametrize("where, contains", [("absent", "--dir {}: no such directory"),
                                             ("empty", "--dir {}: no reproducers (*.json) in it")])
def test_matrix_rejects_a_dir_without_reproducers(where, contains, tmp_path):
    (tmp_path / "empty").mkdir()
    code, out, err = harness("matrix", "--releases", "0.1.15", "--dir", tmp_path / where, "--envs", tmp_path / "envs")
    one_line_error(code, err, prefix="harness matrix:", contains=contains.format(tmp_path / where))
    assert out == "" and not (tmp_path / "envs").exists()  # checked before any release is installed


def test_report_of_results_none_of_which_can_be_read(tmp_path):
    (tmp_path / "results.jsonl").write_text("garbage\n{oops\n")
    code, out, err = harness("report", tmp_path)
    one_line_error(code, err, prefix="harness report:",
                   contains=f"no line of {tmp_path / 'results.jsonl'} could be read as a result")
    assert out == "" and sorted(p.name for p in tmp_path.iterdir()) == ["results.jsonl"]
    (tmp_path / "results.jsonl").write_text("")
    code, _, err = harness("report", tmp_path)
    one_line_error(code, err, prefix="harness report:", contains=f"{tmp_path / 'results.jsonl'} holds no results")


def test_report_in_a_directory_that_cannot_be_written(tmp_path, read_only):
    d = tmp_path / "run"
    d.mkdir()
    (d / "results.jsonl").write_text(json.dumps(Result.of(Case(), "PASS", "judge").to_dict()) + "\n")
    read_only(d)
    code, out, err = harness("report", d)
    one_line_error(code, err, prefix=f"harness report: cannot write in {d}: ", contains="")
    assert out == "" and sorted(p.name for p in d.iterdir()) == ["results.jsonl"]


def test_read_results_drops_a_line_cut_short(tmp_path):
    path = tmp_path / "results.jsonl"
    whole = [json.dumps(Result.of(Case(seqlen_q=n), "PASS", "judge").to_dict()) for n in (1, 2)]
    path.write_text(whole[0] + "\n" + whole[1] + "\n" + whole[1][:40])
    results, notes = campaign.read_results(path)
    assert [r.case.seqlen_q for r in results] == [1, 2]
    assert notes == [f"{path}: last line cut short (40 bytes): dropped, its case runs again"]
    assert path.read_text() == whole[0] + "\n" + whole[1] + "\n"  # appending goes on after a whole line
    path.write_text(whole[0] + "\n{oops\n" + whole[1] + "\n")
    results, notes = campaign.read_results(path)
    assert len(results) == 2 and notes == [f"{path}: line 2 is not a result: skipped, its case runs again"]
    # Not to resume (harness report, the check of --out): skipped only, the file left as it is.
    path.write_text(whole[0] + "\n{oops\n" + whole[1][:40])
    results, notes = campaign.read_results(path, resume=False)
    assert len(results) == 1 and notes == [f"{path}: last line cut short (40 bytes): skipped",
                                           f"{path}: line 2 is not a result: skipped"]
    assert path.read_text() == whole[0] + "\n{oops\n" + whole[1][:40]


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
    first = (out / "summary.md").read_text().splitlines()[0]
    assert first.startswith("Run: TileLang ") and f"cases from {tmp_path / 'mine.jsonl'}, families fake" in first
    assert ("compile-only for sm_90a" in first) == (json.loads((out / "run.json").read_text())["gpu"] is None)
    # A kill mid-write: the last result is cut short. The rerun says so and runs that case again;
    # without its cases.jsonl too (its results are of these cases: this campaign's).
    (out / "results.jsonl").write_text("\n".join(lines[:2]) + "\n" + lines[2][:30])
    (out / "cases.jsonl").unlink()
    code, _, err = harness(*argv)
    assert code == 0, err
    assert "last line cut short (30 bytes): dropped, its case runs again" in err
    assert "3 cases (2 already in" in err
    assert len((out / "results.jsonl").read_text().splitlines()) == 3
    assert (out / "cases.jsonl").read_text() == (tmp_path / "mine.jsonl").read_text()
    # Another campaign into the same directory is refused, not mixed in.
    fake_cases(tmp_path / "other.jsonl", 2)
    code, _, err = harness("run", "--cases-from", tmp_path / "other.jsonl", "--out", out)
    one_line_error(code, err, prefix="harness run:", contains="holds another campaign")
    assert not (tmp_path / "r").exists()  # nothing failed: nothing recorded


def test_a_time_box_ends_the_campaign_with_its_report(tmp_path):
    """--time bounds the cases, compiles in flight included (heads 2 hangs while compiling, under a
    600 s compile timeout): the cases answered are reported, the rest named, nothing failed. The box is
    measured from this machine as loaded as it is now: three times what the passing case alone took."""
    import time
    campaign.write_cases(tmp_path / "one.jsonl", [Case(family="fake", heads=1)])
    t0 = time.monotonic()
    assert harness("run", "--cases-from", tmp_path / "one.jsonl", "--out", tmp_path / "alone", "--workers", "2",
                   "--reproducers", tmp_path / "r")[0] == 0
    box = f"{max(20, 3 * (time.monotonic() - t0)):.0f}"
    campaign.write_cases(tmp_path / "c.jsonl", [Case(family="fake", heads=1), Case(family="fake", heads=2)])
    code, stdout, err = harness("run", "--cases-from", tmp_path / "c.jsonl", "--out", tmp_path / "out",
                                "--workers", "2", "--reproducers", tmp_path / "r", "--time", box)
    assert code == 0, err  # awaited, the hang would end as a HANG at the 600 s timeout: exit 1
    assert f"--time {box} s reached: 1 of 2 cases not run (the same command continues the run)" in err
    assert "1 cases in" in stdout and (tmp_path / "out" / "summary.md").exists()
    assert len((tmp_path / "out" / "results.jsonl").read_text().splitlines()) == 1


def test_the_time_box_counts_loading_the_cases(tmp_path, monkeypatch, capsys):
    """A wrapper sizes its own timeout by --time: loading a big --cases-from (tens of seconds on a busy host) is inside
    the box, so a box that loading alone outlasts runs no case."""
    campaign.write_cases(tmp_path / "c.jsonl", [Case(family="fake", heads=1)])
    load = campaign.load_cases
    monkeypatch.setattr(campaign, "load_cases", lambda path: (time.sleep(3), load(path))[1])
    assert cli.main(["run", "--cases-from", str(tmp_path / "c.jsonl"), "--out", str(tmp_path / "out"), "--workers", "1",
                     "--reproducers", str(tmp_path / "r"), "--time", "2"]) == 0
    assert "--time 2 s reached: 1 of 1 cases not run" in capsys.readouterr().err
    assert not (tmp_path / "out" / "results.jsonl").exists()


def test_a_harness_error_exits_4_and_is_not_recorded(tmp_path):
    """Never 1, which says a new bug was found."""
    campaign.write_cases(tmp_path / "c.jsonl", [Case(family="fake", heads=8)])  # a Python bug in its builder
    code, stdout, _ = harness("run", "--cases-from", tmp_path / "c.jsonl", "--out", tmp_path / "out",
                              "--workers", "1", "--reproducers", tmp_path / "r")
    assert code == 4
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
    p = subprocess.Popen([sys.executable, "-m", "harness.cli", FAKE, "run", "--cases-from", str(tmp_path / "c.jsonl"),
                          "--out", str(tmp_path / "out"), "--workers", "1", "--reproducers", str(tmp_path / "r"),
                          "--compile-timeout", "40"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while not reproducer_files.paths(tmp_path / "r") and p.poll() is None:
        time.sleep(0.2)
    first = [reproducer_loading.load(path).observed["verdict"] for path in reproducer_files.paths(tmp_path / "r")]
    p.wait(timeout=120)
    assert first == ["COMPILE_ERROR"]  # seen alone: while the hang was still being waited for, not after the run
    verdicts = sorted(reproducer_loading.load(p).observed["verdict"] for p in reproducer_files.paths(tmp_path / "r"))
    assert verdicts == ["COMPILE_ERROR", "HANG"]


def test_repro_statuses_follow_git_bisect_run(tmp_path):
    """A recorded compile error replays on the CPU: 1 while it reproduces, 0 once the case
    compiles, 125 when the harness itself fails on it."""
    rejected = Result.of(Case(family="fake", heads=9), "COMPILE_ERROR", "compile",
                      "InternalError: Check failed: (continuous % (vector_size * 2) == 0) is false")
    path = reproducer_building.write(rejected, {"tilelang": "0.1.15"}, tmp_path / "r")
    code, out, _ = harness("repro", path, "--logs", tmp_path / "logs")
    assert code == 1 and "REPRODUCED: 1/1 runs fail; signature matches in 1/1 runs" in out
    for heads, status, says in ((1, 0, "NOT REPRODUCED: 1/1 runs COMPILED"),
                                (8, 125, "CANNOT TEST: HARNESS_ERROR (compile)")):
        d = json.loads(path.read_text())
        d["case"]["heads"] = heads
        path.write_text(json.dumps(d))
        code, out, _ = harness("repro", path, "--logs", tmp_path / "logs")
        assert code == status and says in out, out


def test_help_is_not_an_error_and_shows_defaults_and_bounds(capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["run", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert e.value.code == 0 and "--cases-from" in text
    for shown in ("(default: fwd)", "number of distinct cases (at most 100000) (default: 100)", "(default: 1/1)",
                  "at most 604800, a week; default: no limit", "sm_90a, sm_100a (default: sm_90a)"):
        assert shown in text
    assert "(default: None)" not in text and "(default: False)" not in text


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
