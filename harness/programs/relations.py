"""Hazard relations: what a program makes two statements do to one buffer, named, from the model (no compile).

Every statement kind declares its accesses (`access(s, p)`, harness.programs.access). Two accesses of one buffer
by two statements (or by two warp groups of one statement: a stream's producer and consumers) hold a relation
when one of them writes: read-after-write (raw), write-after-read (war), write-after-write (waw), the first one
first. Each such pair is named by its kind of dependence and each of the following that applies:

    same-thread / other-thread / warp-group   a fragment's element is its thread's own; a shared or global one
                                              is the block's; a stream's producer against the rest of the block
    straight                                  in one run of straight code: both outside loops, or in one trip
    loop-trip                                 the second in a later trip of the loop that holds both
    pipeline                                  in one pipelined loop, in different stages
    zero-trip                                 across the edge of a loop that may run zero times
    when                                      across the edge of a `when`
    partial / atomic / thread-indexed         one of them is a region of a local buffer / an atomic update / by
                                              each thread at an index of its own

plus `extents.<scope>`: two T.Parallel loops of different extents over one fragment or shared buffer. RELATIONS
is the registry: a relation names the statement kinds that make it drawable (any one of them), and coverage
counts only those whose kinds are registered (harness.programs.STATEMENT_KINDS).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from harness.programs import model
from harness.programs.access import Access
from harness.programs.model import Statement


@dataclass(frozen=True)
class Relation:
    name: str
    meaning: str
    kinds: tuple = ()        # the statement kinds that make it drawable, any one of them (none: every program may)
    pending: str = ""        # why the generator does not draw it yet, though its kinds are registered


DEPENDENCES = {"raw": "read after write", "war": "write after read", "waw": "write after write"}
_ASPECTS = (
    ("same-thread", "by the thread that holds the fragment's element", ()),
    ("other-thread", "by other threads of the block (shared or global memory)", ()),
    ("warp-group", "one by a stream's producer warp group, the other by its consumers", ("stream",)),
    ("straight", "in one run of straight code (outside loops, or in one trip)", ()),
    ("loop-trip", "the second in a later trip of the loop holding both", ("loop", "stream")),
    ("pipeline", "in one pipelined loop, in different stages", ("loop",)),
    ("zero-trip", "across the edge of a loop that may run zero times", ("loop", "stream")),
    ("when", "across the edge of a `when`", ("when",)),
    ("partial", "one of them a region of a shared or fragment buffer", ("fill", "map")),
    ("atomic", "one of them an atomic update", ("atomic",)),
    # No kind indexes by the thread yet: the kind that does names itself here.
    ("thread-indexed", "one of them by each thread at an index of its own", ("thread",)),
)
NEVER = {"waw.warp-group"}   # only the producer writes the ring
PENDING = {"waw.pipeline": "the generator writes no tile it loads in a pipelined loop again in that loop"}
RELATIONS = tuple(Relation(f"{dep}.{aspect}", f"{DEPENDENCES[dep]}, {meaning}", kinds, PENDING.get(f"{dep}.{aspect}", ""))
                  for aspect, meaning, kinds in _ASPECTS for dep in DEPENDENCES
                  if f"{dep}.{aspect}" not in NEVER) + (
    *(Relation(f"extents.{scope}", f"two T.Parallel loops of different extents over one {scope} buffer",
               ("map", "copy", "atomic"), PENDING.get(f"extents.{scope}", "")) for scope in ("fragment", "shared")),
)


def drawable() -> tuple:
    """The relations the generator draws: some registered statement kind makes them (all do, for those naming
    none), and none is pending."""
    from harness.programs import STATEMENT_KINDS
    return tuple(r for r in RELATIONS if (not r.kinds or set(r.kinds) & set(STATEMENT_KINDS)) and not r.pending)


@dataclass(frozen=True)
class _Event:
    """An access where it stands: its statement, the loop (or stream) and `when` around it, its pipeline stage."""
    access: Access
    op: str
    where: str               # the statement's path: "3.1" is statement 1 of statement 3's body
    order: int               # program order
    loop: Statement | None   # the statement with a trip count around it
    loop_at: str | None
    when_at: str | None
    stage: int | None


def _events(p) -> list[_Event]:
    out: list[_Event] = []

    def visit(body, path, loop, loop_at, when_at, stages, stage, who):
        """`stages`: each statement's pipeline stage (a pipelined loop's body), else all of them at `stage`."""
        for i, s in enumerate(body):
            where, k = ".".join(map(str, path + (i,))), model.kind(s)
            at = stages[i] if stages else stage
            own = (s, where) if hasattr(s, "trips") else (loop, loop_at)   # a loop's or stream's own accesses are in it
            for a in k.access(s, p):
                a = a if a.who != "block" else dataclasses.replace(a, who=who)
                out.append(_Event(a, s.op, where, len(out), *own, when_at, at))
            if hasattr(s, "trips"):
                visit(s.body, path + (i,), s, where, when_at, getattr(k, "stages_of", lambda s, p: None)(s, p), None,
                      getattr(k, "BODY_THREADS", who))
            elif hasattr(s, "body"):   # a `when`: its statements take its stage
                visit(s.body, path + (i,), loop, loop_at, where, None, at, who)
    visit(p.body, (), None, None, None, None, None, "block")
    return out


def _may_skip(loop) -> bool:
    """A trip count that is 0 for some n (T.ceildiv(n, block) is 1 at least)."""
    return loop.trips in ("n-1", "n//b", 0)


def _repeats(loop) -> bool:
    return loop.trips in model.SYMBOLIC_TRIPS or loop.trips >= 2


def _threads(a: Access, b: Access) -> str:
    if a.who != b.who and "producer" in (a.who, b.who):
        return "warp-group"
    return "same-thread" if a.scope == "fragment" else "other-thread"


def _names(x: _Event, y: _Event, later_trip: bool) -> list[str]:
    """The relations access x then access y hold (y in the next trip of their loop when `later_trip`)."""
    a, b = x.access, y.access
    if a.mode == b.mode == "update":   # atomic updates commute: neither reads what the other wrote
        deps = ["waw"]
    else:
        deps = [d for d, hit in (("raw", a.writes and b.reads), ("war", a.reads and b.writes),
                                 ("waw", a.writes and b.writes)) if hit]
    if not deps:
        return []
    aspects = [_threads(a, b)]
    if later_trip:
        aspects.append("loop-trip")
    elif x.loop_at == y.loop_at:
        aspects.append("straight")
    elif any(e.loop is not None and _may_skip(e.loop) for e in (x, y)):
        aspects.append("zero-trip")
    if x.loop_at == y.loop_at and x.stage is not None and x.stage != y.stage:
        aspects.append("pipeline")
    if x.when_at != y.when_at:
        aspects.append("when")
    aspects += [name for name, hit in (("partial", a.partial or b.partial), ("atomic", "atomic" in (a.how, b.how)),
                                       ("thread-indexed", "thread" in (a.how, b.how))) if hit]
    return [f"{d}.{aspect}" for d in deps for aspect in aspects]


def held(p) -> dict[str, str]:
    """The relations `p` holds, each with the first pair of statements that holds it ("copy 0 -> gemm 2.3 on S1")."""
    out: dict[str, str] = {}

    def hold(names, x, y, note=""):
        for name in names:
            out.setdefault(name, f"{x.op} {x.where} -> {y.op} {y.where}{note} on {x.access.buffer}")

    events = _events(p)
    for i, x in enumerate(events):
        for y in events[i + 1:]:
            if x.access.buffer != y.access.buffer:
                continue
            if x.where != y.where or x.access.who != y.access.who:   # two statements, or two warp groups of one
                hold(_names(x, y, False), x, y)
            if x.access.loop and y.access.loop and x.access.extent != y.access.extent and x.access.scope != "global":
                hold([f"extents.{x.access.scope}"], x, y)
        if x.loop is not None and _repeats(x.loop):   # x in one trip, then its loop's statements up to x's in the next
            for y in events:
                if y.loop_at == x.loop_at and y.access.buffer == x.access.buffer and (y.order <= x.order or y.where == x.where):
                    hold(_names(x, y, True), x, y, " (next trip)")
    return out


def coverage(programs) -> tuple[list[dict], str]:
    """Rows (relation, programs holding it, the first one's pair) for `programs` ((label, Program) pairs) and the
    line `relations covered: X / Y` over the drawable relations; a relation not drawable says why."""
    rows = {r.name: {"relation": r.name, "programs": 0, "example": ""} for r in RELATIONS}
    for label, p in programs:
        for name, pair in held(p).items():
            rows[name]["programs"] += 1
            rows[name]["example"] = rows[name]["example"] or f"{label}: {pair}"
    ready = {r.name for r in drawable()}
    for r in RELATIONS:
        if r.name not in ready:
            row, why = rows[r.name], r.pending or f"needs the kind {' or '.join(r.kinds)}"
            row["example"] = f"not yet drawable ({why})" + (f"; {row['example']}" if row["programs"] else "")
    covered = sum(rows[name]["programs"] > 0 for name in ready)
    return list(rows.values()), f"relations covered: {covered} / {len(ready)}"
