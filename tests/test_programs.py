"""Generated tile programs (harness.programs): the model and its JSON, the generator's validity, the interpreter
against torch written by hand and against reference.py, the shrinker, and the family's judging (CPU only)."""
import json
import math

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness import case as case_mod
from harness import kernels, oracle, pairwise, reference, strategies
from harness.kernels import program_family
from harness.programs import STATEMENT_KINDS, copy, emit, generate, interpret, model, templates
from harness.programs.builder import LENGTH_BLOCKS
from harness.programs.model import ProgramError

SETTINGS = settings(max_examples=60, deadline=None, database=None, suppress_health_check=list(HealthCheck))


def _buffers(*specs):
    return [{"name": n, "scope": s, "dtype": d, "shape": list(shape)} for n, s, d, shape in specs]


def _program(buffers, body, block=64, threads=128):
    return model.from_dict({"block": block, "threads": threads, "buffers": buffers, "body": body})


COPY = _buffers(("A", "global", "float16", ("n", 72)), ("O", "global", "float32", ("n", 40)),
                ("S", "shared", "float16", (64, 32)))


def test_every_statement_kind_is_registered_with_its_record_and_both_semantics():
    for name, module in STATEMENT_KINDS.items():
        assert issubclass(module.STATEMENT, model.Statement) and module.STATEMENT.op == name
        for part in ("check", "reads", "writes", "full", "tilelang", "torch"):
            assert callable(getattr(module, part)), f"{name} lacks {part}"


@SETTINGS
@given(generate.programs(st))
def test_generated_programs_are_valid_and_round_trip(p):
    text = model.to_json(p)
    assert model.from_json(text) == p and model.to_json(model.from_json(text)) == text
    assert p.written() and model.fingerprint(p)
    compile(emit.module(p), "<program>", "exec")  # Python accepts the text TileLang will parse


@SETTINGS
@given(generate.programs(st), st.integers(1, 200))
def test_the_interpreter_runs_every_generated_program_without_reading_undefined_values(p, n):
    out = interpret.run(p, n, interpret.initial(p, n, 0))
    assert set(out) == set(p.written())
    # Local buffers start as NaN: a value read before it is written would show (the rules forbid it).
    assert all(torch.isfinite(t).all() for t in out.values())


def test_a_copy_with_a_ragged_tail_reads_zeros_and_writes_only_rows_below_n():
    p = _program(COPY, [{"op": "copy", "src": "A", "dst": "S", "at": "bx", "row": 0, "col": 8, "form": "tile"},
                        {"op": "copy", "src": "S", "dst": "O", "at": "bx", "row": 0, "col": 4, "form": "loop"}])
    init = interpret.initial(p, 70, 0)
    out = interpret.run(p, 70, init)["O"]
    want = init["O"].double().clone()
    want[:, 4:36] = init["A"][:, 8:40].double()
    assert torch.equal(out, want)


def test_gemm_reduce_map_and_atomic_mean_what_torch_says():
    bufs = _buffers(("A", "global", "float16", ("n", 32)), ("B", "global", "float16", ("n", 32)),
                    ("O", "global", "float32", ("n", 64)), ("D", "global", "float32", (64, 64)),
                    ("As", "shared", "float16", (64, 32)), ("Bs", "shared", "float16", (64, 32)),
                    ("C", "fragment", "float32", (64, 64)), ("m", "fragment", "float32", (64,)))
    body = [{"op": "copy", "src": "A", "dst": "As", "at": "bx", "row": 0, "col": 0, "form": "tile"},
            {"op": "copy", "src": "B", "dst": "Bs", "at": "bx", "row": 0, "col": 0, "form": "tile"},
            {"op": "gemm", "a": "As", "b": "Bs", "c": "C", "ta": False, "tb": True, "clear": True, "policy": "Square"},
            {"op": "reduce", "src": "C", "dst": "m", "kind": "max", "dim": 1, "clear": True},
            {"op": "map", "dst": "C", "rows": 64, "cols": 64, "expr": ["sub", ["buf", "C"], ["buf", "m"]]},
            {"op": "copy", "src": "C", "dst": "O", "at": "bx", "row": 0, "col": 0, "form": "tile"},
            {"op": "atomic", "kind": "add", "src": "C", "dst": "D", "at": "0", "row": 0, "col": 0, "form": "element"}]
    p, n = _program(bufs, body), 100
    init = interpret.initial(p, n, 0)
    out = interpret.run(p, n, init)
    a, b = init["A"].double(), init["B"].double()
    want_o, want_d = init["O"].double().clone(), init["D"].double().clone()
    for bx in range(2):
        rows = slice(64 * bx, min(n, 64 * bx + 64))
        at, bt = torch.zeros(64, 32, dtype=torch.float64), torch.zeros(64, 32, dtype=torch.float64)
        at[:rows.stop - rows.start], bt[:rows.stop - rows.start] = a[rows], b[rows]
        c = at @ bt.T
        c = c - c.amax(1, keepdim=True)
        want_o[rows] = c[:rows.stop - rows.start]
        want_d += c
    assert torch.equal(out["O"], want_o) and torch.equal(out["D"], want_d)


@pytest.mark.parametrize("kind, dim, reverse, in_place", [("sum", 1, False, False), ("sum", 0, True, True),
                                                        ("max", 0, False, False), ("max", 1, True, True)])
