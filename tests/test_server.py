"""harness serve and harness run --server: workers that outlive a command keep their kernels for the
next run, answer as a command's own pool does (crashes and the budget of replacements included), and a
command unlike the server, or with no server, is refused in one line. The fake family (tests/fake_family.py:
heads 1 passes, 3 dies compiling) runs compile-only, as on a machine without a GPU."""
import contextlib
import dataclasses
import json
import shutil
import tempfile
from pathlib import Path

import pytest

from harness import campaign, cli, kernels, server
from harness.case import Case

REGISTER = [f"--register={name}={where}" for name, where in kernels.registered().items()]


def fake(behaviour, **kw):
    return Case(family="fake", heads=behaviour, **kw)


@pytest.fixture
def sock():
    """A socket path short enough for a Unix socket (pytest's tmp_path may not be), and its server stopped after."""
    where = Path(tempfile.mkdtemp(prefix="hs", dir="/tmp"))
    path = where / "s"
    yield path
    if path.exists():
        server.stop(path)
    shutil.rmtree(where, ignore_errors=True)


def serve(sock, *more) -> int:
    return cli.main([*REGISTER, "serve", str(sock), "--workers", "1", "--detach", *more])


def run(tmp_path, sock, name, cases, *more) -> list[dict]:
    campaign.write_cases(tmp_path / f"{name}.jsonl", cases)
    code = cli.main(["run", "--cases-from", str(tmp_path / f"{name}.jsonl"), "--out", str(tmp_path / name),
                     "--server", str(sock), "--reproducers", str(tmp_path / "r"), *more])
    lines = (tmp_path / name / "results.jsonl").read_text().splitlines()
    return code, [json.loads(line) for line in lines]


def test_a_second_run_finds_its_kernels_in_the_workers_and_the_same_verdicts(tmp_path, sock, capsys):
    assert serve(sock) == 0
    assert f"listening at {sock}" in capsys.readouterr().out
    cases = [fake(1, seqlen_q=q) for q in (1, 2)]
    code, first = run(tmp_path, sock, "first", cases)
    assert code == 0 and [r["verdict"] for r in first] == ["COMPILED", "COMPILED"]
    assert sum("compile" in r["seconds"] for r in first) == 1  # one kernel, compiled once
    code, second = run(tmp_path, sock, "second", cases)
    assert code == 0 and [r["verdict"] for r in second] == ["COMPILED", "COMPILED"]
    assert not any("compile" in r["seconds"] or "start" in r["seconds"] for r in second)  # held, not loaded
    assert "0 worker processes" in capsys.readouterr().out
    # A command's own pool gives the same verdicts.
    campaign.write_cases(tmp_path / "own.jsonl", cases)
    assert cli.main(["run", "--cases-from", str(tmp_path / "own.jsonl"), "--out", str(tmp_path / "own"), "--workers", "1",
                     "--reproducers", str(tmp_path / "r")]) == 0
    own = [json.loads(line) for line in (tmp_path / "own" / "results.jsonl").read_text().splitlines()]
    assert [(r["case_id"], r["verdict"]) for r in own] == [(r["case_id"], r["verdict"]) for r in second]


def test_a_worker_that_dies_is_replaced_within_the_runs_budget_and_the_server_goes_on(tmp_path, sock, capsys):
    assert serve(sock) == 0
    code, results = run(tmp_path, sock, "crash", [fake(3), fake(1)], "--max-worker-restarts", "0")
    assert code == 1 and [r["verdict"] for r in results] == ["CRASH"]
    err = capsys.readouterr().err
    assert "harness run: stopped: a worker died or hung (CRASH at compile" in err and "--max-worker-restarts 0" in err
    # The next run has a budget of its own: the dead worker is replaced, and the crash is a known bug now.
    code, results = run(tmp_path, sock, "after", [fake(1)])
    assert code == 0 and [r["verdict"] for r in results] == ["COMPILED"]


