"""`harness upstream`: the report's sections from what a reproducer records, nothing else (no TileLang,
no GPU: the export and the triage are replaced where a test needs their output)."""
import json
import subprocess
import sys
from types import SimpleNamespace

import pytest

from harness import cli, export, record, replay, triage, upstream, worker
from harness.case import Case
from harness.result import Result

COMPILE = Case(family="fake", heads=9, kv_heads=9)
NUMERIC = Case(family="fake", heads=1, kv_heads=1)
ENV = {"tilelang": "0.1.15", "gpu": "NVIDIA H100 x1"}
ERROR = 'InternalError: Layout Layout((32, 64, 1) -> (6, 384)) has errors: ("Index mapping does not form a bijective")'
NOT_HERE = {"tilelang": "not importable: no module named tilelang"}


def _save(tmp_path, case=COMPILE, links=(), title=None, env=ENV, id=None, message=ERROR):
    """A reproducer file in tmp_path/reproducers, as `harness run` records one, with these links."""
    compile_error = case.heads == 9
    failing = Result.of(case, "COMPILE_ERROR" if compile_error else "MISMATCH", "compile" if compile_error else "judge",
                     message, tensor="" if compile_error else "O", checks=[] if compile_error else
                     [{"tensor": "O", "ok": False, "verdict": "MISMATCH", "error": 2.86, "tolerance": 0.00195}])
    rep = record.build(failing, env, title=title, id=id)
    rep = record.Reproducer(**{**rep.__dict__, "links": list(links)})
    return record.load(record.save(rep, tmp_path / "reproducers"))


@pytest.fixture
def exported(monkeypatch):
    """harness.export replaced: it writes a small program and says which kernels it built."""
    calls = []

    def fake(rep, to):
        calls.append((rep.id, to))
        to.parent.mkdir(parents=True, exist_ok=True)
        to.write_text("import tilelang\nprint('```')\n")
        return to, [SimpleNamespace(kernel="main")]

    monkeypatch.setattr(export, "export", fake)
    return calls


def _report(rep, tmp_path, **kwargs):
    kwargs.setdefault("env", NOT_HERE)
    return upstream.report(rep, tmp_path / "out" / f"{rep.id}.standalone.py", tmp_path / "reproducers",
                           envs=kwargs.pop("envs", tmp_path / "envs"), **kwargs)


def _section(text, heading):
    """The lines under `## heading`, up to the next heading."""
    part = text.split(f"## {heading}\n", 1)[1]
    return part.split("\n## ", 1)[0].strip()


def test_nothing_recorded_reads_so_and_nothing_is_invented(tmp_path, exported):
    rep = _save(tmp_path)
    out = _report(rep, tmp_path)
    text = out.text
    assert text.startswith(f"# {rep.title}"[:60])
    env = _section(text, "Environment (as recorded)")
    assert "| TileLang | 0.1.15 |" in env and "commit" not in env
    assert "| GPU | NVIDIA H100 x1 |" in env and "| Driver | not recorded |" in env and "| CUDA | not recorded |" in env
    program = _section(text, "Reproducer")
    assert f"`harness export {rep.id}`" in program and f"{rep.id}.standalone.py" in program
    assert "````python\nimport tilelang\nprint('```')\n````" in program  # a fence longer than the program's backticks
    assert exported == [(rep.id, tmp_path / "out" / f"{rep.id}.standalone.py")]
    assert _section(text, "Expected") == rep.expected
    assert ERROR in _section(text, "Observed")
    release = _section(text, "Release bisect")
    assert release.startswith("Not bisected.")
    assert f"harness bisect {rep.id} --good GOOD --bad 0.1.15" in release  # one release known: no --good to suggest
    assert _section(text, "Commit bisect") == "Not run."
    assert _section(text, "Culprit pass") == f"Not triaged: cannot compile {rep.id} here: tilelang {NOT_HERE['tilelang']}"
    assert _section(text, "Workaround") == "None known."
    assert _section(text, "Duplicates searched") == "no upstream issue or pull request found (searched: nothing recorded)"
    assert "## Same root cause" not in text
    assert out.summary[1:4] == ["release bisect: not bisected", "commit bisect: not run",
                                "culprit: not triaged (cannot compile here)"]


def test_a_numerical_reproducer_is_not_triaged_and_its_bisect_needs_a_gpu(tmp_path, exported):
    _save(tmp_path, env={"tilelang": "0.1.6.post2"}, id="0old")
    rep = _save(tmp_path, NUMERIC, message="O: max error 2.86 > tolerance 0.00195 at [0, 0, 3, 1]")
    text = _report(rep, tmp_path).text
    assert _section(text, "Culprit pass") == f"Not triaged: cannot compile {rep.id} here: tilelang {NOT_HERE['tilelang']}"
    assert "O: MISMATCH, error 2.86 against tolerance 0.00195" in _section(text, "Observed")
    release = _section(text, "Release bisect")
    assert f"harness bisect {rep.id} --good 0.1.6.post2 --bad 0.1.15" in release
    assert "not known good for this case" in release and "needs a GPU" in release