def test_a_scan_means_a_cumulative_sum_or_maximum_of_the_tile(kind, dim, reverse, in_place):
    bufs = _buffers(("A", "global", "float16", ("n", 32)), ("O", "global", "float16", ("n", 32)),
                    ("S", "shared", "float16", (32, 32)), ("R", "shared", "float16", (32, 32)))
    dst = "S" if in_place else "R"
    p = _program(bufs, [{"op": "copy", "src": "A", "dst": "S", "at": "bx", "row": 0, "col": 0, "form": "tile"},
                        {"op": "scan", "src": "S", "dst": dst, "kind": kind, "dim": dim, "reverse": reverse},
                        {"op": "copy", "src": dst, "dst": "O", "at": "bx", "row": 0, "col": 0, "form": "tile"}],
                 block=32)
    n = 50
    init = interpret.initial(p, n, 0)
    want = init["O"].double().clone()
    for bx in range(2):
        tile = torch.zeros(32, 32, dtype=torch.float64)
        rows = min(n, 32 * bx + 32) - 32 * bx
        tile[:rows] = init["A"][32 * bx: 32 * bx + rows].double()
        line = [tile.select(dim, i) for i in range(32)]
        order = range(31, -1, -1) if reverse else range(32)
        acc = None
        for i in order:  # element by element, as written in no library
            acc = line[i].clone() if acc is None else (acc + line[i] if kind == "sum" else torch.maximum(acc, line[i]))
            tile.select(dim, i).copy_(acc)
        want[32 * bx: 32 * bx + rows] = tile[:rows]
    assert torch.equal(interpret.run(p, n, init)["O"], want)
    assert f"T.cum{kind}(S{'' if in_place else ', R'}, dim={dim}, reverse={reverse})" in emit.tilelang_source(p)


@pytest.mark.parametrize("kind, clear, want", [
    ("min", True, lambda x, old: x.amin(1)), ("min", False, lambda x, old: torch.minimum(old, x.amin(1))),
    ("absmax", True, lambda x, old: x.abs().amax(1))])
def test_a_reduce_min_or_abs_max_means_what_torch_says(kind, clear, want):
    bufs = _buffers(("A", "global", "float32", ("n", 32)), ("O", "global", "float32", ("n", 32)),
                    ("X", "fragment", "float32", (32, 32)), ("m", "fragment", "float32", (32,)))
    body = [{"op": "copy", "src": "A", "dst": "X", "at": "bx", "row": 0, "col": 0, "form": "tile"},
            {"op": "fill", "dst": "m", "value": -1},
            {"op": "reduce", "src": "X", "dst": "m", "kind": kind, "dim": 1, "clear": clear},
            {"op": "map", "dst": "X", "rows": 32, "cols": 32, "expr": ["buf", "m"]},
            {"op": "copy", "src": "X", "dst": "O", "at": "bx", "row": 0, "col": 0, "form": "tile"}]
    p, n = _program(bufs, body, block=32), 32
    init = interpret.initial(p, n, 0)
    expected = want(init["A"].double(), torch.full((32,), -1.0, dtype=torch.float64))
    assert torch.equal(interpret.run(p, n, init)["O"][:, 0], expected)
    assert f"T.reduce_{kind}(X, m, dim=1, clear={clear})" in emit.tilelang_source(p)
    if kind == "absmax":
        with pytest.raises(ProgramError, match="absmax always clears"):
            _program(bufs, [*body[:2], {**body[2], "clear": False}, *body[3:]], block=32)


def test_a_scan_is_valid_at_any_thread_count_and_refused_between_unlike_tiles():
    """TileLang's scan templates take a power-of-two thread count: a limit of the compiler, not of the language, so
    a scan over 96 threads is a valid program (and a known failure), not one the rules refuse."""
    bufs = _buffers(("A", "global", "float32", ("n", 32)), ("O", "global", "float32", ("n", 32)),
                    ("S", "shared", "float32", (32, 32)))
    body = [{"op": "copy", "src": "A", "dst": "S", "at": "bx", "row": 0, "col": 0, "form": "tile"},
            {"op": "scan", "src": "S", "dst": "S", "kind": "sum", "dim": 0, "reverse": False},
            {"op": "copy", "src": "S", "dst": "O", "at": "bx", "row": 0, "col": 0, "form": "tile"}]
    _program(bufs, body, block=32, threads=128)
    _program(bufs, body, block=32, threads=96)
    body[1], body[2] = {**body[1], "dst": "Fr"}, {**body[2], "src": "Fr"}
    with pytest.raises(ProgramError, match="Fr must be a shared float32 buffer"):
        _program(bufs + _buffers(("Fr", "fragment", "float32", (32, 32))), body, block=32, threads=128)


