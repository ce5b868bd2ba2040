"""Every failure of the harness itself says so (#46): one line on stderr, never exit 1 (which `repro`
and bisect read as "bug reproduced"), nothing written for bad input; paths and untrusted JSON are
checked before any work; Ctrl-C is 130; killing a run's process group kills its workers."""
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness import campaign, cli, reproducer_building, reproducer_files, reproducer_loading
from harness.case import Case
from harness.result import Result

REPRODUCERS = Path(__file__).resolve().parent.parent / "reproducers"


@pytest.fixture
def home(tmp_path):
    """A HOME of its own, so that ~/.cache/harness is the test's to watch."""
    (tmp_path / "home").mkdir()
    return tmp_path / "home"


@pytest.fixture
def run(tmp_path, home):
    """run(*argv): `harness ...` in tmp_path as a command -> (status, stdout, stderr, paths written),
    where paths written are those under tmp_path (HOME, ~/.cache/harness included) newer than the
    command's start: `find -newer`."""
    def call(*argv, timeout=300):
        stamp = tmp_path / ".stamp"
        stamp.write_text("")
        time.sleep(0.01)
        p = subprocess.run([sys.executable, "-m", "harness.cli", *map(str, argv)], capture_output=True, text=True,
                           cwd=tmp_path, env={**os.environ, "HOME": str(home)}, timeout=timeout)
        # -mindepth 1: tmp_path's own mtime can land a clock tick after the stamp it was bumped by (seen under load).
        found = subprocess.run(["find", str(tmp_path), "-mindepth", "1", "-newer", str(stamp)], capture_output=True,
                               text=True).stdout
        return p.returncode, p.stdout, p.stderr, found.split()
    return call


def refused(code, out, err, written, contains):
    """Bad input: exit 2, one line on stderr, nothing on stdout, nothing written."""
    assert code == 2 and out == "", err
    assert err.count("\n") == 1 and err.startswith("harness ") and contains in err, err
    assert written == [], written


@pytest.fixture
def reproducer(tmp_path):
    failing = Result.of(Case(seqlen_q=130, seqlen_k=77), "MISMATCH", "judge", "O: max error 0.5 > tolerance 0.004",
                        tensor="O", region="interior", checks=[])
    return reproducer_building.write(failing, {"tilelang": "0.1.15"}, tmp_path / "reproducers")


def deep(path):
    path.write_text("[" * 100_000 + "]" * 100_000)
    return path


@pytest.mark.parametrize("spec, says", [
    ("fake_family:FAMILY", "harness run: extra family 'fake_family:FAMILY': expected name=module:attribute"),
    ("badfam=badfam:LENGTHS", "harness run: family 'badfam': lengths='rng' is not one of dense, masked"),
    ("badfam=badfam:TAKES", "harness run: family 'badfam': takes='sink' is not one of causal"),
    ("badfam=badfam:DTYPES", "harness run: family 'badfam': feature 'dtype' has no levels"),
])
def test_a_family_that_cannot_be_registered_is_bad_input(spec, says, run, tmp_path):
    """Checked when registered (harness.kernels.FamilyError): one line naming the family and the field, exit 2,
    before any work; not a KeyError mid-campaign inside a worker."""
    (tmp_path / "badfam.py").write_text(
        "import dataclasses\n\nfrom fake_family import FAMILY\n\n"
        "def offering(**changes):\n"
        "    return dataclasses.replace(FAMILY, name='badfam', offer=dataclasses.replace(FAMILY.offer, **changes))\n\n"
        "LENGTHS = offering(lengths='rng')\n"
        "TAKES = offering(takes=('causal', 'sink'))\n"
        "DTYPES = offering(dtypes=())\n")
    refused(*run(f"--register={spec}", "run", "--families", "badfam", "--cases", "1", "--out", "out"), contains=says)


def test_an_empty_out_is_refused(run):
    refused(*run("run", "--out", "", "--cases", "1"), contains="argument --out: an empty path")


@pytest.mark.parametrize("argv", [["repro", "deep.json"], ["export", "deep.json"], ["run", "--cases-from", "deep.json"]])
def test_json_nested_too_deep_is_bad_input(argv, run, tmp_path):
    deep(tmp_path / "deep.json")
    refused(*run(*argv), contains="nested deeper than 64 levels")


