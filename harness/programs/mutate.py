"""A program changed once: a statement dropped, two adjacent ones swapped, one field changed, or a fresh statement
inserted, at any depth (a loop's, stream's or when's body too). A mutant is kept only if model.check passes.

The campaign mutates the programs of its corpus (harness.corpus) with a seeded random.Random, so a seed gives the
same mutants. A field changes to another of the values its kind declares (`CHOICES`: field -> allowed values), or,
where the kind declares none, a boolean flips. Inserting needs the generator's statement draws: `insert(program,
choices, at)` gives the statements (JSON objects) to put in and the buffers (JSON objects) they add, drawn with
`choices` (Rolled) where the loop variable `at` ("bx", or "k" in a loop) indexes tiles; without it, no insert.
"""
from __future__ import annotations

import json
from collections.abc import Callable

from harness.programs import KINDS, model

OPERATIONS = ("drop", "swap", "change", "insert")
TRIES = 20  # operations tried until one gives a valid program


class Rolled:
    """The generator's choices (one, between, flip) from a seeded random.Random instead of Hypothesis."""

    def __init__(self, rng):
        self.rng = rng

    def one(self, options):
        return self.rng.choice(tuple(options))

    def between(self, bounds):
        return self.rng.randint(*bounds)

    def flip(self) -> bool:
        return self.rng.random() < 0.5


def _bodies(body: list, in_loop=False):
    """(statement list, whether it runs inside a loop) for the program's body and every nested body."""
    yield body, in_loop
    for s in body:
        if "body" in s:
            yield from _bodies(s["body"], in_loop or s["op"] in ("loop", "stream"))


def _statements(body: list):
    return [(b, i) for b, _ in _bodies(body) for i in range(len(b))]


def _changes(s: dict) -> list[tuple[str, list]]:
    """(field, the other values it may take) of a statement: its kind's CHOICES, else its booleans."""
    choices = getattr(KINDS[s["op"]], "CHOICES", {})
    fields = [(f, [v for v in values if v != s[f]]) for f, values in choices.items() if f in s]
    if not choices:
        fields = [(f, [not v]) for f, v in s.items() if isinstance(v, bool)]
    return [(f, values) for f, values in fields if values]


def _apply(d: dict, what: str, rng, insert) -> bool:
    """Change the program object `d` in place by one operation; False if it has nowhere to apply."""
    body = d["body"]
    if what == "drop":
        places = _statements(body)
        if not places:
            return False
        b, i = rng.choice(places)
        del b[i]
    elif what == "swap":
        places = [(b, i) for b, i in _statements(body) if i + 1 < len(b)]
        if not places:
            return False
        b, i = rng.choice(places)
        b[i], b[i + 1] = b[i + 1], b[i]
    elif what == "change":
        places = [(b, i) for b, i in _statements(body) if _changes(b[i])]
        if not places:
            return False
        b, i = rng.choice(places)
        field, values = rng.choice(_changes(b[i]))
        b[i][field] = rng.choice(values)
    else:
        if insert is None:
            return False
        b, in_loop = rng.choice(list(_bodies(body)))
        drawn = insert(model.from_dict(json.loads(json.dumps(d))), Rolled(rng), "k" if in_loop else "bx")
        if not drawn:
            return False
        statements, buffers = drawn
        b[rng.randint(0, len(b)):0] = statements
        d["buffers"] += buffers
    return True


def _used(d: dict) -> dict:
    """`d` without the buffers no statement names (dropping a statement may leave a fragment nobody reads)."""
    text = json.dumps(d["body"])
    return {**d, "buffers": [b for b in d["buffers"] if json.dumps(b["name"]) in text]}


def mutate(p: model.Program, rng, insert: Callable | None = None) -> model.Program | None:
    """One valid mutant of `p` other than `p`, by operations drawn from `rng` (random.Random), or None after TRIES."""
    for _ in range(TRIES):
        d = model.to_dict(p)
        if not _apply(d, rng.choice(OPERATIONS), rng, insert):
            continue
        try:
            q = model.from_dict(_used(d))
        except model.ProgramError:
            continue
        if q != p:
            return q
    return None
