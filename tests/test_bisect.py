"""Release bisect on the CPU: ordering, the search with skips, pins, resume, the report."""
import json
import zipfile

import pytest
from packaging.version import Version

from harness import bisect, record
from harness.bisect import BAD, GOOD, SKIP, BisectError
from harness.case import Case
from harness.oracle import result

RELEASES = [Version(v) for v in ("0.1.6.post2", "0.1.7", "0.1.7.post3", "0.1.8", "0.1.10", "0.1.12", "0.1.15")]


def test_releases_between_endpoints_in_search_order():
    assert [str(v) for v in bisect.between(RELEASES, "0.1.7.post3", "0.1.12")] == ["0.1.7.post3", "0.1.8", "0.1.10",
                                                                                  "0.1.12"]
    # --good newer than --bad: where a bug was fixed, walked from the good side.
    assert [str(v) for v in bisect.between(RELEASES, "0.1.15", "0.1.10")] == ["0.1.15", "0.1.12", "0.1.10"]
    with pytest.raises(BisectError, match="--bad 0.1.9 is not a TileLang release; known: 0.1.6.post2, 0.1.7"):
        bisect.between(RELEASES, "0.1.7", "0.1.9")
    with pytest.raises(BisectError, match="--good 'latest' is not a version"):
        bisect.between(RELEASES, "latest", "0.1.9")
    with pytest.raises(BisectError, match="same release"):
        bisect.between(RELEASES, "0.1.8", "0.1.8")


def test_offline_releases_come_from_a_wheel_directory(tmp_path):
    for v in ("0.1.12", "0.1.6.post2", "0.1.10"):
        (tmp_path / f"tilelang-{v}-cp38-abi3-manylinux_2_28_x86_64.whl").write_bytes(b"")
    (tmp_path / "torch-2.13.0-cp311-none-any.whl").write_bytes(b"")
    assert [str(v) for v in bisect.available(tmp_path)] == ["0.1.6.post2", "0.1.10", "0.1.12"]


def statuses(table):
    calls = []

    def test(version):
        calls.append(str(version))
        return table[str(version)]
    return test, calls


def test_search_finds_the_first_bad_release_in_few_steps():
    order = [str(v) for v in RELEASES]
    test, calls = statuses({v: GOOD if Version(v) < Version("0.1.10") else BAD for v in order})
    lo, hi, skipped = bisect.search(order, test)
    assert (order[lo], order[hi], skipped) == ("0.1.8", "0.1.10", [])
    assert calls[:2] == ["0.1.6.post2", "0.1.15"] and len(calls) <= 2 + 3  # endpoints first, then log2


def test_search_steps_around_untestable_releases():
    order = [str(v) for v in RELEASES]
    table = {v: GOOD if Version(v) < Version("0.1.10") else BAD for v in order}
    table["0.1.8"] = table["0.1.7.post3"] = SKIP  # e.g. does not import here
    lo, hi, skipped = bisect.search(order, statuses(table)[0])
    assert (order[lo], order[hi]) == ("0.1.7", "0.1.10") and [order[i] for i in skipped] == ["0.1.7.post3", "0.1.8"]


def test_endpoints_are_checked_first():
    order = ["a", "b", "c"]
    with pytest.raises(BisectError, match="--good a is not good here"):
        bisect.search(order, statuses({"a": BAD, "c": BAD})[0])
    with pytest.raises(BisectError, match="--bad c is not bad here .status 125"):
        bisect.search(order, statuses({"a": GOOD, "c": SKIP})[0])


def wheel(tmp_path, requires):
    path = tmp_path / "tilelang-0.1.10-cp38-abi3-manylinux_2_28_x86_64.whl"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("tilelang-0.1.10.dist-info/METADATA",
                   "Name: tilelang\n" + "".join(f"Requires-Dist: {r}\n" for r in requires))
    return path


def test_requirements_are_pinned_as_the_release_was_built(tmp_path):
    w = wheel(tmp_path, ["apache-tvm-ffi>=0.1.6,~=0.1.0", "z3-solver<4.15.5,>=4.13.0", "torch", "pytest>=1",
                         "no-such-package-xyz>=2.0", "cffi>=1.0; extra == 'dev'", "pywin32; sys_platform == 'win32'"])
    assert bisect.requirements(w) == ["apache-tvm-ffi==0.1.6", "z3-solver<4.15.5,>=4.13.0", "no-such-package-xyz==2.0"]


class FakeReleases(bisect.Releases):
    def ensure(self, version):
        if str(version) == "0.1.8":
            return None, "tilelang 0.1.8 does not install: no wheel for this platform"
        self.path(version).mkdir(parents=True, exist_ok=True)
        return self.path(version), ""


@pytest.fixture
def reproducer(tmp_path):
    r = result(Case(seqlen_q=130, seqlen_k=77, causal=True), "COMPILE_ERROR", "compile", "InternalError: boom")
    return record.write(r, {"tilelang": "0.1.15"}, tmp_path / "reproducers")


def test_an_interrupted_bisect_resumes_from_its_state_file(tmp_path, reproducer, monkeypatch):
    replays = []

    def replay_in(target, rep, runs, logs):
        version = target.name.split("-", 1)[1]
        replays.append(version)
        if len(replays) == 3 and not getattr(replay_in, "resumed", False):
            raise KeyboardInterrupt  # killed in the middle of the third step
        bad = Version(version) >= Version("0.1.10")
        return (BAD, "REPRODUCED: 1/1 runs fail") if bad else (GOOD, "NOT REPRODUCED: 1/1 runs COMPILED")

    monkeypatch.setattr(bisect, "replay_in", replay_in)
    state = tmp_path / "state.json"

    def start(**kw):
        return bisect.Bisect(reproducer, "0.1.6.post2", "0.1.15", FakeReleases(tmp_path / "envs"), state,
                             log=lambda line: None, **kw)

    with pytest.raises(KeyboardInterrupt):
        start().run(RELEASES)
    # The endpoints and the skipped 0.1.8 were saved; the step killed mid-way (0.1.7.post3) was not.
    assert set(json.loads(state.read_text())["steps"]) == {"0.1.6.post2", "0.1.15", "0.1.8"}
    replay_in.resumed = True
    text = start().run(RELEASES)
    assert replays[:2] == ["0.1.6.post2", "0.1.15"] and "0.1.6.post2" not in replays[3:]  # nothing tested twice
    assert "**Regression: first bad release 0.1.10, last good 0.1.7.post3.**" in text
    assert "harness bisect" in text and "| release | result | evidence | seconds |" in text
    with pytest.raises(BisectError, match="holds another bisect"):
        start(runs=3)


def test_a_fix_is_reported_as_a_fix(tmp_path, reproducer, monkeypatch):
    monkeypatch.setattr(bisect, "replay_in", lambda target, rep, runs, logs: (
        (GOOD, "NOT REPRODUCED") if Version(target.name.split("-", 1)[1]) >= Version("0.1.12") else (BAD, "REPRODUCED")))
    b = bisect.Bisect(reproducer, "0.1.15", "0.1.7", FakeReleases(tmp_path / "envs"), tmp_path / "s.json",
                      log=lambda line: None)
    text = b.run(RELEASES)
    assert "**Fixed in 0.1.12; the last release with the bug is 0.1.10.**" in text


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