def test_links_sorted_by_what_they_record(tmp_path, exported):
    links = ["https://github.com/tile-ai/tilelang/issues/2643 (open: the same root cause)",
             "harness bisect X --good 0.1.10 --bad 0.1.15 (CPU, compile-only): first bad release 0.1.14, last good 0.1.13",
             "harness bisect X --repo ~/tl --good a1b2c3d --bad e4f5a6b: first bad commit e4f5a6b",
             "workaround: set TL_DISABLE_WARP_SPECIALIZED",
             "reproducers/X.standalone.py"]
    rep = _save(tmp_path, links=links)
    out = _report(rep, tmp_path)
    text = out.text
    assert _section(text, "Duplicates searched") == f"- {links[0]}"
    assert _section(text, "Release bisect") == f'- first bad 0.1.14, last good 0.1.13 (recorded: "{links[1]}")'
    assert _section(text, "Commit bisect") == f'- first bad e4f5a6b (recorded: "{links[2]}")'
    assert _section(text, "Workaround") == f"- {links[3]}"
    assert f"Also recorded with the reproducer:\n\n- {links[4]}" in _section(text, "Reproducer")
    assert "release bisect: first bad 0.1.14, last good 0.1.13" in out.summary


def test_a_recorded_search_is_named(tmp_path, exported):
    rep = _save(tmp_path, links=["searched TileLang's tracker (sink varlen backward): no report found"])
    assert _section(_report(rep, tmp_path).text, "Duplicates searched") == (
        "no upstream issue or pull request found (searched: searched TileLang's tracker (sink varlen backward): "
        "no report found)")


def test_a_workaround_the_title_states_is_quoted(tmp_path, exported):
    rep = _save(tmp_path, title="fake: fails to compile at 256 threads; the same kernel compiles with 128 threads")
    assert _section(_report(rep, tmp_path).text, "Workaround") == (
        '- the title records: "the same kernel compiles with 128 threads"')


def test_same_root_cause_from_links_either_way_and_from_titles(tmp_path, exported):
    first = _save(tmp_path, id="aaaaaaaaaaaa", links=[
        "harness bisect aaaaaaaaaaaa --good 0.1.10 --bad 0.1.15: first bad release 0.1.14, last good 0.1.13",
        "https://github.com/tile-ai/tilelang/issues/1 (open)"])
    _save(tmp_path, id="bbbbbbbbbbbb", links=["reproducers/aaaaaaaaaaaa.json (the forward's face)"])
    _save(tmp_path, id="cccccccccccc", title="fake: the same failure as aaaaaaaaaaaa, in another kernel")
    _save(tmp_path, id="dddddddddddd", title="fake: an unrelated failure")
    text = _report(first, tmp_path).text
    same = _section(text, "Same root cause")
    assert "`bbbbbbbbbbbb`" in same and "links this one: reproducers/aaaaaaaaaaaa.json (the forward's face)" in same
    assert "`cccccccccccc`" in same and "its title says the same as this one" in same
    assert "dddddddddddd" not in text
    # From the other side: the link and its bisect, and the tracker link recorded on the other one.
    text = _report(record.load(tmp_path / "reproducers" / "bbbbbbbbbbbb.json"), tmp_path).text
    assert "`aaaaaaaaaaaa`" in _section(text, "Same root cause")
    release = _section(text, "Release bisect")
    assert release.startswith("Not bisected.")
    assert "- aaaaaaaaaaaa (same root cause): first bad 0.1.14, last good 0.1.13" in release
    assert "harness bisect bbbbbbbbbbbb --good 0.1.13 --bad 0.1.15" in release
    assert "the last good release recorded for aaaaaaaaaaaa (same root cause); not known good for this case" in release
    assert _section(text, "Duplicates searched") == \
        "- https://github.com/tile-ai/tilelang/issues/1 (open) (recorded on aaaaaaaaaaaa)"


