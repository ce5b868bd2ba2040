"""Bisect on the CPU: releases (ordering, pins, resume, report), commits and the release matrix
(the search alone: test_bisect_search.py)."""
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from packaging.version import Version

from harness import reproducer_building, reproducer_files, reproducer_loading
from harness.bisect import BisectError, Pending, environments, matrix, steps
from harness.case import Case, to_json
from harness.result import Result
from harness.status import GOOD, SKIP, Status

REPRODUCED, NOT_REPRODUCED = Status.REPRODUCED, Status.NOT_REPRODUCED

RELEASES = [Version(v) for v in ("0.1.6.post2", "0.1.7", "0.1.7.post3", "0.1.8", "0.1.10", "0.1.12", "0.1.15")]


def test_releases_between_endpoints_in_search_order():
    assert [str(v) for v in environments.between(RELEASES, "0.1.7.post3", "0.1.12")] == ["0.1.7.post3", "0.1.8", "0.1.10",
                                                                                  "0.1.12"]
    # --good newer than --bad: where a bug was fixed, walked from the good side.
    assert [str(v) for v in environments.between(RELEASES, "0.1.15", "0.1.10")] == ["0.1.15", "0.1.12", "0.1.10"]
    with pytest.raises(BisectError, match="--bad 0.1.9 is not a TileLang release; known: 0.1.6.post2, 0.1.7"):
        environments.between(RELEASES, "0.1.7", "0.1.9")
    with pytest.raises(BisectError, match="--good 'latest' is not a version"):
        environments.between(RELEASES, "latest", "0.1.9")
    with pytest.raises(BisectError, match="same release"):
        environments.between(RELEASES, "0.1.8", "0.1.8")


def test_offline_releases_come_from_a_wheel_directory(tmp_path):
    for v in ("0.1.12", "0.1.6.post2", "0.1.10"):
        (tmp_path / f"tilelang-{v}-cp38-abi3-manylinux_2_28_x86_64.whl").write_bytes(b"")
    (tmp_path / "torch-2.13.0-cp311-none-any.whl").write_bytes(b"")
    assert [str(v) for v in environments.available(tmp_path)] == ["0.1.6.post2", "0.1.10", "0.1.12"]


def wheel(tmp_path, requires):
    path = tmp_path / "tilelang-0.1.10-cp38-abi3-manylinux_2_28_x86_64.whl"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("tilelang-0.1.10.dist-info/METADATA",
                   "Name: tilelang\n" + "".join(f"Requires-Dist: {r}\n" for r in requires))
    return path


def test_requirements_are_pinned_as_the_release_was_built(tmp_path):
    w = wheel(tmp_path, ["apache-tvm-ffi>=0.1.6,~=0.1.0", "z3-solver<4.15.5,>=4.13.0", "torch", "pytest>=1",
                         "no-such-package-xyz>=2.0", "cffi>=1.0; extra == 'dev'", "pywin32; sys_platform == 'win32'"])
    assert environments.requirements(w) == ["apache-tvm-ffi==0.1.6", "z3-solver<4.15.5,>=4.13.0", "no-such-package-xyz==2.0"]


class FakeReleases(environments.Releases):
    def ensure(self, version):
        if str(version) == "0.1.8":
            return None, "tilelang 0.1.8 does not install: no wheel for this platform"
        self.path(version).mkdir(parents=True, exist_ok=True)
        return self.path(version), ""


@pytest.fixture
def reproducer(tmp_path):
    r = Result.of(Case(seqlen_q=130, seqlen_k=77, causal=True), "COMPILE_ERROR", "compile", "InternalError: boom")
    return reproducer_building.write(r, {"tilelang": "0.1.15"}, tmp_path / "reproducers")


