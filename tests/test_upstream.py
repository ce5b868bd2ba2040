"""`harness upstream`: the text to file, from what a reproducer records and nothing else (no TileLang, no GPU:
the export and the triage are replaced where a test needs their output); and the reports committed in
reproducers/upstream/ checked against their reproducers' data."""
import dataclasses
import json
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from packaging.version import Version

from harness import (
    cli,
    export,
    replay,
    reproducer_building,
    reproducer_files,
    reproducer_index,
    reproducer_loading,
    reproducer_model,
    triage,
    upstream,
    worker,
)
from harness.case import Case
from harness.reproducer_model import (
    Control,
    Culprit,
    File,
    Issue,
    Links,
    RecordedBisect,
    Release,
    Search,
    Sibling,
    Triage,
    Upstream,
)
from harness.result import Result, ScanFinding
from harness.upstream import outputs

COMPILE = Case(family="fake", heads=9, kv_heads=9)
NUMERIC = Case(family="fake", heads=1, kv_heads=1)
ENV = {"tilelang": "0.1.15", "gpu": "NVIDIA H100 x1"}
ERROR = 'InternalError: Layout Layout((32, 64, 1) -> (6, 384)) has errors: ("Index mapping does not form a bijective")'
NOT_HERE = {"tilelang": "not importable: no module named tilelang"}
ROOT = Path(__file__).resolve().parent.parent
DRAFT = "<!-- DRAFT: not a report to file (no report words or no program recorded) -->\n\n"


def _save(tmp_path, case=COMPILE, title=None, env=ENV, id=None, message=ERROR, **facts):
    """A reproducer file in tmp_path/reproducers, as `harness run` records one, with these typed facts."""
    compile_error = case.heads == 9
    failing = Result.of(case, "COMPILE_ERROR" if compile_error else "MISMATCH", "compile" if compile_error else "judge",
                     message, tensor="" if compile_error else "O", checks=[] if compile_error else
                     [{"tensor": "O", "ok": False, "verdict": "MISMATCH", "error": 2.86, "tolerance": 0.00195,
                       "where": {"index": [0, 0, 3, 1]}}])
    rep = dataclasses.replace(reproducer_building.build(failing, env, title=title, id=id), **facts)
    return reproducer_loading.load(reproducer_files.save(rep, tmp_path / "reproducers"))


@pytest.fixture
def exported(monkeypatch):
    """harness.export replaced: it writes a small program and says which kernels it built."""
    calls = []

    def fake(rep, to, **kwargs):
        calls.append((rep.id, to))
        to.parent.mkdir(parents=True, exist_ok=True)
        to.write_text("import tilelang\nprint('```')\n")
        return to, [SimpleNamespace(kernel="main")]

    monkeypatch.setattr(export, "export", fake)
    return calls


def _report(rep, tmp_path, **kwargs):
    kwargs.setdefault("env", NOT_HERE)
    return upstream.report(rep, tmp_path / "out", tmp_path / "reproducers", envs=kwargs.pop("envs", tmp_path / "envs"),
                           **kwargs)


def _section(text, heading):
    """The lines under `## heading`, up to the next heading or the details."""
    part = text.split(f"## {heading}\n", 1)[1]
    return part.split("\n## ", 1)[0].split("\n<details>", 1)[0].strip()


def test_nothing_recorded_reads_so_and_nothing_is_invented(tmp_path, exported):
    rep = _save(tmp_path, title="fake: a layout error at 256 threads")
    out = _report(rep, tmp_path)
    text = out.text
    assert text.startswith(DRAFT + "# [BUG][ice-on-valid-code] fake: a layout error at 256 threads\n")
    assert "**Environment:** TileLang 0.1.15 (commit not recorded), GPU NVIDIA H100 x1." in text
    program = _section(text, "Program")
    assert program.startswith("No program of at most 90 lines yet (no program file): "
                              f"`harness reduce {rep.id}` makes one.") and f"`harness repro {rep.id}`" in program
    assert exported == []  # a hand-written kernel's export is never embedded, so it is not made
    assert _section(text, "Expected") == rep.expected
    assert ERROR in _section(text, "Observed")
    assert _section(text, "Control") == "No control recorded: `harness triage` tries one knob at a time."
    assert _section(text, "Root cause") == f"Not triaged: cannot compile {rep.id} here: tilelang {NOT_HERE['tilelang']}"
    provenance = _section(text, "Provenance")
    assert "**First bad release: at or before 0.1.15 (no older release tested without it)**" in provenance
    assert "**Commit bisect:** not run." in provenance and "Introduced by" not in provenance
    assert _section(text, "Workaround") == "None known: no recorded control is right."
    assert _section(text, "Duplicates") == "- No search of the tracker recorded."
    assert "## Same root cause" not in text and "## Suggested fix" not in text
    assert f"`harness repro {rep.id}` replays it" in text and '"family": "fake"' in text
    assert out.comment_for is None and out.summary[0].startswith("draft, report: ")


