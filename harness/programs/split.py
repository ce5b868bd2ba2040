"""split: per-warp-group regions, explicit warp specialization where both sides compute. The block's first `first`
threads run the first `a` statements of the body (side A), the others the rest (side B); A hands its results to
B through an mbarrier (`hand`, `first` arrivals), which B waits on before its statements from index `wait` on:

    tx = T.get_thread_binding()
    if tx < first:
        <body[:a]>
        T.barrier_arrive(hand)
    else:
        <body[a:wait]>                      # B's own work, beside A's
        T.mbarrier_wait_parity(hand, 0)
        <body[wait:]>                       # may read what A wrote to shared memory

Its meaning is the body in order. That holds because B's statements before the wait touch nothing A writes, A
reads and writes nothing B writes, and a fragment belongs to one side only (TileLang lays a fragment out over
the threads of one region, as in a stream). The barrier is used once, so a split stands at a block's top level
(not in a loop, where a second trip would need the slot handed back, nor in a `when`); one per program, no
stream beside it (one warp-specialized region per kernel). Each side's statements see only that side's threads
(their fragments and T.Parallel extents spread over them); a thread-indexed statement (THREAD_INDEXED) stands on
side A only, where the threads are numbered from 0. Sides are warp groups: 128 of 256 threads, 128 or 256 of
384. What either side defines is defined after the split.
"""
from dataclasses import dataclass

from harness.programs import model
from harness.programs.builder import load
from harness.programs.copy import Copy
from harness.programs.model import Scope, Statement, fields, need


@dataclass(frozen=True, kw_only=True)
class Split(Statement):
    op = "split"
    first: int
    a: int
    wait: int
    body: tuple


STATEMENT = Split

FIRST = {256: (128,), 384: (128, 256)}
PLACES = {"top": 3}


def check(s, p, scope):
    fields(s, first=int, a=int, wait=int, body=tuple)
    need(not scope.in_loop and not scope.in_when, "no split inside a loop or a when")
    need(sum(x.op in ("split", "stream") for x in model.walk(p.body)) == 1, "one split per program, and no stream")
    need(s.first in FIRST.get(p.threads, ()), f"first is a warp group count, one of {FIRST.get(p.threads, ())}")
    need(all(b.name != "hand" for b in p.buffers), "the split's barrier is named hand: no buffer may be")
    body, a, wait = s.body, s.a, s.wait
    need(1 <= a < len(body) <= 12 and a <= wait <= len(body), "1 <= a < len(body) <= 12 and a <= wait <= len(body)")
    inside = list(model.walk(body))
    need(not any(x.op in ("split", "stream", "loop") for x in inside), "no loop, stream or split inside a split")
    need(not any(getattr(model.kind(x), "THREAD_INDEXED", False) for x in model.walk(body[a:])),
         "thread-indexed statements only on side A (side B's threads start at first)")
    shared = {n for n in scope.defined if p.buffer(n).scope == "shared"}
    side_a = Scope(s.first, shared)
    model.check_body(p, body[:a], side_a)
    side_b = Scope(p.threads - s.first, shared)
    model.check_body(p, body[a:wait], side_b)
    side_b.defined |= {n for n in side_a.defined if p.buffer(n).scope == "shared"}
    model.check_body(p, body[wait:], side_b)
    (ra, wa), (rb0, wb0), (rb1, wb1) = (_uses(body[:a]), _uses(body[a:wait]), _uses(body[wait:]))
    frag_a = {n for n in ra | wa if p.buffer(n).scope == "fragment"}
    frag_b = {n for n in rb0 | wb0 | rb1 | wb1 if p.buffer(n).scope == "fragment"}
    outside = {n for x in model.walk(p.body) if not any(x is y for y in [s, *inside])
               for n in model.kind(x).reads(x) + model.kind(x).writes(x)}
    shared_frags = sorted(frag_a & frag_b | (frag_a | frag_b) & outside)
    need(not shared_frags, f"fragment {shared_frags[0] if shared_frags else ''} is used on two sides of a split")
    for name, threads in [(n, s.first) for n in frag_a] + [(n, p.threads - s.first) for n in frag_b]:
        need(model.spreads(p.buffer(name).shape, threads), f"fragment {name} does not spread over its side's threads")
    clash = sorted(wa & (rb0 | wb0 | wb1) | ra & (wb0 | wb1))
    need(not clash, f"{clash[0] if clash else ''} is written on one side and used on the other before the barrier")
    scope.defined |= side_a.defined | side_b.defined


def _uses(statements) -> tuple:
    """(what they read, what they write), updates in place counted as both."""
    read, written = set(), set()
    for x in model.walk(statements):
        k = model.kind(x)
        updated = set(getattr(k, "updates", lambda _: [])(x))
        read |= set(k.reads(x)) | updated
        written |= set(k.writes(x)) | updated
    return read, written


def reads(s):
    return []


def writes(s):
    return []


def full(s, p):
    return False


def allocations(s, p, ind):
    return [f"{ind}hand = T.alloc_barrier([{s.first}])"]


def tilelang(s, p, ind):
    from harness.programs.emit import body_lines
    body, a, wait, inner = s.body, s.a, s.wait, ind + "    "
    return ([f"{ind}tx = T.get_thread_binding()", f"{ind}if tx < {s.first}:"]
            + body_lines(body[:a], p, inner, "tilelang") + [f"{inner}T.barrier_arrive(hand)", f"{ind}else:"]
            + body_lines(body[a:wait], p, inner, "tilelang") + [f"{inner}T.mbarrier_wait_parity(hand, 0)"]
            + body_lines(body[wait:], p, inner, "tilelang"))


def torch(s, p, ind):
    from harness.programs.emit import body_lines
    return body_lines(s.body, p, ind, "torch")


def draw(c, b, at):
    """Side A: 1 to 3 statements and a shared tile it loads; side B: 0 to 2 statements of its own, the wait, then a
    store of A's tile to a new global (the handoff) and 0 to 2 more."""
    if at != "bx" or b.threads not in FIRST or any(x.op in ("split", "stream") for x in model.walk(b.body)):
        return
    threads, first = b.threads, c.one(FIRST[b.threads])
    outer, outer_defined = b.body, set(b.defined)
    shared = {n for n in b.defined if b.buffers[n].scope == "shared"}

    def side(count, defined, width):
        b.body, b.defined, b.threads = [], set(defined), width
        for _ in range(count):
            b.statement(c, b, "bx", "trip")
        return b.body, b.defined

    side_a, defined_a = side(c.between((1, 3)), shared, first)
    tile = load(c, b, "shared", c.one(("float16", "bfloat16", "float32")), (b.block, c.one(b.widths("shared"))))
    side_a, handed = side_a + tile, tile[0].dst
    b.first_thread = first
    before, defined_b = side(c.between((0, 2)), shared, threads - first)
    out = b.new("global", b.buffers[handed].dtype, ("n", b.buffers[handed].shape[1]))
    after = [Copy(src=handed, dst=out, at="bx", row=0, col=0, form="tile")]
    more, defined_b = side(c.between((0, 2)), defined_b | {n for n in defined_a | {handed} if b.buffers[n].scope == "shared"},
                           threads - first)
    del b.first_thread
    b.body, b.threads = outer, threads
    b.defined = outer_defined | {n for n in defined_a | defined_b | {handed} if b.buffers[n].scope == "shared"}
    body = side_a + before + after + more
    b.emit([Split(first=first, a=len(side_a), wait=len(side_a) + len(before), body=tuple(body))])


def access(s, p):
    """None of its own: its sides' statements make them."""
    return []
