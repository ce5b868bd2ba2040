"""Hazard relations (harness.programs.relations): each on a small program written by hand, and absent from one
that differs from it only where the relation lives; the issue's two hazard programs; the coverage table."""
import subprocess
import sys
import types
from dataclasses import dataclass

import pytest

from harness.programs import STATEMENT_KINDS, model, relations
from harness.programs.access import Access

BUFFERS = [{"name": n, "scope": s, "dtype": d, "shape": list(shape)} for n, s, d, shape in (
    ("A", "global", "float16", ("n", 32)), ("O", "global", "float32", ("n", 32)), ("O2", "global", "float32", ("n", 32)),
    ("S", "shared", "float16", (64, 32)), ("W", "shared", "float32", (64, 32)), ("R", "fragment", "float32", (64, 32)))]


def program(*body, threads=128):
    named = {n for s in _walk(body) for n in s.values() if isinstance(n, str)}
    named |= {e for s in _walk(body) for e in _refs(s.get("expr", []))}
    return model.from_dict({"block": 64, "threads": threads, "buffers": [b for b in BUFFERS if b["name"] in named],
                            "body": list(body)})


def _walk(body):
    """Every statement's JSON object, bodies included."""
    for s in body:
        yield s
        yield from _walk(s.get("body", ()))


def _refs(e):
    return [e[1]] if e and e[0] == "buf" else [r for a in e[1:] if isinstance(a, list) for r in _refs(a)]


def load(dst, at="bx"):
    return {"op": "copy", "src": "A", "dst": dst, "at": at, "row": 0, "col": 0, "form": "tile"}


def store(src, out="O"):
    return {"op": "copy", "src": src, "dst": out, "at": "bx", "row": 0, "col": 0, "form": "tile"}


def fill(dst, value=0, region=None):
    return {"op": "fill", "dst": dst, "value": value, **({"region": region} if region else {})}


def add_one(dst, rows=64, cols=32):
    return {"op": "map", "dst": dst, "rows": rows, "cols": cols, "expr": ["add", ["buf", dst], ["num", 1]]}


def loop(*body, trips=2, kind="serial", stages=0):
    return {"op": "loop", "kind": kind, "trips": trips, "stages": stages, "body": list(body)}


def when(*body):
    return {"op": "when", "at": "bx", "test": "first", "body": list(body)}


def stream(trips):
    """A producer streams A's tiles into S; the consumers add each into a buffer every block adds to."""
    acc = {"name": "ACC", "scope": "global", "dtype": "float32", "shape": [64, 32]}
    return model.from_dict({"block": 64, "threads": 256, "buffers": [BUFFERS[0], BUFFERS[3], acc], "body": [
        {"op": "stream", "src": "A", "dst": "S", "row": 0, "col": 0, "stages": 2, "trips": trips, "load": "copy", "body": [
            {"op": "atomic", "kind": "add", "src": "S", "dst": "ACC", "at": "0", "row": 0, "col": 0, "form": "element"}]}]})


# The issue's first hazard: a pipelined loop reads a shared tile, then loads the next tile into it.
def pipelined(kind="pipelined", stages=1):
    return program(load("S"), fill("R"),
                   loop({"op": "map", "dst": "R", "rows": 64, "cols": 32, "expr": ["add", ["buf", "R"], ["buf", "S"]]},
                        load("S", at="k"), kind=kind, stages=stages),
                   store("R"))


# The issue's second: two T.Parallel loops of different extents over one fragment (or shared buffer).
def two_extents(buffer="R", rows=4):
    return program(fill(buffer), add_one(buffer), add_one(buffer, rows=rows), store(buffer))


def looped(trips):
    """R stored, then added to: a later statement of the loop feeds an earlier one next trip."""
    return program(fill("R"), loop(store("R"), add_one("R"), trips=trips))