def test_on_one_key_block_the_interpreter_is_attention_as_reference_py_computes_it():
    """S = QK^T, P = exp2(S - rowmax), O = PV / rowsum: softmax attention at scale ln 2 (exp(s ln 2) = 2^s)."""
    bufs = _buffers(("Q", "global", "float16", ("n", 64)), ("K", "global", "float16", ("n", 64)),
                    ("V", "global", "float16", ("n", 64)), ("O", "global", "float32", ("n", 64)),
                    ("Qs", "shared", "float16", (64, 64)), ("Ks", "shared", "float16", (64, 64)),
                    ("Vs", "shared", "float16", (64, 64)), ("S", "fragment", "float32", (64, 64)),
                    ("m", "fragment", "float32", (64,)), ("l", "fragment", "float32", (64,)),
                    ("Ps", "shared", "float16", (64, 64)), ("Of", "fragment", "float32", (64, 64)))
    load = [{"op": "copy", "src": x, "dst": x + "s", "at": "bx", "row": 0, "col": 0, "form": "tile"} for x in "QKV"]
    body = load + [
        {"op": "gemm", "a": "Qs", "b": "Ks", "c": "S", "ta": False, "tb": True, "clear": True, "policy": "FullRow"},
        {"op": "map", "dst": "S", "rows": 64, "cols": 64, "expr": ["where", ["col<n", "bx"], ["buf", "S"], ["num", -1.0]]},
        {"op": "reduce", "src": "S", "dst": "m", "kind": "max", "dim": 1, "clear": True},
        {"op": "map", "dst": "S", "rows": 64, "cols": 64,
         "expr": ["where", ["col<n", "bx"], ["exp2", ["sub", ["buf", "S"], ["buf", "m"]]], ["num", 0]]},
        {"op": "reduce", "src": "S", "dst": "l", "kind": "sum", "dim": 1, "clear": True},
        {"op": "copy", "src": "S", "dst": "Ps", "at": "0", "row": 0, "col": 0, "form": "tile"},
        {"op": "gemm", "a": "Ps", "b": "Vs", "c": "Of", "ta": False, "tb": False, "clear": True, "policy": "FullRow"},
        {"op": "map", "dst": "Of", "rows": 64, "cols": 64, "expr": ["div", ["buf", "Of"], ["buf", "l"]]},
        {"op": "copy", "src": "Of", "dst": "O", "at": "bx", "row": 0, "col": 0, "form": "tile"}]
    p, n = _program(bufs, body), 37
    g = torch.Generator().manual_seed(1)
    init = {b.name: (torch.randn(n, 64, generator=g) / 4).to(torch.float16) for b in p.globals}
    got = interpret.run(p, n, init)["O"][:n]
    q, k, v = (init[x].double()[None, None] for x in "QKV")
    seen = torch.ones(n, n, dtype=torch.bool)
    want, _ = reference.attention(q, k, v, None, seen, math.log(2))
    # P is rounded to float16 on its way to the PV gemm (its shared buffer's dtype); reference.py keeps float64.
    assert torch.allclose(got, want[0, 0], atol=2e-3, rtol=2e-3)


@pytest.mark.parametrize("program, reason", [
    ({"block": 64, "threads": 128, "buffers": [], "body": []}, "n rows"),
    ({"block": 64, "threads": 128, "buffers": COPY[:1], "body": []}, "no output"),
    ({"block": 64, "threads": 128, "buffers": _buffers(("os.system", "global", "float16", ("n", 8))), "body": []}, "buffer name"),
    ({"block": 64, "threads": 128, "buffers": COPY,
      "body": [{"op": "copy", "src": "S", "dst": "O", "at": "bx", "row": 0, "col": 0, "form": "tile"}]}, "before every element"),
    ({"block": 64, "threads": 128, "buffers": COPY,
      "body": [{"op": "copy", "src": "A", "dst": "S", "at": "k", "row": 0, "col": 0, "form": "tile"}]}, "inside a loop"),
    ({"block": 32, "threads": 128, "buffers": COPY,
      "body": [{"op": "copy", "src": "A", "dst": "S", "at": "bx", "row": 0, "col": 0, "form": "tile"},
               {"op": "copy", "src": "S", "dst": "O", "at": "bx", "row": 0, "col": 0, "form": "tile"}]}, "own rows"),
])
def test_malformed_programs_are_refused_with_the_reason(program, reason):
    with pytest.raises(ProgramError, match=reason):
        model.from_dict(program)


LOAD_FIELDS = {"op": "copy", "src": "A", "dst": "S", "at": "bx", "row": 0, "col": 0, "form": "tile"}


@pytest.mark.parametrize("statement, reason", [
    ({**LOAD_FIELDS, "colour": "red"}, r"statement 0 \(copy\): unknown field\(s\) \['colour'\]"),
    ({k: v for k, v in LOAD_FIELDS.items() if k != "row"}, r"statement 0 \(copy\): missing field 'row'"),
    ({**LOAD_FIELDS, "row": None}, r"statement 0 \(copy\): row must not be null"),
    ({**LOAD_FIELDS, "row": "0"}, r"statement 0 \(copy\): row must be int"),
])
def test_a_statements_json_is_read_into_its_kinds_record_with_exactly_its_fields(statement, reason):
    store = {"op": "copy", "src": "S", "dst": "O", "at": "bx", "row": 0, "col": 0, "form": "tile"}
    p = model.from_dict({"block": 64, "threads": 128, "buffers": COPY, "body": [LOAD_FIELDS, store]})
    assert p.body[0] == copy.Copy(src="A", dst="S", at="bx", row=0, col=0, form="tile")
    assert model.to_dict(p)["body"] == [LOAD_FIELDS, store]
    with pytest.raises(ProgramError, match=reason):
        model.from_dict({"block": 64, "threads": 128, "buffers": COPY, "body": [statement, store]})


STREAM = _buffers(("A", "global", "float16", ("n", 40)), ("O", "global", "float32", ("n", 32)),
                  ("S", "shared", "float16", (64, 32)), ("Fr", "fragment", "float32", (64, 32)))


def _stream(body, trips="n", threads=256, col=8, before=(), load="tma"):
    return {"block": 64, "threads": threads, "buffers": STREAM,
            "body": [*before, {"op": "stream", "src": "A", "dst": "S", "row": 0, "col": col, "stages": 2, "trips": trips,
                               "load": load, "body": body}]}


_STORE = {"op": "copy", "src": "Fr", "dst": "O", "at": "bx", "row": 0, "col": 0, "form": "tile"}
_TAKE = {"op": "copy", "src": "S", "dst": "Fr", "at": "0", "row": 0, "col": 0, "form": "tile"}


@pytest.mark.parametrize("program, reason", [
    (_stream([_TAKE, _STORE], threads=128), "128 or 256 consumers"),
    (_stream([_TAKE, _STORE], col=4), "16 bytes"),
    (_stream([_STORE], before=[{"op": "fill", "dst": "Fr", "value": 1}]), "inside the stream and outside"),
    (_stream([{"op": "loop", "kind": "serial", "trips": 1, "stages": 0, "body": [_TAKE, _STORE]}]), "no loop inside a loop"),
])
def test_a_stream_keeps_to_what_warp_specialization_can_lay_out(program, reason):
    with pytest.raises(ProgramError, match=reason):
        model.from_dict(program)