def test_an_interrupted_bisect_resumes_from_its_state_file(tmp_path, reproducer, monkeypatch):
    replays = []

    def replay_in(target, rep, runs, logs, fresh=False, examples=None):
        version = target.name.split("-", 1)[1]
        replays.append(version)
        if len(replays) == 3 and not getattr(replay_in, "resumed", False):
            raise KeyboardInterrupt  # killed in the middle of the third step
        bad = Version(version) >= Version("0.1.10")
        return (REPRODUCED, "REPRODUCED: 1/1 runs fail") if bad else (NOT_REPRODUCED, "NOT REPRODUCED: 1/1 runs COMPILED")

    monkeypatch.setattr(environments, "replay_in", replay_in)
    state = tmp_path / "state.json"

    def start(**kw):
        return steps.Bisect(reproducer, "0.1.6.post2", "0.1.15", FakeReleases(tmp_path / "envs"), state,
                             log=lambda line: None, **kw)

    with pytest.raises(KeyboardInterrupt):
        start().run(environments.between(RELEASES, "0.1.6.post2", "0.1.15"))
    # The endpoints and the skipped 0.1.8 were saved; the step killed mid-way (0.1.7.post3) was not.
    saved = json.loads(state.read_text())
    assert set(saved["steps"]) == {"0.1.6.post2", "0.1.15", "0.1.8"}
    assert saved["kind"] == "release"  # what it bisects, said, not guessed from the steps' names
    replay_in.resumed = True
    text = start().run(environments.between(RELEASES, "0.1.6.post2", "0.1.15"))
    assert replays[:2] == ["0.1.6.post2", "0.1.15"] and "0.1.6.post2" not in replays[3:]  # nothing tested twice
    assert "**Regression: first bad release 0.1.10, last good 0.1.7.post3.**" in text
    assert "harness bisect" in text and "| release | result | evidence | seconds |" in text
    with pytest.raises(BisectError, match="holds another bisect"):
        start(runs=3)
    with pytest.raises(BisectError, match="holds another bisect"):
        start(fresh=True)


def test_a_fresh_bisect_compiles_afresh_in_every_step_and_says_so(tmp_path, reproducer, monkeypatch):
    seen = []
    monkeypatch.setattr(environments, "replay_in", lambda target, rep, runs, logs, fresh=False: (
        seen.append(fresh) or ((REPRODUCED, "REPRODUCED") if target.name.endswith("0.1.6.post2")
                               else (NOT_REPRODUCED, "NOT REPRODUCED"))))
    text = steps.Bisect(reproducer, "0.1.15", "0.1.6.post2", FakeReleases(tmp_path / "envs"), tmp_path / "s.json", runs=4,
                        fresh=True, log=lambda line: None).run(environments.between(RELEASES, "0.1.6.post2", "0.1.15")[::-1])
    assert seen and all(seen)
    assert "--runs 4 --fresh" in text and "each replayed 4 time(s) (a compile each)" in text
    # The step itself: a fresh replay asked of harness.bisect.inside in the release's environment, its answer typed.
    calls = []
    monkeypatch.undo()  # the real replay_in, over a fake subprocess.run
    monkeypatch.setattr(environments.subprocess, "run", lambda cmd, **kw: calls.append((cmd, kw)) or
                        subprocess.CompletedProcess(cmd, GOOD, json.dumps(
                            {"status": "not reproduced", "verdict": "NOT REPRODUCED: 4/4 runs COMPILED",
                             "now": ["COMPILED"]}) + "\n", "a log line\n"))
    assert environments.replay_in(tmp_path, reproducer, 4, tmp_path / "logs", fresh=True) == (
        NOT_REPRODUCED, "NOT REPRODUCED: 4/4 runs COMPILED | COMPILED")
    cmd, kw = calls[-1]
    assert cmd[1:] == ["-m", "harness.bisect.inside"] and str(tmp_path) in kw["env"]["PYTHONPATH"].split(os.pathsep)
    assert json.loads(kw["input"]) == {"request": "replay", "reproducer": str(reproducer), "runs": 4,
                                       "logs": str(tmp_path / "logs"), "fresh": True, "examples": None}
    # A step that answered nothing (it died first), or could not read its input, is a bisect error, not a verdict.
    monkeypatch.setattr(environments.subprocess, "run", lambda cmd, **kw: subprocess.CompletedProcess(cmd, 1, "", "boom"))
    with pytest.raises(BisectError, match="gave no JSON answer .exit 1.: boom"):
        environments.replay_in(tmp_path, reproducer, 1, tmp_path / "logs")
    monkeypatch.setattr(environments.subprocess, "run", lambda cmd, **kw: subprocess.CompletedProcess(
        cmd, 0, '{"error": "no reproducer here"}\n', ""))
    with pytest.raises(BisectError, match="cannot run: no reproducer here"):
        environments.replay_in(tmp_path, reproducer, 1, tmp_path / "logs")