def test_report_of_results_nested_too_deep(run, tmp_path):
    (tmp_path / "out").mkdir()
    deep(tmp_path / "out" / "results.jsonl")
    refused(*run("report", "out"), contains="no line of out/results.jsonl could be read as a result")


def _results(out, cases):
    out.mkdir()
    (out / "results.jsonl").write_text("".join(json.dumps(Result.of(c, "COMPILED", "compile").to_dict()) + "\n"
                                               for c in cases))


def test_a_reproducers_dir_holding_files_that_are_not_reproducers_is_said_once(run, tmp_path, reproducer):
    deep(reproducer.parent / "deep.json")
    (reproducer.parent / "garbage.json").write_text("garbage")
    _results(tmp_path / "out", [Case()])
    code, out, err, _ = run("report", "out", "--reproducers", reproducer.parent)
    assert code == 0, err
    assert err.count("\n") == 1 and "2 .json file(s) are not reproducers, skipped (deep.json, garbage.json" in err, err


def test_a_case_read_twice_from_results_counts_once(run, tmp_path):
    _results(tmp_path / "out", [Case(seqlen_q=1), Case(seqlen_q=2)])
    lines = (tmp_path / "out" / "results.jsonl").read_text().splitlines()
    (tmp_path / "out" / "results.jsonl").write_text("\n".join(lines + lines[:1]) + "\n")
    code, _, err, _ = run("report", "out", "--reproducers", "none")
    assert code == 0, err
    assert err.count("\n") == 1 and "1 line(s) repeat a case already read (first: line 3)" in err
    assert "| 2 | 2 |" in (tmp_path / "out" / "summary.md").read_text()
    results, notes = campaign.read_results(tmp_path / "out" / "results.jsonl")
    assert len(results) == 2 and len(notes) == 1


def test_repro_logs_that_is_a_file(run, tmp_path, reproducer):
    (tmp_path / "logs").write_text("")
    refused(*run("repro", reproducer, "--logs", "logs"), contains="argument --logs: logs is a file, not a directory")


@pytest.fixture
def read_only(tmp_path):
    """A directory no file can be made in, root included (an immutable one, for root)."""
    d = tmp_path / "ro"
    d.mkdir()
    if os.geteuid() != 0:
        d.chmod(0o555)
    elif subprocess.run(["chattr", "+i", str(d)], capture_output=True).returncode != 0:
        pytest.skip("root, and chattr +i is not available here: no directory root cannot write")
    yield d
    if os.geteuid() == 0:
        subprocess.run(["chattr", "-i", str(d)])
    d.chmod(0o755)


@pytest.mark.parametrize("to, contains", [("dir", "dir is a directory, not a file"),
                                          ("file/x.py", "file is a file, not a directory"),
                                          ("ro/x.py", "cannot write in ro: ")])
def test_export_to_where_no_file_can_be_written(to, contains, run, tmp_path, reproducer, read_only):
    (tmp_path / "dir").mkdir()
    (tmp_path / "file").write_text("")
    refused(*run("export", reproducer, "--to", to), contains=f"argument --to: {contains}")


def test_upstream_to_a_read_only_directory_fails_before_compiling(run, reproducer, read_only):
    """Nothing written: not TileLang's kernel cache under HOME either, which the triage's compile would fill."""
    refused(*run("upstream", reproducer, "--to", "ro/report.md"), contains="argument --to: cannot write in ro: ")


def test_upstream_default_to_is_checked_too(run, tmp_path, reproducer, read_only):
    os.rename(reproducer, tmp_path / "ro.json")
    code, _, err, _ = run("upstream", tmp_path / "ro.json", "--dir", "ro")
    assert code == 2 and err.count("\n") == 1 and "cannot write in ro: " in err, err


@pytest.mark.parametrize("state, contains", [
    (None, "argument --state: no file missing.json"),
    ("garbage", "state missing.json is not a bisect state file: not UTF-8 JSON"),
    ('{"reproducer": "other.json", "steps": {}}', "state missing.json is a bisect of 'other.json', not of "),
], ids=["missing", "garbage", "another-reproducer"])
def test_upstream_state_that_is_not_this_reproducers(state, contains, run, tmp_path, reproducer):
    if state is not None:
        (tmp_path / "missing.json").write_text(state)
    refused(*run("upstream", reproducer, "--state", "missing.json"), contains=contains)