def test_a_command_unlike_the_server_or_without_one_is_refused_in_one_line(tmp_path, sock, capsys, monkeypatch):
    campaign.write_cases(tmp_path / "c.jsonl", [fake(1)])
    argv = ["run", "--cases-from", str(tmp_path / "c.jsonl"), "--out", str(tmp_path / "out"), "--server", str(sock)]
    assert cli.main(argv) == 2
    assert capsys.readouterr().err.strip() == (f"harness run: no server at {sock} (No such file or directory): start one "
                                               f"with `harness serve {sock} --detach`")
    assert serve(sock) == 0
    assert serve(sock) == 2
    assert capsys.readouterr().err.strip() == f"harness serve: a server is already listening at {sock}"
    monkeypatch.setenv("HARNESS_BANDS", "off")
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "refused: this command is unlike the server: HARNESS_BANDS='off' (the server's: None)" in err[0]
    monkeypatch.delenv("HARNESS_BANDS")
    monkeypatch.setenv(kernels.EXAMPLES_ENV, str(tmp_path))  # the workers' examples tree, handed as an argument
    assert cli.main(argv) == 2
    assert f"examples '{tmp_path.resolve()}' (the server's: None)" in capsys.readouterr().err
    monkeypatch.delenv(kernels.EXAMPLES_ENV)
    kernels.use_examples(None)
    assert cli.main([*argv, "--workers", "2"]) == 2
    assert "--workers does not go with --server" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()  # refused before anything was written
    assert cli.main(["serve", str(sock), "--stop"]) == 0
    assert not sock.exists()
    assert cli.main(["serve", str(sock), "--stop"]) == 2


def test_the_server_watches_every_variable_the_harness_reads():
    """A variable the harness reads that the server does not compare would let a client run under the server's value."""
    import re

    root = Path(server.__file__).parent
    text = "\n".join(p.read_text() for p in root.rglob("*.py") if "bisect" not in p.parts)
    read = set(re.findall(r'environ(?:\.get\(|\[)"([A-Z_]+)"', text))
    parent_only = {"HARNESS_SERVER", "PYTEST_XDIST_WORKER_COUNT", "PYTHONPATH",  # read by the command, not a worker
                   "HYPOTHESIS_STORAGE_DIRECTORY"}                                # (the draw is the command's)
    assert read - parent_only <= set(server.WATCHED), read - parent_only - set(server.WATCHED)


def test_a_client_out_of_step_is_dropped_and_the_server_serves_the_next(tmp_path, sock):
    import socket

    assert serve(sock) == 0
    for garbage in (b"[1, 2]\n", b'{"identity": 3}\n', b"not json\n"):
        with socket.socket(socket.AF_UNIX) as raw:
            raw.connect(str(sock))
            raw.sendall(garbage)
            with contextlib.suppress(ConnectionResetError):
                raw.recv(1 << 16)  # a refusal, or the connection closed
    with socket.socket(socket.AF_UNIX) as raw:  # the right identity, then a run that is no run
        raw.connect(str(sock))
        with raw.makefile("rwb") as stream:
            server._send(stream, identity=dataclasses.asdict(server.Identity.here()))
            assert "ready" in server._receive(stream)
            server._send(stream, run={"cases": "none"})
            assert server._receive(stream) is None  # dropped
    code, results = run(tmp_path, sock, "after", [fake(1)])
    assert code == 0 and [r["verdict"] for r in results] == ["COMPILED"]


def test_a_socket_path_too_long_or_in_no_directory_is_refused(tmp_path, capsys):
    long = tmp_path / ("x" * 120)
    assert cli.main(["serve", str(long), "--stop"]) == 2
    assert "longer than 107 bytes" in capsys.readouterr().err
    (tmp_path / "f").write_text("")
    assert cli.main(["serve", str(tmp_path / "f")]) == 2  # a file where the socket would be: never removed
    assert capsys.readouterr().err.strip() == f"harness serve: {tmp_path / 'f'} is there and is no socket: choose another path"
    assert (tmp_path / "f").is_file()
    inside = tmp_path / "f" / "s"
    assert cli.main(["serve", str(inside)]) == 2
    said = capsys.readouterr().err.strip()
    assert said == f"harness serve: cannot listen at {inside}: {inside.parent} is a file, not a directory"
    with pytest.raises(SystemExit) as stop:  # argparse's one line
        cli.main(["serve", "s", "--logs", str(tmp_path / "f")])
    assert stop.value.code == 2 and "argument --logs" in capsys.readouterr().err