def test_the_report_reads_the_typed_fields(tmp_path, exported):
    links = Links(related=(Issue("tile-ai/tilelang", 2566, state="open", note="a single-iteration loop, not this"),),
                  searches=(Search("the tracker: a wait in a loop's first iteration", "nothing found"),),
                  bisected_by=(RecordedBisect("release", "0.1.10", "0.1.15", "0.1.14", "0.1.13", note="CPU"),
                               RecordedBisect("commit", "a1b2c3d", "e4f5a6b", "9f9f9f9", "a1b2c3d")),
                  introduced_by=(Issue("tile-ai/tilelang", 2444, kind="pull", state="merged", note="the wait lowering"),),
                  fixed_by=(Issue("tile-ai/tilelang", 3000, kind="pull", state="open", note="a proposed fix"),),
                  notes=("as written",))
    rep = _save(tmp_path, NUMERIC, message="O: max error 2.86 > tolerance 0.00195 at [0, 0, 3, 1]", links=links,
                releases={"0.1.13": Release("not reproduced"), "0.1.14": Release("reproduced")},
                triage=Triage(Culprit("tl.ProducerConsumerWarpSpecialized", "src/x.cc", "Rewriter::Build", "it waits once"),
                              (Control("TL_DISABLE_WARP_SPECIALIZED", "right", True, knob="no_warp_specialize"),
                               Control("num_stages=0", "right", True), Control("TL_DISABLE_TMA_LOWER", "wrong", False,
                                                                                knob="no_tma"))),
                upstream=Upstream("[BUG][wrong-code] a loop that runs zero times never waits", "rows with no key are 0",
                                  "rows with no key hold Q", "wait after the loop too"))
    text = _report(rep, tmp_path).text
    assert text.startswith(DRAFT + "# [BUG][wrong-code] a loop that runs zero times never waits\n")
    assert _section(text, "Expected") == "rows with no key are 0"
    observed = _section(text, "Observed")
    assert observed.startswith("rows with no key hold Q")
    assert "max |kernel - float64 reference| = 2.86 at [0, 0, 3, 1]" in observed
    assert "tolerance" not in observed
    control = _section(text, "Control")
    assert "| none (as recorded) | **wrong values** |" in control and "| TL_DISABLE_TMA_LOWER | wrong |" in control
    assert _section(text, "Root cause") == ("**tl.ProducerConsumerWarpSpecialized** (`src/x.cc`, `Rewriter::Build`, read "
                                            "in the 0.1.15 source): it waits once.")
    assert _section(text, "Suggested fix") == "wait after the loop too"
    provenance = _section(text, "Provenance")
    assert "**First bad release: 0.1.14** (a release bisect: first bad release 0.1.14, last good 0.1.13" in provenance
    assert "**Commit bisect:** first bad commit 9f9f9f9, last good a1b2c3d" in provenance
    assert "**Introduced by:** [PR #2444](https://github.com/tile-ai/tilelang/pull/2444) (merged): the wait lowering" \
        in provenance
    assert "**Fixed by:** [PR #3000](https://github.com/tile-ai/tilelang/pull/3000) (open): a proposed fix" in provenance
    assert _section(text, "Workaround") == ("- TL_DISABLE_WARP_SPECIALIZED: right\n"
                                            "- changing the program: num_stages=0: right")
    duplicates = _section(text, "Duplicates")
    assert "- Searched the tracker: a wait in a loop's first iteration: nothing found." in duplicates
    assert "- Nearest: [#2566](https://github.com/tile-ai/tilelang/issues/2566) (open): a single-iteration loop, not this" \
        in duplicates


