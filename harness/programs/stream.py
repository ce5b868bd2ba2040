"""stream: explicit warp specialization, a producer loading a global's tiles into an mbarrier ring of shared slots
that the consumers drain, running the body on each (its meaning: a loop over the tiles).

The block's last 128 threads are the producer: it loads a tile of an n-row global at row k * block + row, trip
by trip, into a ring of `stages` shared slots; the threads before them are consumers that wait for a slot, copy
it into `dst`, hand the slot back and run the body. Two mbarriers per
slot: `full[s]` completes when the slot's bytes landed, `empty[s]` when every consumer arrived. The producer
loads by T.tma_copy, posting the bytes on `full[s]` (one elected thread arrives: `load: "tma"`), or by T.copy,
after which each of its threads arrives (`load: "copy"`). The consumers prime the ring (arrive on every
`empty[s]` once before the loop), so both sides wait with parity (k // stages) & 1; both run the same trip
count, 0 included.

Its meaning is a plain loop: for k in range(trips): dst = the tile (rows past n read 0); body. The body (no loop
in it) runs on the consumers only, so its fragments and T.Parallel extents spread over them, and a fragment it
uses is not used outside (TileLang lays a fragment out over the threads of one region). At most one stream per
program, at its top level; what `dst` holds is defined after it only if it surely runs.
"""
from dataclasses import dataclass, replace

from harness.programs import model
from harness.programs.copy import Copy
from harness.programs.model import Scope, Statement, fields, local, need


@dataclass(frozen=True, kw_only=True)
class Stream(Statement):
    op = "stream"
    src: str
    dst: str
    row: int
    col: int
    stages: int
    trips: int | str
    load: str
    body: tuple


STATEMENT = Stream

PRODUCER = 128                 # one warpgroup
TRIPS = (0, 1, 2, 3) + model.SYMBOLIC_TRIPS
LOADS = ("tma", "copy")


def consumers(p) -> int:
    return p.threads - PRODUCER


def check(s, p, scope):
    fields(s, src=str, dst=str, row=int, col=int, stages=(1, 2, 3), trips=TRIPS, load=LOADS, body=tuple)
    need(not scope.in_loop and not scope.in_when, "no stream inside a loop or a when")
    need(sum(x.op == "stream" for x in model.walk(p.body)) == 1, "at most one stream")
    need(p.threads in (256, 384), "a stream runs 128 or 256 consumers beside its 128 producers (256 or 384 threads)")
    g, d = p.buffer(s.src), local(p, s.dst, 2)
    need(g.scope == "global" and g.rows == "n" and not g.layout, f"{g.name} must be an n-row global, no layout")
    need(g.dtype == d.dtype, f"{d.name} takes {g.name}'s dtype")
    h, w = d.shape
    size = 4 if g.dtype == "float32" else 2
    # TMA: a 16-byte aligned row stride, box width and start column.
    need(g.shape[1] * size % 16 == 0 and w * size % 16 == 0 and s.col * size % 16 == 0,
         "TMA needs the global's row, the tile's width and its column in whole 16 bytes")
    need(s.row >= 0 and 0 <= s.col and s.col + w <= g.shape[1], f"columns exceed {g.name}'s {g.shape[1]}")
    need(model.shared_bytes(p) + s.stages * h * w * size <= 96 * 1024, "shared buffers and the ring exceed 96 KiB")
    need(len(s.body) <= 12, "a stream's body holds at most 12 statements")
    inner = Scope(consumers(p), scope.defined | {d.name}, in_loop=True)
    model.check_body(p, s.body, inner)
    inside = [s, *model.walk(s.body)]
    ours = _fragments(p, inside)
    theirs = _fragments(p, [x for x in model.walk(p.body) if not any(x is y for y in inside)])
    shared_frags = sorted(ours & theirs)
    need(not shared_frags, f"fragment {shared_frags[0] if shared_frags else ''} is used inside the stream and outside it")
    if model.surely_runs(s.trips):
        scope.defined |= inner.defined


def _fragments(p, statements) -> set:
    return {n for x in statements for n in model.kind(x).reads(x) + model.kind(x).writes(x)
            if p.buffer(n).scope == "fragment"}


def reads(s):
    return [s.src]


def writes(s):
    return [s.dst]


def full(s, p):
    return False


def allocations(s, p, ind):
    g, d = p.buffer(s.src), p.buffer(s.dst)
    return [f'{ind}ring = T.alloc_shared(({s.stages}, {d.shape[0]}, {d.shape[1]}), "{g.dtype}")',
            f"{ind}full = T.alloc_barrier([{1 if s.load == 'tma' else PRODUCER}] * {s.stages})",
            f"{ind}empty = T.alloc_barrier([{consumers(p)}] * {s.stages})"]