def test_matrix_of_outside_reproducers_needs_examples_before_installing(run):
    """The README's form on a machine without the examples: said before 307 MB are installed."""
    refused(*run("matrix", "--releases", "0.1.15", "--dir", REPRODUCERS / "examples"),
            contains="need each release's examples: --examples DIR (`harness examples fetch --version V --to DIR`")


def test_matrix_examples_without_a_tree_for_a_release(run, tmp_path):
    (tmp_path / "ex" / "tilelang-0.1.14" / "examples").mkdir(parents=True)  # 0.1.15 runs 0.1.14's
    refused(*run("matrix", "--releases", "0.1.10,0.1.15", "--dir", REPRODUCERS / "examples", "--examples", "ex"),
            contains="--examples ex has no tree for TileLang 0.1.10")


def test_matrix_refuses_a_release_listed_twice(run, reproducer):
    refused(*run("matrix", "--releases", "0.1.15,0.1.15", "--dir", reproducer.parent),
            contains="--releases lists 0.1.15 twice")


def test_a_variant_the_family_does_not_declare_is_bad_input(run, tmp_path, reproducer):
    case = dict(json.loads(reproducer.read_text())["case"], variant="../../etc")
    (tmp_path / "c.jsonl").write_text(json.dumps(case) + "\n")
    refused(*run("run", "--cases-from", "c.jsonl"), contains="c.jsonl line 1: fwd has no variant '../../etc'")
    d = json.loads(reproducer.read_text())
    d["case"] = case
    reproducer.write_text(json.dumps(d))
    refused(*run("repro", reproducer), contains="field 'case': fwd has no variant '../../etc'; it has: default")


@pytest.mark.parametrize("source, contains", [
    ("x = (\n", "does not load: SyntaxError: '(' was never closed"),
    ("raise SystemExit(7)\n", "does not load: SystemExit: 7"),
    ("X = 3\n", "is a int, not a harness.kernels.Family"),
], ids=["syntax-error", "system-exit", "not-a-family"])
def test_check_with_an_adapter_that_is_not_one(source, contains, run, tmp_path):
    (tmp_path / "adapter.py").write_text(source)
    (tmp_path / "kernel.py").write_text("")
    refused(*run("check", "kernel.py", "--adapter", "adapter.py:X"), contains=contains)


def test_run_reproducers_that_is_a_file(run, tmp_path):
    (tmp_path / "r").write_text("")
    refused(*run("run", "--cases", "1", "--reproducers", "r"), contains="argument --reproducers: r is a file")


def test_cases_with_cases_from_is_refused(run, tmp_path):
    campaign.write_cases(tmp_path / "c.jsonl", [Case()])
    refused(*run("run", "--cases-from", "c.jsonl", "--cases", "5"), contains="--cases does not go with --cases-from")


@pytest.mark.parametrize("argv, contains", [
    (["--good", "0.1.10", "--bad", "0.1.15", "--wheels", "/nonexistent"], "argument --wheels: no directory /nonexistent"),
    (["--good", "0.1.10", "--bad", "0.1.15", "--wheels", "."], "holds no TileLang wheel (tilelang-<release>-*.whl)"),
    (["--at", "abc"], "--at COMMIT needs --repo PATH and --build CMD"),
], ids=["no-wheels-dir", "no-wheels", "at-without-repo"])
def test_bisect_says_what_it_cannot_do(argv, contains, run, reproducer):
    refused(*run("bisect", reproducer, "--envs", "envs", *argv), contains=contains)


def test_bisect_of_an_outside_kernel_is_refused_before_installing(run):
    outside = next(p for p in reproducer_files.paths(REPRODUCERS) if reproducer_loading.load(p).case.family.startswith("tl_"))
    refused(*run("bisect", outside, "--good", "0.1.10", "--bad", "0.1.15", "--envs", "envs"),
            contains="whose examples differ by release: bisect cannot give each step its own")


def test_a_bare_harness_lists_the_commands(run):
    code, out, err, _ = run()
    assert code == 0 and err == ""
    assert all(f"    {c}" in out for c in ("run", "repro", "bisect", "matrix", "examples", "report"))


def test_help_of_bisect_and_examples(capsys):
    for argv in (["bisect", "--help"], ["examples", "--help"]):
        with pytest.raises(SystemExit):
            cli.main(argv)
    text = " ".join(capsys.readouterr().out.split())
    assert "--good GOOD required (but with --at)" in text and "--bad BAD required (but with --at)" in text
    assert "fetch: download a release's source package" in text


