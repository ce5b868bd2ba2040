"""loop: T.serial, T.Pipelined (num_stages 0 to 3) or T.unroll over `k`, a constant trip count (0 and 1 included)
or the symbolic T.ceildiv(n, block) or one fewer (0 when n fits one block); its body (no loop inside) may index
global tiles at row k * block. What the body defines is defined after the loop only if it surely runs (a constant
trip count of 1 or more).

A pipelined loop may instead carry a manual schedule (`schedule`, TileLang's `order=` and `stage=`): each body
statement its `stage` (0 to 2, some above 0), emitted in body order or later stages first (`late_first`, the
order TileLang's own example gives). Its meaning is still the serial loop's, which holds when a buffer used in
more than one stage is a shared one (the pipeline keeps a version per stage) written only in the first of them."""
from dataclasses import dataclass, replace

from harness.programs import model
from harness.programs.model import ProgramError, Scope, Statement, fields, need


@dataclass(frozen=True, kw_only=True)
class Loop(Statement):
    op = "loop"
    kind: str
    trips: int | str
    stages: int
    body: tuple
    schedule: str | None = None   # SCHEDULES: a manual pipeline schedule, each body statement with its stage


STATEMENT = Loop

LOOP_KINDS = ("serial", "pipelined", "unroll")
MAX_TRIPS = 8
SCHEDULES = ("body", "late_first")
STAGES = (0, 1, 2)


def check(s, p, scope):
    fields(s, kind=LOOP_KINDS, trips=(0, 1, 2, 3, 4, 5, 8) + model.SYMBOLIC_TRIPS, stages=(0, 1, 2, 3), body=tuple,
           **({"schedule": SCHEDULES} if s.schedule is not None else {}))
    need(not scope.in_loop, "no loop inside a loop")
    need(not scope.in_when, "no loop inside a when")
    need(s.kind == "pipelined" or s.stages == 0, "only a pipelined loop has stages")
    need(s.kind != "unroll" or s.trips not in model.SYMBOLIC_TRIPS, "an unrolled loop has a constant trip count")
    need(1 <= len(s.body) <= 12, "a loop's body holds 1 to 12 statements")
    if s.schedule is not None:
        check_schedule(s, p)
    inner = Scope(scope.threads, scope.defined, in_loop=True)
    model.check_body(p, s.body, inner, staged=s.schedule is not None)
    if model.surely_runs(s.trips):
        scope.defined |= inner.defined


def check_schedule(s, p):
    """ProgramError unless the loop's schedule keeps the serial loop's meaning (see above)."""
    need(s.kind == "pipelined" and s.stages == 0, "a schedule is a pipelined loop's, without num_stages")
    stages = [x.stage for x in s.body]
    need(all(type(t) is int and t in STAGES for t in stages), f"each statement's stage is one of {list(STAGES)}")
    need(min(stages) == 0 and max(stages) > 0, "stages start at 0 and use more than one")
    used: dict = {}   # local buffer -> [(stage, writes it)]
    for x, t in zip(s.body, stages):
        for y in model.walk((x,)):
            writes = set(model.kind(y).writes(y)) | set(getattr(model.kind(y), "updates", lambda _: [])(y))
            for name in set(model.kind(y).reads(y)) | writes:
                if p.buffer(name).local:
                    used.setdefault(name, []).append((t, name in writes))
    for name, uses in used.items():
        seen = {t for t, _ in uses}
        if len(seen) > 1:
            need(p.buffer(name).scope == "shared", f"{name} is used in stages {sorted(seen)}: only a shared buffer is versioned")
            need(all(t == min(seen) for t, w in uses if w), f"{name} is written after the first stage that uses it")


def order(s) -> list[int]:
    """Each body statement's place in the emitted loop (TileLang's `order=`)."""
    stages = [x.stage for x in s.body]
    ranked = sorted(range(len(stages)), key=lambda i: (-stages[i], i) if s.schedule == "late_first" else i)
    return [ranked.index(i) for i in range(len(stages))]


def reads(s):
    return []


def writes(s):
    return []


def full(s, p):
    return False


