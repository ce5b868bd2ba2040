"""A Result reads back results.jsonl lines and reproducers written before it existed, byte for byte, and
holds typed facts: its Case, a Verdict, the code scan's Findings."""
import json

import pytest

from harness import reproducer_building, reproducer_files, reproducer_loading
from harness.case import Case, CaseError, to_dict
from harness.result import Result, ScanFinding, Verdict

BWD = json.dumps(to_dict(Case(family="bwd", variant="atomic", seqlen_q=70)))
FWD = json.dumps(to_dict(Case()))
# results.jsonl lines as `harness run` wrote them before Result (dicts built by oracle.result,
# keys added by the worker and the pool in the order they came).
JUDGED = (
    '{"case_id": "c217343f39bc", "case": ' + BWD + ', '
    '"verdict": "MISMATCH", "stage": "judge", "message": "dSinks: max error 0.5 > tolerance 0.01 at [1]", '
    '"tensor": "dSinks", "region": "per_head", "kernel": "sink_grad", '
    '"seconds": {"start": 3.5, "compile": 20.1, "inputs": 0.1, "run": 0.2, "judge": 0.3}, '
    '"checks": [{"tensor": "dSinks", "ok": false, "verdict": "MISMATCH", "error": 0.5, "tolerance": 0.01, '
    '"base_error": 0.001, "atol": 0.002, "region": "per_head", "where": {"index": [1]}}], '
    '"hazards": ["register_budget: x"], "code": "0123456789abcdef", "gpu": "1"}')
BLAMED = (
    '{"case_id": "1", "case": ' + FWD + ', "verdict": "COMPILE_ERROR", '
    '"stage": "compile", "message": "InternalError: boom", "tensor": "", "region": "", '
    '"traceback": "Traceback ...", "seconds": {"compile": 1.0}, "kernel": "common", "hazards": [], "code": "ab"}')
HUNG = ('{"case_id": "2", "case": ' + FWD + ', "verdict": "HANG", "stage": "run", '
        '"message": "no answer within 60 s (run)", "tensor": "", "region": "", "hazards": [], "code": "ab"}')
UNSUPPORTED = ('{"case_id": "3", "case": ' + FWD + ', "verdict": "UNSUPPORTED", '
               '"stage": "plan", "message": "no", "tensor": "", "region": "", "seconds": {"start": 2.0}}')
FOREIGN = ('{"case_id": "4", "case": ' + FWD + ', "verdict": "PASS", "stage": "judge", '
           '"message": "", "tensor": "", "region": "", "sanitizer": {"errors": 0}, "seconds": {}}')
# A hang whose code scan explains it: the cause is a field (`predicted`), and the message names it too.
PREDICTED = ('{"case_id": "5", "case": ' + FWD + ', "verdict": "HANG", "stage": "run", '
             '"message": "no answer within 60 s (run); the code scan predicts it: register_budget", "tensor": "", '
             '"region": "", "hazards": ["register_budget: setmaxnreg asks 240"], "code": "ab", '
             '"predicted": ["register_budget"]}')


def test_lines_written_before_result_round_trip_byte_for_byte():
    for line in (JUDGED, BLAMED, HUNG, UNSUPPORTED, FOREIGN, PREDICTED):
        r = Result.from_dict(json.loads(line))
        assert json.dumps(r.to_dict()) == line
    judged = Result.from_dict(json.loads(JUDGED))
    assert (judged.verdict, judged.kernel, judged.gpu) == ("MISMATCH", "sink_grad", "1")
    assert judged.hazards == (ScanFinding("register_budget", "x"),) and judged.case == Case(family="bwd", variant="atomic",
                                                                                             seqlen_q=70)
    assert Result.from_dict(json.loads(FOREIGN)).extra == {"sanitizer": {"errors": 0}}
    assert Result.from_dict(json.loads(PREDICTED)).predicted == ("register_budget",)


def test_the_signature_is_what_it_was():
    assert Result.from_dict(json.loads(JUDGED)).signature == (
        "", "kernel:sink_grad", "MISMATCH", "judge", "dSinks", "per_head", "dSinks: max error N > tolerance N at [N]")
    assert Result.from_dict(json.loads(HUNG)).signature == (
        "fwd", "default", "HANG", "run", "", "", "no answer within N s (run)")


def test_a_signatures_scope_carries_its_kind_beside_the_text_the_files_hold():
    """The scope is written as it always was ("kernel:NAME", "program:FINGERPRINT", the variant); whether it is a
    program's is its kind, not its prefix: a variant named "program:x" is a variant, and unscoped leaves it."""
    import copy

    from harness.programs import generate
    from harness.result import Scope, ScopeKind, unscoped

    program = Result.of(Case(family="program", program=generate.template("reduce")), "COMPILE_ERROR",
                        "compile", "boom").signature
    kernel = Result.from_dict(json.loads(JUDGED)).signature
    assert program[1].kind is ScopeKind.PROGRAM and program[1].startswith("program:") and kernel[1].kind is ScopeKind.KERNEL
    assert json.dumps(list(program)) == json.dumps([str(s) for s in program]) and repr(program[1]) == repr(str(program[1]))
    assert unscoped(program)[1] == "program" and unscoped(program)[2:] == program[2:] and unscoped(kernel) == kernel
    variant = Scope(ScopeKind.VARIANT, "program:x")
    assert variant == "program:x" and unscoped(("fwd", variant)) == ("fwd", variant)
    assert copy.copy(program[1]).kind is ScopeKind.PROGRAM


