"""Mutations of a program (harness.programs.mutate): each operation alone, each mutant valid, a seed the same mutant."""
import json
import random

import pytest

from harness.programs import STATEMENT_KINDS, copy, fill, model, mutate


def _program(body, extra=()):
    buffers = [{"name": "A", "scope": "global", "dtype": "float16", "shape": ["n", 32]},
               {"name": "O", "scope": "global", "dtype": "float16", "shape": ["n", 32]},
               {"name": "S", "scope": "shared", "dtype": "float16", "shape": [32, 32]}, *extra]
    return model.from_dict({"block": 32, "threads": 128, "buffers": buffers, "body": body})


LOAD = {"op": "copy", "src": "A", "dst": "S", "at": "bx", "row": 0, "col": 0, "form": "tile"}
SCAN = {"op": "scan", "src": "S", "dst": "S", "kind": "sum", "dim": 1, "reverse": False}
FILL = {"op": "fill", "dst": "S", "value": 1, "region": [0, 0, 4, 4]}
STORE = {"op": "copy", "src": "S", "dst": "O", "at": "bx", "row": 0, "col": 0, "form": "tile"}
P = _program([LOAD, SCAN, FILL, STORE])


def _only(monkeypatch, operation):
    monkeypatch.setattr(mutate, "OPERATIONS", (operation,))


def _no_choices(monkeypatch):
    """No kind declares CHOICES: a change can only flip a boolean."""
    for kind in STATEMENT_KINDS.values():
        monkeypatch.setattr(kind, "CHOICES", {}, raising=False)


def _body(p):
    return json.loads(model.to_json(p))["body"]


def test_a_drop_removes_one_statement_and_keeps_a_valid_program(monkeypatch):
    _only(monkeypatch, "drop")
    for seed in range(10):
        body = _body(mutate.mutate(P, random.Random(seed)))
        assert len(body) == 3 and all(s in _body(P) for s in body)
        assert body[0] == LOAD and body[-1] == STORE  # without either, S is read undefined or nothing is written


def test_a_swap_exchanges_two_adjacent_statements(monkeypatch):
    _only(monkeypatch, "swap")
    assert _body(mutate.mutate(P, random.Random(0))) == [LOAD, FILL, SCAN, STORE]  # the only valid swap


def test_a_change_takes_another_value_the_kind_declares_else_flips_a_boolean(monkeypatch):
    _only(monkeypatch, "change")
    _no_choices(monkeypatch)
    assert _body(mutate.mutate(P, random.Random(0)))[1] == {**SCAN, "reverse": True}
    monkeypatch.setattr(fill, "CHOICES", {"value": (1, 2)}, raising=False)
    changed = [_body(mutate.mutate(P, random.Random(seed))) for seed in range(20)]
    assert [LOAD, SCAN, {**FILL, "value": 2}, STORE] in changed


def test_an_insert_puts_the_drawn_statements_and_their_buffers_in(monkeypatch):
    _only(monkeypatch, "insert")
    extra = {"name": "R", "scope": "shared", "dtype": "float16", "shape": [32, 32]}

    def insert(p, choices, at):
        assert at == "bx" and p == P and choices.one(["x"]) == "x"
        return (fill.Fill(dst="R", value=choices.one((0, 1))), copy.Copy(src="R", dst="O", at="bx", row=0, col=0, form="tile")), \
            (model.Buffer("R", "shared", "float16", (32, 32)),)
    q = mutate.mutate(P, random.Random(3), insert)
    assert extra in json.loads(model.to_json(q))["buffers"] and len(_body(q)) == 6
    assert mutate.mutate(P, random.Random(3)) is None  # no insert without the generator's draws


def test_a_seed_gives_the_same_mutant_and_a_program_with_no_valid_mutant_none(monkeypatch):
    assert model.to_json(mutate.mutate(P, random.Random(7))) == model.to_json(mutate.mutate(P, random.Random(7)))
    _no_choices(monkeypatch)
    assert mutate.mutate(_program([LOAD, STORE]), random.Random(0)) is None


@pytest.mark.parametrize("seed", range(5))
def test_a_dropped_statements_buffers_go_with_it(monkeypatch, seed):
    _only(monkeypatch, "drop")
    spare = {"name": "R", "scope": "shared", "dtype": "float16", "shape": [32, 32]}
    p = _program([LOAD, {"op": "fill", "dst": "R", "value": 0}, STORE], [spare])
    assert [b["name"] for b in json.loads(model.to_json(mutate.mutate(p, random.Random(seed))))["buffers"]] == ["A", "O", "S"]
