"""The composer knows no statement kind by name: a kind is its module and one registry line. Here a toy kind
(`negate`: X = -X of a local tile) is added from this file alone, its statement record too, and it is drawn, emitted,
interpreted, written to JSON and read back, and shrunk."""
import ast
import builtins
import types
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st

from harness.programs import STATEMENT_KINDS, emit, generate, interpret, model


@dataclass(frozen=True, kw_only=True)
class Negate(model.Statement):
    op = "negate"
    dst: str


def _check(s, p, scope):
    model.fields(s, dst=str)
    model.local(p, s.dst, 2)


def _draw(c, b, at):
    held = [n for n in b.locals() if len(b.buffers[n].shape) == 2]
    if held:
        b.emit([Negate(dst=c.one(held))])


NEGATE = types.SimpleNamespace(
    STATEMENT=Negate, check=_check, reads=lambda s: [s.dst], writes=lambda s: [s.dst], full=lambda s, p: True,
    tilelang=lambda s, p, ind: [f"{ind}for i, j in T.Parallel({', '.join(map(str, p.buffer(s.dst).shape))}):",
                                f"{ind}    {s.dst}[i, j] = -{s.dst}[i, j]"],
    torch=lambda s, p, ind: [f"{ind}{s.dst}[:] = -{s.dst}"],
    draw=_draw, PLACES={"top": 40, "trip": 40, "guarded": 40},
    shrink=lambda s, where: [(f"negate {where} -> nothing", ())])


@pytest.fixture
def negate(monkeypatch):
    monkeypatch.setitem(STATEMENT_KINDS, "negate", NEGATE)
    return NEGATE


def _drawn(count, seed=3):
    out = []

    @hypothesis_seed(seed)
    @settings(max_examples=count, database=None, deadline=None, phases=[Phase.generate], suppress_health_check=list(HealthCheck))
    @given(generate.programs(st))
    def collect(p):
        out.append(p)
    collect()
    return out


def test_a_kind_added_from_outside_is_drawn_emitted_interpreted_and_shrunk(negate):
    with_toy = [p for p in _drawn(200) if any(s.op == "negate" for s in model.walk(p.body))]
    assert with_toy, "the toy kind was never drawn"
    p = min(with_toy, key=lambda q: len(list(model.walk(q.body))))
    assert model.from_json(model.to_json(p)) == p
    assert "= -" in emit.tilelang_source(p)
    n = p.block + 1
    initial = interpret.initial(p, n, 0)
    assert interpret.run(p, n, initial)          # the float64 meaning runs
    steps = [step for step, _ in generate.shrink(p)]
    assert any(step.startswith("negate ") for step in steps), steps


def test_a_kind_left_out_of_a_swarm_configuration_is_not_drawn(negate):
    from harness.programs.builder import Builder, First
    b = Builder(64, 128, {"kinds": ("fill",)}, generate.statement)
    for _ in range(5):
        generate.statement(First(None), b, "bx", "top")
    assert {s.op for s in b.body} == {"fill"}


def test_the_composer_names_no_statement_kind():
    tree = ast.parse(Path(generate.__file__).read_text())
    literals = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and not hasattr(builtins, n.id)} | \
            {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    assert not (literals | names) & set(STATEMENT_KINDS), sorted((literals | names) & set(STATEMENT_KINDS))


def test_a_corpus_mutant_can_take_a_statement_the_composer_draws():
    """mutate's insert is the composer's own draw (generate.insert), into any body, kept only if the mutant is valid."""
    import random

    from harness.programs import mutate
    p = generate.template("attention")
    grown = [q for q in (mutate.mutate(p, random.Random(seed), generate.insert) for seed in range(60))
             if q and len(list(model.walk(q.body))) > len(list(model.walk(p.body)))]
    assert grown, "no insert was kept"
    for q in grown:
        assert model.from_json(model.to_json(q)) == q      # valid: model.check ran in from_json