@pytest.mark.parametrize("load", ["tma", "copy"])
def test_a_stream_means_a_loop_over_its_tiles_and_declares_a_primed_ring(load):
    p = model.from_dict(_stream([_TAKE, _STORE], load=load))
    init = interpret.initial(p, 150, 0)
    want = init["O"].double().clone()
    for bx in range(3):  # the last trip's tile stays in each block's rows; rows past n are not written
        last = (150 + 63) // 64 - 1
        rows = min(64, 150 - bx * 64)
        tile = torch.zeros(64, 32, dtype=torch.float64)
        tile[:max(0, min(64, 150 - last * 64))] = init["A"][last * 64:last * 64 + 64, 8:40].double()
        want[bx * 64:bx * 64 + rows] = tile[:rows]
    assert torch.equal(interpret.run(p, 150, init)["O"], want)
    text = emit.tilelang_source(p)
    assert "empty = T.alloc_barrier([128] * 2)" in text and "for s in T.unroll(2):" in text
    assert ("T.tma_copy(A[k * 64 + 0:" in text and "full = T.alloc_barrier([1] * 2)" in text) if load == "tma" else \
        ("T.copy(A[k * 64 + 0:" in text and "full = T.alloc_barrier([128] * 2)" in text)
    assert model.fingerprint(p) == "stream[copy copy]"
    assert any(step.startswith("unwrap stream") for step, _ in generate.shrink(p))


def test_an_atomic_into_shared_memory_updates_a_tile_that_holds_values():
    bufs = _buffers(("A", "global", "float32", ("n", 32)), ("O", "global", "float32", ("n", 32)),
                    ("Fr", "fragment", "float32", (64, 16)), ("S", "shared", "float32", (64, 32)))
    load = [{"op": "copy", "src": "A", "dst": "Fr", "at": "bx", "row": 0, "col": 0, "form": "tile"}]
    add = {"op": "atomic", "kind": "add", "src": "Fr", "dst": "S", "at": "0", "row": 0, "col": 16, "form": "tile"}
    with pytest.raises(ProgramError, match="before every element"):
        _program(bufs, load + [add, {**_STORE, "src": "S"}])
    p = _program(bufs, load + [{"op": "fill", "dst": "S", "value": 1}, add, {**_STORE, "src": "S"}])
    init = interpret.initial(p, 64, 0)
    want = torch.ones(64, 32, dtype=torch.float64)
    want[:, 16:] += init["A"][:, :16].double()
    assert torch.equal(interpret.run(p, 64, init)["O"], want)
    assert "T.atomic_add(S[0 + 0, 16], Fr)" in emit.tilelang_source(p)


def _tile_sum_loop(trips):
    """O += every A tile the loop visits (a pipelined loop of `trips`), in each block of the grid."""
    bufs = _buffers(("A", "global", "float32", ("n", 32)), ("O", "global", "float32", (64, 32)),
                    ("Fr", "fragment", "float32", (64, 32)))
    return _program(bufs, [{"op": "loop", "kind": "pipelined", "trips": trips, "stages": 2, "body": [
        {"op": "copy", "src": "A", "dst": "Fr", "at": "k", "row": 0, "col": 0, "form": "tile"},
        {"op": "atomic", "kind": "add", "src": "Fr", "dst": "O", "at": "0", "row": 0, "col": 0, "form": "tile"}]}])


def test_a_symbolic_trip_count_one_short_runs_no_trip_when_n_fits_one_block():
    p = _tile_sum_loop("n-1")
    assert "T.Pipelined(T.ceildiv(n, 64) - 1, num_stages=2)" in emit.tilelang_source(p)
    one = interpret.initial(p, 64, 0)
    assert torch.equal(interpret.run(p, 64, one)["O"], one["O"].double())
    three = interpret.initial(p, 130, 0)
    a = three["A"].double()
    assert torch.equal(interpret.run(p, 130, three)["O"], three["O"].double() + 3 * (a[:64] + a[64:128]))


def test_a_trip_count_of_whole_blocks_runs_none_under_a_block_and_skips_a_partial_one():
    p = _tile_sum_loop("n//b")
    assert "T.Pipelined(n // 64, num_stages=2)" in emit.tilelang_source(p)
    short = interpret.initial(p, 63, 0)
    assert torch.equal(interpret.run(p, 63, short)["O"], short["O"].double())
    two = interpret.initial(p, 127, 0)  # two blocks of the grid, one whole block of rows: one trip each
    assert torch.equal(interpret.run(p, 127, two)["O"], two["O"].double() + 2 * two["A"].double()[:64])


def test_a_fill_of_a_region_changes_only_its_elements():
    bufs = _buffers(("A", "global", "float32", ("n", 32)), ("O", "global", "float32", ("n", 32)),
                    ("Fr", "fragment", "float32", (64, 32)))
    load = {"op": "copy", "src": "A", "dst": "Fr", "at": "bx", "row": 0, "col": 0, "form": "tile"}
    region = {"op": "fill", "dst": "Fr", "value": -3, "region": [3, 8, 8, 16]}
    p = _program(bufs, [load, region, _STORE])
    assert "T.fill(Fr[3:11, 8:24], -3.0)" in emit.tilelang_source(p)
    init = interpret.initial(p, 64, 0)
    want = init["A"].double().clone()
    want[3:11, 8:24] = -3
    assert torch.equal(interpret.run(p, 64, init)["O"], want)
    with pytest.raises(ProgramError, match="before every element"):  # a region defines nothing by itself
        _program(bufs, [region, _STORE])
    with pytest.raises(ProgramError, match="outside"):
        _program(bufs, [load, {**region, "region": [60, 8, 8, 16]}, _STORE])