def test_the_first_bad_release_from_the_matrix_is_a_range_it_does_not_contradict(tmp_path, exported):
    matrix = {"0.1.6.post2": Release("not reproduced"), "0.1.7.post3": Release("not reproduced"),
              "0.1.10": Release("reproduced"), "0.1.12": Release("reproduced", "an early run")}
    rep = _save(tmp_path, NUMERIC, releases=matrix)
    provenance = _section(_report(rep, tmp_path).text, "Provenance")
    assert "**First bad release: after 0.1.7.post3, at or before 0.1.10** (the release matrix; not bisected)" in provenance
    assert "0.1.12 reproduced (an early run); 0.1.15 reproduced (recorded there)." in provenance
    assert f"`harness bisect {rep.id} --good 0.1.7.post3 --bad 0.1.10` (needs a GPU" in provenance
    # A release between them that could not tell is said to be so; a fix found by a bisect is said as a fix.
    matrix["0.1.8"] = Release("cannot test")
    fixed = RecordedBisect("release", "0.1.15", "0.1.12", "0.1.14", "0.1.15", fixes=True)
    rep = _save(tmp_path, NUMERIC, id="bbbbbbbbbbbb", releases=matrix, links=Links(bisected_by=(fixed,)))
    provenance = _section(_report(rep, tmp_path).text, "Provenance")
    assert "(the release matrix; not bisected; 0.1.8 could not tell)" in provenance
    assert "**Fixed in 0.1.15** (fixed in 0.1.15, the last release with it 0.1.14" in provenance
    # A commit bisect inside the range narrows it: the line names its commit instead of "not bisected".
    inside = RecordedBisect("commit", "6c09e88966", "9754ac4471", "61f968b6c5c00c8986b9", "4a5cf099fbc6c52e63c5")
    rep = _save(tmp_path, NUMERIC, id="cccccccccccc", releases=matrix, links=Links(bisected_by=(inside,)))
    provenance = _section(_report(rep, tmp_path).text, "Provenance")
    assert "(the release matrix; a commit bisect names 61f968b6c; 0.1.8 could not tell)" in provenance
    # One between other releases (a witness's: the defect in the code of a release that ran without failing) says so.
    before = RecordedBisect("commit", "v0.1.6.post2", "v0.1.7.post3", "61f968b6c5c00c8986b9", "4a5cf099fbc6c52e63c5")
    rep = _save(tmp_path, NUMERIC, id="dddddddddddd", releases=matrix, links=Links(bisected_by=(before,)))
    provenance = _section(_report(rep, tmp_path).text, "Provenance")
    assert "a commit bisect from v0.1.6.post2 to v0.1.7.post3 names 61f968b6c;" in provenance


def test_a_known_open_issue_gets_a_comment(tmp_path, exported):
    issue = Issue("tile-ai/tilelang", 2643, state="open", note="the same root cause")
    main = _save(tmp_path, id="aaaaaaaaaaaa", links=Links(tracker_issue=(issue,), same_root_cause_as=(
        Sibling("bbbbbbbbbbbb", "also at head dim 128"),)), upstream=Upstream(title="[BUG] the words"))
    _save(tmp_path, id="bbbbbbbbbbbb", links=Links(tracker_issue=(issue,), same_root_cause_as=(Sibling("aaaaaaaaaaaa"),)))
    out = _report(main, tmp_path)
    first, second = out.text.splitlines()[2:4]
    assert first == "<!-- a comment for https://github.com/tile-ai/tilelang/issues/2643; reproducer aaaaaaaaaaaa -->"
    assert second.startswith("**Still present in TileLang 0.1.15.** **Environment:**")
    assert "Also:\n\n- `bbbbbbbbbbbb` (COMPILE_ERROR, TileLang 0.1.15): also at head dim 128" in out.text
    assert "## Duplicates" not in out.text and "## Same root cause" not in out.text and out.comment_for == issue
    # A closed issue, or one on another tracker, is not commented on: a report names it.
    other = dataclasses.replace(issue, repo="tile-ai/TileOPs", number=1852)
    rep = _save(tmp_path, id="cccccccccccc", links=Links(tracker_issue=(other,)))
    text = _report(rep, tmp_path).text
    assert text.startswith("<!-- DRAFT") and "\n# " in text
    assert "- This bug: [TileOPs#1852](https://github.com/tile-ai/TileOPs/issues/1852) (open)" in _section(text, "Duplicates")