def test_a_fix_is_reported_as_a_fix(tmp_path, reproducer, monkeypatch):
    monkeypatch.setattr(environments, "replay_in", lambda target, rep, runs, logs, fresh=False: (
        (NOT_REPRODUCED, "NOT REPRODUCED") if Version(target.name.split("-", 1)[1]) >= Version("0.1.12")
        else (REPRODUCED, "REPRODUCED")))
    b = steps.Bisect(reproducer, "0.1.15", "0.1.7", FakeReleases(tmp_path / "envs"), tmp_path / "s.json",
                      log=lambda line: None)
    text = b.run(environments.between(RELEASES, "0.1.15", "0.1.7"))
    assert "**Fixed in 0.1.12; the last release with the bug is 0.1.10.**" in text


def test_regress_signature_counts_another_bug_as_good(tmp_path, reproducer, monkeypatch):
    """Before 0.1.12 the program fails with another error (another bug hides this one): by default the good end
    is not good, and the error says what to do; with --regress signature only the recorded bug is bad."""
    def replay_in(target, rep, runs, logs, fresh=False):
        v = Version(target.name.split("-", 1)[1])
        return ((Status.REPRODUCED, "REPRODUCED") if v >= Version("0.1.12") else
                (Status.FAILS_DIFFERENTLY, "REPRODUCED: 1/1 runs fail; signature differs"))
    monkeypatch.setattr(environments, "replay_in", replay_in)
    order = environments.between(RELEASES, "0.1.7", "0.1.15")
    b = steps.Bisect(reproducer, "0.1.7", "0.1.15", FakeReleases(tmp_path / "any"), tmp_path / "failure.json",
                     log=lambda line: None)
    with pytest.raises(BisectError, match="0.1.7 fails with another signature .* --regress signature counts that"):
        b.run(order)
    b = steps.Bisect(reproducer, "0.1.7", "0.1.15", FakeReleases(tmp_path / "only"), tmp_path / "signature.json",
                     regress="signature", log=lambda line: None)
    text = b.run(order)
    assert "**Regression: first bad release 0.1.12, last good 0.1.10.**" in text, text
    assert "counted good (--regress signature)" in text and "--regress signature" in text.split("Rerun:")[1]
    with pytest.raises(BisectError, match="holds another bisect"):  # a state file belongs to one way of counting
        steps.Bisect(reproducer, "0.1.7", "0.1.15", FakeReleases(tmp_path / "x"), tmp_path / "signature.json")


class OneRelease(environments.Releases):
    """A machine that holds one unpacked release and reaches no package index."""
    here = None

    def ensure(self, version):
        if str(version) != self.here:
            raise Pending(f"tilelang {version} is not here")
        return self.path(version), ""

    def at_hand(self, version):
        return str(version) == self.here


def test_a_bisect_continues_one_release_per_machine_from_its_state_file(tmp_path, reproducer, monkeypatch):
    """Each machine holds one release: the bisect tests what it can, pauses, and the next machine,
    with no index, walks the saved order from the saved steps. The fix lies between 0.1.12 and 0.1.15."""
    tested = []

    def replay_in(target, rep, runs, logs, fresh=False, examples=None):
        version = target.name.split("-", 1)[1]
        tested.append(version)
        return (NOT_REPRODUCED, "NOT REPRODUCED") if version == "0.1.15" else (REPRODUCED, "REPRODUCED")

    monkeypatch.setattr(environments, "replay_in", replay_in)
    state, releases = tmp_path / "state.json", OneRelease(tmp_path / "envs")
    first = steps.Bisect(reproducer, "0.1.15", "0.1.10", releases, state, log=lambda line: None)
    releases.here = "0.1.10"  # the bad endpoint, though the search would start with the good one
    with pytest.raises(Pending, match="0.1.15 is not here"):
        first.run(environments.between(RELEASES, "0.1.15", "0.1.10"))
    saved = json.loads(state.read_text())
    assert saved["order"] == ["0.1.15", "0.1.12", "0.1.10"] and list(saved["steps"]) == ["0.1.10"]
    for here in ("0.1.15", "0.1.12"):
        releases.here = here
        b = steps.Bisect(reproducer, "0.1.15", "0.1.10", releases, state, log=lambda line: None)
        assert b.order == saved["order"]
        try:
            text = b.run()
        except Pending:
            continue
    assert tested == ["0.1.10", "0.1.15", "0.1.12"]  # each release tested once, where it was
    assert "**Fixed in 0.1.15; the last release with the bug is 0.1.12.**" in text