# ----------------------------------------------------------------------------- the boundary
def _argv(tmp_path):
    """Arguments each command parses with, in tmp_path."""
    (tmp_path / "k.py").write_text("")
    (tmp_path / "c.jsonl").write_text("")
    (tmp_path / "out").mkdir()
    return {"run": [], "check": ["k.py", "--adapter", "a.py:X"], "repro": ["x"], "triage": ["x"],
            "examples": ["fetch"], "export": ["x"], "reduce": ["x"], "upstream": ["x"], "minimize": ["x"], "bisect": ["x"],
            "matrix": ["--releases", "0.1.15"], "determinism": ["--cases-from", "c.jsonl"], "report": ["out"],
            "forms": [], "programs": [], "index": ["--dir", str(tmp_path)], "serve": ["s", "--stop"], "env": []}


def test_an_exception_in_any_command_is_one_line_never_1(tmp_path, home, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(home))
    argvs = _argv(tmp_path)
    assert set(argvs) == set(cli.parser()._subparsers._group_actions[0].choices)  # every command

    def boom(args):
        raise RuntimeError("injected\nsecond line")
    for command in cli.COMMANDS:
        for name in {a for a in dir(command) if a.startswith("cmd_")}:
            monkeypatch.setattr(command, name, boom)
    for command, argv in [*argvs.items(), ("bisect", ["x", "--repo", ".", "--build", "true", "--at", "HEAD"])]:
        status = cli.main([command, *argv])
        err = capsys.readouterr().err
        step = command == "repro" or "--at" in argv
        assert status == (125 if step else 4), (command, status)
        assert err.count("\n") == 1 and err.startswith(f"harness {command}: HARNESS_ERROR, the harness's own failure, "
                                                       "not TileLang's: RuntimeError: injected (traceback in "), err
        log = Path(err.rsplit("traceback in ", 1)[1].rstrip(")\n"))
        assert log.parent == home / ".cache" / "harness" / "errors" and "second line" in log.read_text()


def test_ctrl_c_in_any_command_body_is_130(tmp_path, home, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(home))

    def interrupted(args):
        raise KeyboardInterrupt
    for command in cli.COMMANDS:
        for name in {a for a in dir(command) if a.startswith("cmd_")}:
            monkeypatch.setattr(command, name, interrupted)
    for command, argv in _argv(tmp_path).items():
        assert cli.main([command, *argv]) == 130, command
        assert capsys.readouterr().err == f"harness {command}: interrupted; what was written so far is kept\n"


# ----------------------------------------------------------------------------- one exit table (#55)
def _name(command) -> str:
    return command.__name__.rsplit(".", 1)[1]


def test_the_readmes_exit_table_is_what_the_commands_declare():
    readme = (REPRODUCERS.parent / "README.md").read_text()
    assert cli.exit_table() in readme
    named = [n for line in cli.exit_table().splitlines()[2:] for n in line.split(" | ")[0].strip("| ").split(", ")]
    assert sorted(named) == sorted(f"`harness {_name(c)}`" for c in cli.COMMANDS)  # each command, once


@pytest.mark.parametrize("command", cli.COMMANDS, ids=_name)
def test_a_command_returns_no_status_its_row_does_not_give(command):
    """Every status a command's code returns as a number is in its row (a status it passes on from the library,
    replay's or reduce's, is named in the row's words)."""
    import ast
    tree = ast.parse(Path(command.__file__).read_text())
    returned = {c.value for r in ast.walk(tree) if isinstance(r, ast.Return) and r.value is not None
                for c in ast.walk(r.value) if isinstance(c, ast.Constant) and type(c.value) is int}
    assert returned <= set(command.EXITS), (returned, command.EXITS)
    assert command.EXITS[2] == "bad input" and any("HARNESS_ERROR" in w for w in command.EXITS.values())


