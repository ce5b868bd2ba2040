"""A program changed once: a statement dropped, two adjacent ones swapped, one field changed, or a fresh statement
inserted, at any depth (a loop's, stream's or when's body too). A mutant is kept only if model.check passes.

The campaign mutates the programs of its corpus (harness.corpus) with a seeded random.Random, so a seed gives the
same mutants. A field changes to another of the values its kind declares (`CHOICES`: field -> allowed values), or,
where the kind declares none, a boolean flips. Inserting needs the generator's statement draws: `insert(program,
choices, at)` gives the statements to put in and the buffers they add, drawn with
`choices` (Rolled) where the loop variable `at` ("bx", or "k" in a loop) indexes tiles; without it, no insert.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable

from harness.programs import STATEMENT_KINDS, model

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


def _bodies(body: tuple, path=(), in_loop=False):
    """(path, statements, whether they run inside a loop) for the program's body and every nested body, the path
    being the indices of the statements holding it."""
    yield path, body, in_loop
    for i, s in enumerate(body):
        if hasattr(s, "body"):
            yield from _bodies(s.body, path + (i,), in_loop or s.op in ("loop", "stream"))


def _statements(body: tuple):
    return [(path, i) for path, b, _ in _bodies(body) for i in range(len(b))]


def _at(body: tuple, path) -> tuple:
    for i in path:
        body = body[i].body
    return body


def _with(body: tuple, path, statements) -> tuple:
    """`body` with the statements at `path` (the body there) replaced by `statements`."""
    if not path:
        return tuple(statements)
    i = path[0]
    return body[:i] + (dataclasses.replace(body[i], body=_with(body[i].body, path[1:], statements)),) + body[i + 1:]


def _changes(s) -> list[tuple[str, list]]:
    """(field, the other values it may take) of a statement: its kind's CHOICES, else its booleans."""
    choices = getattr(STATEMENT_KINDS[s.op], "CHOICES", {})
    fields = [(f, [v for v in values if v != getattr(s, f)]) for f, values in choices.items()
              if getattr(s, f, None) is not None]
    if not choices:
        fields = [(f, [not v]) for f, v in sorted(vars(s).items()) if isinstance(v, bool)]
    return [(f, values) for f, values in fields if values]


def _applied(p: model.Program, what: str, rng, insert) -> model.Program | None:
    """`p` changed by one operation (its buffers as they were, and any an insert adds); None if it has nowhere to apply."""
    body, buffers = p.body, p.buffers
    if what == "drop":
        places = _statements(body)
        if not places:
            return None
        path, i = rng.choice(places)
        b = _at(body, path)
        body = _with(body, path, b[:i] + b[i + 1:])
    elif what == "swap":
        places = [(path, i) for path, i in _statements(body) if i + 1 < len(_at(body, path))]
        if not places:
            return None
        path, i = rng.choice(places)
        b = _at(body, path)
        body = _with(body, path, b[:i] + (b[i + 1], b[i]) + b[i + 2:])
    elif what == "change":
        places = [(path, i) for path, i in _statements(body) if _changes(_at(body, path)[i])]
        if not places:
            return None
        path, i = rng.choice(places)
        b = _at(body, path)
        field, values = rng.choice(_changes(b[i]))
        body = _with(body, path, b[:i] + (dataclasses.replace(b[i], **{field: rng.choice(values)}),) + b[i + 1:])
    else:
        if insert is None:
            return None
        path, b, in_loop = rng.choice(list(_bodies(body)))
        drawn = insert(p, Rolled(rng), "k" if in_loop else "bx")
        if not drawn:
            return None
        statements, added = drawn
        at = rng.randint(0, len(b))
        body, buffers = _with(body, path, b[:at] + tuple(statements) + b[at:]), buffers + tuple(added)
    return dataclasses.replace(p, body=body, buffers=buffers)


def mutate(p: model.Program, rng, insert: Callable | None = None) -> model.Program | None:
    """One valid mutant of `p` other than `p`, by operations drawn from `rng` (random.Random), or None after TRIES."""
    for _ in range(TRIES):
        q = _applied(p, rng.choice(OPERATIONS), rng, insert)
        if q is None:
            continue
        try:
            q = model.check(model.used(q))   # dropping a statement may leave a fragment nobody reads
        except model.ProgramError:
            continue
        if q != p:
            return q
    return None