def test_a_numerical_bisect_pauses_on_a_machine_without_a_gpu(tmp_path, monkeypatch, capsys):
    from harness import cli

    r = Result.of(Case(seqlen_q=130, seqlen_k=77), "MISMATCH", "judge", "O: max error 1 > tolerance 0.01")
    rep = reproducer_building.write(r, {"tilelang": "0.1.12"}, tmp_path / "reproducers")
    monkeypatch.setattr(steps, "gpu_count", lambda: 0)
    (tmp_path / "wheels").mkdir()
    for v in ("0.1.12", "0.1.14", "0.1.15"):
        (tmp_path / "wheels" / f"tilelang-{v}-cp38-abi3-manylinux_2_28_x86_64.whl").write_bytes(b"")
    state = tmp_path / "b.json"
    argv = ["bisect", str(rep), "--good", "0.1.15", "--bad", "0.1.12", "--wheels", str(tmp_path / "wheels"),
            "--envs", str(tmp_path / "envs"), "--state", str(state)]
    assert cli.main(argv) == 3
    err = capsys.readouterr().err
    assert "paused: the reproducer is numerical and this machine has no GPU" in err and "steps so far: none" in err
    assert json.loads(state.read_text())["order"] == ["0.1.15", "0.1.14", "0.1.12"]  # planned: the GPU machine needs no index


def test_bad_versions_are_one_line_errors(tmp_path, reproducer, capsys):
    from harness import cli

    (tmp_path / "wheels").mkdir()
    for v in ("0.1.10", "0.1.15"):
        (tmp_path / "wheels" / f"tilelang-{v}-cp38-abi3-manylinux_2_28_x86_64.whl").write_bytes(b"")
    common = ["--wheels", str(tmp_path / "wheels"), "--envs", str(tmp_path / "envs")]
    assert cli.main(["bisect", str(reproducer), "--good", "0.1.10", "--bad", "0.1.99", *common]) == 2
    err = capsys.readouterr().err
    assert err == "harness bisect: --bad 0.1.99 is not a TileLang release; known: 0.1.10, 0.1.15\n"
    assert cli.main(["matrix", "--releases", "0.1.10,0.1.99", "--dir", str(reproducer.parent), *common]) == 2
    assert capsys.readouterr().err == "harness matrix: not TileLang releases: 0.1.99\n"
    assert not (tmp_path / "envs").exists() or not any((tmp_path / "envs").glob("tilelang-*"))  # nothing installed


MAKE_WHEEL = '''
import base64, hashlib, os, pathlib, zipfile
if pathlib.Path("BROKEN").exists():
    raise SystemExit("error: this commit does not compile")
bug = pathlib.Path("bug.txt").read_text().strip()
files = {"tilelang/__init__.py": f"BUG = {bug!r}\\n",
         "tilelang-0.0.1.dist-info/METADATA": "Metadata-Version: 2.1\\nName: tilelang\\nVersion: 0.0.1\\n",
         "tilelang-0.0.1.dist-info/WHEEL": "Wheel-Version: 1.0\\nGenerator: t\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n"}
record = "".join(f"{n},sha256={base64.urlsafe_b64encode(hashlib.sha256(t.encode()).digest()).rstrip(b'=').decode()},"
                 f"{len(t.encode())}\\n" for n, t in files.items()) + "tilelang-0.0.1.dist-info/RECORD,,\\n"
files["tilelang-0.0.1.dist-info/RECORD"] = record
with zipfile.ZipFile(pathlib.Path(os.environ["HARNESS_WHEEL_DIR"]) / "tilelang-0.0.1-py3-none-any.whl", "w") as z:
    for n, t in files.items():
        z.writestr(n, t)
'''


def git(repo, *args):
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout.strip()


