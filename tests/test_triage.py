"""Triage's reading of pass traces, on recorded-style traces (IR as text; no TileLang needed)."""
from harness import triage
from harness.result import ScanFinding

ERROR = ('InternalError: Layout Layout((32, 64, 1) -> (6, 384), transform: ...) has errors: '
         '("Index mapping does not form a bijective transform.")')
WRITTEN = 'tx = T.launch_thread("threadIdx.x", 128)\nT.fill(dq_s, 0)\nT.gemm(a, b, c)'
SPECIALIZED = 'tx = T.launch_thread("threadIdx.x", 384)\nT.fill(dq_s, 0)\nT.gemm(a, b, c)'


def _trace(after: list[str], raised_in: str | None, given: str | None) -> triage.Trace:
    t = triage.Trace(passes=[f"pass{i}" for i in range(len(after))], after=after, raised_in=raised_in, given=given)
    t.error = ERROR
    return t


def test_clues_are_the_specific_tokens_of_the_message():
    assert triage.clues(ERROR) == ["32", "64", "384"]
    assert triage.clues("Check failed: buffer dQ_acc.data in tl.LowerTileOp") == ["dQ_acc.data", "tl.LowerTileOp"]


def test_the_evidence_is_the_clue_on_fewest_lines():
    text = "a = 32\nb = 32 + 64\nc = 384\nd = 64 + 32"
    assert triage.evidence_lines(text, ["32", "64", "384"]) == [2]
    assert triage.evidence_lines("x\ny", ["384"]) == []
    crowded = "\n".join(["v = 32"] * (triage.MOST_LINES + 1))
    assert triage.evidence_lines(crowded, ["32"]) == []


def test_the_pass_that_raised_and_the_pass_that_made_its_input():
    trace = _trace([WRITTEN, WRITTEN, SPECIALIZED, SPECIALIZED], "tl.LowerTileOp", SPECIALIZED)
    found = triage.find(trace, str)
    assert found.raised_in == "tl.LowerTileOp" and found.passes_before == 4
    assert found.evidence == 'tx = T.launch_thread("threadIdx.x", 384)'
    assert found.introduced_by == "pass2"
    lines = triage.describe(found, trace)
    assert lines[1] == "raised in pass: tl.LowerTileOp (after 4 passes ran)"
    assert "that line first appears after: pass2" in lines
    assert any("384" in line for line in found.excerpt)


def test_evidence_present_from_the_start_is_the_program_as_written():
    trace = _trace([SPECIALIZED, SPECIALIZED], "tl.LowerTileOp", SPECIALIZED)
    found = triage.find(trace, str)
    assert found.introduced_by is None
    assert "that line first appears after: the program as written (present before the first pass)" in \
        triage.describe(found, trace)


def test_an_error_outside_the_passes_says_so_with_the_last_pass():
    trace = _trace([WRITTEN], None, None)
    assert triage.find(trace, str) is None
    assert triage.describe(None, trace)[1].startswith("raised outside the passes (after 1 passes ran, the last pass0)")


HAZARD = ScanFinding("unwaited_async_loads",
                     "TMA load into q_s on mbarrier[4] waited on only inside a loop that may run zero times")
LOOP = "for kb in range(n):\n    T.gemm(q_s, k_s, acc_s)"
FIRST_ONLY = "for kb in range(n):\n    if kb == 0:\n        T.mbarrier_wait_parity(mbarrier[4], 0)\n    T.gemm(q_s, k_s, acc_s)"


def test_the_pass_that_made_a_hazard_is_the_first_whose_output_holds_its_construct():
    t = triage.Trace(passes=["pass0", "tl.ProducerConsumerWarpSpecialized", "pass2"], after=[LOOP, FIRST_ONLY, FIRST_ONLY])
    [made] = triage.hazards_made(t, [HAZARD], str)
    assert made.made_by == "tl.ProducerConsumerWarpSpecialized"
    assert any("if kb == 0:" in line for line in made.excerpt)
    lines = triage.describe_made([made], [HAZARD])
    assert lines[0] == f"hazard: {HAZARD}" and "made by pass tl.ProducerConsumerWarpSpecialized" in lines[1]


def test_a_hazard_no_pass_shows_and_one_with_no_known_shape_are_said_so():
    t = triage.Trace(passes=["pass0"], after=[LOOP])
    [made] = triage.hazards_made(t, [HAZARD], str)
    assert made.made_by is None and "no pass's output holds" in triage.describe_made([made], [HAZARD])[1]
    other = ScanFinding("register_budget", "300 registers")
    assert triage.hazards_made(t, [other], str) == []
    assert "no IR shape is known" in triage.describe_made([], [other])[-1]
    assert "no hazard" in triage.describe_made([], [])[0]


def test_the_passes_where_a_failing_compile_and_a_clean_neighbour_part():
    holds = triage._pattern_holder(triage.HAZARD_IR["unwaited_async_loads"][0])
    bad = triage.Trace(passes=["pass0", "tl.ProducerConsumerWarpSpecialized", "pass2"], after=[LOOP, FIRST_ONLY, FIRST_ONLY])
    good = triage.Trace(passes=["pass0", "tl.ProducerConsumerWarpSpecialized", "pass2"], after=[LOOP, LOOP, LOOP])
    d = triage.diverge(bad, good, holds, str, "knob no_warp_specialize added")
    assert d.turn == "tl.ProducerConsumerWarpSpecialized" and d.neighbour_holds is None
    assert any("T.gemm(q_s" in line for line in d.excerpt)  # the neighbour's IR at the same place
    lines = triage.describe_divergence(d, [d.neighbour])
    assert lines[0] == "passing neighbour: knob no_warp_specialize added (compiles clean)"
    assert lines[1].startswith("where they part: tl.ProducerConsumerWarpSpecialized.")


def test_a_neighbour_holding_the_construct_too_is_not_where_they_part():
    holds = triage._line_holder('tx = T.launch_thread("threadIdx.x", 384)')
    bad = _trace([WRITTEN, SPECIALIZED, SPECIALIZED], "tl.LowerTileOp", SPECIALIZED)
    good = triage.Trace(passes=["pass0", "pass1", "pass2"], after=[WRITTEN, WRITTEN, SPECIALIZED])
    d = triage.diverge(bad, good, holds, str, "knob no_tma added")
    assert (d.turn, d.neighbour_holds) == ("pass1", "pass2")
    assert "not where they part" in triage.describe_divergence(d, [d.neighbour])[1]
    assert triage.describe_divergence(None, ["knob no_tma added"])[0].startswith("no passing neighbour among: knob no_tma")


def test_neighbours_toggle_one_knob_each():
    from harness.case import Case

    near = dict(triage.neighbours(Case(knobs=("no_tma",))))
    assert near["knob no_tma removed"].knobs == () and near["knob no_warp_specialize added"].knobs == (
        "no_tma", "no_warp_specialize")


def test_a_neighbour_that_skips_the_pass_says_so():
    holds = triage._pattern_holder(triage.HAZARD_IR["unwaited_async_loads"][0])
    bad = triage.Trace(passes=["pass0", "tl.ProducerConsumerWarpSpecialized"], after=[LOOP, FIRST_ONLY])
    good = triage.Trace(passes=["pass0", "pass1"], after=[LOOP, LOOP])
    d = triage.diverge(bad, good, holds, str, "knob no_warp_specialize added")
    assert not d.ran_turn and d.excerpt == []
    assert triage.describe_divergence(d, [])[-1] == "the neighbour's compile does not run tl.ProducerConsumerWarpSpecialized"
