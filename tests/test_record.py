"""Reproducer files: round trip, strict loading, dedupe, the groups and their test, `harness repro` exit codes."""
import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness import (
    campaign,
    cli,
    oracle,
    reproducer_building,
    reproducer_files,
    reproducer_index,
    reproducer_loading,
    reproducer_model,
)
from harness.case import Case
from harness.result import Result, ScanFinding

ENV = {"python": "3.11.7", "tilelang": "0.1.15", "tilelang_commit": "", "torch": "2.13.0", "cuda": "12.8",
       "driver": "570.1", "gpu": "NVIDIA H100 x1", "capability": "sm_90", "compile_only": False}
CASE = Case(heads=4, kv_heads=2, seqlen_q=130, seqlen_k=77, causal=True)
ROOT = Path(__file__).resolve().parent.parent


def failure(case=CASE, region="tail_q_tile", verdict="MISMATCH"):
    checks = [{"tensor": "O", "ok": False, "verdict": verdict, "error": 0.5, "tolerance": 0.004, "base_error": 0.001,
               "atol": 0.002, "region": region, "where": {"index": [0, 1, 129, 3]}},
              {"tensor": "LSE", "ok": True, "verdict": "PASS", "error": 1e-6, "tolerance": 1e-5, "base_error": 1e-6,
               "atol": 1e-6, "region": "", "where": None}]
    return Result.of(case, verdict, "judge", "O: max error 0.5 > tolerance 0.004 at [0, 1, 129, 3]",
                     tensor="O", region=region, checks=checks)


@pytest.fixture
def written(tmp_path):
    return reproducer_building.write(failure(), ENV, tmp_path, flaky={"runs": 3, "reproduced": 3, "deterministic": True})


def test_round_trip(written):
    rep = reproducer_loading.load(written)
    assert written.name == f"{rep.id}.json" and rep.id == reproducer_files.signature_id(failure().signature)
    assert rep.kind == "compiler" and written.parent.name == "compiler"  # a new recording: the compiler's group
    assert rep.case == CASE and rep.minimized_from is None and rep.links == reproducer_model.Links()
    assert rep.releases == {} and rep.triage is None and rep.upstream is None
    assert rep.signature == failure().signature
    assert rep.observed["flaky"] == {"runs": 3, "reproduced": 3, "deterministic": True}
    assert rep.observed["checks"][0]["error"] == 0.5 and rep.environment == ENV
    assert "float64 reference" in rep.expected and "MISMATCH O tail_q_tile" in rep.title
    assert reproducer_loading.from_dict(json.loads(written.read_text())) == rep
    again = reproducer_files.save(rep, written.parent.parent)  # saving what was loaded changes nothing
    assert again == written and reproducer_loading.load(again) == rep


def test_compile_only_is_a_field_of_the_environment_and_old_files_tell_it_by_their_gpu(written):
    """The environment says whether it is compile-only. A reproducer recorded before it did loads with it (its `gpu` was
    NO_GPU then); every reproducer here loads so, as it stands."""
    from harness.environment import NO_GPU, environment

    here = environment()
    assert here["compile_only"] is (here["gpu"] == NO_GPU)
    d = json.loads(written.read_text())
    assert d["environment"]["compile_only"] is False
    for gpu, compile_only in ((NO_GPU, True), ("NVIDIA H100 x1", False)):
        old = {**d, "environment": {k: v for k, v in {**ENV, "gpu": gpu}.items() if k != "compile_only"}}
        assert reproducer_loading.from_dict(old).environment == {**old["environment"], "compile_only": compile_only}
    recorded = [reproducer_loading.load(p) for p in reproducer_files.paths(ROOT / "reproducers")]
    assert {r.environment["compile_only"] for r in recorded if r.environment.get("gpu") == NO_GPU} == {True}
    assert {r.environment["compile_only"] for r in recorded if r.environment.get("gpu") != NO_GPU} == {False}