def test_a_finding_names_its_check_as_a_check_and_is_written_as_it_was():
    """A code-scan finding's check is one of the scan's (a ScanCheck, one function of harness.codegen each), written
    "check: message"; a message may hold ": " itself, and a text naming no check is no finding."""
    from harness import codegen
    from harness.result import ScanCheck

    assert all(callable(getattr(codegen, c.value)) for c in ScanCheck)
    found = ScanFinding.from_json("register_budget: setmaxnreg: 240 > 232")
    assert found == ScanFinding(ScanCheck.register_budget, "setmaxnreg: 240 > 232") and found.check is ScanCheck.register_budget
    assert ScanFinding("register_budget", "x").check is ScanCheck.register_budget and found.to_json() == str(found)
    assert json.dumps(Result.from_dict(json.loads(PREDICTED)).to_dict()["predicted"]) == '["register_budget"]'
    for text in ("no_such_check: x", "register_budget:x", 3):
        with pytest.raises(ValueError):
            ScanFinding.from_json(text)


def test_the_verdict_is_an_enum_written_as_its_name():
    r = Result.of(Case(), "MISMATCH", "judge")
    assert r.verdict is Verdict.MISMATCH and r.verdict == "MISMATCH" and f"{r.verdict}" == "MISMATCH"
    assert json.dumps(r.to_dict()["verdict"]) == '"MISMATCH"'
    assert r.failed and r.is_new({}) and not r.is_new({r.signature: "known.json"})
    assert not Result.of(Case(), "HARNESS_ERROR", "run").failed and not Result.of(Case(), "PASS", "judge").is_new({})
    with pytest.raises(ValueError):
        Result.of(Case(), "SOMETIMES", "run")


def test_a_line_whose_case_is_no_case_is_not_a_result():
    with pytest.raises(CaseError):
        Result.from_dict({"case_id": "1", "case": {"family": "fwd"}, "verdict": "PASS"})
    with pytest.raises(CaseError):
        Result.from_dict({"case_id": "1", "verdict": "PASS"})


def test_built_results_keep_the_key_order_of_old():
    case = Case()
    r = Result.of(case, "COMPILED", "compile", seconds={"compile": 1.0}, hazards=(), code="ab")
    assert list(r.to_dict()) == ["case_id", "case", "verdict", "stage", "message", "tensor", "region",
                                 "seconds", "hazards", "code"]
    assert r.to_dict()["case_id"] == case.id and r.message == "" and r.kernel is None
    wire = r.replace(fatal=True)
    assert list(wire.to_dict())[-1] == "fatal" and wire.without("fatal").to_dict() == r.to_dict()
    assert r.replace(seconds={"compile": 2.0}).to_dict()["seconds"] == {"compile": 2.0}  # in place, not appended
    assert list(r.replace(seconds={}).to_dict()) == list(r.to_dict())


def test_a_reproducer_recorded_before_result_loads_as_one():
    rep = reproducer_loading.load(reproducer_files.find("54d466153e16"))
    seen = rep.result
    assert (seen.verdict, seen.stage, seen.region) == ("MISMATCH", "judge", "empty_rows")
    assert list(rep.signature) == rep.observed["signature"]
    back = seen.to_dict()
    assert back.pop("case") == to_dict(rep.case) and list(back.items()) == list(rep.observed.items())
    again = reproducer_building.observed(seen, rep.observed["flaky"])
    assert {k: again[k] for k in rep.observed} == rep.observed  # what a reproducer's `observed` is built from


def test_numbers_in_either_notation_normalize_alike():
    """A kernel writing garbage errs by 2 in one run and by 2.366e+38 in the next: one failure, one signature."""
    from harness.result import normalize

    assert normalize("G7: max error 2 > tolerance 0 at [24, 0]") == \
        normalize("G7: max error 2.366e+38 > tolerance 9.763e-05 at [12, 2]") == "GN: max error N > tolerance N at [N, N]"


def test_an_invalid_programs_failure_that_its_valid_part_has_too_is_that_failure():
    """An invalid program whose valid part fails the same way says so in its message, and is the recorded class."""
    from harness.result import VALID_PART_FAILS, normalize

    message = "InternalError: ScanCheck failed: (has_best) is false: no available layout found"
    assert normalize(message + VALID_PART_FAILS) == normalize(message)