def test_same_root_cause_either_way_and_one_report_per_root_cause(tmp_path, exported, monkeypatch):
    monkeypatch.setattr(upstream, "environment", lambda: NOT_HERE)
    first = _save(tmp_path, id="aaaaaaaaaaaa", links=Links(bisected_by=(
        RecordedBisect("release", "0.1.10", "0.1.15", "0.1.14", "0.1.13"),)))
    face = _save(tmp_path, id="bbbbbbbbbbbb", links=Links(same_root_cause_as=(Sibling("aaaaaaaaaaaa", "the forward's face"),)))
    alone = _save(tmp_path, id="cccccccccccc")
    directory = tmp_path / "reproducers"
    assert "- `bbbbbbbbbbbb` (COMPILE_ERROR, TileLang 0.1.15): links this one: the forward's face" in \
        _section(_report(first, tmp_path).text, "Same root cause")
    text = _report(face, tmp_path).text
    assert "- `aaaaaaaaaaaa` (COMPILE_ERROR, TileLang 0.1.15): the forward's face" in _section(text, "Same root cause")
    assert "For `aaaaaaaaaaaa` (same root cause): first bad release 0.1.14, last good 0.1.13" in _section(text, "Provenance")
    assert upstream.primary(face, directory).id == upstream.primary(first, directory).id == "aaaaaaaaaaaa"
    assert upstream.primary(alone, directory).id == "cccccccccccc"
    # The one with the report's words recorded covers the others, however they link.
    worded = dataclasses.replace(face, upstream=Upstream(title="[BUG] the words"))
    reproducer_files.save(worded, directory)
    assert upstream.primary(first, directory).id == "bbbbbbbbbbbb"
    assert cli.main(["upstream", first.id, "--dir", str(directory), "--envs", str(tmp_path)]) == 0
    assert (directory / "upstream" / "bbbbbbbbbbbb.md").is_file() and not (directory / "upstream" / "aaaaaaaaaaaa.md").exists()


def test_the_program_embedded_is_a_short_one(tmp_path, exported):
    directory = tmp_path / "reproducers"
    rep = _save(tmp_path, links=Links(files=(File("reproducers/x.standalone.py", "standalone", "exit 1 while the bug is here"),)))
    docstring = '"""What it shows.\n\n' + "prose\n" * 30 + '"""\n'
    (directory / "x.standalone.py").write_text(docstring + "import tilelang\n" * 90)  # 90 lines after the docstring
    text = _report(rep, tmp_path).text
    assert _section(text, "Program").startswith("`x.standalone.py` (tilelang and torch only): exit 1 while the bug is here.")
    (directory / "compiler" / f"{rep.id}.standalone.py").write_text("import tilelang\n" * 91)  # beside its file
    out = _report(rep, tmp_path)
    assert out.program == directory / "x.standalone.py"  # the one over 90 lines is passed over, the next one taken
    (directory / "x.standalone.py").unlink()
    out = _report(rep, tmp_path)
    assert out.program is None and f"({rep.id}.standalone.py has 91 lines)" in _section(out.text, "Program")
    (tmp_path / "out").mkdir(exist_ok=True)
    (tmp_path / "out" / f"{rep.id}.min.py").write_text("import tilelang\nprint('REPRODUCED')\n")
    assert _report(rep, tmp_path).program == tmp_path / "out" / f"{rep.id}.min.py"  # a reduced program first
    assert upstream.code_lines('"""one\ntwo"""\nx = 1\n\ny = 2\n') == 3


def test_a_generated_program_is_exported_and_embedded(tmp_path, exported, monkeypatch):
    rep = _save(tmp_path)
    monkeypatch.setattr(upstream, "generated", lambda rep: True)
    out = _report(rep, tmp_path)
    assert exported == [(rep.id, tmp_path / "out" / f"{rep.id}.standalone.py")]
    assert "````python\nimport tilelang\nprint('```')\n````" in _section(out.text, "Program")  # a longer fence


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
    provenance = _section(_report(rep, tmp_path).text, "Provenance")
    assert "**First bad release: 0.1.14** (a release bisect: first bad release 0.1.14, last good 0.1.13" in provenance
    assert "steps: 0.1.10 good, 0.1.15 bad, 0.1.13 good, 0.1.14 bad" in provenance and "other" not in provenance
    paused = _state(tmp_path / "paused.json", rep, "0.1.10", "0.1.15", order, {"0.1.10": 0})
    commits = _state(tmp_path / "commits.json", rep, "a1b2c3d", "e4f5a6b", ["a1b2c3d", "9f9f9f9", "e4f5a6b"],
                     {"a1b2c3d": 0, "e4f5a6b": 1, "9f9f9f9": 1})
    provenance = _section(_report(rep, tmp_path, envs=None, states=[paused, commits]).text, "Provenance")
    assert "Bisect not finished (state " in provenance and "steps so far: 0.1.10 good; next: 0.1.15" in provenance
    assert "**Commit bisect:** first bad commit 9f9f9f9, last good a1b2c3d" in provenance