def test_find(written, tmp_path):
    rep_id = written.stem
    assert reproducer_files.find(written, "elsewhere") == written
    for root in (tmp_path, written.parent):  # the folder of groups, or one group's folder
        assert reproducer_files.find(rep_id, root) == written
        assert reproducer_files.find(rep_id[:5], root) == written
    with pytest.raises(reproducer_model.RecordError, match="no reproducer"):
        reproducer_files.find("0000nothere", tmp_path)
    moved = dataclasses.replace(reproducer_loading.load(written), id=rep_id[:5] + "0", kind="candidate")
    candidate = reproducer_files.save(moved, tmp_path)
    assert candidate == tmp_path / "candidates" / f"{rep_id[:5]}0.json"
    assert reproducer_files.find(rep_id[:5] + "0", tmp_path) == candidate
    with pytest.raises(reproducer_model.RecordError, match="is ambiguous"):
        reproducer_files.find(rep_id[:5], tmp_path)
    assert reproducer_files.paths(tmp_path) == [written, candidate]


def test_every_reproducer_lies_in_its_group_and_replays_by_its_id():
    """`harness repro <id>` finds every recorded reproducer, as does a unique prefix of its id; its kind names its
    folder; and reproducers/test_reproducers.py has one test for it, selected by the id."""
    root = ROOT / "reproducers"
    found = reproducer_files.paths(root)
    assert {p.parent.name for p in found} == set(reproducer_model.FOLDER_OF_KIND.values())
    for path in found:
        rep = reproducer_loading.load(path)
        assert path == reproducer_files.file_path(root, rep.kind, rep.id), f"{path}: kind {rep.kind!r}: git mv it into its group"
        assert reproducer_files.find(rep.id, root) == path
        assert reproducer_files.find(rep.id[:8], root) == path
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--collect-only",
                          str(root / "test_reproducers.py"), "-k", found[0].stem], capture_output=True, text=True, cwd=ROOT,
                         timeout=300)
    assert f"1/{len(found)} tests collected" in out.stdout, out.stdout + out.stderr


def _mutations():
    def top(**kw):
        return lambda d: d.update(kw)

    def drop(key):
        return lambda d: d.pop(key)

    def obs(**kw):
        return lambda d: d["observed"].update(kw)
    return {
        "old schema": (top(schema=2), "'schema' is 2; this harness reads schema 3"),
        "schema as text": (top(schema="3"), "'schema'"),
        "no kind": (drop("kind"), "missing field 'kind'"),
        "unknown kind": (top(kind="harness"), "field 'kind' must be one of compiler, example, candidate, got 'harness'"),
        "no schema": (drop("schema"), "missing field 'schema'"),
        "missing field": (drop("expected"), "missing field 'expected'"),
        "missing observed field": (lambda d: d["observed"].pop("region"), "missing field 'observed.region'"),
        "unknown field": (top(notes="x"), "unknown field 'notes'"),
        "unknown observed field": (obs(colour="red"), "unknown field 'observed.colour'"),
        "wrong type": (top(title=3), "field 'title' must be string"),
        "description not text": (top(description=["x"]), "field 'description' must be string or null"),
        "wrong nested type": (lambda d: d["observed"]["flaky"].update(runs="3"), "'observed.flaky.runs' must be int"),
        "bool is not int": (lambda d: d["observed"]["flaky"].update(runs=True), "'observed.flaky.runs'"),
        "check error": (lambda d: d["observed"]["checks"][0].update(error="big"), "'observed.checks[0].error'"),
        "bad verdict": (obs(verdict="OOPS"), "'observed.verdict'"),
        "short signature": (obs(signature=["fwd"]), "'observed.signature'"),
        "environment": (lambda d: d["environment"].update(torch=2), "'environment.torch'"),
        "compile-only not a bool": (lambda d: d["environment"].update(compile_only="true"),
                                    "field 'environment.compile_only' must be boolean, got str"),
        "bad id": (top(id="../x"), "'id'"),
        "invalid case": (lambda d: d["case"].update(heads=3), "field 'case': heads (3) must be a multiple"),
        "unknown case field": (lambda d: d["case"].update(colour=1), "field 'case': unknown case field"),
        "case field type": (lambda d: d["case"].update(seqlen_q="130"), "field 'case': field 'seqlen_q'"),
        "invalid original": (top(minimized_from={"batch": 0}), "field 'minimized_from'"),
        "case not an object": (top(case=[]), "field 'case' must be object, got list"),
        "links as text": (top(links=["https://github.com/tile-ai/tilelang/issues/1"]), "field 'links' must be object"),
        "unknown link": (top(links={"tracker": []}), "unknown field 'links.tracker'"),
        "issue without number": (top(links={"tracker_issue": [{"repo": "tile-ai/tilelang"}]}),
                                 "missing field 'links.tracker_issue[0].number'"),
        "issue state": (top(links={"fixed_by": [{"repo": "tile-ai/tilelang", "number": 1, "state": "done"}]}),
                        "'links.fixed_by[0].state' must be one of open, closed, merged"),
        "issue repo": (top(links={"related": [{"repo": "tilelang", "number": 1}]}), "'links.related[0].repo' must be owner/name"),
        "bisect fields": (top(links={"bisected_by": [{"kind": "release", "good": "0.1.10"}]}),
                          "missing field 'links.bisected_by[0].bad'"),
        "note not text": (top(links={"notes": [1]}), "field 'links.notes[0]' must be string"),
        "release result": (top(releases={"0.1.15": {"result": "bad"}}), "'releases.0.1.15.result' must be one of"),
        "control ok": (top(triage={"controls": [{"change": "x", "result": "y", "ok": "yes"}]}),
                       "'triage.controls[0].ok' must be bool"),
        "unknown upstream field": (top(upstream={"titel": "x"}), "unknown field 'upstream.titel'"),
        "witness not a check": (top(witness=["races"]), "field 'witness' must list code-scan checks ("),
        "witness twice": (top(witness=["vectorized_atomics"] * 2), "field 'witness' lists a check twice"),
        "predicted without a witness": (top(releases={"0.1.9": {"result": "reproduced", "predicted": True}}),
                                        "field 'releases.0.1.9.predicted': a row predicted by the code scan needs a 'witness'"),
        "witness of a compile error": (lambda d: (d["observed"].update(verdict="COMPILE_ERROR"),
                                                  d.update(witness=["vectorized_atomics"])),
                                       "field 'witness' is for a failure only a GPU shows"),
    }