@pytest.mark.parametrize("command", cli.COMMANDS, ids=_name)
def test_every_command_gives_its_rows_bad_input_and_harness_error(command, tmp_path, home, monkeypatch, capsys):
    """2 for an option it does not have (before anything runs); its row's HARNESS_ERROR status for an exception."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(home))
    name, argv = _name(command), _argv(tmp_path)[_name(command)]
    with pytest.raises(SystemExit) as e:
        cli.main([name, *argv, "--no-such-option"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.count("\n") == 1 and "unrecognized arguments: --no-such-option" in err, err

    def boom(args):
        raise RuntimeError("injected")
    monkeypatch.setattr(command, f"cmd_{name}", boom)
    status = cli.main([name, *argv])
    assert "HARNESS_ERROR" in command.EXITS[status], (name, status)


# ----------------------------------------------------------------------------- runs (worker processes)
def _children(pid) -> set[int]:
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.add(int(stat.parent.name))
    return found


def _alive(pid) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _start(tmp_path, *argv):
    """`harness run` on the fake family's cases (heads 1 passes, heads 2 hangs while compiling), in its
    own session as a shell would start it: with Ctrl-C's default action, whatever this process inherited (a
    job a script put in the background ignores SIGINT, and so would its children)."""
    return subprocess.Popen([sys.executable, "-m", "harness.cli", "--register=fake=fake_family:FAMILY", "run",
                             "--cases-from", str(tmp_path / "c.jsonl"),
                             "--out", str(tmp_path / "out"), "--workers", "1", "--reproducers", str(tmp_path / "r"),
                             *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
                            start_new_session=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def _wait_for(predicate, seconds=120):
    t0 = time.monotonic()
    while not predicate():
        assert time.monotonic() - t0 < seconds
        time.sleep(0.2)


def test_ctrl_c_mid_run_is_one_line_130_and_the_results_stay(tmp_path):
    campaign.write_cases(tmp_path / "c.jsonl", [Case(family="fake", heads=1), Case(family="fake", heads=2)])
    p = _start(tmp_path)
    results = tmp_path / "out" / "results.jsonl"
    _wait_for(lambda: results.exists() and results.read_text().count("\n") == 1)
    workers = _children(p.pid)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 130, err
    assert err.splitlines()[-1] == "harness run: interrupted; what was written so far is kept" and "Traceback" not in err
    assert results.read_text().count("\n") == 1 and not any(_alive(w) for w in workers)


def test_killing_a_runs_process_group_kills_its_workers(tmp_path):
    campaign.write_cases(tmp_path / "c.jsonl", [Case(family="fake", heads=2)])
    p = _start(tmp_path)
    _wait_for(lambda: (tmp_path / "out" / "logs" / "worker-0.log").exists() and _children(p.pid))
    workers = _children(p.pid)
    os.killpg(p.pid, signal.SIGKILL)
    p.wait(timeout=10)
    _wait_for(lambda: not any(_alive(w) for w in workers))


def test_a_time_box_that_drops_every_case_names_no_results_file(tmp_path):
    campaign.write_cases(tmp_path / "c.jsonl", [Case(family="fake", heads=2)])
    p = _start(tmp_path, "--time", "5")
    out, err = p.communicate(timeout=120)
    assert p.returncode == 0, err
    assert out.splitlines()[-1].endswith("no case finished, so no results file yet")
    assert not (tmp_path / "out" / "results.jsonl").exists()


# ----------------------------------------------------------------------------- bad input, second round (#55)
LONG = "a" * 300  # one path component over NAME_MAX (255 bytes): every call on it fails with ENAMETOOLONG


@pytest.mark.parametrize("argv, contains", [
    (["run", "--out", LONG, "--cases", "1"], "argument --out: a path component of 300 bytes (at most 255)"),
    (["run", "--cases-from", LONG], "argument --cases-from: a path component of 300 bytes"),
    (["repro", "R", "--logs", LONG], "argument --logs: a path component of 300 bytes"),
    (["export", "R", "--to", LONG], "argument --to: a path component of 300 bytes"),
    (["report", LONG], "argument dir: a path component of 300 bytes"),
    (["index", "--dir", LONG], "argument --dir: a path component of 300 bytes"),
    (["serve", LONG], "argument socket: a path component of 300 bytes"),
    (["run", "--out", "/".join(["b" * 200] * 25), "--cases", "1"], "argument --out: a path of 5024 bytes (at most 4095)"),
    (["run", "--out", "~nosuchuser_55/x", "--cases", "1"], "'~nosuchuser_55/x': Could not determine home directory"),
], ids=["run-out", "cases-from", "repro-logs", "export-to", "report", "index", "serve", "path-max", "unknown-user"])
def test_n1_a_path_that_cannot_be_one_is_refused_by_the_parser(argv, contains, run, reproducer):
    refused(*run(*[str(reproducer) if a == "R" else a for a in argv]), contains=contains)


@pytest.mark.parametrize("text", ["a\0b", "\ud800"], ids=["nul", "lone-surrogate"])
def test_n1_a_path_with_a_nul_or_not_encodable_is_one_line(text, capsys):
    """Neither reaches argv from a shell; a caller of cli.main can pass them: still one line, exit 2."""
    with pytest.raises(SystemExit) as e:
        cli.main(["run", "--out", text])
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.count("\n") == 1 and "argument --out: " in err, err


def _edited(reproducer, tmp_path, name, text=None, **fields):
    """The reproducer with `fields` replaced, written as `name` (or as `text` made of its JSON)."""
    d = {**json.loads(reproducer.read_text()), **fields}
    (tmp_path / name).write_text(text(json.dumps(d)) if text else json.dumps(d))
    return name


@pytest.mark.parametrize("command", ["repro", "export", "minimize", "triage", "upstream", "reduce"])
def test_n2_an_id_over_64_characters_in_the_file_is_bad_input(command, run, tmp_path, reproducer):
    name = _edited(reproducer, tmp_path, "long.json", id="0" * 300)
    refused(*run(command, name), contains="field 'id' must be 1 to 64 letters, digits, '_' or '-', got '000")


@pytest.mark.parametrize("rid, contains", [
    ("0" * 65, "an id is 1 to 64 letters, digits, '_' or '-'"),
    ("0" * 300, "argument reproducer: a path component of 300 bytes"),
    ("71d484709490\n", "no reproducer file '71d484709490\\n'; an id is 1 to 64"),
], ids=["65", "300", "newline"])
def test_n2_n3_an_id_argument_that_is_no_id_is_one_line(rid, contains, run, reproducer):
    refused(*run("repro", rid, "--dir", reproducer.parent.parent), contains=contains)


def test_n3_an_id_ending_in_a_newline_is_no_id(run, tmp_path, reproducer):
    """`$` matches before a final newline: the rule is a fullmatch."""
    name = _edited(reproducer, tmp_path, "nl.json", id="000000000000\n")
    refused(*run("repro", name), contains="field 'id' must be 1 to 64 letters, digits, '_' or '-', got '000000000000\\n'")


@pytest.mark.parametrize("command", ["repro", "export"])
def test_n4_a_lone_surrogate_in_a_text_field_is_bad_input(command, run, tmp_path, reproducer):
    name = _edited(reproducer, tmp_path, "s.json", lambda t: t.replace('"title": "x"', '"title": "a\\ud800b"'), title="x")
    refused(*run(command, name), contains="field 'title' holds '\\ud800' at 1, which is not text (a lone surrogate)")


@pytest.mark.parametrize("argv, contains", [
    (["repro", "R", "--compile-timeout", "1e-9"], "argument --compile-timeout: must be >= 5 (what a worker needs to start)"),
    (["run", "--cases", "1", "--compile-timeout", "4.9"], "argument --compile-timeout: must be >= 5"),
    (["minimize", "R", "--compile-timeout", "1"], "argument --compile-timeout: must be >= 5"),
    (["reduce", "R", "--timeout", "0.5"], "argument --timeout: must be >= 5"),
])
def test_n5_a_timeout_too_short_for_a_worker_to_start_is_bad_input(argv, contains, run, reproducer):
    """Else `repro` says REPRODUCED for a HANG the start caused, and `run` records it as the compiler's."""
    refused(*run(*[str(reproducer) if a == "R" else a for a in argv]), contains=contains)