def test_a_map_at_an_offset_writes_there_and_reads_its_operands_from_the_start():
    bufs = _buffers(("A", "global", "float32", ("n", 32)), ("O", "global", "float32", ("n", 32)),
                    ("Fr", "fragment", "float32", (64, 32)), ("G", "fragment", "float32", (64, 32)))
    load = [{"op": "copy", "src": "A", "dst": n, "at": "bx", "row": 0, "col": 0, "form": "tile"} for n in ("Fr", "G")]
    shifted = {"op": "map", "dst": "Fr", "rows": 4, "cols": 16, "offset": [3, 16], "expr": ["add", ["buf", "G"], ["num", 1]]}
    p = _program(bufs, load + [shifted, _STORE])
    assert "Fr[3 + i, 16 + j] = (G[i, j] + T.float32(1.0))" in emit.tilelang_source(p)
    init = interpret.initial(p, 64, 0)
    want = init["A"].double().clone()
    want[3:7, 16:32] = init["A"][:4, :16].double() + 1
    assert torch.equal(interpret.run(p, 64, init)["O"], want)
    with pytest.raises(ProgramError, match="does not read Fr"):
        _program(bufs, load + [{**shifted, "expr": ["buf", "Fr"]}, _STORE])
    with pytest.raises(ProgramError, match="exceed"):
        _program(bufs, load + [{**shifted, "offset": [61, 16]}, _STORE])


def test_the_dq_layout_is_a_bijection_and_the_reference_gives_memory_in_its_order():
    ns = {"torch": torch}
    exec(emit.HELPERS, ns)
    g = torch.zeros(16, 24)
    order = ns["dq_order"](g)
    assert sorted(order.flatten().tolist()) == list(range(16 * 24))
    assert order[0, 1] == 32 and order[1, 0] == 4 and order[0, 2] == 1 and order[0, 8] == 64
    bufs = _buffers(("A", "global", "float32", ("n", 24)), ("Fr", "fragment", "float32", (64, 24)))
    bufs.append({"name": "D", "scope": "global", "dtype": "float32", "shape": [64, 24], "layout": "dq"})
    p = _program(bufs, [{"op": "copy", "src": "A", "dst": "Fr", "at": "bx", "row": 0, "col": 0, "form": "tile"},
                        {"op": "atomic", "kind": "add", "src": "Fr", "dst": "D", "at": "0", "row": 0, "col": 0,
                         "form": "tile"}])
    assert "T.Layout((64, 24), lambda r, c: [r // 8, c // 8, c % 2, 4 * (r % 8) + (c % 8) // 2])" in emit.tilelang_source(p)
    init = interpret.initial(p, 64, 0)
    init["D"] = torch.zeros(64, 24)
    memory = interpret.run(p, 64, init)["D"]
    assert torch.equal(memory.flatten()[ns["dq_order"](memory)], init["A"].double())
    with pytest.raises(ProgramError, match="layout"):
        model.from_dict({**model.to_dict(p), "buffers": [dict(b, layout="dq") if b["name"] == "A" else b
                                                         for b in model.to_dict(p)["buffers"]]})


def test_a_case_carries_its_program_as_an_object_and_refuses_a_bad_one():
    p = generate.template("pipelined_gemm")
    c = case_mod.Case(family="program", program=p, seqlen_q=70, seqlen_k=70)
    d = json.loads(case_mod.to_json(c))
    assert isinstance(d["program"], dict) and case_mod.from_json(case_mod.to_json(c)) == c
    d["program"]["body"][0]["op"] = "launch_missiles"
    with pytest.raises(case_mod.CaseError, match="program: a statement"):
        case_mod.from_dict(d)
    assert "program" not in case_mod.to_dict(case_mod.Case())  # other families' ids are unchanged


def test_the_covering_array_puts_every_chain_under_every_twin():
    rows = pairwise.covering("program", 0)
    assert {(pairwise.levels(r)["program"], r.knobs) for r in rows} == \
        {(t, k) for t in templates.TEMPLATES for k in ((),) + tuple((x,) for x in program_family.TWINS)}
    for name in templates.TEMPLATES:
        assert templates.construct(generate.template(name)) == name


def test_shrinking_keeps_programs_valid_and_reaches_a_few_statements():
    p = generate.template("attention")
    steps = generate.shrink(p)
    assert steps and all(model.check(q) == q for _, q in steps)
    assert any("drop statement" in step for step, _ in steps) and any("unwrap loop" in step for step, _ in steps)
    # Greedy: keep dropping while something stays valid (as the minimizer does while the failure holds).
    size = len(list(model.walk(p.body)))
    while (smaller := generate.shrink(p)):
        p = smaller[0][1]
    assert len(list(model.walk(p.body))) < size and p.written()


def _judged(p, n, change=None):
    c = case_mod.Case(family="program", program=p, seqlen_q=n, seqlen_k=n, seed=3)
    fam = kernels.family("program")
    inputs = fam.runner.make_inputs(c, "cpu")
    outputs = fam.judge.reference(c, inputs, torch.float64)
    if change:
        change(outputs)
    return oracle.judge(c, fam, inputs, {k: v.to(torch.float32) for k, v in outputs.items()})


def test_exact_programs_are_held_bit_exact_and_a_one_off_element_is_a_mismatch_in_its_region():
    p = generate.template("copy")
    assert _judged(p, 40).verdict == "PASS"
    name = p.written()[0]
    r = _judged(p, 40, lambda out: out[name].__setitem__((33, 0), out[name][33, 0] + 1))
    assert (r.verdict, r.tensor, r.region) == ("MISMATCH", name, "tail_block")
    assert r.checks[0]["tolerance"] == 0.0