@pytest.mark.parametrize("name", list(_mutations()))
def test_malformed_files_name_the_field(written, name):
    mutate, expected = _mutations()[name]
    d = json.loads(written.read_text())
    mutate(d)
    written.write_text(json.dumps(d))
    with pytest.raises(reproducer_model.RecordError) as e:
        reproducer_loading.load(written)
    assert expected in str(e.value) and "\n" not in str(e.value)


def test_truncated_json_and_non_object(written):
    text = written.read_text()
    written.write_text(text[:200])
    with pytest.raises(reproducer_model.RecordError, match="not valid JSON"):
        reproducer_loading.load(written)
    written.write_text("[]")
    with pytest.raises(reproducer_model.RecordError, match="must be a JSON object"):
        reproducer_loading.load(written)


def test_typed_links_and_facts_round_trip(written):
    rep = reproducer_loading.load(written)
    links = reproducer_model.Links(
        tracker_issue=(reproducer_model.Issue("tile-ai/tilelang", 2643, state="open", note="this bug"),),
        related=(reproducer_model.Issue("tile-ai/TileOPs", 1852, state="closed", note="the same error elsewhere"),),
        same_root_cause_as=(reproducer_model.Sibling("157ba1f2e171", "also at head dim 128"),),
        bisected_by=(reproducer_model.RecordedBisect("release", "0.1.10", "0.1.15", "0.1.14", "0.1.13", note="CPU"),
                     reproducer_model.RecordedBisect("release", "0.1.15", "0.1.12", "0.1.14", "0.1.15", fixes=True)),
        fixed_by=(reproducer_model.Issue("tile-ai/tilelang", 2737, kind="pull", state="merged", release="0.1.13"),),
        searches=(reproducer_model.Search("the tracker: a fill over 384 threads", "nothing found"),),
        files=(reproducer_model.File("reproducers/x.standalone.py", "standalone"),), notes=("as written",))
    rich = dataclasses.replace(
        rep, links=links,
        releases={"0.1.14": reproducer_model.Release("reproduced"), "0.1.13": reproducer_model.Release("not reproduced", "CPU"),
                  "0.1.12": reproducer_model.Release("not reproduced", predicted=True)},
        triage=reproducer_model.Triage(
            reproducer_model.Culprit("tl.LowerTileOp", "src/transform/lower_tile_op.cc", "Lower"),
            (reproducer_model.Control("knob no_warp_specialize added", "compiles", True, knob="no_warp_specialize"),)),
        upstream=reproducer_model.Upstream(title="[BUG][ice-on-valid-code] a title", expected="it compiles"),
        witness=("vectorized_atomics",))
    again = reproducer_loading.load(reproducer_files.save(rich, written.parent.parent))
    assert again == rich
    assert [i.ref for i in again.links.issues()] == ["#2643", "PR #2737", "TileOPs#1852"]
    assert again.links.fixed_by[0].url == "https://github.com/tile-ai/tilelang/pull/2737"
    d = json.loads(written.read_text())
    assert "kind" not in d["links"]["tracker_issue"][0] and "fixes" not in d["links"]["bisected_by"][0]  # defaults left out
    assert d["triage"]["culprit"]["pass"] == "tl.LowerTileOp"