@pytest.fixture
def repo(tmp_path):
    """Six first-parent commits: the bug arrives in the fifth; the third does not build."""
    r = tmp_path / "tilelang-src"
    r.mkdir()
    git(r, "init", "-q", "-b", "main")
    (r / "make_wheel.py").write_text(MAKE_WHEEL)
    shas = []
    for i, (bug, broken) in enumerate([("no", 0), ("no", 0), ("no", 1), ("no", 0), ("yes", 0), ("yes", 0)]):
        (r / "bug.txt").write_text(bug)
        (r / "version.txt").write_text(str(i))
        (r / "BROKEN").unlink(missing_ok=True)
        if broken:
            (r / "BROKEN").write_text("")
        git(r, "add", "-A")
        git(r, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", f"commit {i}")
        shas.append(git(r, "rev-parse", "HEAD"))
    return r, shas


def by_build(target, rep, runs, logs, fresh=False):
    """Stands for `harness repro` in the built tree: bad where the built package has the bug."""
    text = (target / "tilelang" / "__init__.py").read_text()
    return (REPRODUCED, "REPRODUCED: 1/1 runs fail") if "yes" in text else (NOT_REPRODUCED, "NOT REPRODUCED: 1/1 runs COMPILED")


def test_commit_bisect_builds_each_commit_once_and_skips_what_does_not_build(tmp_path, repo, reproducer, monkeypatch):
    r, shas = repo
    monkeypatch.setattr(environments, "replay_in", by_build)
    commits = environments.Commits(tmp_path / "envs", r, f"{sys.executable} make_wheel.py")
    order = commits.order(shas[0], "main")
    assert order == shas
    b = steps.Bisect(reproducer, shas[0], "main", commits, tmp_path / "state.json", log=lambda line: None)
    text = b.run(order)
    assert f"**Regression: first bad commit {shas[4]}, last good {shas[3]}.**" in text
    assert "across TileLang commits" in text
    # The rerun line puts the first bad commit's install, the directory its build imports from, on the path.
    site = tmp_path / "envs" / "commits" / shas[4] / "site"
    assert f"PYTHONPATH={site} harness repro" in text and (site / "tilelang" / "__init__.py").exists()
    assert "does not build (status 1): error: this commit does not compile" in (tmp_path / "envs" / "commits" /
                                                                                 shas[2] / "build-failed.txt").read_text()
    # The build cache is keyed by commit: a second bisect builds nothing.
    again = environments.Commits(tmp_path / "envs", r, "false")  # a build command that would fail everywhere
    text2 = steps.Bisect(reproducer, shas[0], "main", again, tmp_path / "state2.json", log=lambda line: None).run(
        again.order(shas[0], "main"))
    assert again.installs == [] and f"first bad commit {shas[4]}" in text2
    # Endpoints named by refs rather than shas read the same.
    by_ref = steps.Bisect(reproducer, "main~5", "main", commits, tmp_path / "state3.json", log=lambda line: None)
    assert f"**Regression: first bad commit {shas[4]}" in by_ref.run(commits.order("main~5", "main"))
    # The other direction: where it was fixed, walked back from the newer good end.
    assert commits.order("main", shas[0]) == shas[::-1]


def test_commit_mode_is_a_git_bisect_run_script(tmp_path, repo, reproducer):
    """`git bisect run harness bisect REPRO --repo . --build CMD --at HEAD`: exit 0/1/125 per commit."""
    r, shas = repo
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parent))
    said = {}
    for sha in (shas[2], shas[5]):
        p = subprocess.run([sys.executable, "-m", "harness.cli", "bisect", str(reproducer), "--repo", str(r),
                            "--build", f"{sys.executable} make_wheel.py", "--at", sha, "--envs", str(tmp_path / "envs")],
                           capture_output=True, text=True, env=env, timeout=600)
        said[sha] = (p.returncode, p.stdout.strip())
    # A commit that does not build is a skip. One that builds is replayed in its own tree: the
    # stand-in package there has no tilelang.language, so the replay fails on our side: a skip too,
    # never "bad", and it says so.
    log = tmp_path / "envs" / "commits" / shas[2] / "build.log"
    assert said[shas[2]] == (SKIP, f"CANNOT TEST: commit {shas[2][:12]} does not build (status 1): "
                                   f"error: this commit does not compile (log: {log})")
    assert "error: this commit does not compile" in log.read_text()  # the build's whole output is kept
    assert said[shas[5]][0] == SKIP and said[shas[5]][1].startswith("CANNOT TEST: HARNESS_ERROR (compile)")
    assert "No module named 'tilelang.language'" in said[shas[5]][1]
    assert (tmp_path / "envs" / "commits" / shas[5] / "site" / "tilelang" / "__init__.py").read_text() == "BUG = 'yes'\n"