def tilelang(s, p, ind):
    from harness.programs.emit import body_lines
    g, d, st = p.buffer(s.src), p.buffer(s.dst), s.stages
    h, w = d.shape
    row, count = f"k * {p.block} + {s.row}", model.trips(s.trips, p.block, "tilelang")
    tile = f"{g.name}[{row}:{row} + {h}, {s.col}:{s.col + w}]"
    if s.load == "tma":
        load = [f"{ind}        T.tma_copy({tile}, ring[k % {st}, :, :], barrier=full[k % {st}])",
                f"{ind}        if T.shuffle_elect({PRODUCER}):",
                f"{ind}            T.barrier_arrive(full[k % {st}])"]
    else:
        load = [f"{ind}        T.copy({tile}, ring[k % {st}, :, :])",
                f"{ind}        T.barrier_arrive(full[k % {st}])"]
    return [f"{ind}tx = T.get_thread_binding()",
            f"{ind}if tx >= {consumers(p)}:",
            f"{ind}    for k in T.serial({count}):",
            f"{ind}        T.mbarrier_wait_parity(empty[k % {st}], (k // {st}) & 1)"] + load + [
            f"{ind}else:",
            f"{ind}    for s in T.unroll({st}):",
            f"{ind}        T.barrier_arrive(empty[s])",
            f"{ind}    for k in T.serial({count}):",
            f"{ind}        T.mbarrier_wait_parity(full[k % {st}], (k // {st}) & 1)",
            f"{ind}        T.copy(ring[k % {st}, :, :], {d.name})",
            f"{ind}        T.barrier_arrive(empty[k % {st}])"] + body_lines(s.body, p, ind + "        ", "tilelang")


def torch(s, p, ind):
    from harness.programs.emit import body_lines
    g, d = p.buffer(s.src), p.buffer(s.dst)
    return [f"{ind}for k in range({model.trips(s.trips, p.block, 'torch')}):",
            f'{ind}    {d.name}[:] = rnd(load({g.name}, k * {p.block} + {s.row}, {s.col}, {d.shape[0]}, {d.shape[1]}), '
            f'"{d.dtype}")'] + body_lines(s.body, p, ind + "    ", "torch")


# ------------------------------------------------------------------------------------------- drawing
PLACES = {"top": 1}
BODY_AT = "k"
CHOICES = {"load": LOADS, "stages": (1, 2, 3)}
LAUNCHES = {256: (64, 128), 384: (128,)}   # 128 consumers at block 64 or 128, or 256 at 128: they run a gemm


def draw(c, b, at):
    """A producer streaming tiles of a global to consumers that run 1 to 4 statements on each."""
    if b.threads not in (256, 384) or any(x.op == "stream" for x in model.walk(b.body)):
        return
    dtype = b.pick(c, "dtype", ("float16", "bfloat16", "float32"))
    scope = b.pick(c, "scope", ("shared", "fragment"))
    widths = [x for x in b.widths(scope, b.threads - PRODUCER) if x * (4 if dtype == "float32" else 2) % 16 == 0]
    w = c.one(widths or [32])
    dst = b.new(scope, dtype, (b.block, w))
    srcs = [g for g in b.inputs() if g.rows == "n" and g.dtype == dtype and g.shape[1] >= w and g.shape[1] % 8 == 0]
    g = c.one(srcs) if srcs and c.flip() else b.buffers[b.new("global", dtype, ("n", w + c.one((0, 8, 16))))]
    col = c.one(range(0, g.shape[1] - w + 1, 8))
    b.mag[dst] = b.mag[g.name]
    trips = b.pick(c, "trips", ("n", "n", "n-1", "n//b", 0, 1, 2, 3))
    outer_defined = set(b.defined)
    b.defined = {n for n in b.defined if b.buffers[n].scope == "shared"} | {dst}   # fragments stay on their side
    inner = b.nested(c, "k", "trip", c.between((1, 4)), threads=b.threads - PRODUCER)
    b.defined = outer_defined | ({dst} if model.surely_runs(trips) and scope == "shared" else set())
    b.emit([Stream(src=g.name, dst=dst, row=c.one((0, 0, 1)), col=col, stages=c.between((1, 3)),
                   trips=trips, load=c.one(LOADS), body=inner)])


def shrink(s, where):
    load = Copy(src=s.src, dst=s.dst, at="bx", row=s.row, col=s.col, form="tile")
    out = [(f"unwrap stream {where}", (load,) + tuple(model.outside_loop(x) for x in s.body))]
    out += [(f"stream {where} stages {s.stages} -> {x}", (replace(s, stages=x),)) for x in range(1, s.stages)]
    if s.trips in model.SYMBOLIC_TRIPS or s.trips > 1:
        out.append((f"stream {where} trips {s.trips} -> 1", (replace(s, trips=1),)))
    return out


# Who runs the body (harness.programs.relations).
BODY_THREADS = "consumers"


def access(s, p):
    """Each trip: the producer reads the global's tile and writes it into a slot of the ring (named "ring": a
    shared buffer of the stream's own, a slot of it whole), the consumers read the slot and write dst whole."""
    from harness.programs.access import Access, region, whole
    tile = p.buffer(s.dst).shape
    return [region(p, s.src, "read", (s.row, s.col), tile, who="producer"),
            Access("ring", "shared", "write", "whole", (), tile, who="producer"),
            Access("ring", "shared", "read", "whole", (), tile, who="consumers"),
            whole(p, s.dst, "write", who="consumers")]