def test_minimized_from_may_be_absent(written):
    d = json.loads(written.read_text())
    del d["minimized_from"], d["observed"]["flaky"]
    rep = reproducer_loading.from_dict(d)
    assert rep.minimized_from is None and rep.observed["flaky"] is None


def test_dedupe_by_signature(written, tmp_path):
    # Another case with the same signature (numbers in the message are normalized away): not recorded again.
    same = failure(CASE.replace(seqlen_q=131, batch=2))
    assert reproducer_building.write(same, ENV, tmp_path) == written
    other = reproducer_building.write(failure(region="interior"), ENV, tmp_path)
    assert other != written
    (tmp_path / "broken.json").write_text("{")
    broken = []
    known = reproducer_files.known_signatures(tmp_path, broken)
    assert set(known) == {failure().signature, failure(region="interior").signature} and broken == [tmp_path / "broken.json"]
    assert sorted(p.name for p in reproducer_files.paths(tmp_path)) == sorted([written.name, other.name, "broken.json"])


def test_recording_many_reads_the_folder_once(written, tmp_path, monkeypatch):
    # A campaign records hundreds of signatures at its end: each write must not read every file again.
    on_disk = reproducer_building.recorded(tmp_path)
    monkeypatch.setattr(reproducer_building, "known_signatures", lambda *a, **k: pytest.fail("folder read again"))
    assert reproducer_building.write(failure(CASE.replace(batch=2)), ENV, tmp_path, on_disk=on_disk) == written
    other = reproducer_building.write(failure(region="interior"), ENV, tmp_path, on_disk=on_disk)
    assert other != written and on_disk == {failure().signature: written, failure(region="interior").signature: other}
    assert reproducer_building.write(failure(region="interior"), ENV, tmp_path, on_disk=on_disk) == other
    assert sorted(reproducer_files.paths(tmp_path)) == sorted([written, other])


def test_a_candidate_is_no_known_bug_but_is_not_recorded_twice(written, tmp_path):
    candidate = reproducer_files.file_path(tmp_path, "candidate", written.stem)
    candidate.parent.mkdir()
    written.rename(candidate)
    reproducer_files.save(dataclasses.replace(reproducer_loading.load(candidate), kind="candidate"), tmp_path)
    assert reproducer_files.known_signatures(tmp_path) == {}  # a campaign counts its failure as new
    assert reproducer_building.write(failure(), ENV, tmp_path) == candidate  # and finds its file, not a second one
    assert reproducer_files.paths(tmp_path) == [candidate]


def test_an_edited_reproducer_keeps_its_file(written, tmp_path):
    # A recorded message sharpened by hand (bb5de5939ba0 named its cause later) leaves the file
    # under its old id; a new failure with the old signature gets another id, not that file.
    rep = reproducer_loading.load(written)
    edited = dataclasses.replace(rep, observed={**rep.observed, "message": rep.observed["message"] + "; cause named",
                                                "signature": [*rep.signature[:-1], rep.signature[-1] + "; cause named"]})
    reproducer_files.save(edited, tmp_path)
    again = reproducer_building.write(failure(), ENV, tmp_path)
    assert again != written and reproducer_loading.load(written) == edited
    assert reproducer_loading.load(again).signature == failure().signature
    assert reproducer_building.write(failure(), ENV, tmp_path) == again  # and the new one dedupes as usual


def test_describe():
    line = failure().describe()
    assert line.startswith("MISMATCH (judge O tail_q_tile)") and "O error 0.5 > tolerance 0.004" in line
    assert "LSE error 1e-06 <= tolerance 1e-05" in line