def test_program_lengths_stay_below_the_generators_trip_bound():
    cases = strategies.draw("program", 30, seed=2, per_kernel=3)
    assert len(cases) == 30
    for c in cases:
        p = c.program
        assert 1 <= c.seqlen_q < LENGTH_BLOCKS * p.block and c.heads == 1 and set(c.knobs) <= set(program_family.TWINS)


def test_the_signature_names_the_constructs_and_the_twin():
    p = generate.template("reduce")
    c = case_mod.Case(family="program", program=p, knobs=("no_tma",))
    from harness.result import Result
    r = Result.of(c, "MISMATCH", "judge", "x", tensor=p.written()[0], region="twin:no_tma")
    assert r.signature[1] == "program:" + model.fingerprint(p) and "twin:no_tma" in r.signature


def test_harness_programs_lists_every_kind_chain_and_twin():
    import subprocess
    import sys
    out = subprocess.run([sys.executable, "-m", "harness.cli", "programs"], capture_output=True, text=True, check=True).stdout
    for name in (*STATEMENT_KINDS, *templates.TEMPLATES, *program_family.TWINS):
        assert f" {name}" in out, name


def _exported(rid, tmp_path):
    from harness import export, reproducer_files, reproducer_loading
    path, calls = export.export(reproducer_loading.load(reproducer_files.find(rid)), tmp_path / f"{rid}.py")
    return path


@pytest.mark.parametrize("rid", ["19be18df3f5c", "afbd3b136354", "be71d6527dc3"])
def test_a_generated_finding_exports_as_a_small_file_of_tilelang_and_torch(rid, tmp_path):
    text = _exported(rid, tmp_path).read_text()
    assert "harness" not in text.split('"""', 2)[2]  # past the docstring: nothing of the harness
    assert len(text.splitlines()) <= 80 and "REPRODUCED" in text
    compile(text, rid, "exec")


@pytest.mark.compile
def test_the_exported_compile_error_reproduces_alone(tmp_path):
    """19be18df3f5c's file, run with nothing but tilelang and torch: compile-only without a GPU."""
    import subprocess
    import sys
    path = _exported("19be18df3f5c", tmp_path)
    done = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert done.returncode == 1 and "REPRODUCED:" in done.stdout, done.stdout + done.stderr[-2000:]


@SETTINGS
@given(generate.programs(st), st.integers(1, 150))
def test_a_backward_slice_computes_the_same_output(p, n):
    """`shrink`'s first steps keep only what one output depends on: that output must not change."""
    init = interpret.initial(p, n, 0)
    whole = interpret.run(p, n, init)
    for step, q in generate.shrink(p):
        if step.startswith("only what "):
            name = step.split()[2]
            assert torch.equal(interpret.run(q, n, {b.name: init[b.name] for b in q.globals})[name], whole[name]), step


def test_the_minimizer_drops_statements_while_the_failure_stays():
    """A stand-in compiler that fails whenever a program holds a reduce: the attention chain shrinks to a few
    statements, though each drop changes the statement kinds its signature names."""
    from harness import minimize
    from harness.result import Result

    def evaluate(c):
        p = c.program
        bad = any(s.op == "reduce" for s in model.walk(p.body))
        return Result.of(c, "COMPILE_ERROR" if bad else "COMPILED", "compile", "reduce refused" if bad else "")
    start = case_mod.Case(family="program", program=generate.template("attention"), seqlen_q=70, seqlen_k=70)
    small, steps = minimize.minimize(start, evaluate(start).signature, evaluate, budget_s=60)
    p = small.program
    # A reduce needs a fragment a gemm fills from two loads, a result something reads (its own fold: a fill
    # first), and an output: 7 statements, down from 14.
    assert evaluate(small).verdict == "COMPILE_ERROR" and len(list(model.walk(p.body))) <= 7, model.fingerprint(p)
    assert evaluate(small).signature != evaluate(start).signature  # the recorded one names what remains


def _pipelined_split(p):
    """(the first pipelined loop, the statements after it, the buffers' scopes), or None without such a loop."""
    loops = [i for i, s in enumerate(p.body) if s.op == "loop" and s.kind == "pipelined"]
    return (p.body[loops[0]], p.body[loops[0] + 1:], {b.name: b.scope for b in p.buffers}) if loops else None


def _zero_trip_epilogue(p):
    """O stored through a shared tile after a pipelined loop that may run zero times (54d466153e16)."""
    split = _pipelined_split(p)
    return split is not None and split[0].trips in ("n-1", "n//b") and any(
        s.op == "copy" and split[2][s.src] == "fragment" and split[2][s.dst] == "shared" for s in split[1])


def _prologue_for_epilogue(p):
    """A shared tile loaded before a pipelined loop and read only after it (tile-ai/tilelang#2443)."""
    split = _pipelined_split(p)
    if split is None:
        return False
    loop, after, scope = split
    before = p.body[:p.body.index(loop)]
    loaded = {s.dst for s in before if s.op == "copy" and scope[s.src] == "global" and scope[s.dst] == "shared"}
    return any(f"'{d}'" not in str(loop) and f"'{d}'" in str(after) for d in loaded)  # names, quoted


@pytest.mark.parametrize("construct", [_zero_trip_epilogue, _prologue_for_epilogue])
def test_the_draw_reaches_the_constructs_of_known_warp_specialization_bugs(construct):
    """Hypothesis finds a drawn program holding each construct (a few in a thousand programs hold the first)."""
    from hypothesis import find
    assert construct(find(generate.programs(st), construct,
                          settings=settings(max_examples=3000, database=None, suppress_health_check=list(HealthCheck))))