def test_with_no_triage_recorded_harness_triage_runs_here(tmp_path, exported, monkeypatch):
    rep = _save(tmp_path)
    given = 'tx = T.launch_thread("threadIdx.x", 384)\nT.fill(dq_s, 0)'
    trace = triage.Trace(passes=["pass0", "tl.ProducerConsumerWarpSpecialized"],
                         after=['tx = T.launch_thread("threadIdx.x", 256)\nT.fill(dq_s, 0)', given],
                         raised_in="tl.LowerTileOp", given=given, error=ERROR)
    monkeypatch.setattr(replay, "gpu_count", lambda: 0)
    monkeypatch.setattr(triage, "trace", lambda build: trace)
    out = _report(rep, tmp_path, env={"tilelang": "0.1.15"})
    cause = _section(out.text, "Root cause")
    assert cause.startswith(f"`harness triage {rep.id}`, run here (TileLang 0.1.15, target sm_90a):")
    for line in triage.describe(triage.find(trace, triage.script), trace):
        assert line in cause
    assert "culprit: raised in tl.LowerTileOp, input from tl.ProducerConsumerWarpSpecialized" in out.summary

    def broken(build):
        raise RuntimeError("no pass instrument in this release\nmore")

    monkeypatch.setattr(triage, "trace", broken)
    assert _section(_report(rep, tmp_path, env={"tilelang": "0.1.15"}).text, "Root cause") == \
        "Not triaged: triage failed: RuntimeError: no pass instrument in this release"
    # A triage recorded without a pass: said so, nothing run.
    rep = _save(tmp_path, id="dddddddddddd", triage=Triage(None, ()))
    assert _section(_report(rep, tmp_path).text, "Root cause") == "Not traced to a pass or a source line."


def test_a_numerical_bug_names_the_pass_that_made_its_hazard(tmp_path, exported, monkeypatch):
    rep = _save(tmp_path, NUMERIC, message="O: max error 2.86 > tolerance 0.00195 at [0, 0, 3, 1]")
    made = "for kb in range(n):\n    if kb == 0:\n        T.mbarrier_wait_parity(mbarrier[4], 0)\n    T.gemm(q_s, k_s, acc_s)"
    trace = triage.Trace(passes=["pass0", "tl.ProducerConsumerWarpSpecialized", "pass2"],
                         after=["for kb in range(n):\n    T.gemm(q_s, k_s, acc_s)", made, made], result="kernel")
    hazard = ScanFinding("unwaited_async_loads", "TMA load into q_s on mbarrier[4] waited on only inside a loop that may run "
                         "zero times")
    monkeypatch.setattr(replay, "gpu_count", lambda: 0)
    monkeypatch.setattr(triage, "trace", lambda build: trace)
    monkeypatch.setattr(worker, "scan", lambda fam, case, kernel: ((hazard,), "digest", ()))
    out = _report(rep, tmp_path, env={"tilelang": "0.1.15"})
    cause = _section(out.text, "Root cause")
    assert f"hazard: {hazard}" in cause and "unwaited_async_loads: made by pass tl.ProducerConsumerWarpSpecialized" in cause


def test_an_outside_kernel_is_not_exported_and_the_repro_command_is_given(tmp_path, exported, monkeypatch):
    rep = _save(tmp_path)
    outside = SimpleNamespace(runner=SimpleNamespace(module="example_gqa_decode.py"),
                              offer=SimpleNamespace(variants=("default",)))
    monkeypatch.setattr(upstream.kernels, "family", lambda name: outside)
    program = _section(_report(rep, tmp_path, unavailable="outside kernels need TileLang's examples").text, "Program")
    assert "TileLang's own `examples/example_gqa_decode.py`" in program and "refuses outside kernels" in program
    assert f"`harness repro {rep.id}`" in program and exported == []
    assert "`harness reduce` cannot make one" in program and "makes one" not in program  # reduce starts from an export