def test_repro_exit_codes(written, tmp_path, capsys):
    assert cli.main(["repro", str(written), "--logs", str(tmp_path / "logs")]) == 125  # no GPU on this machine
    assert "CANNOT TEST" in capsys.readouterr().out
    assert cli.main(["repro", written.stem[:6], "--dir", str(tmp_path)]) == 125
    assert cli.main(["minimize", written.stem, "--dir", str(tmp_path)]) == 125
    written.write_text(written.read_text()[:100])
    assert cli.main(["repro", str(written)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("harness repro:") and err.count("\n") == 1
    assert cli.main(["repro", "nothere", "--dir", str(tmp_path)]) == 2
    assert cli.main(["minimize", str(written)]) == 2


def test_campaign_records_one_reproducer_per_new_signature(tmp_path, capsys):
    opts = campaign.Options(out=tmp_path, reproducers=tmp_path / "repro")
    results = [failure(), failure(CASE.replace(batch=3)), failure(region="empty_rows"),
               Result.of(CASE, "PASS", "judge"), Result.of(CASE, "HARNESS_ERROR", "judge", "KeyError: x")]
    paths = campaign.record_failures(results, opts, "sm_90a", known={})
    assert len(paths) == 2 and all(p.exists() for p in paths)  # the HARNESS_ERROR is not recorded
    assert campaign.record_failures(results, opts, "sm_90a", reproducer_files.known_signatures(opts.reproducers)) == []
    assert capsys.readouterr().out.count("already recorded") == 2


def test_run_rejects_an_unknown_family(capsys):
    assert cli.main(["run", "--families", "fwd,nope"]) == 2
    assert "unknown kernel family 'nope'" in capsys.readouterr().err


def test_run_says_cannot_test_when_tilelang_does_not_import(tmp_path, monkeypatch, capsys):
    broken = tmp_path / "site" / "tilelang"
    broken.mkdir(parents=True)
    (broken / "__init__.py").write_text("raise ImportError('libcuda.so.1: cannot open shared object file')\n")
    monkeypatch.setenv("PYTHONPATH", f"{broken.parent}:{__import__('os').environ.get('PYTHONPATH', '')}")
    assert cli.main(["run", "--cases", "1", "--out", str(tmp_path / "out")]) == 125
    assert "cannot test here: tilelang not importable" in capsys.readouterr().err
    assert not (tmp_path / "out" / "results.jsonl").exists()  # no fake COMPILE_ERROR verdicts


def test_which_reproducers_need_a_gpu():
    """A compile error and a hang the code scan explains replay compile-only (bisect on a CPU)."""
    def rep(verdict, message):
        return reproducer_building.build(failure().replace(verdict=verdict, stage="run", message=message), {})
    assert rep("MISMATCH", "O: max error 1").needs_gpu
    assert reproducer_building.build(oracle.hang(failure().case, 60, "run"), {}).needs_gpu
    assert not rep("COMPILE_ERROR", "InternalError: x").needs_gpu
    hang = oracle.hang(failure().case, 60, "run", [ScanFinding("register_budget", "x"), ScanFinding("named_barrier_counts", "y")])
    scanned = reproducer_building.build(hang, {})
    assert not scanned.needs_gpu and scanned.scan_checks == ["named_barrier_counts", "register_budget"]
    assert scanned.observed["predicted"] == ["named_barrier_counts", "register_budget"]  # a field, not words read back
    # The cause is what the file says, whatever the message: nothing reads it back out of the words.
    worded = rep("HANG", hang.message)
    assert worded.needs_gpu and "predicted" not in worded.observed


def test_the_index_lists_every_reproducer_as_its_file_says():
    """reproducers/INDEX.md is `harness index`'s output for the files here: regenerate it when one changes."""
    root = ROOT / "reproducers"
    text = (root / "INDEX.md").read_text()
    assert text == reproducer_index.render(root), "reproducers/INDEX.md is stale: run `harness index`"
    sections = text.split("\n## ")[1:]
    assert len(sections) == len(reproducer_model.FOLDER_OF_KIND)
    for section, group in zip(sections, reproducer_model.FOLDER_OF_KIND.values()):
        assert f"in [{group}/]({group}/)" in section
        assert all(f"]({group}/" in row for row in section.splitlines() if row.startswith("| ["))
    assert all(f"[{p.stem}]({p.relative_to(root).as_posix()})" in text for p in reproducer_files.paths(root))