def test_n5_the_bound_is_in_help(capsys):
    with pytest.raises(SystemExit):
        cli.main(["repro", "--help"])
    assert "at least 5: a worker needs up to 2.3 s to start" in " ".join(capsys.readouterr().out.split())


def test_n6_an_empty_sanitizer_tool_is_not_a_plain_replay(run, reproducer):
    refused(*run("repro", reproducer, "--sanitize", ""), contains="argument --sanitize: unknown sanitizer tool ''")


@pytest.fixture
def frozen():
    """freeze(path): a file no one can write, root included (immutable, for root); undone at the end."""
    done = []

    def freeze(path):
        if os.geteuid() != 0:
            path.chmod(0o444)
        elif subprocess.run(["chattr", "+i", str(path)], capture_output=True).returncode != 0:
            pytest.skip("root, and chattr +i is not available here: no file root cannot write")
        done.append(path)
        return path
    yield freeze
    for path in done:
        if os.geteuid() == 0:
            subprocess.run(["chattr", "-i", str(path)])
        path.chmod(0o644)


def _case_file(tmp_path):
    campaign.write_cases(tmp_path / "c.jsonl", [Case()])
    return "c.jsonl"


@pytest.mark.parametrize("command, output, how", [
    ("run", "out/summary.md", "frozen"), ("run", "out/report.html", "dir"), ("run", "out/results.csv", "frozen"),
    ("run", "out/results.jsonl", "dir"), ("run", "out/logs", "file"), ("run", "r/compiler", "file"),
    ("report", "out/summary.md", "dir"), ("report", "out/results.csv", "frozen"), ("report", "out/report.html", "frozen"),
    ("determinism", "out/determinism.md", "frozen"), ("determinism", "out/seed-7", "file"),
    ("index", "r/INDEX.md", "frozen"), ("index", "r/INDEX.md", "dir"),
    ("export", "x.py", "frozen"), ("minimize", "R", "frozen"), ("upstream", "x.md", "frozen"),
    ("repro", "logs/71d484709490", "file"), ("reduce", "x.min.py", "frozen"),
])
def test_n7_an_output_file_that_cannot_be_written_is_refused_before_any_work(command, output, how, run, tmp_path,
                                                                             reproducer, frozen):
    """Each command checks every file it will write, before its first compile, and rewrites nothing."""
    path = reproducer if output == "R" else tmp_path / output
    path.parent.mkdir(parents=True, exist_ok=True)
    if how == "dir":
        path.mkdir()
    elif output != "R":
        path.write_text("")
    if how == "frozen":
        frozen(path)
    if command == "report":
        (tmp_path / "out" / "results.jsonl").write_text(json.dumps(Result.of(Case(), "COMPILED", "compile").to_dict()) + "\n")
    argv = {"run": ["run", "--cases", "1", "--out", "out", "--reproducers", "r"], "report": ["report", "out"],
            "determinism": ["determinism", "--cases-from", _case_file(tmp_path), "--out", "out"],
            "index": ["index", "--dir", "r"], "export": ["export", reproducer, "--to", "x.py"],
            "minimize": ["minimize", reproducer, "--logs", "logs"], "upstream": ["upstream", reproducer, "--to", "x.md"],
            "repro": ["repro", reproducer, "--logs", "logs"], "reduce": ["reduce", "x.py", "--out", "x.min.py"]}[command]
    if command == "reduce":
        (tmp_path / "x.py").write_text("print('REPRODUCED: x')\n")
    if command == "index":
        shutil.copytree(reproducer.parent.parent, tmp_path / "r", dirs_exist_ok=True)
    words = "is a directory, not a file" if how == "dir" else "is a file, not a directory" if how == "file" else \
        "read-only (or immutable)"
    refused(*run(*argv), contains=words)


