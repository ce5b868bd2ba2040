"""The statement kinds the tracker's bugs need (issue 56, item 4): thread-indexed statements, per-warp-group regions
and programs invalid on purpose. Each kind checks, emits, means what a hand computation says, and is drawn; the
`compile` tests compile each with the installed TileLang for sm_90a, no GPU."""
from __future__ import annotations

import random

import pytest
import torch

from harness import case as case_mod
from harness import oracle, worker
from harness.programs import emit, generate, interpret, model, overrun
from harness.programs.model import ProgramError


def _buffers(*specs):
    return [{"name": n, "scope": s, "dtype": d, "shape": list(shape)} for n, s, d, shape in specs]


def _program(buffers, body, block=64, threads=128):
    return model.from_dict({"block": block, "threads": threads, "buffers": buffers, "body": body})


def _tiles(g, n, block, width):
    """Each block's [block, width] tile of g's first columns, rows past n as 0: (block index, tile)."""
    for bx in range(-(-n // block)):
        tile = torch.zeros(block, width, dtype=torch.float64)
        rows = min(block, n - bx * block)
        tile[:rows] = g[bx * block: bx * block + rows, :width].double()
        yield bx, tile


LANE = _buffers(("A", "global", "float16", ("n", 32)), ("S", "shared", "float16", (64, 32)),
                ("R", "shared", "float32", (64, 32)), ("O", "global", "float32", ("n", 32)))
LOAD = {"op": "copy", "src": "A", "dst": "S", "at": "bx", "row": 0, "col": 0, "form": "tile"}


def _thread(**fields):
    return {"op": "thread", "dst": "R", "src": "S", "count": 2048, "shift": 5, "test": "all", "bound": 0,
            "threads": 128, **fields}


def test_a_thread_indexed_write_reads_another_threads_element_and_adds_its_index():
    p = _program(LANE, [LOAD, _thread(), {"op": "copy", "src": "R", "dst": "O", "at": "bx", "row": 0, "col": 0,
                                          "form": "tile"}])
    text = emit.tilelang_source(p)
    assert "tx = T.get_thread_binding()" in text and "for s in T.serial(16):" in text
    assert "R[(s * 128 + tx) // 32, (s * 128 + tx) % 32] = " in text and "(((s * 128 + tx) + 5) % 2048)" in text
    n = 100
    init = interpret.initial(p, n, 1)
    out = interpret.run(p, n, init)["O"]
    e = torch.arange(2048)
    for bx, tile in _tiles(init["A"], n, 64, 32):
        want = (tile.flatten()[(e + 5) % 2048] + e % 128 % 3 - 1).view(64, 32)
        rows = min(64, n - bx * 64)
        assert torch.equal(out[bx * 64: bx * 64 + rows], want[:rows])


def test_a_thread_indexed_write_in_place_covers_a_partial_count_of_the_threads_that_pass_its_test():
    body = [LOAD, _thread(dst="S", count=100, shift=0, test="below", bound=37),
            {"op": "copy", "src": "S", "dst": "O", "at": "bx", "row": 0, "col": 0, "form": "tile"}]
    p = _program(LANE, body)
    assert "if tx < 100:" in emit.tilelang_source(p) and "if tx < 37:" in emit.tilelang_source(p)
    n = 64
    init = interpret.initial(p, n, 2)
    want = init["A"].double().clone()
    e = torch.arange(37)                      # elements below 100 whose thread (e % 128) is below 37
    want.view(-1)[e] += e % 3 - 1
    assert torch.equal(interpret.run(p, n, init)["O"], want)


@pytest.mark.parametrize("fields, error", [
    ({"src": "S", "dst": "S", "shift": 1}, "in place only with shift 0"),
    ({"count": 4096}, "count is 1 to the elements"),
    ({"threads": 64}, "threads is the count that runs it here"),
    ({"test": "below", "bound": 128}, "bound is 1 to threads - 1"),
])
def test_the_rules_of_a_thread_indexed_write(fields, error):
    with pytest.raises(ProgramError, match=error):
        _program(LANE, [LOAD, _thread(**fields), {"op": "copy", "src": "R", "dst": "O", "at": "bx", "row": 0, "col": 0,
                                                   "form": "tile"}])


def test_a_thread_indexed_write_to_a_fragment_is_refused():
    buffers = LANE[:2] + _buffers(("F1", "fragment", "float32", (64, 32))) + LANE[3:]
    with pytest.raises(ProgramError, match="F1 must be shared"):
        _program(buffers, [LOAD, _thread(dst="F1"), {"op": "copy", "src": "F1", "dst": "O", "at": "bx", "row": 0, "col": 0,
                                                     "form": "tile"}])


ATOMIC = _buffers(("A", "global", "float32", ("n", 16)), ("S", "shared", "float32", (64, 16)),
                  ("O", "global", "float32", ("n", 16)), ("G", "global", "float16", (2, 16)),
                  ("H", "global", "float16", (2, 16)), ("K", "global", "float16", (2, 16)))
TO = {"add": "G", "max": "H", "min": "K"}   # one atomic kind per global: kinds do not commute (model.check)


def test_scalar_atomics_from_every_thread_mean_a_scatter_of_each_threads_value():
    body = [{"op": "copy", "src": "A", "dst": "S", "at": "bx", "row": 0, "col": 0, "form": "tile"},
            {"op": "thread_atomic", "kind": "max", "dst": "S", "target": "whole", "row": 0, "col": 0, "value": "mod3",
             "threads": 128},
            {"op": "thread_atomic", "kind": "add", "dst": "G", "target": "row", "row": 1, "col": 0, "value": "mod3",
             "threads": 128},
            {"op": "thread_atomic", "kind": "min", "dst": "K", "target": "element", "row": 0, "col": 3, "value": "one",
             "threads": 128},
            {"op": "copy", "src": "S", "dst": "O", "at": "bx", "row": 0, "col": 0, "form": "tile"}]
    p = _program(ATOMIC, body)
    text = emit.tilelang_source(p)
    assert 'T.atomic_max(S[tx // 16 % 64, tx % 16], T.cast(tx % 3 - 1, "float32"))' in text
    assert 'T.atomic_add(G[1, tx % 16], T.cast(tx % 3 - 1, "float16"))' in text
    assert 'T.atomic_min(K[0, 3], T.cast(1, "float16"))' in text
    n = 130                                   # three blocks
    init = interpret.initial(p, n, 4)
    out = interpret.run(p, n, init)
    tx = torch.arange(128)
    for bx, tile in _tiles(init["A"], n, 64, 16):
        flat = tile.flatten()
        flat[:128] = torch.maximum(flat[:128], (tx % 3 - 1).double())   # 128 threads over the first 128 of 1024
        rows = min(64, n - bx * 64)
        assert torch.equal(out["O"][bx * 64: bx * 64 + rows], tile[:rows])
    g = init["G"].double()
    sums = torch.zeros(16, dtype=torch.float64).index_add_(0, tx % 16, (tx % 3 - 1).double())
    g[1] += 3 * sums
    g[0, 3] = min(g[0, 3].item(), 1.0)
    assert torch.equal(out["G"], g)


def test_a_scalar_atomic_goes_into_a_shared_buffer_that_holds_values_or_a_fixed_row_global():
    body = [{"op": "thread_atomic", "kind": "add", "dst": "S", "target": "element", "row": 0, "col": 0, "value": "one",
             "threads": 128},
            {"op": "copy", "src": "S", "dst": "O", "at": "bx", "row": 0, "col": 0, "form": "tile"}]
    with pytest.raises(ProgramError, match="reads S before every element of it is written"):
        _program(ATOMIC, body)
    with pytest.raises(ProgramError, match="fixed-row global"):
        _program(ATOMIC, [dict(body[0], dst="O"), {"op": "copy", "src": "A", "dst": "S", "at": "bx", "row": 0, "col": 0,
                                                   "form": "tile"}])


SPLIT = _buffers(("A", "global", "float16", ("n", 32)), ("B", "global", "float16", ("n", 32)),
                 ("S1", "shared", "float16", (64, 32)), ("S2", "shared", "float32", (64, 32)),
                 ("S3", "shared", "float16", (64, 32)), ("F1", "fragment", "float32", (64, 32)),
                 ("O", "global", "float32", ("n", 32)), ("P", "global", "float16", ("n", 32)))
SIDES = (
    {"op": "copy", "src": "A", "dst": "S1", "at": "bx", "row": 0, "col": 0, "form": "tile"},
    {"op": "map", "dst": "F1", "rows": 64, "cols": 32, "expr": ["add", ["buf", "S1"], ["num", 1]]},
    {"op": "copy", "src": "F1", "dst": "S2", "at": "0", "row": 0, "col": 0, "form": "tile"},
    {"op": "copy", "src": "B", "dst": "S3", "at": "bx", "row": 0, "col": 0, "form": "tile"},   # side B's own
    {"op": "copy", "src": "S3", "dst": "P", "at": "bx", "row": 0, "col": 0, "form": "tile"},
    {"op": "copy", "src": "S2", "dst": "O", "at": "bx", "row": 0, "col": 0, "form": "tile"},   # after the wait
)


def _split(**fields):
    return _program(SPLIT, [{"op": "split", "first": 128, "a": 3, "wait": 5, "body": list(SIDES), **fields}], threads=256)


def test_a_split_runs_each_side_on_its_warp_group_and_hands_a_tile_through_an_mbarrier():
    p = _split()
    text = emit.tilelang_source(p)
    assert "hand = T.alloc_barrier([128])" in text
    lines = [line.strip() for line in text.splitlines()]
    at = lines.index("if tx < 128:")
    assert lines[at + 5:at + 7] == ["T.barrier_arrive(hand)", "else:"]
    assert lines[at + 9:at + 11] == ["T.mbarrier_wait_parity(hand, 0)", "T.copy(S2, O[bx * 64 + 0, 0])"]
    n = 100
    init = interpret.initial(p, n, 5)
    out = interpret.run(p, n, init)
    assert torch.equal(out["O"], init["A"].double() + 1) and torch.equal(out["P"], init["B"].double())


CLASH = SIDES[:3] + ({"op": "copy", "src": "B", "dst": "S1", "at": "bx", "row": 0, "col": 0, "form": "tile"},
                     {"op": "copy", "src": "S1", "dst": "P", "at": "bx", "row": 0, "col": 0, "form": "tile"}, SIDES[5])


@pytest.mark.parametrize("fields, error", [
    ({"wait": 6}, "reads S2 before every element of it is written"),
    ({"body": list(CLASH)}, "S1 is written on one side and used on the other before the barrier"),
    ({"first": 64}, "first is a warp group count"),
    ({"a": 0}, "1 <= a < len"),
])
def test_the_rules_of_a_split(fields, error):
    with pytest.raises(ProgramError, match=error):
        _split(**fields)


def test_a_split_keeps_a_fragment_to_one_side_and_thread_indexing_to_the_first():
    body = SIDES[:5] + ({"op": "map", "dst": "F1", "rows": 64, "cols": 32, "expr": ["buf", "S2"]},
                        {"op": "copy", "src": "F1", "dst": "O", "at": "bx", "row": 0, "col": 0, "form": "tile"})
    with pytest.raises(ProgramError, match="fragment F1 is used on two sides"):
        _program(SPLIT, [{"op": "split", "first": 128, "a": 3, "wait": 5, "body": list(body)}], threads=256)
    lane = {"op": "thread", "dst": "S3", "src": "S3", "count": 8, "shift": 0, "test": "all", "bound": 0, "threads": 128}
    with pytest.raises(ProgramError, match="thread-indexed statements only on side A"):
        _program(SPLIT, [{"op": "split", "first": 128, "a": 3, "wait": 5, "body": [*SIDES[:4], lane, *SIDES[4:]]}],
                 threads=256)


OVER = _buffers(("A", "global", "float16", ("n", 32)), ("S", "shared", "float16", (64, 32)),
                ("R", "shared", "float16", (64, 32)), ("O", "global", "float16", ("n", 32)),
                ("Q", "global", "float16", ("n", 24)))
STORE = {"op": "copy", "src": "S", "dst": "O", "at": "bx", "row": 0, "col": 0, "form": "tile"}


def _overrun(**fields):
    stmt = {"op": "overrun", "form": "fill", "dst": "S", "region": [48, 0, 32, 32], "invalid": True, **fields}
    if stmt["form"] == "fill":
        stmt.setdefault("value", 1)
    return _program(OVER, [LOAD, stmt, STORE])


def test_an_overrun_says_it_is_invalid_and_reaches_past_its_buffer():
    p = _overrun()
    assert "T.fill(S[48:48 + 32, 0:32], 1.0)" in emit.tilelang_source(p)
    assert overrun.reason(p) == "fill of S[48:80, 0:32] reaches past [64, 32]"
    assert overrun.reason(model.from_json(model.to_json(p))) == overrun.reason(p)
    q = _overrun(form="copy", src="S", dst="R", region=[8, 4, 64, 32])
    assert "T.copy(S, R[8:8 + 64, 4:36])" in emit.tilelang_source(q)
    s = _overrun(form="store", src="S", dst="Q", region=[0, 0, 64, 32])
    assert "T.copy(S, Q[bx * 64 + 0:bx * 64 + 0 + 64, 0:32])" in emit.tilelang_source(s)
    assert overrun.reason(_program(OVER, [LOAD, STORE])) == ""


@pytest.mark.parametrize("fields, error", [
    ({"region": [0, 0, 64, 32]}, "lies inside S's"),
    ({"invalid": False}, "invalid must be one of"),
    ({"form": "store", "src": "S", "dst": "O", "region": [0, 0, 64, 32]}, "end past its 32"),
    ({"form": "copy", "src": "S", "dst": "R", "region": [8, 4, 32, 32]}, "the region is S's shape"),
])
def test_an_overrun_is_refused_where_its_region_lies_inside_or_it_is_not_marked(fields, error):
    with pytest.raises(ProgramError, match=error):
        _overrun(**fields)


def test_the_interpreter_does_an_overruns_in_bounds_part_which_no_verdict_reads():
    n = 64
    p = _overrun()
    init = interpret.initial(p, n, 0)
    want = init["A"].double().clone()
    want[48:64] = 1
    assert torch.equal(interpret.run(p, n, init)["O"], want)


def _drawn(op, draws=600):
    for seed in range(draws):
        p = generate.write(_Random(random.Random(seed)))
        if p is not None and any(s.op == op for s in model.walk(p.body)):
            return p
    return None


class _Random:
    """Choices from a seeded random.Random: the generator's own draws, without Hypothesis's shrinking."""

    def __init__(self, rng):
        self.rng = rng

    def one(self, options):
        return self.rng.choice(tuple(options))

    def between(self, bounds):
        return self.rng.randint(*bounds)

    def flip(self):
        return self.rng.random() < 0.5


@pytest.mark.parametrize("op", ["thread", "thread_atomic", "split", "overrun"])
def test_the_generator_draws_each_kind_within_a_few_hundred_programs(op):
    p = _drawn(op)
    assert p is not None, f"no {op} in 600 drawn programs"
    assert model.from_json(model.to_json(p)) == p
    out = interpret.run(p, 90, interpret.initial(p, 90, 0))
    assert all(torch.isfinite(t).all() for t in out.values())


def _compiled(p) -> object:
    c = case_mod.Case(family="program", program=p, seqlen_q=100, seqlen_k=100)
    return worker.run_case(c, "sm_90a", {})


@pytest.mark.compile
@pytest.mark.parametrize("p", [
    _program(LANE, [LOAD, _thread(), {"op": "copy", "src": "R", "dst": "O", "at": "bx", "row": 0, "col": 0, "form": "tile"}]),
    _program(ATOMIC, [{"op": "copy", "src": "A", "dst": "S", "at": "bx", "row": 0, "col": 0, "form": "tile"},
                      *({"op": "thread_atomic", "kind": k, "dst": TO[k], "target": "row", "row": 1, "col": 0,
                         "value": "mod3", "threads": 128} for k in ("add", "max", "min")),
                      {"op": "copy", "src": "S", "dst": "O", "at": "bx", "row": 0, "col": 0, "form": "tile"}]),
    _split(),
], ids=["thread", "thread_atomic", "split"])
def test_each_kind_compiles_for_sm90a(p):
    result = _compiled(p)
    assert result.verdict == "COMPILED", result.message


@pytest.mark.compile
@pytest.mark.parametrize("fields", [{}, {"form": "copy", "src": "S", "dst": "R", "region": [8, 4, 64, 32]},
                                    {"form": "store", "src": "S", "dst": "Q", "region": [0, 0, 64, 32]}],
                         ids=["fill", "copy", "store"])
def test_an_invalid_program_is_accepts_invalid_or_refused_never_a_compile_error(fields):
    result = _compiled(_overrun(**fields))
    assert result.verdict in ("ACCEPTS_INVALID", "REFUSES_INVALID"), result.message
    assert oracle.invalid(result.case) in result.message
    assert result.verdict.failed == (result.verdict == "ACCEPTS_INVALID")


def test_an_accepted_invalid_program_that_ran_reports_what_the_guard_bands_counted():
    """The GPU path, on the host: a stand-in kernel that writes 3 elements past the end of Q, as a store past an
    n-row global's last column does in its last row."""
    from types import SimpleNamespace

    from harness.kernels import program_family
    p = _overrun(form="store", src="S", dst="Q", region=[0, 0, 64, 32])
    c = case_mod.Case(family="program", program=p, seqlen_q=64, seqlen_k=64)

    def run(kernel, case, inputs):
        q = inputs["Q"]
        torch.as_strided(q, (q.numel() + 3,), (1,), q.storage_offset()).fill_(7)

    fam = SimpleNamespace(runner=SimpleNamespace(make_inputs=program_family.make_inputs, run=run))
    result = worker.accepted_invalid(fam, c, None, oracle.invalid(c))
    assert result.verdict == "ACCEPTS_INVALID" and result.stage == "run" and result.extra["written_outside"] == 3
    assert result.message == ("compiled an invalid program (store of Q[0:64, 0:32] reaches past ['n', 24]); "
                              "the guard bands: Q: 3 elements written after the end (first at +0)")


def test_a_compile_error_of_an_invalid_program_is_refuses_invalid_and_no_failure_while_a_valid_ones_stays():
    from harness.result import Result
    bad = case_mod.Case(family="program", program=_overrun())
    good = case_mod.Case(family="program", program=_program(OVER, [LOAD, STORE]))
    refused = oracle.refused(bad, Result.of(bad, "COMPILE_ERROR", "compile", "InternalError: out of bounds"))
    assert refused.verdict == "REFUSES_INVALID" and not refused.verdict.failed
    assert refused.message == "refused (fill of S[48:80, 0:32] reaches past [64, 32]): InternalError: out of bounds"
    assert oracle.refused(good, Result.of(good, "COMPILE_ERROR", "compile", "x")).verdict == "COMPILE_ERROR"


def test_a_refusal_counts_as_refuses_invalid_only_if_the_program_compiles_without_its_overrun(monkeypatch):
    """TileLang may refuse an invalid program for a reason that has nothing to do with its overrun (a known layout
    failure elsewhere in it): the worker compiles the program without the overrun, and only if that compiles is the
    refusal REFUSES_INVALID; otherwise the compile error stands, the valid part's."""
    from harness import blame
    bad = case_mod.Case(family="program", program=_overrun())
    twin = oracle.valid_twin(bad)
    assert twin is not None and not oracle.invalid(twin) and "overrun" not in model.to_json(twin.program)
    monkeypatch.setattr(blame, "from_compiler", lambda e: True)   # the stand-in error below is TileLang's
    for twin_compiles, verdict in ((True, "REFUSES_INVALID"), (False, "COMPILE_ERROR")):
        def build(fam, case, target, twin_compiles=twin_compiles):
            if oracle.invalid(case) or not twin_compiles:
                raise RuntimeError("InternalError: no layout")
            return object()
        monkeypatch.setattr(worker, "build", build)
        monkeypatch.setattr(worker, "scan", lambda fam, case, kernel: ((), "", ()))
        result = worker.run_case(bad, "sm_90a", {})
        assert result.verdict == verdict, result.message


def test_a_refusal_of_a_program_that_is_nothing_without_its_overrun_is_refuses_invalid(monkeypatch):
    """A store past the end that is the program's only output leaves no program to compile as the control: the
    refusal stands for the invalid program (0.1.15's 'region[0] = 18 > 16' was a COMPILE_ERROR so)."""
    from harness import blame
    only = _program(OVER, [LOAD, {"op": "overrun", "form": "store", "src": "S", "dst": "Q", "region": [0, 0, 64, 32],
                                  "invalid": True}])
    bad = case_mod.Case(family="program", program=only)
    assert oracle.invalid(bad) and oracle.valid_twin(bad) is None
    monkeypatch.setattr(blame, "from_compiler", lambda e: True)

    def build(fam, case, target):
        raise RuntimeError("InternalError: region[0] = 18 > 16")
    monkeypatch.setattr(worker, "build", build)
    assert worker.run_case(bad, "sm_90a", {}).verdict == "REFUSES_INVALID"


def _mapped(expr, dtype="float16"):
    """Load A, set its fragment to `expr` of itself, store it (dtype: the output's)."""
    return model.from_dict({"block": 64, "threads": 128, "buffers": [
        {"name": "A", "scope": "global", "dtype": "float16", "shape": ["n", 32]},
        {"name": "R", "scope": "fragment", "dtype": "float32", "shape": [64, 32]},
        {"name": "O", "scope": "global", "dtype": dtype, "shape": ["n", 32]}], "body": [
        {"op": "copy", "src": "A", "dst": "R", "at": "bx", "row": 0, "col": 0, "form": "tile"},
        {"op": "map", "dst": "R", "rows": 64, "cols": 32, "expr": expr},
        {"op": "copy", "src": "R", "dst": "O", "at": "bx", "row": 0, "col": 0, "form": "tile"}]})


def test_a_program_whose_values_outgrow_the_generators_bounds_is_caught_before_it_judges_the_compiler():
    """A mutant may change a field or insert a statement without the generator's bounds: the corpus checks its float64
    meaning first (interpret.out_of_range); and a reference that is not finite judges nothing of the compiler."""
    from harness import blame
    from harness.kernels import program_family
    from harness.programs import interpret
    assert interpret.out_of_range(_mapped(["mul", ["buf", "R"], ["num", 2]]), 100, 0) == ""
    big = ["mul", ["mul", ["mul", ["mul", ["buf", "R"], ["num", 8]], ["num", 8]], ["num", 8]], ["num", 8]]
    assert "past 2048" in interpret.out_of_range(_mapped(big), 100, 0)   # 2 * 8**4 in float16
    inf = ["exp2", ["exp2", ["exp2", ["num", 8]]]]                      # 2 ** (2 ** 256)
    p = _mapped(inf, "float32")
    assert interpret.out_of_range(p, 100, 0) == "O is not finite"
    c = case_mod.Case(family="program", program=p, seqlen_q=100, seqlen_k=100)
    with pytest.raises(program_family.OutOfRange) as e:
        program_family.reference(c, interpret.initial(p, 100, 0), torch.float64)
    assert blame.classify(e.value, "judge")[0] == "UNSUPPORTED"


def test_an_attention_chain_whose_running_max_is_taken_on_the_first_trip_only_is_unsupported_not_the_harnesss_error():
    """A changed chain (an H200 campaign: 5 HARNESS_ERROR cases of one program in 4,058) put the running max's reduce
    under a `when` of the first trip: exp2(S - m) outgrows float64 at later trips. The unchanged chain keeps to its
    bounds at the same length and inputs."""
    from harness import blame
    from harness.kernels import program_family
    from harness.programs import generate, interpret
    chain = model.to_dict(generate.template("attention"))
    assert interpret.out_of_range(model.from_dict(chain), 448, 25) == ""
    loop = next(s for s in chain["body"] if s["op"] == "loop")
    loop["body"] = [{"op": "when", "test": "first", "at": "k", "body": [s]} if s["op"] == "reduce" else s
                    for s in loop["body"]]
    p = model.from_dict(chain)
    c = case_mod.Case(family="program", program=p, seqlen_q=448, seqlen_k=448, seed=25)
    with pytest.raises(program_family.OutOfRange) as e:
        program_family.reference(c, interpret.initial(p, 448, 25), torch.float64)
    assert blame.classify(e.value, "judge") == ("UNSUPPORTED", f"OutOfRange: {e.value}")