def test_a_failure_met_through_other_statements_is_shown_alike_a_recorded_one():
    """Two programs of other statement kinds failing alike (the minimizer's `unscoped` signature) are most likely
    one bug: the report names the recorded one ("like ID"); a program failing otherwise, or one recorded itself, not."""
    from harness import report
    from harness.result import Result, alike

    def failed(name, message="TypeError: Downcast from tirx.Sub to ir.IntImm failed."):
        c = case_mod.Case(family="program", program=generate.template(name))
        return Result.of(c, "COMPILE_ERROR", "compile", message)
    recorded, other, unlike = failed("reduce"), failed("attention"), failed("attention", "InternalError: no layout")
    assert recorded.signature != other.signature
    known = {recorded.signature: "reproducers/compiler/752120de86bc.json"}
    assert alike(other.signature, known) == known[recorded.signature]
    assert alike(recorded.signature, known) is None and alike(unlike.signature, known) is None
    table = report.failure_table([recorded, other, unlike], known)
    assert list(table["known"]) == ["752120de86bc", "like 752120de86bc", ""]


def test_a_failure_row_names_the_code_scan_checks_its_cases_carried():
    """391bcfb1f341 was 2c4e73a32b9e in another region: no signature matched, but the scan had named its race."""
    from harness import report
    from harness.codegen.source import LineFinding
    from harness.result import Result

    c = case_mod.Case(family="program", program=generate.template("attention"))
    race = LineFinding("barriers_in_skipped_loops", 57, "S4 written by the threads at line 57 and read here")
    failed = [Result.of(c.replace(seed=s), "MISMATCH", "judge", "G7: max error 2 > tolerance 0 at [24, 0]", tensor="G7",
                        region="interior", hazards=h) for s, h in ((1, (race,)), (2, ()))]
    table = report.failure_table(failed, {})
    assert list(table["count"]) == [2] and list(table["scan"]) == ["barriers_in_skipped_loops"]


def _when(at, test, body):
    return {"op": "when", "at": at, "test": test, "body": list(body)}


LOAD_S = {"op": "copy", "src": "A", "dst": "S", "at": "bx", "row": 0, "col": 8, "form": "tile"}
STORE_S = {"op": "copy", "src": "S", "dst": "O", "at": "bx", "row": 0, "col": 4, "form": "tile"}


@pytest.mark.parametrize("test, blocks", [("first", [0]), ("later", [1, 2]), ("even", [0, 2]), ("not_last", [0, 1])])
def test_a_when_runs_its_body_in_the_blocks_its_condition_names(test, blocks):
    p = _program(COPY, [LOAD_S, _when("bx", test, (STORE_S,))])
    n = 150  # three blocks of 64, the last ragged
    init = interpret.initial(p, n, 0)
    out = interpret.run(p, n, init)["O"]
    for bx in range(3):
        rows = slice(64 * bx, min(64 * bx + 64, n))
        want = init["A"][rows, 8:40].double() if bx in blocks else init["O"][rows, 4:36].double()
        assert torch.equal(out[rows, 4:36], want), (test, bx)
    src = emit.tilelang_source(p)
    assert {"first": "if bx == 0:", "later": "if bx > 0:", "even": "if bx % 2 == 0:",
            "not_last": "if bx < T.ceildiv(n, 64) - 1:"}[test] in src


@pytest.mark.parametrize("body, error", [
    ([LOAD_S, _when("bx", "first", (_when("bx", "later", (STORE_S,)),))], "no when inside a when"),
    ([LOAD_S, _when("k", "first", (STORE_S,))], "at 'k' only inside a loop"),
    ([{"op": "loop", "kind": "serial", "trips": 2, "stages": 0, "body": [LOAD_S, _when("k", "not_last", (STORE_S,))]}],
     "a trip is tested first, later or even"),
    ([LOAD_S, _when("bx", "even", ({"op": "loop", "kind": "serial", "trips": 1, "stages": 0, "body": [STORE_S]},))],
     "no loop inside a when"),
    ([_when("bx", "first", (LOAD_S,)), STORE_S], "reads S before every element of it is written"),
])
def test_the_rules_of_a_when(body, error):
    with pytest.raises(ProgramError, match=error):
        _program(COPY, body)


def test_a_when_shrinks_to_its_body_and_the_draw_writes_one_in_a_chain_and_in_a_loop():
    from hypothesis import find
    p = _program(COPY, [LOAD_S, _when("bx", "later", (STORE_S,))])
    assert ("unwrap when 1", _program(COPY, [LOAD_S, STORE_S])) in generate.shrink(p)
    relaxed = settings(max_examples=3000, database=None, suppress_health_check=list(HealthCheck))
    for at in ("bx", "k"):
        def tests_at(q, at=at):
            return any(s.op == "when" and s.at == at for s in model.walk(q.body))
        assert tests_at(find(generate.programs(st), tests_at, settings=relaxed))


PIPE = _buffers(("A", "global", "float16", ("n", 72)), ("O", "global", "float32", ("n", 40)),
                ("S", "shared", "float16", (64, 32)), ("R", "fragment", "float32", (64, 32)))


def _scheduled(stages, schedule="late_first", body=None):
    body = body or [{"op": "copy", "src": "A", "dst": "S", "at": "k", "row": 0, "col": 8, "form": "tile"},
                    {"op": "copy", "src": "S", "dst": "R", "at": "0", "row": 0, "col": 0, "form": "tile"}]
    loop = {"op": "loop", "kind": "pipelined", "trips": 3, "stages": 0, "schedule": schedule,
            "body": [dict(x, stage=t) for x, t in zip(body, stages)]}
    return _program(PIPE, [loop, {"op": "copy", "src": "R", "dst": "O", "at": "bx", "row": 0, "col": 4, "form": "tile"}])