def test_one_root_cause_one_report_the_one_the_others_name(tmp_path, exported, monkeypatch):
    monkeypatch.setattr(upstream, "environment", lambda: NOT_HERE)
    main = _save(tmp_path, id="aaaaaaaaaaaa", links=["reproducers/bbbbbbbbbbbb.json (its head-dim-128 face)"])
    face = _save(tmp_path, id="bbbbbbbbbbbb", title="fake: aaaaaaaaaaaa at head dim 128",
                 links=["reproducers/aaaaaaaaaaaa.json", "reproducers/aaaaaaaaaaaa.standalone.py"])
    alone = _save(tmp_path, id="cccccccccccc")
    directory = tmp_path / "reproducers"
    assert upstream.primary(face, directory).id == upstream.primary(main, directory).id == "aaaaaaaaaaaa"
    assert upstream.primary(alone, directory).id == "cccccccccccc"
    assert "its own program: `harness export bbbbbbbbbbbb`" in _section(_report(main, tmp_path).text, "Same root cause")
    assert cli.main(["upstream", face.id, "--dir", str(directory), "--envs", str(tmp_path)]) == 0
    assert (directory / "upstream" / "aaaaaaaaaaaa.md").is_file() and not (directory / "upstream" / "bbbbbbbbbbbb.md").exists()


def _state(path, rep, good, bad, order, steps):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"reproducer": f"{rep.id}.json", "good": good, "bad": bad, "runs": 1, "fresh": False,
                                "order": order, "steps": {v: {"status": s, "evidence": "", "seconds": 1}
                                                          for v, s in steps.items()}}))
    return path


def test_bisect_state_files_are_read(tmp_path, exported):
    rep = _save(tmp_path)
    order = ["0.1.10", "0.1.12", "0.1.13", "0.1.14", "0.1.15"]
    envs = tmp_path / "envs"
    _state(envs / f"bisect-{rep.id}-0.1.10-0.1.15.json", rep, "0.1.10", "0.1.15", order,
           {"0.1.10": 0, "0.1.15": 1, "0.1.13": 0, "0.1.14": 1})
    _state(envs / "bisect-other-0.1.10-0.1.15.json", SimpleNamespace(id="other"), "0.1.10", "0.1.15", order, {})
    release = _section(_report(rep, tmp_path).text, "Release bisect")
    assert release.startswith("- first bad release 0.1.14, last good 0.1.13 (state ")
    assert "steps: 0.1.10 good, 0.1.15 bad, 0.1.13 good, 0.1.14 bad" in release and "other" not in release
    # A fix (--good newer than --bad), a bisect not finished, and a commit bisect named with --state.
    fixed = _state(tmp_path / "fixed.json", rep, "0.1.15", "0.1.12", ["0.1.15", "0.1.14", "0.1.12"],
                   {"0.1.15": 0, "0.1.12": 1, "0.1.14": 1})
    paused = _state(tmp_path / "paused.json", rep, "0.1.10", "0.1.15", order, {"0.1.10": 0})
    commits = _state(tmp_path / "commits.json", rep, "a1b2c3d", "e4f5a6b", ["a1b2c3d", "9f9f9f9", "e4f5a6b"],
                     {"a1b2c3d": 0, "e4f5a6b": 1, "9f9f9f9": 1})
    text = _report(rep, tmp_path, envs=None, states=[fixed, paused, commits]).text
    release = _section(text, "Release bisect")
    assert "- first fixed release 0.1.15, the last with the bug 0.1.14" in release
    assert "- not finished (state " in release and "steps so far: 0.1.10 good; next: 0.1.15" in release
    assert _section(text, "Commit bisect").startswith("- first bad commit 9f9f9f9, last good a1b2c3d (state ")


def test_the_culprit_pass_is_what_harness_triage_prints(tmp_path, exported, monkeypatch):
    rep = _save(tmp_path)
    given = 'tx = T.launch_thread("threadIdx.x", 384)\nT.fill(dq_s, 0)'
    trace = triage.Trace(passes=["pass0", "tl.ProducerConsumerWarpSpecialized"],
                         after=['tx = T.launch_thread("threadIdx.x", 256)\nT.fill(dq_s, 0)', given],
                         raised_in="tl.LowerTileOp", given=given, error=ERROR)
    monkeypatch.setattr(replay, "gpu_count", lambda: 0)
    monkeypatch.setattr(triage, "trace", lambda build: trace)
    out = _report(rep, tmp_path, env={"tilelang": "0.1.15"})
    culprit = _section(out.text, "Culprit pass")
    assert culprit.startswith(f"`harness triage {rep.id}`, run here (TileLang 0.1.15, target sm_90a):")
    for line in triage.describe(triage.find(trace, triage.script), trace):
        assert line in culprit
    assert "culprit: raised in tl.LowerTileOp, input from tl.ProducerConsumerWarpSpecialized" in out.summary

    def broken(build):
        raise RuntimeError("no pass instrument in this release\nmore")

    monkeypatch.setattr(triage, "trace", broken)
    assert _section(_report(rep, tmp_path, env={"tilelang": "0.1.15"}).text, "Culprit pass") == \
        "Not triaged: triage failed: RuntimeError: no pass instrument in this release"