def test_a_cases_file_runs_on_every_release_and_its_verdicts_are_counted(tmp_path, monkeypatch, capsys):
    from harness import cli

    cases = tmp_path / "cases.jsonl"
    cases.write_text("".join(to_json(c) + "\n" for c in (Case(), Case(seed=1))))
    ran = []

    def campaign_in(target, path, out, examples=None):
        ran.append((target.name, path, out.name))
        return "COMPILED 2" if target.name != "tilelang-0.1.12" else "COMPILE_ERROR 1, COMPILED 1"
    monkeypatch.setattr(environments, "campaign_in", campaign_in)
    text = matrix.cases_matrix(cases, [Version("0.1.8"), Version("0.1.12"), Version("0.1.15")],
                               FakeReleases(tmp_path / "envs"), tmp_path / "out", log=lambda line: None)
    assert text.splitlines()[:5] == ["| release | verdicts |", "|---|---|",
                                     "| 0.1.8 | cannot test: tilelang 0.1.8 does not install: no wheel for this platform |",
                                     "| 0.1.12 | COMPILE_ERROR 1, COMPILED 1 |", "| 0.1.15 | COMPILED 2 |"]
    assert ran == [("tilelang-0.1.12", cases, "tilelang-0.1.12"), ("tilelang-0.1.15", cases, "tilelang-0.1.15")]
    # A cases file that does not load is a one-line error before anything is installed.
    (tmp_path / "wheels").mkdir()
    (tmp_path / "wheels" / "tilelang-0.1.15-cp38-abi3-manylinux_2_28_x86_64.whl").write_bytes(b"")
    cases.write_text(to_json(Case(heads=3, kv_heads=2)) + "\n")
    assert cli.main(["matrix", "--releases", "0.1.15", "--cases-from", str(cases), "--wheels", str(tmp_path / "wheels"),
                     "--envs", str(tmp_path / "envs2")]) == 2
    assert capsys.readouterr().err.startswith(f"harness matrix: {cases} line 1: heads (3) must be a multiple")
    assert not (tmp_path / "envs2").exists()


def test_a_campaign_in_a_release_answers_its_verdicts_counted(tmp_path, monkeypatch):
    from harness.bisect import inside

    # The step in the release's environment: a campaign asked of harness.bisect.inside, its answer typed.
    answers = iter([{"exit": 1, "verdicts": {"COMPILED": 1, "COMPILE_ERROR": 2}}, {"exit": 125, "verdicts": {}}])
    monkeypatch.setattr(environments.subprocess, "run", lambda cmd, **kw: subprocess.CompletedProcess(
        cmd, 0, json.dumps(next(answers)) + "\n", "harness run: cannot test here: tilelang 0.1.8\n"))
    assert environments.campaign_in(tmp_path, tmp_path / "c.jsonl", tmp_path / "out") == "COMPILED 1, COMPILE_ERROR 2"
    assert environments.campaign_in(tmp_path, tmp_path / "c.jsonl", tmp_path / "out") == (
        "cannot test (exit 125): harness run: cannot test here: tilelang 0.1.8")
    # The real entry point, in this environment: a cases file that is not there is said, not a traceback.
    monkeypatch.undo()
    assert environments.campaign_in(tmp_path, tmp_path / "none.jsonl", tmp_path / "out") == (
        f"cannot test: {tmp_path / 'none.jsonl'}: cannot read: No such file or directory")
    assert inside.answer({"request": "bisect"}) == {"error": "no such request 'bisect': one of replay, campaign"}