FRAGMENT = program(fill("R"), store("R"))
SHARED = program(load("S"), store("S"))
REWRITTEN = program(fill("R"), store("R"), fill("R", 1), store("R", "O2"))
# relation -> (a program holding it, one that does not)
CASES = {
    "raw.same-thread": (FRAGMENT, SHARED),
    "war.same-thread": (REWRITTEN, FRAGMENT),
    "waw.same-thread": (program(fill("R"), add_one("R"), store("R")), FRAGMENT),
    "raw.other-thread": (SHARED, FRAGMENT),
    "war.other-thread": (program(load("S"), store("S"), fill("S", 1), store("S", "O2")), SHARED),
    "waw.other-thread": (program(load("S"), fill("S", 1), store("S")), SHARED),
    "raw.warp-group": (stream("n"), SHARED),
    "war.warp-group": (stream("n"), stream(1)),   # the ring is refilled only on a later trip
    "raw.straight": (FRAGMENT, program(fill("R"), loop(store("R")))),
    "war.straight": (REWRITTEN, FRAGMENT),
    "waw.straight": (program(fill("R"), fill("R", 1), store("R")), FRAGMENT),
    "raw.loop-trip": (looped(2), looped(1)),
    "war.loop-trip": (looped(2), looped(1)),
    "waw.loop-trip": (looped(2), looped(1)),
    "raw.pipeline": (pipelined(), pipelined("serial", 0)),
    "war.pipeline": (pipelined(), pipelined("serial", 0)),
    "waw.pipeline": (program(loop(load("S", "k"), fill("S", 1), store("S"), kind="pipelined", stages=1)),
                     program(loop(load("S", "k"), fill("S", 1), store("S")))),
    "raw.zero-trip": (program(fill("R"), loop(add_one("R"), trips="n-1"), store("R")),
                      program(fill("R"), loop(add_one("R"), trips="n"), store("R"))),
    "war.zero-trip": (program(fill("R"), loop(store("R"), trips="n//b"), fill("R", 1), store("R", "O2")),
                      program(fill("R"), loop(store("R"), trips=2), fill("R", 1), store("R", "O2"))),
    "waw.zero-trip": (program(fill("R"), loop(add_one("R"), trips=0), store("R")),
                      program(fill("R"), loop(add_one("R"), trips=1), store("R"))),
    "raw.when": (program(fill("R"), store("R"), when(fill("R", 1)), store("R", "O2")), REWRITTEN),
    "war.when": (program(fill("R"), store("R"), when(fill("R", 1)), store("R", "O2")), REWRITTEN),
    "waw.when": (program(fill("R"), store("R"), when(fill("R", 1)), store("R", "O2")), REWRITTEN),
    "raw.partial": (program(fill("R"), store("R"), fill("R", 1, [0, 0, 8, 32]), store("R", "O2")), REWRITTEN),
    "war.partial": (program(fill("R"), store("R"), fill("R", 1, [0, 0, 8, 32]), store("R", "O2")), REWRITTEN),
    "waw.partial": (program(fill("R"), store("R"), fill("R", 1, [0, 0, 8, 32]), store("R", "O2")), REWRITTEN),
    # W is filled, stored, added into atomically and stored again (or copied into, plainly).
    "raw.atomic": (program(fill("R", 2), fill("W", 1), store("W", "O2"), {"op": "atomic", "kind": "add", "src": "R", "dst": "W",
                   "at": "0", "row": 0, "col": 0, "form": "tile"}, store("W")),
                   program(fill("R", 2), fill("W", 1), store("W", "O2"), {"op": "copy", "src": "R", "dst": "W", "at": "0",
                   "row": 0, "col": 0, "form": "tile"}, store("W"))),
    "extents.fragment": (two_extents(), two_extents(rows=64)),
    "extents.shared": (two_extents("W"), two_extents("W", rows=64)),
}
CASES["war.atomic"] = CASES["waw.atomic"] = CASES["raw.atomic"]


def test_every_statement_kind_declares_its_accesses():
    for name, module in STATEMENT_KINDS.items():
        assert callable(getattr(module, "access", None)), f"{name} lacks access"


def test_every_relation_has_a_program_holding_it_except_the_thread_indexed():
    assert set(CASES) == {r.name for r in relations.RELATIONS} - {f"{d}.thread-indexed" for d in relations.DEPENDENCES}
    assert len(relations.drawable()) >= 20


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_relation_holds_where_it_lives_and_not_in_its_twin(name):
    holding, lacking = CASES[name]
    assert name in relations.held(holding), relations.held(holding)
    assert name not in relations.held(lacking), relations.held(lacking)


def test_the_issue_s_hazard_programs_are_named():
    # A shared tile read in the pipelined loop, then overwritten by the load of the next tile.
    assert relations.held(pipelined())["war.pipeline"] == "map 2.0 -> copy 2.1 on S"
    assert {"raw.loop-trip", "raw.pipeline"} <= set(relations.held(pipelined()))
    held = relations.held(two_extents())
    assert held["extents.fragment"] == "map 1 -> map 2 on R" and "raw.partial" in held


def test_the_ring_is_written_by_the_producer_and_read_by_the_consumers():
    held = relations.held(stream("n"))
    assert held["raw.warp-group"] == "stream 0 -> stream 0 on ring"
    assert held["war.warp-group"] == "stream 0 -> stream 0 (next trip) on ring"
    assert held["raw.other-thread"] == "stream 0 -> atomic 0.0 on S"   # the consumers' own copy, then their body
    assert "waw.atomic" in held and "raw.atomic" not in held      # atomic adds commute