def test_a_numerical_bug_names_the_pass_that_made_its_hazard(tmp_path, exported, monkeypatch):
    rep = _save(tmp_path, NUMERIC, message="O: max error 2.86 > tolerance 0.00195 at [0, 0, 3, 1]")
    made = "for kb in range(n):\n    if kb == 0:\n        T.mbarrier_wait_parity(mbarrier[4], 0)\n    T.gemm(q_s, k_s, acc_s)"
    trace = triage.Trace(passes=["pass0", "tl.ProducerConsumerWarpSpecialized", "pass2"],
                         after=["for kb in range(n):\n    T.gemm(q_s, k_s, acc_s)", made, made], result="kernel")
    hazard = "unwaited_async_loads: TMA load into q_s on mbarrier[4] waited on only inside a loop that may run zero times"
    monkeypatch.setattr(replay, "gpu_count", lambda: 0)
    monkeypatch.setattr(triage, "trace", lambda build: trace)
    monkeypatch.setattr(worker, "scan", lambda fam, case, kernel: ([hazard], "digest"))
    out = _report(rep, tmp_path, env={"tilelang": "0.1.15"})
    culprit = _section(out.text, "Culprit pass")
    assert f"hazard: {hazard}" in culprit
    assert "unwaited_async_loads: made by pass tl.ProducerConsumerWarpSpecialized" in culprit
    assert "culprit: unwaited_async_loads made by tl.ProducerConsumerWarpSpecialized" in out.summary


def test_an_outside_kernel_is_not_exported_and_the_repro_command_is_given(tmp_path, exported, monkeypatch):
    rep = _save(tmp_path)
    monkeypatch.setattr(upstream.kernels, "family", lambda name: SimpleNamespace(module="example_gqa_decode.py",
                                                                                  variants=("default",)))
    program = _section(_report(rep, tmp_path, unavailable="outside kernels need TileLang's examples").text,
                       "Reproducer")
    assert "`examples/example_gqa_decode.py`" in program and "refuses outside kernels" in program
    assert f"harness repro {rep.id} --examples PATH" in program
    assert exported == []


def test_a_failed_export_says_why_and_gives_the_repro_command(tmp_path, monkeypatch):
    def refuse(rep, to):
        raise export.ExportError("kernel main has its own pass configs; not exported")

    monkeypatch.setattr(export, "export", refuse)
    rep = _save(tmp_path)
    out = _report(rep, tmp_path)
    program = _section(out.text, "Reproducer")
    assert "could not write the standalone program here (ExportError: kernel main has its own pass configs" in program
    assert f"```sh\nharness repro {rep.id}\n```" in program
    assert out.summary[0].startswith("program: not exported")


def test_a_report_too_long_for_an_issue_says_so(tmp_path, monkeypatch):
    def big(rep, to):
        to.parent.mkdir(parents=True, exist_ok=True)
        to.write_text("x = 1\n" * 12000)
        return to, [SimpleNamespace(kernel="main")]

    monkeypatch.setattr(export, "export", big)
    rep = _save(tmp_path)
    text = _report(rep, tmp_path).text
    assert f"GitHub takes 65536 in an issue body: attach `{rep.id}.standalone.py`" in text


def test_the_command_writes_the_report_and_the_program_beside_it(tmp_path, exported, monkeypatch, capsys):
    rep = _save(tmp_path)
    monkeypatch.setattr(upstream, "environment", lambda: NOT_HERE)
    to = tmp_path / "filed" / "report.md"
    code = cli.main(["upstream", rep.id, "--dir", str(tmp_path / "reproducers"), "--to", str(to),
                     "--envs", str(tmp_path / "envs")])
    assert code == 0
    assert to.read_text().startswith("# ") and (tmp_path / "filed" / f"{rep.id}.standalone.py").is_file()
    out = capsys.readouterr().out
    assert out.startswith(f"wrote {to}: program {tmp_path / 'filed' / f'{rep.id}.standalone.py'} (main); ")
    assert out.count("\n") == 1
    # Default: DIR/upstream/<id>.md.
    assert cli.main(["upstream", rep.id, "--dir", str(tmp_path / "reproducers"), "--envs", str(tmp_path)]) == 0
    assert (tmp_path / "reproducers" / "upstream" / f"{rep.id}.md").is_file()


def test_a_missing_reproducer_is_one_line_and_exit_2(tmp_path):
    p = subprocess.run([sys.executable, "-m", "harness.cli", "upstream", "nope", "--dir", str(tmp_path)],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.count("\n") == 1 and p.stderr.startswith("harness upstream: no reproducer 'nope'")
    assert not (tmp_path / "upstream").exists()
