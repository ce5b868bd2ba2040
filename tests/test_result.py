"""A Result reads back results.jsonl lines and reproducers written before it existed, byte for byte."""
import json

from harness import record
from harness.case import Case
from harness.result import Result

# results.jsonl lines as `harness run` wrote them before Result (dicts built by oracle.result,
# keys added by the worker and the pool in the order they came).
JUDGED = (
    '{"case_id": "c217343f39bc", "case": {"family": "bwd", "variant": "atomic", "seqlen_q": 70}, '
    '"verdict": "MISMATCH", "stage": "judge", "message": "dSinks: max error 0.5 > tolerance 0.01 at [1]", '
    '"tensor": "dSinks", "region": "per_head", "kernel": "sink_grad", '
    '"seconds": {"start": 3.5, "compile": 20.1, "inputs": 0.1, "run": 0.2, "judge": 0.3}, '
    '"checks": [{"tensor": "dSinks", "ok": false, "verdict": "MISMATCH", "error": 0.5, "tolerance": 0.01, '
    '"base_error": 0.001, "atol": 0.002, "region": "per_head", "where": {"index": [1]}}], '
    '"hazards": ["register_budget: x"], "code": "0123456789abcdef", "gpu": "1"}')
BLAMED = (
    '{"case_id": "1", "case": {"family": "fwd", "variant": "default"}, "verdict": "COMPILE_ERROR", '
    '"stage": "compile", "message": "InternalError: boom", "tensor": "", "region": "", '
    '"traceback": "Traceback ...", "seconds": {"compile": 1.0}, "kernel": "common", "hazards": [], "code": "ab"}')
HUNG = ('{"case_id": "2", "case": {"family": "fwd", "variant": "default"}, "verdict": "HANG", "stage": "run", '
        '"message": "no answer within 60 s (run)", "tensor": "", "region": "", "hazards": [], "code": "ab"}')
UNSUPPORTED = ('{"case_id": "3", "case": {"family": "fwd", "variant": "default"}, "verdict": "UNSUPPORTED", '
               '"stage": "plan", "message": "no", "tensor": "", "region": "", "seconds": {"start": 2.0}}')
FOREIGN = ('{"case_id": "4", "case": {"family": "fwd", "variant": "default"}, "verdict": "PASS", "stage": "judge", '
           '"message": "", "tensor": "", "region": "", "sanitizer": {"errors": 0}, "seconds": {}}')


def test_lines_written_before_result_round_trip_byte_for_byte():
    for line in (JUDGED, BLAMED, HUNG, UNSUPPORTED, FOREIGN):
        r = Result.from_dict(json.loads(line))
        assert json.dumps(r.to_dict()) == line
    judged = Result.from_dict(json.loads(JUDGED))
    assert (judged.verdict, judged.kernel, judged.gpu, judged.hazards) == ("MISMATCH", "sink_grad", "1", ["register_budget: x"])
    assert Result.from_dict(json.loads(FOREIGN)).extra == {"sanitizer": {"errors": 0}}


def test_the_signature_is_what_it_was():
    assert Result.from_dict(json.loads(JUDGED)).signature == (
        "", "kernel:sink_grad", "MISMATCH", "judge", "dSinks", "per_head", "dSinks: max error N > tolerance N at [N]")
    assert Result.from_dict(json.loads(HUNG)).signature == (
        "fwd", "default", "HANG", "run", "", "", "no answer within N s (run)")


def test_built_results_keep_the_key_order_of_old():
    case = Case()
    r = Result.of(case, "COMPILED", "compile", seconds={"compile": 1.0}, hazards=[], code="ab")
    assert list(r.to_dict()) == ["case_id", "case", "verdict", "stage", "message", "tensor", "region",
                                 "seconds", "hazards", "code"]
    assert r.to_dict()["case_id"] == case.id and r.message == "" and r.kernel is None
    wire = r.replace(fatal=True)
    assert list(wire.to_dict())[-1] == "fatal" and wire.without("fatal").to_dict() == r.to_dict()
    assert r.replace(seconds={"compile": 2.0}).to_dict()["seconds"] == {"compile": 2.0}  # in place, not appended
    assert list(r.replace(seconds={}).to_dict()) == list(r.to_dict())


def test_a_reproducer_recorded_before_result_loads_as_one():
    rep = record.load(record.find("54d466153e16"))
    seen = rep.result
    assert (seen.verdict, seen.stage, seen.region) == ("MISMATCH", "judge", "empty_rows")
    assert list(rep.signature) == rep.observed["signature"]
    back = seen.to_dict()
    assert back.pop("case") == rep.result.case and list(back.items()) == list(rep.observed.items())
    again = record.observed(seen, rep.observed["flaky"])
    assert {k: again[k] for k in rep.observed} == rep.observed  # what a reproducer's `observed` is built from