def test_the_cases_matrix_names_each_failing_case_and_the_releases_it_fails_on(tmp_path):
    runs = {}
    for v, verdicts in (("0.1.10", ("MISMATCH", "PASS", "OOB_WRITE", "PASS", "PASS")),
                        ("0.1.12", ("MISMATCH", "PASS", "PASS", "CRASH", "MISMATCH")),
                        ("0.1.15", ("MISMATCH", "PASS", "PASS", "CRASH", "PASS"))):
        runs[v] = tmp_path / v / "results.jsonl"
        runs[v].parent.mkdir()
        runs[v].write_text("".join(json.dumps(Result.of(Case(seed=i), verdict, "judge").replace(case_id=f"c{i}").to_dict())
                                   + "\n" for i, verdict in enumerate(verdicts)))
    runs["0.1.14"] = tmp_path / "missing" / "results.jsonl"   # a release that could not run
    lines = matrix.per_case(runs).splitlines()
    assert lines[:5] == ["| case | 0.1.10 | 0.1.12 | 0.1.15 | 0.1.14 |", "|---|---|---|---|---|",
                         "| c0 | MISMATCH | MISMATCH | MISMATCH | - |", "| c2 | OOB_WRITE | PASS | PASS | - |",
                         "| c3 | PASS | CRASH | CRASH | - |"]
    assert lines[5] == "| c4 | PASS | MISMATCH | PASS | - |"
    assert lines[-1] == ("4 of 5 cases fail on some release: 1 everywhere, 1 fixed since, 1 broken since, "
                         "1 back and forth")


def test_the_matrix_replays_reproducers_in_parallel_and_needs_no_index_for_releases_at_hand(tmp_path, monkeypatch,
                                                                                                capsys):
    from harness import cli

    reps = [reproducer_building.write(Result.of(Case(seqlen_q=130, seqlen_k=77), "COMPILE_ERROR", "compile", message),
                         {"tilelang": "0.1.15"}, tmp_path / "reproducers") for message in ("InternalError", "ValueError")]
    for v in ("0.1.12", "0.1.15"):
        (tmp_path / "envs" / f"tilelang-{v}").mkdir(parents=True)
        (tmp_path / "envs" / f"tilelang-{v}" / ".complete").write_text("")
    monkeypatch.setattr(environments, "available", lambda wheels: pytest.fail("the index was asked"))
    def replay_in(target, rep, runs, logs, fresh=False, examples=None):
        if target.name.endswith("0.1.15"):
            if rep == reps[1]:
                return REPRODUCED, "REPRODUCED: 1/1 runs fail; signature matches in 1/1 runs"
            return Status.FAILS_DIFFERENTLY, "REPRODUCED: 1/1 runs fail; signature differs"
        return NOT_REPRODUCED, "NOT REPRODUCED"

    monkeypatch.setattr(environments, "replay_in", replay_in)
    assert cli.main(["matrix", "--releases", "0.1.15,0.1.12", "--jobs", "2", "--dir", str(tmp_path / "reproducers"),
                     "--envs", str(tmp_path / "envs")]) == 0
    table = capsys.readouterr().out
    ids = [reproducer_loading.load(p).id for p in reps]
    assert "| reproducer | 0.1.12 | 0.1.15 |" in table
    assert f"| {ids[0]} | not reproduced | fails differently |" in table
    assert f"| {ids[1]} | not reproduced | **REPRODUCED** |" in table


def test_the_matrix_replays_the_reproducers_of_every_group(tmp_path, monkeypatch, capsys):
    from dataclasses import replace

    from harness import cli

    flat = [reproducer_building.write(Result.of(Case(seqlen_q=130, seqlen_k=77), "COMPILE_ERROR", "compile", message),
                         {"tilelang": "0.1.15"}, tmp_path / "flat") for message in ("InternalError", "ValueError")]
    reps = [replace(reproducer_loading.load(flat[0]), kind="compiler"), replace(reproducer_loading.load(flat[1]), kind="example")]
    (tmp_path / "reproducers" / "compiler").mkdir(parents=True)  # a folder of groups, as reproducers/ is
    for rep in reps:
        reproducer_files.save(rep, tmp_path / "reproducers")
    assert not list((tmp_path / "reproducers").glob("*.json"))
    (tmp_path / "envs" / "tilelang-0.1.15").mkdir(parents=True)
    (tmp_path / "envs" / "tilelang-0.1.15" / ".complete").write_text("")
    monkeypatch.setattr(environments, "replay_in", lambda target, rep, runs, logs, fresh=False, examples=None:
                        (NOT_REPRODUCED, "NOT REPRODUCED"))
    assert cli.main(["matrix", "--releases", "0.1.15", "--dir", str(tmp_path / "reproducers"),
                     "--envs", str(tmp_path / "envs")]) == 0
    table = capsys.readouterr().out
    assert all(f"| {rep.id} | not reproduced |" in table for rep in reps), table