def test_the_command_writes_the_text_and_says_what_it_holds(tmp_path, exported, monkeypatch, capsys):
    rep = _save(tmp_path)
    monkeypatch.setattr(upstream, "environment", lambda: NOT_HERE)
    to = tmp_path / "filed" / "report.md"
    code = cli.main(["upstream", rep.id, "--dir", str(tmp_path / "reproducers"), "--to", str(to),
                     "--envs", str(tmp_path / "envs")])
    assert code == 0 and to.read_text().startswith("<!-- DRAFT") and "\n# [BUG]" in to.read_text()
    out = capsys.readouterr().out
    assert out.startswith(f"wrote {to}: draft, report: ") and "program: no program file" in out and out.count("\n") == 1
    assert cli.main(["upstream", rep.id, "--dir", str(tmp_path / "reproducers"), "--envs", str(tmp_path)]) == 0
    assert (tmp_path / "reproducers" / "upstream" / f"{rep.id}.md").is_file()


def test_a_missing_reproducer_is_one_line_and_exit_2(tmp_path):
    p = subprocess.run([sys.executable, "-m", "harness.cli", "upstream", "nope", "--dir", str(tmp_path)],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.count("\n") == 1 and p.stderr.startswith("harness upstream: no reproducer 'nope'")
    assert not (tmp_path / "upstream").exists()


# ----------------------------------------------------------------------------- the reports committed
REPORTS = sorted((ROOT / "reproducers" / "upstream").glob("*.md"))
_FIRST_BAD = re.compile(r"\*\*First bad release: (?:(?P<exact>[\w.]+)\*\*|(?:after (?P<after>[\w.]+), )?at or before "
                        r"(?P<before>[\w.]+))")


@pytest.mark.parametrize("path", REPORTS, ids=[p.stem for p in REPORTS])
def test_a_committed_report_holds_to_its_reproducer(path):
    """Its size, its title, and its provenance and workaround against the matrix, the bisects and the triage."""
    text = path.read_text()
    rep = reproducer_loading.load(reproducer_files.find(path.stem, ROOT / "reproducers"))
    assert len(text.splitlines()) <= upstream.REPORT_LINES and len(text) < upstream.ISSUE_LIMIT
    first = text.splitlines()[0]
    assert "…" not in first and (first.startswith("# [BUG][") or first.startswith("<!-- a comment for https://github.com/"))
    if upstream.known_issue(rep):
        assert upstream.known_issue(rep).url in first
    # Provenance: what it states is what the matrix and the bisects allow.
    m = _FIRST_BAD.search(text)
    assert m, "the report states no first bad release"
    matrix = {v: r.result for v, r in upstream.releases(rep).items()}
    regression = [b for b in rep.links.bisected_by if b.kind == "release" and not b.fixes]
    bad, good = m.group("exact") or m.group("before"), m.group("after") or (regression[0].last_good if regression else None)
    assert matrix.get(bad) != "not reproduced", f"{bad} is not bad in the matrix"
    if good:
        assert matrix.get(good) != "reproduced", f"{good} is bad in the matrix"
        assert Version(good) < Version(bad)
        assert not [v for v, r in matrix.items() if r == "reproduced" and Version(good) < Version(v) < Version(bad)]
    if regression:
        assert m.group("exact") == regression[0].first_bad
    else:  # a range from the matrix says how far it was narrowed: not at all, or to a commit a bisect names
        commits = [b for b in rep.links.bisected_by if b.kind == "commit" and not b.fixes]
        said = text.split("**First bad release", 1)[1].split("\n", 1)[0]
        assert (f"names {commits[0].first_bad[:9]}" if commits else "not bisected") in said, said
    if any(r == "reproduced" for v, r in matrix.items() if Version(v) < Version(bad)):
        raise AssertionError(f"the matrix has the bug before {bad}")
    # Workaround: the record's words, and every control marked a workaround named (its output is above).
    workaround = _section(text, "Workaround")
    up = rep.upstream
    for c in up.controls:
        assert (f"**{c.name}**" in workaround) == c.workaround, c.name
    assert (workaround == "None found.") == (not up.workaround and not any(c.workaround for c in up.controls))
    # Output captured, not written: each block pasted is the captured file's text, verbatim; a missing one is a
    # marked gap, and only where a GPU is needed.
    captured = ROOT / "reproducers" / "upstream" / outputs.OUTPUTS
    for control, gpu in [("", up.gpu)] + [(c.name, c.gpu) for c in up.controls]:
        command = f"python {outputs.PROGRAM_NAME}" + (f" --control {control}" if control else "")
        out = outputs.read_output(captured / outputs.output_name(rep.id, control))
        if out is not None and (out.gpu is not None or not gpu):
            assert f"`{command}` (" in text and out.text.rstrip("\n") in text, command
            assert f"Exit status {out.status}." in text
        else:
            assert gpu, f"{command}: no output captured, and it needs no GPU"
            assert f"<!-- GAP: {command} -->" in text


# ----------------------------------------------------------------------------- reports from recorded words
PROGRAM = '''"""A program for the tests."""
import sys

control = sys.argv[2] if len(sys.argv) > 2 else ""
if control == "fine":
    print("compiles")
    sys.exit(0)
print("REPRODUCED: InternalError: Layout Layout((32, 64, 1) -> (6, 384)) has errors")
sys.exit(1)
'''
WORDS = Upstream(title="[BUG][ice-on-valid-code] a fill at 384 threads", expected="it compiles",
                 observed="the fill is planned over 384 threads", cause="Read in the source: Fill::Lower.",
                 fix="predicate the tail", workaround="Use 128 threads.",
                 controls=(reproducer_model.Variant("fine", "threads=128", workaround=True),
                           reproducer_model.Variant("numbers", "run it on a GPU", gpu=True)))


def _worded(tmp_path, **facts):
    rep = _save(tmp_path, upstream=facts.pop("upstream", WORDS), **facts)
    filed = tmp_path / "reproducers" / "upstream"
    filed.mkdir(parents=True, exist_ok=True)
    (filed / f"{rep.id}.min.py").write_text(PROGRAM)
    return rep


def test_a_report_pastes_the_output_it_captured_and_marks_what_needs_a_gpu(tmp_path, exported, monkeypatch):
    monkeypatch.setattr(outputs, "gpu_here", lambda: None)
    rep = _worded(tmp_path)
    out = _report(rep, tmp_path)
    text = out.text
    assert text.startswith("# [BUG][ice-on-valid-code] a fill at 384 threads\n")
    assert "```python\n" + PROGRAM.rstrip("\n") + "\n```" in text  # the program, as the file holds it
    output = _section(text, "Output")
    assert output.startswith("`python repro.py` (on a machine without a GPU, compile-only, sm_90a, TileLang ")
    assert "REPRODUCED: InternalError: Layout Layout((32, 64, 1) -> (6, 384))" in output and "Exit status 1." in output
    controls = _section(text, "Controls")
    assert "**fine**: threads=128\n\n`python repro.py --control fine` (" in controls and "compiles\n```" in controls
    assert "<!-- GAP: python repro.py --control numbers -->" in controls and "needs an sm_90 GPU" in controls
    assert out.gaps == ["python repro.py --control numbers"]
    assert _section(text, "Workaround") == "Use 128 threads. Shown by **fine** above."
    assert _section(text, "Root cause") == "Read in the source: Fill::Lower." and "## Suggested fix" in text
    assert text.rstrip("\n").splitlines()[-1] == f"Reproducer id: {rep.id}"
    assert "harness" not in text.lower() and "```json" not in text
    # What it ran is saved, so the next report pastes the same text without running anything.
    saved = tmp_path / "reproducers" / "upstream" / "outputs" / f"{rep.id}.fine.txt"
    assert outputs.read_output(saved).text == "compiles"
    assert _report(rep, tmp_path, run=False).text == text
    # An output from a GPU machine (--outputs) fills the gap; one from a machine without a GPU does not.
    gpu_dir = tmp_path / "gpu"
    gpu_dir.mkdir()
    (gpu_dir / f"{rep.id}.numbers.txt").write_text(
        outputs.Output("no GPU here", 125, "0.1.15", gpu=None, arch="sm_90a").dumps())
    assert "<!-- GAP: python repro.py --control numbers -->" in _report(rep, tmp_path, outputs=gpu_dir, run=False).text
    (gpu_dir / f"{rep.id}.numbers.txt").write_text(
        outputs.Output("max error 876\nREPRODUCED", 1, "0.1.15", gpu="NVIDIA H100 80GB HBM3", versions="torch 2.9").dumps())
    filled = _report(rep, tmp_path, outputs=gpu_dir, run=False)
    assert filled.gaps == [] and "`python repro.py --control numbers` (NVIDIA H100 80GB HBM3, TileLang 0.1.15):" \
        in filled.text and "max error 876\nREPRODUCED\n```" in filled.text
    assert "NVIDIA H100 80GB HBM3 (torch 2.9)" in filled.text.splitlines()[2]



def test_a_pull_request_not_merged_is_a_proposed_fix(tmp_path, exported, monkeypatch):
    monkeypatch.setattr(outputs, "gpu_here", lambda: None)
    merged = Issue("tile-ai/tilelang", 2406, kind="pull", state="merged", note="the fix")
    proposed = Issue("tile-ai/tilelang", 2681, kind="pull", state="open", note="an alignment check")
    provenance = _section(_report(_worded(tmp_path, links=Links(fixed_by=(merged, proposed))), tmp_path).text,
                          "Provenance")
    assert "- **Fixed by:** [PR #2406](https://github.com/tile-ai/tilelang/pull/2406) (merged): the fix" in provenance
    assert "- **Proposed fix:** [PR #2681](https://github.com/tile-ai/tilelang/pull/2681) (open): an alignment check" \
        in provenance


def test_an_output_file_round_trips(tmp_path):
    out = outputs.Output("line 1\n\nline 3", 1, "0.1.15", gpu="NVIDIA H100", versions="torch 2.9, CUDA 12.8, Python 3.11")
    (tmp_path / "x.txt").write_text(out.dumps())
    assert outputs.read_output(tmp_path / "x.txt") == out
    (tmp_path / "y.txt").write_text("no end line\n")
    assert outputs.read_output(tmp_path / "y.txt") is None
    assert out.dumps().endswith("# exit 1 on NVIDIA H100, TileLang 0.1.15, torch 2.9, CUDA 12.8, Python 3.11\n")


def test_one_venue_from_the_typed_links(tmp_path, exported):
    directory = tmp_path / "reproducers"
    issue = Issue("tile-ai/tilelang", 2643, state="open")
    pull = Issue("tile-ai/tilelang", 3180, kind="pull", state="open")
    assert upstream.venue(_worded(tmp_path, id="aaaaaaaaaaaa"), directory).kind == "new issue"
    commented = _worded(tmp_path, id="bbbbbbbbbbbb", links=Links(tracker_issue=(issue,)))
    v = upstream.venue(commented, directory)
    assert (v.kind, v.issue, v.words()) == ("comment", issue, "comment on #2643")
    assert _report(commented, tmp_path).text.startswith(f"<!-- a comment for {issue.url} -->\n")
    tested = _worded(tmp_path, id="cccccccccccc", links=Links(tracker_issue=(pull,)))
    assert upstream.venue(tested, directory).words() == "test case for PR #3180"
    closed = _worded(tmp_path, id="dddddddddddd", links=Links(tracker_issue=(dataclasses.replace(issue, state="closed"),)))
    assert upstream.venue(closed, directory).kind == "new issue"
    gone = _worded(tmp_path, id="eeeeeeeeeeee", upstream=Upstream(withdrawn="Reads shared memory before writing it. More."))
    assert upstream.venue(gone, directory).words() == "withdrawn: Reads shared memory before writing it"
    folded = _save(tmp_path, id="ffffffffffff", links=Links(same_root_cause_as=(Sibling("bbbbbbbbbbbb"),)))
    assert upstream.venue(folded, directory).words() == "in bbbbbbbbbbbb's report"
    # The index's "ready" column says the venue, and "not ready" while a GPU output is missing or it is on hold.
    for rep in (commented, tested):
        (directory / "upstream" / f"{rep.id}.md").write_text(_report(rep, tmp_path).text)
    index = reproducer_index.render(directory)
    assert "| comment on #2643, not ready: GPU output missing |" in index
    assert "| withdrawn: Reads shared memory before writing it |" in index
    held = dataclasses.replace(commented, upstream=dataclasses.replace(WORDS, hold="read #1714 first"))
    reproducer_files.save(held, directory)
    assert "not ready: GPU output missing; on hold: read #1714 first |" in reproducer_index.render(directory)