def tilelang(s, p, ind):
    from harness.programs.emit import body_lines
    count = model.trips(s.trips, p.block, "tilelang")
    if s.schedule is not None:
        pipelined = f"T.Pipelined({count}, order={order(s)}, stage={[x.stage for x in s.body]})"
    else:
        pipelined = f"T.Pipelined({count}, num_stages={s.stages})"
    head = {"serial": f"T.serial({count})", "unroll": f"T.unroll({count})", "pipelined": pipelined}[s.kind]
    return [f"{ind}for k in {head}:"] + body_lines(s.body, p, ind + "    ", "tilelang")


def torch(s, p, ind):
    from harness.programs.emit import body_lines
    count = model.trips(s.trips, p.block, "torch")
    return [f"{ind}for k in range({count}):"] + body_lines(s.body, p, ind + "    ", "torch")


# ------------------------------------------------------------------------------------------- drawing
PLACES = {"top": 2}
BODY_AT = "k"            # its body's statements index tiles by the trip
CHOICES = {"kind": LOOP_KINDS, "stages": (0, 1, 2, 3)}
SWARM = {"loop": LOOP_KINDS, "trips": (0, 1, 2, 3) + model.SYMBOLIC_TRIPS}   # a program's loops draw from a subset of each


def draw(c, b, at):
    kind = b.pick(c, "loop", ("pipelined", "pipelined", "serial", "unroll"))
    trips = b.pick(c, "trips", (0, 1, 2, 3, "n", "n", "n", "n-1", "n//b")) if kind != "unroll" else c.one((1, 2, 3))
    stages = c.between((0, 3)) if kind == "pipelined" else 0
    outer_defined = set(b.defined)
    inner = b.nested(c, "k", "trip", c.between((1, 4)))
    if not model.surely_runs(trips):
        b.defined = outer_defined
    if inner:
        drawn = Loop(kind=kind, trips=trips, stages=stages, body=inner)
        if c.flip():
            drawn = vary(c, b.program(), drawn) or drawn
        b.emit([drawn])


def vary(c, p, drawn: Loop) -> Loop | None:
    """The pipelined loop `drawn` with a manual schedule: its body cut into runs of stages 0, 1 (and 2), emitted in
    body order or later stages first; None if it is no plain pipelined loop or the cut breaks the schedule's rule."""
    m = len(drawn.body)
    if drawn.kind != "pipelined" or drawn.schedule is not None or m < 2:
        return None
    cuts = {c.between((1, m - 1)) for _ in range(c.one((1, 1, 2)))}
    body = tuple(replace(x, stage=sum(i >= k for k in cuts)) for i, x in enumerate(drawn.body))
    out = replace(drawn, stages=0, schedule=c.one(SCHEDULES), body=body)
    try:
        check_schedule(out, p)
    except ProgramError:
        return None
    return out


def shrink(s, where):
    out = [(f"unwrap loop {where}", tuple(model.outside_loop(x) for x in s.body))]
    out += [(f"loop {where} stages {s.stages} -> {x}", (replace(s, stages=x),)) for x in range(s.stages)]
    if s.trips in model.SYMBOLIC_TRIPS or s.trips > 1:
        out.append((f"loop {where} trips {s.trips} -> 1", (replace(s, trips=1),)))
    if s.schedule is not None:
        out.append((f"loop {where} schedule -> num_stages", (replace(
            s, schedule=None, stages=1 + max(x.stage for x in s.body), body=tuple(replace(x, stage=None) for x in s.body)),)))
    return out


def access(s, p):
    """None of its own: its body's statements make them."""
    return []


def stages_of(s, p) -> list | None:
    """Each body statement's pipeline stage where TileLang pipelines the loop, else None: its schedule's, or with
    num_stages, 0 for a load from a global into shared memory (what the pipeline issues ahead) and num_stages for
    the rest (harness.programs.relations)."""
    if s.schedule is not None:
        return [x.stage for x in s.body]
    if s.kind != "pipelined" or not s.stages:
        return None

    def load(x):
        return x.op == "copy" and p.buffer(x.src).scope == "global" and p.buffer(x.dst).scope == "shared"
    return [0 if load(x) else s.stages for x in s.body]