@pytest.mark.parametrize("argv, contains", [
    (["run", "--cases", "1", "--out", "loop"], "argument --out: loop is a symbolic link to nothing"),
    (["run", "--cases", "1", "--out", "dangling/sub"], "argument --out: dangling is a symbolic link to nothing"),
    (["export", "R", "--to", "loop"], "argument --to: loop is a symbolic link to nothing"),
    (["export", "R", "--to", "dangling"], "argument --to: dangling is a symbolic link to nothing"),
    (["repro", "R", "--logs", "loop"], "argument --logs: loop is a symbolic link to nothing"),
    (["index", "--dir", "dangling"], "argument --dir: dangling is a symbolic link to nothing"),
    (["report", "loop"], "argument dir: loop is a symbolic link to nothing"),
    (["run", "--cases-from", "loop"], "argument --cases-from: loop is a symbolic link to nothing"),
], ids=["run-loop", "run-dangling", "export-loop", "export-dangling", "repro-logs", "index", "report", "cases-from"])
def test_n8_a_symlink_loop_or_to_nowhere_is_bad_input(argv, contains, run, tmp_path, reproducer):
    (tmp_path / "loop").symlink_to("loop")
    (tmp_path / "dangling").symlink_to("missing/dir")
    refused(*run(*[str(reproducer) if a == "R" else a for a in argv]), contains=contains)