def test_a_manual_pipeline_schedule_is_emitted_as_order_and_stage_and_means_the_serial_loop():
    p = _scheduled([0, 1])
    assert "T.Pipelined(3, order=[1, 0], stage=[0, 1]):" in emit.tilelang_source(p)
    assert "order=[0, 1], stage=[0, 1]" in emit.tilelang_source(_scheduled([0, 1], "body"))
    d = model.to_dict(p)
    loop = {k: v for k, v in d["body"][0].items() if k != "schedule"}
    loop.update(kind="serial", body=[{k: v for k, v in x.items() if k != "stage"} for x in loop["body"]])
    serial = model.from_dict({**d, "body": [loop] + d["body"][1:]})
    init = interpret.initial(p, 150, 0)
    assert torch.equal(interpret.run(p, 150, init)["O"], interpret.run(serial, 150, init)["O"])
    assert model.from_json(model.to_json(p)) == p


@pytest.mark.parametrize("stages, error", [
    ([1, 0], "R is used in stages|S is written after the first stage"),   # the consumer in an earlier stage
    ([0, 0], "stages start at 0 and use more than one"),
    ([0, 3], "each statement's stage is one of"),
])
def test_the_rules_of_a_manual_schedule(stages, error):
    with pytest.raises(ProgramError, match=error):
        _scheduled(stages)


def test_a_fragment_used_across_stages_and_a_stage_outside_a_schedule_are_refused():
    fragment_across = [{"op": "copy", "src": "A", "dst": "R", "at": "k", "row": 0, "col": 8, "form": "tile"},
                       {"op": "copy", "src": "R", "dst": "S", "at": "0", "row": 0, "col": 0, "form": "tile"},
                       {"op": "copy", "src": "S", "dst": "R", "at": "0", "row": 0, "col": 0, "form": "tile"}]
    with pytest.raises(ProgramError, match="R is used in stages"):
        _scheduled([0, 1, 1], body=fragment_across)
    with pytest.raises(ProgramError, match="a stage only on each statement of a scheduled loop's body"):
        _program(COPY, [dict(LOAD_S, stage=0), STORE_S])


def test_a_schedule_shrinks_to_num_stages_and_its_statements_keep_their_stages_when_a_when_unwraps():
    p = _scheduled([0, 1])
    steps = dict(generate.shrink(p))
    plain = steps["loop 0 schedule -> num_stages"].body[0]
    assert plain.schedule is None and plain.stages == 2 and all(x.stage is None for x in plain.body)
    assert all(x.stage is None for x in steps["unwrap loop 0"].body)
    # A plain pipelined loop still lowers its stages and trips.
    d = model.to_dict(_program(COPY, [{"op": "loop", "kind": "pipelined", "trips": "n", "stages": 2,
                                       "body": [dict(LOAD_S, at="k"), STORE_S]}]))
    assert {"loop 0 stages 2 -> 1", "loop 0 trips n -> 1"} <= set(dict(generate.shrink(model.from_dict(d))))


def test_a_construct_the_release_lacks_is_unsupported_with_its_name_and_not_drawn(monkeypatch):
    """A release without T.cumsum: a loaded scan program is UNSUPPORTED naming it, before any compile, and the campaign's
    strategy draws no program that uses it (0.1.10 lacks T.cummax: on an H200 its campaign's scan cases were UNSUPPORTED,
    'tilelang 0.1.10 has no T.cummax')."""
    from harness import compat, strategies, worker
    monkeypatch.delattr(compat.T, "cumsum")
    scan = case_mod.Case(family="program", program=generate.template("scan"), seqlen_q=70, seqlen_k=70)
    result = worker.run_case(scan, "sm_90a", {})
    assert (result.verdict.value, result.stage) == ("UNSUPPORTED", "plan") and "T.cumsum" in result.message
    drawn = strategies.draw("program", 60, seed=5)
    assert drawn and not any("T.cumsum" in emit.tilelang_source(c.program) for c in drawn)


def test_a_global_updated_by_two_atomic_kinds_or_by_an_atomic_and_a_store_is_refused():
    """Blocks and threads run in any order, and add, max, min and a store do not commute: a fixed-row global that
    every block updates with an atomic min and then an add has no one meaning (an H200 campaign: 'G4: max error 6',
    the interpreter's block order against the GPU's). Atomics of one kind commute, and stay valid."""
    def program(*kinds, store=False):
        body = [{"op": "copy", "src": "A", "dst": "R", "at": "bx", "row": 0, "col": 0, "form": "tile"}]
        body += [{"op": "atomic", "kind": k, "src": "R", "dst": "G", "at": "0", "row": 0, "col": 0, "form": "element"}
                 for k in kinds]
        if store:
            body.append({"op": "copy", "src": "R", "dst": "O", "at": "bx", "row": 0, "col": 0, "form": "tile"})
            body.append({"op": "atomic", "kind": "add", "src": "R", "dst": "O", "at": "bx", "row": 0, "col": 0,
                         "form": "element"})
        return {"block": 32, "threads": 64, "body": body, "buffers": [
            {"name": "A", "scope": "global", "dtype": "float32", "shape": ["n", 16]},
            {"name": "R", "scope": "fragment", "dtype": "float32", "shape": [32, 16]},
            {"name": "G", "scope": "global", "dtype": "float32", "shape": [32, 16]},
            {"name": "O", "scope": "global", "dtype": "float32", "shape": ["n", 16]}]}
    model.from_dict(program("add", "add"))
    model.from_dict(program("max"))
    with pytest.raises(model.ProgramError, match="G is updated by add and updated by min"):
        model.from_dict(program("min", "add"))
    with pytest.raises(model.ProgramError, match="O is stored and updated by add"):
        model.from_dict(program("add", store=True))