def test_a_relation_is_drawable_only_while_its_kind_is_registered(monkeypatch):
    """The thread-indexed relations need the `thread` kind: without it they are not drawable; with a kind of that
    name (here a toy, registered from this file) they are computed from its accesses' how."""
    @dataclass(frozen=True, kw_only=True)
    class Lane(model.Statement):
        op = "thread"
        dst: str

    toy = types.SimpleNamespace(STATEMENT=Lane, access=lambda s, p: [Access(s.dst, "shared", "write", "thread", (), (1,))])
    monkeypatch.delitem(STATEMENT_KINDS, "thread")
    assert not {r.name for r in relations.drawable()} & {"raw.thread-indexed", "war.thread-indexed"}
    monkeypatch.setitem(STATEMENT_KINDS, "thread", toy)
    assert {"raw.thread-indexed", "war.thread-indexed", "waw.thread-indexed"} <= {r.name for r in relations.drawable()}
    p = model.Program(64, 128, SHARED.buffers, (*SHARED.body, Lane(dst="S")))
    held = relations.held(p)
    assert held["war.thread-indexed"] == "copy 1 -> thread 2 on S" and "waw.thread-indexed" in held


def test_the_coverage_table_counts_the_programs_holding_each_relation():
    rows, line = relations.coverage([("a", FRAGMENT), ("b", SHARED), ("c", REWRITTEN)])
    by = {r["relation"]: r for r in rows}
    assert by["raw.same-thread"]["programs"] == 2 and by["raw.same-thread"]["example"] == "a: fill 0 -> copy 1 on R"
    assert by["waw.pipeline"]["example"].startswith("not yet drawable")
    assert line == f"relations covered: 7 / {len(relations.drawable())}"


def test_harness_programs_draws_and_prints_the_coverage_table():
    out = subprocess.run([sys.executable, "-m", "harness.cli", "programs", "--draw", "200", "--seed", "1", "--coverage"],
                         capture_output=True, text=True, check=True, timeout=300).stdout.splitlines()
    assert out[0].split() == ["relation", "programs", "example"]
    assert [line.split()[0] for line in out[1:-1]] == [r.name for r in relations.RELATIONS]
    covered = sum(int(line.split()[1]) > 0 for line in out[1:-1] if line.split()[0] in {r.name for r in relations.drawable()})
    assert out[-1] == f"relations covered: {covered} / {len(relations.drawable())}"


def test_steered_puts_first_what_adds_to_the_goal_then_the_rest_in_order():
    from harness import strategies
    pool = [{1}, {1}, {2}, {1, 3}, {4}]
    assert strategies.steered(pool, set, 3, set()) == [{1}, {2}, {1, 3}]
    covered = {4}
    assert strategies.steered(pool, set, 4, covered) == [{1}, {2}, {1, 3}, {1}] and covered == {1, 2, 3, 4}
    assert strategies.steered(pool, lambda x: set(), 2, set()) == pool[:2]   # no goal: the first, in order


def test_steered_programs_cover_more_relations_than_as_many_drawn_plainly():
    from harness import strategies

    def covered(steer):
        return len(set().union(*(relations.held(p) for p in strategies.programs(30, 1, steer))))
    assert covered(True) > covered(False)


def test_the_summary_shows_the_relations_of_the_programs_that_ran():
    from harness import report
    from harness.case import Case
    from harness.result import Result
    ran = [Result.of(Case(family="program", program=p, seqlen_q=n, seqlen_k=n), "PASS", "judge")
           for p in (FRAGMENT, SHARED) for n in (1, 70)]
    table = report.relation_table(ran + [Result.of(Case(), "PASS", "judge")])
    by = dict(zip(table["relation"], table["programs"]))
    assert by["raw.same-thread"] == 1 and by["raw.straight"] == 2 and by["war.straight"] == 0   # per program, not case
    assert table["relation"].iloc[-1] == f"relations covered: 3 / {len(relations.drawable())}"
    assert "## Hazard relations" in report.summary(ran)
    assert report.relation_table([Result.of(Case(), "PASS", "judge")]).empty   # no program ran


def test_coverage_without_draw_is_refused_in_one_line(capsys):
    from harness import cli
    assert cli.main(["programs", "--coverage"]) == 2
    assert capsys.readouterr().err == "harness programs: --coverage and --steer go with --draw N\n"