@pytest.mark.parametrize("data, contains", [
    (b"print('\xff')\n", "x.py: not UTF-8 text (byte 7): not a Python file"),
    (b"def (:\n", "x.py: not Python: line 1: invalid syntax"),
    (b"x = 1\0\n", "x.py: not Python: "),
], ids=["latin-1", "syntax", "nul"])
def test_n9_reduce_of_a_file_that_is_not_python_is_refused_before_running_it(data, contains, run, tmp_path):
    (tmp_path / "x.py").write_bytes(data)
    refused(*run("reduce", "x.py"), contains=contains)


def test_n10_index_over_a_json_that_is_not_a_reproducer_names_it(run, tmp_path, reproducer):
    (reproducer.parent / "run.json").write_text('{"cases": 3}')
    refused(*run("index", "--dir", reproducer.parent.parent), contains="run.json: missing field 'schema'")


def test_n11_serve_on_an_empty_path(run):
    refused(*run("serve", ""), contains="argument socket: an empty path")


@pytest.mark.parametrize("spec, contains", [
    ("x=nosuchmodule_55:ATTR", "family 'x': nosuchmodule_55:ATTR does not load: ModuleNotFoundError: "),
    ("x=os:nosuchattr", "family 'x': os:nosuchattr does not load: AttributeError: "),
    ("x=os:sep", "family 'x': os:sep is a str, not a harness.kernels.Family"),
], ids=["no-module", "no-attribute", "not-a-family"])
def test_n12_register_checks_the_family_when_it_registers(spec, contains, run):
    """Even for a command that never uses it (forms): at registration, as Hypothesis's registries do."""
    refused(*run(f"--register={spec}", "forms"), contains=contains)


def test_n13_minimize_runs_has_the_bound_of_every_runs(run, reproducer):
    refused(*run("minimize", reproducer, "--runs", "10000000000"), contains="argument --runs: must be <= 10000")


def test_n13_minimize_of_a_bug_that_does_not_reproduce_is_125_as_the_table_says(run, tmp_path):
    """Not 1, which repro says for "reproduced": nothing minimized here, and the file is kept as it was."""
    from harness.commands import minimize
    rejected = Result.of(Case(family="fake", heads=1), "COMPILE_ERROR", "compile", "InternalError: rejected")
    path = reproducer_building.write(rejected, {"tilelang": "0.1.15"}, tmp_path / "r")
    before = path.read_text()
    code, out, err, _ = run("--register=fake=fake_family:FAMILY", "minimize", path, "--logs", "logs")
    assert code == 125 and minimize.EXITS[125].startswith("nothing changed: not reproduced here"), err
    assert out.startswith("NOT REPRODUCED, nothing to minimize: now COMPILED") and path.read_text() == before


@pytest.mark.parametrize("out", ["r", "r/compiler", "r/compiler/x", "PROJECT/reproducers", "PROJECT/harness/x",
                                 "PROJECT"])
def test_o15_a_run_writes_neither_into_reproducers_nor_into_the_project(out, run, tmp_path):
    project = str(REPRODUCERS.parent)
    refused(*run("run", "--cases", "1", "--out", out.replace("PROJECT", project), "--reproducers", "r"),
            contains="a run writes elsewhere")


@pytest.mark.parametrize("argv, status", [(["index", "--dir", "d"], 4), (["repro", "x", "--logs", "l"], 125)])
def test_an_argument_check_that_raises_is_still_inside_the_boundary(argv, status, home, monkeypatch, capsys):
    """A path check's own bug (an OSError, not an ArgumentTypeError) is the harness's failure: one line, never 1."""
    from harness.commands import common

    def broken(text):
        raise OSError(5, "Input/output error", text)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setattr(common, "bad_path", broken)
    assert cli.main(argv) == status
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"harness {argv[0]}: HARNESS_ERROR") and "OSError" in err, err


def test_drawing_cases_writes_nothing_in_the_working_directory(tmp_path, monkeypatch):
    """Hypothesis keeps a cache under its home, ./.hypothesis by default: a refused shard (known only once drawn) had
    left it in the user's folder. A draw goes under the harness's cache instead."""
    from harness import strategies
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("HYPOTHESIS_STORAGE_DIRECTORY", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert strategies.draw("fwd", 4, seed=1)
    assert [p.name for p in tmp_path.iterdir()] == ["home"]
