"""Writing programs: attention's chains (TEMPLATES), then changed statement by statement, and free compositions.

`programs(st)` is the Hypothesis strategy; it is handed Hypothesis's strategies module, so that the
layers below the campaign never import Hypothesis. Every statement is drawn so that its rules hold where it
stands (model.check confirms each program), and values stay small integers wherever the arithmetic
allows: inputs lie in [-2, 2], and a statement whose result could leave a dtype's exactly representable
integers is not drawn, so most checks are bit-exact. A program is a list of statements; Hypothesis
shrinks it by drawing fewer and simpler ones, and `shrink` deletes statements from a recorded one.
"""
from __future__ import annotations

import dataclasses

from harness.programs import loop, model, overrun, reduce, scan, split, stream, thread, thread_atomic, when
from harness.programs.gemm import M_BY_THREADS, POLICIES, K, N
from harness.programs.model import INPUT_RANGE, Buffer, Program, ProgramError

# Exactly representable integers by dtype: a value drawn past these is rounded, and checked by tolerance.
EXACT = {"float16": 2048, "bfloat16": 256, "float32": 1 << 24}
LENGTH_BLOCKS = 5                  # n stays below 5 blocks (harness.strategies draws it): trips <= 5
PLAIN_THREADS = (64, 96, 128, 160, 192, 256, 384)   # thread counts without a gemm, powers of two or not
WIDTHS = (16, 32, 64, 48, 80, 96)   # the last three spread over 96, 160, 192 and 384 threads


class Builder:
    """A program being written: its buffers, statements, what is defined and how large its values may be."""

    def __init__(self, block, threads):
        self.block, self.threads = block, threads
        self.buffers: dict[str, Buffer] = {}
        self.body: list = []
        self.mag: dict[str, float] = {}      # name -> a bound on |value| (inputs: INPUT_RANGE)
        self.defined: set = set()
        self.count = 0

    def new(self, scope, dtype, shape, swizzle=False, mag=INPUT_RANGE, layout="") -> str:
        self.count += 1
        prefix = {"global": "G", "shared": "S", "fragment": "F"}[scope]
        name = f"{prefix}{self.count}"
        self.buffers[name] = Buffer(name, scope, dtype, tuple(shape), swizzle, layout)
        self.mag[name] = mag
        return name

    def program(self) -> Program:
        return Program(self.block, self.threads, tuple(self.buffers.values()), tuple(self.body))

    def locals(self, shape=None, scope=None, dtype=None, defined=True):
        return [b.name for b in self.buffers.values() if b.local and (not defined or b.name in self.defined)
                and (shape is None or b.shape == tuple(shape)) and (scope is None or b.scope == scope)
                and (dtype is None or b.dtype == dtype)]

    def widths(self, scope) -> tuple:
        """Widths of a [block, width] tile this scope can hold here (a fragment must spread over the threads)."""
        if self.threads & (self.threads - 1) == 0:  # 48, 80, 96: for the other thread counts
            return WIDTHS[:3]
        if scope == "shared":
            return WIDTHS[:3]
        return tuple(w for w in WIDTHS if model.spreads((self.block, w), self.threads)) or WIDTHS[:3]  # none: refused, redrawn

    def fits(self, name, mag) -> bool:
        return mag <= EXACT[self.buffers[name].dtype]

    def inputs(self):
        written = {s["dst"] for s in model.walk(self.body) if s["op"] in ("copy", "atomic")}
        return [b for b in self.buffers.values() if b.scope == "global" and b.name not in written]

    def outputs(self):
        read = {s["src"] for s in model.walk(self.body) if s["op"] in ("copy", "stream")}
        return [b for b in self.buffers.values() if b.scope == "global" and b.name not in read]


# ----------------------------------------------------------------------------------- statements
def load(c, b: Builder, scope, dtype, shape, at="bx", into=None, swizzle=None) -> list:
    """Statements that define a local tile of `shape` from an n-row global input (new, or one wide enough),
    at row base(at) + row: a read-only input may be read from any row, past the block's own ones too."""
    h, w = shape
    if into is None:
        sw = swizzle if swizzle is not None else (scope == "shared" and model.swizzles(shape, dtype) and c.flip())
        into = b.new(scope, dtype, shape, swizzle=sw)
    candidates = [g for g in b.inputs() if g.shape[1] >= w and g.rows == "n"]
    if candidates and c.flip():
        g = c.one(candidates)
    else:
        width = w + c.one((0, 0, 0, 4, 8, 13))
        g = b.buffers[b.new("global", c.one(("float16", "float16", "bfloat16", "float32")), ("n", width))]
    col = c.between((0, g.shape[1] - w))
    row = c.one((0, 0, 1, 3))
    stmt = {"op": "copy", "src": g.name, "dst": into, "at": at, "row": row, "col": col,
            "form": c.one(("tile", "tile", "loop"))}
    b.mag[into] = b.mag[g.name]
    return [stmt]


def _emit(b: Builder, stmts, defines=()):
    b.body.extend(stmts)
    b.defined |= set(defines)


def draw_load(c, b, at):
    scope = c.one(("shared", "fragment"))
    dtype = c.one(("float16", "bfloat16", "float32"))
    shape = (b.block, c.one(b.widths(scope)))
    existing = b.locals(shape=shape, scope=scope, dtype=dtype, defined=False)
    into = c.one(existing) if existing and c.flip() else None
    stmts = load(c, b, scope, dtype, shape, at=at, into=into)
    _emit(b, stmts, [stmts[0]["dst"]])


def draw_fill(c, b, at):
    held = b.locals()
    if held and c.flip():  # a region of what a buffer holds (tile-ai/tilelang#2942 fills the wrong rows)
        dst = c.one(held)
        shape, value = b.buffers[dst].shape, c.one((0, 1, -1, 2, -3, 0.5))
        starts = [c.between((0, d - 1)) for d in shape]
        extents = [c.between((1, d - a)) for a, d in zip(starts, shape)]
        b.mag[dst] = max(b.mag[dst], abs(value))
        _emit(b, [{"op": "fill", "dst": dst, "value": value, "region": starts + extents}])
        return
    existing = b.locals(defined=False)
    if existing and c.flip():
        dst = c.one(existing)
    else:
        scope = c.one(("shared", "fragment"))
        shapes = [(b.block, w) for w in b.widths(scope)] + [(b.block,)] * (scope == "fragment")
        dst = b.new(scope, c.one(("float32", "float16")), c.one(shapes))
    value = c.one((0, 0, 1, -1, 2, -3, 0.5))
    b.mag[dst] = abs(value)
    _emit(b, [{"op": "fill", "dst": dst, "value": value}], [dst])


def draw_gemm(c, b, at):
    if b.threads not in M_BY_THREADS or b.block not in M_BY_THREADS[b.threads]:
        return
    m, n, k = b.block, c.one(N), c.one(K)
    dtype = c.one(("float16", "float16", "bfloat16"))
    a_scope = c.one(("shared", "shared", "fragment"))
    ta = a_scope == "shared" and c.flip()
    tb = c.flip()
    a = _operand(c, b, a_scope, dtype, (k, m) if ta else (m, k), at)
    bb = _operand(c, b, "shared", dtype, (n, k) if tb else (k, n), at)
    cs = b.locals(shape=(m, n), scope="fragment", dtype="float32")
    clear = not cs or c.flip()
    acc = b.new("fragment", "float32", (m, n)) if clear and (not cs or c.flip()) else c.one(cs)
    mag = k * b.mag[a] * b.mag[bb] * (LENGTH_BLOCKS if at == "k" else 1) + (0 if clear else b.mag[acc])
    if not b.fits(acc, mag):
        return
    b.mag[acc] = mag
    _emit(b, [{"op": "gemm", "a": a, "b": bb, "c": acc, "ta": ta, "tb": tb, "clear": clear,
               "policy": c.one(POLICIES)}], [acc])


def _operand(c, b, scope, dtype, shape, at):
    """A defined local of this spec, or one loaded now."""
    have = b.locals(shape=shape, scope=scope, dtype=dtype)
    if have and c.flip():
        return c.one(have)
    stmts = load(c, b, scope, dtype, shape, at=at)
    _emit(b, stmts, [stmts[0]["dst"]])
    return stmts[0]["dst"]


def draw_reduce(c, b, at):
    srcs = [n for n in b.locals(scope="fragment", dtype="float32") if len(b.buffers[n].shape) == 2]
    if not srcs:
        return
    src = c.one(srcs)
    dim = c.one((1, 1, 0))
    length = b.buffers[src].shape[1 - dim]
    kind = c.one(reduce.KINDS)
    dsts = b.locals(shape=(length,), scope="fragment", dtype="float32")
    clear = kind in reduce.CLEARING or not dsts or c.flip()
    dst = b.new("fragment", "float32", (length,)) if clear and (not dsts or c.flip()) else c.one(dsts)
    grow = b.mag[src] * (b.buffers[src].shape[dim] if kind in ("sum", "abssum") else 1)
    mag = grow if clear else b.mag[dst] + grow * (LENGTH_BLOCKS if at == "k" else 1)
    if not b.fits(dst, mag):
        return
    b.mag[dst] = mag
    _emit(b, [{"op": "reduce", "src": src, "dst": dst, "kind": kind, "dim": dim, "clear": clear}], [dst])


def draw_scan(c, b, at):
    if b.threads & (b.threads - 1):  # the scan templates take a power-of-two thread count
        return
    srcs = [n for n in b.locals() if not b.buffers[n].swizzle]  # scanned in the plain layout only (scan.check)
    if not srcs:
        return
    src = c.one(srcs)
    buf = b.buffers[src]
    kind, dim = c.one(scan.KINDS), c.one(tuple(range(len(buf.shape))))
    like = [n for n in b.locals(shape=buf.shape, scope=buf.scope, dtype=buf.dtype, defined=False)
            if n != src and not b.buffers[n].swizzle]
    dst = src if c.flip() else c.one(like) if like and c.flip() else b.new(buf.scope, buf.dtype, buf.shape)
    if kind == "sum" and dst == src and at == "k":  # a sum in place every trip grows as length ** trips
        return
    mag = b.mag[src] * (buf.shape[dim] if kind == "sum" else 1)
    if not b.fits(dst, mag):
        return
    b.mag[dst] = mag
    _emit(b, [{"op": "scan", "src": src, "dst": dst, "kind": kind, "dim": dim, "reverse": c.flip()}], [dst])


def draw_map(c, b, at):
    dsts = b.locals()
    new = not dsts or c.flip()
    if new:
        shape = c.one([b.buffers[n].shape for n in dsts] or [(b.block, 32)])
        dst = b.new(c.one(("fragment", "shared")) if len(shape) == 2 else "fragment",
                    c.one(("float32", "float16")), shape)
    else:
        dst = c.one(dsts)
    shape = b.buffers[dst].shape
    full = new or c.flip()
    rows = shape[0] if full else c.between((1, shape[0]))
    cols = None if len(shape) == 1 else (shape[1] if full else c.between((1, shape[1])))
    offset = [] if full or not c.flip() else \
        [c.between((0, shape[0] - rows))] + ([c.between((0, shape[1] - cols))] if cols is not None else [])
    operands = [n for n in b.locals() if (n != dst or not new) and not (n == dst and any(offset))]
    refs = [n for n in operands if b.buffers[n].shape in (shape, (shape[0],))]
    expr, mag = _expression(c, b, refs, len(shape), at, 3)
    if not b.fits(dst, mag):
        return
    b.mag[dst] = max(mag, b.mag.get(dst, 0) if not full else 0)
    stmt = {"op": "map", "dst": dst, "rows": rows, "expr": expr, **({"cols": cols} if cols is not None else {}),
            **({"offset": offset} if any(offset) else {})}
    _emit(b, [stmt], [dst] if rows == shape[0] and (cols is None or cols == shape[1]) else [])


def _expression(c, b, refs, dims, at, depth):
    """(expression, bound on its magnitude)."""
    choice = c.between((0, 9)) if depth else 0
    if choice <= 2 or depth == 0:
        if refs and c.between((0, 3)):
            name = c.one(refs)
            return ["buf", name], b.mag[name]
        v = c.one((0, 1, -1, 2, 3, -2, 0.5, 0.25, 8))
        return ["num", v], abs(v)
    if choice <= 6:
        op = c.one(("add", "sub", "mul", "max", "min", "div"))
        x, mx = _expression(c, b, refs, dims, at, depth - 1)
        if op == "div":  # by a power of two: exact, and never by zero
            d = c.one((2, 0.5, 8, -2))
            return [op, x, ["num", d]], mx / abs(d)
        y, my = _expression(c, b, refs, dims, at, depth - 1)
        return [op, x, y], (mx * my if op == "mul" else mx + my if op in ("add", "sub") else max(mx, my))
    if choice == 7:
        x, mx = _expression(c, b, refs, dims, at, depth - 1)
        if mx > 8:
            return ["neg", x], mx
        return ["exp2", x], 2.0 ** mx
    kinds = ["i<", "row<n"] + (["j<", "col<n"] if dims == 2 else [])
    kind = c.one(kinds)
    pred = [kind, c.between((0, b.block))] if kind in ("i<", "j<") else [kind, c.one(("bx", at) if at == "k" else ("bx",))]
    (x, mx), (y, my) = (_expression(c, b, refs, dims, at, depth - 1) for _ in range(2))
    return ["where", pred, x, y], max(mx, my)


def draw_store(c, b, at):
    srcs = [n for n in b.locals() if len(b.buffers[n].shape) == 2 and b.buffers[n].shape[0] <= b.block]
    if not srcs:
        return
    src = c.one(srcs)
    h, w = b.buffers[src].shape
    dtype = c.one(("float32", "float16", "bfloat16"))
    if b.mag[src] > EXACT[dtype]:
        dtype = "float32"
    g = b.new("global", dtype, ("n", w + c.one((0, 0, 3, 8))))
    col = c.between((0, b.buffers[g].shape[1] - w))
    _emit(b, [{"op": "copy", "src": src, "dst": g, "at": "bx", "row": c.between((0, b.block - h)), "col": col,
               "form": c.one(("tile", "tile", "loop"))}])


def draw_atomic(c, b, at):
    srcs = [n for n in b.locals() if len(b.buffers[n].shape) == 2 and b.buffers[n].shape[0] <= b.block]
    if not srcs:
        return
    src = c.one(srcs)
    t = b.buffers[src]
    h, w = t.shape
    kind = c.one(("add", "add", "max", "min"))
    form = c.one(("tile", "element")) if kind == "add" else "element"
    dtype = t.dtype if form == "tile" else ("float32" if kind != "add" else c.one(("float32", "float16", "bfloat16")))
    tiles = [n for n in b.locals(scope="shared", dtype=dtype) if n != src and len(b.buffers[n].shape) == 2
             and b.buffers[n].shape[0] >= h and b.buffers[n].shape[1] >= w]
    if tiles and c.flip():  # into a shared tile of the block's own
        g = b.buffers[c.one(tiles)]
        mag = b.mag[g.name] + b.mag[src] * (LENGTH_BLOCKS if at == "k" else 1)
        if mag > EXACT[g.dtype] or b.mag[src] > EXACT[g.dtype]:
            return
        b.mag[g.name] = mag
        _emit(b, [{"op": "atomic", "kind": kind, "src": src, "dst": g.name, "at": "0", "row": c.between((0, g.shape[0] - h)),
                   "col": c.between((0, g.shape[1] - w)), "form": form}])
        return
    whole = c.flip()
    outs = [g for g in b.outputs() if g.dtype == dtype and g.shape[1] >= w and (g.rows != "n") == whole
            and (not whole or g.rows >= h)
            and g.name not in {s["dst"] for s in model.walk(b.body) if s["op"] == "copy"}]
    if outs and c.flip():
        g = c.one(outs)
    else:
        width = w + c.one((0, 0, 2, 8))
        laid = whole and dtype == "float32" and h % 8 == 0 and width % 8 == 0 and c.flip()
        g = b.buffers[b.new("global", dtype, (h if whole else "n", width), layout="dq" if laid else "")]
    adds = (LENGTH_BLOCKS if whole else 1) * (LENGTH_BLOCKS if at == "k" else 1)
    mag = b.mag[g.name] + b.mag[src] * (adds if kind == "add" else 1)
    if mag > EXACT[g.dtype] or b.mag[src] > EXACT[g.dtype]:
        return
    b.mag[g.name] = mag
    row = c.between((0, (g.rows if whole else b.block) - h))
    _emit(b, [{"op": "atomic", "kind": kind, "src": src, "dst": g.name, "at": "0" if whole else "bx", "row": row,
               "col": c.between((0, g.shape[1] - w)), "form": form}])


def draw_loop(c, b, at):
    kind = c.one(("pipelined", "pipelined", "serial", "unroll"))
    trips = c.one((0, 1, 2, 3, "n", "n", "n", "n-1", "n//b")) if kind != "unroll" else c.one((1, 2, 3))
    stages = c.between((0, 3)) if kind == "pipelined" else 0
    outer, b.body = b.body, []
    outer_defined = set(b.defined)
    for _ in range(c.between((1, 4))):
        c.one(INNER)(c, b, "k")
    inner, b.body = b.body, outer
    if not model.surely_runs(trips):
        b.defined = outer_defined
    if inner:
        drawn = {"op": "loop", "kind": kind, "trips": trips, "stages": stages, "body": tuple(inner)}
        if kind == "pipelined" and len(inner) > 1 and c.flip():
            drawn = _scheduled(c, b.program(), drawn) or drawn
        _emit(b, [drawn])


def _scheduled(c, p: Program, drawn: dict) -> dict | None:
    """The pipelined loop `drawn` with a manual schedule (loop.py): its body cut into runs of stages 0, 1 (and 2),
    emitted in body order or later stages first; None if the cut breaks the schedule's rule."""
    m = len(drawn["body"])
    cuts = {c.between((1, m - 1)) for _ in range(c.one((1, 1, 2)))}
    body = tuple(dict(x, stage=sum(i >= k for k in cuts)) for i, x in enumerate(drawn["body"]))
    out = dict(drawn, stages=0, schedule=c.one(loop.SCHEDULES), body=body)
    try:
        loop.check_schedule(out, p)
    except ProgramError:
        return None
    return out


def draw_stream(c, b, at):
    """A producer streaming tiles of a global to consumers that run 1 to 4 statements on each (stream.py)."""
    if b.threads not in (256, 384) or any(s["op"] == "stream" for s in model.walk(b.body)):
        return
    dtype = c.one(("float16", "bfloat16", "float32"))
    threads, b.threads = b.threads, b.threads - stream.PRODUCER
    scope = c.one(("shared", "fragment"))
    w = c.one([x for x in b.widths(scope) if x * (4 if dtype == "float32" else 2) % 16 == 0])
    dst = b.new(scope, dtype, (b.block, w))
    srcs = [g for g in b.inputs() if g.rows == "n" and g.dtype == dtype and g.shape[1] >= w and g.shape[1] % 8 == 0]
    g = c.one(srcs) if srcs and c.flip() else b.buffers[b.new("global", dtype, ("n", w + c.one((0, 8, 16))))]
    col = c.one(range(0, g.shape[1] - w + 1, 8))
    b.mag[dst] = b.mag[g.name]
    trips = c.one(("n", "n", "n-1", "n//b", 0, 1, 2, 3))
    outer, b.body = b.body, []
    outer_defined = set(b.defined)
    b.defined = {n for n in b.defined if b.buffers[n].scope == "shared"} | {dst}   # fragments stay on their side
    for _ in range(c.between((1, 4))):
        c.one(INNER)(c, b, "k")
    inner, b.body, b.threads = b.body, outer, threads
    b.defined = outer_defined | ({dst} if model.surely_runs(trips) and scope == "shared" else set())
    _emit(b, [{"op": "stream", "src": g.name, "dst": dst, "row": c.one((0, 0, 1)), "col": col, "stages": c.between((1, 3)),
               "trips": trips, "load": c.one(stream.LOADS), "body": tuple(inner)}])


def draw_when(c, b, at):
    """1 to 3 statements under a condition every thread of the block agrees on (when.py): the block, or the trip."""
    test = c.one(when.TESTS if at == "bx" else when.TRIP_TESTS)
    outer, b.body = b.body, []
    outer_defined = set(b.defined)
    for _ in range(c.between((1, 3))):
        c.one(UNDER_WHEN)(c, b, at)
    inner, b.body, b.defined = b.body, outer, outer_defined   # what the body defines may not be
    if inner:
        _emit(b, [{"op": "when", "at": at, "test": test, "body": tuple(inner)}])


UNDER_WHEN = (draw_load, draw_load, draw_gemm, draw_gemm, draw_map, draw_reduce, draw_scan, draw_fill, draw_atomic, draw_store,
              thread.draw, thread_atomic.draw)
INNER = UNDER_WHEN + (draw_when,)
OUTER = INNER + (draw_loop, draw_loop, draw_stream, split.draw, split.draw, split.draw, overrun.draw)


# ------------------------------------------------------------------------------------ templates
def _attention(c, b):
    """Load Q; per key block: load K and V, S = QK^T, mask the keys past n, the running max, P = exp2(S - m),
    O += PV; store O (directly, or through a shared tile), and accumulate it atomically (as dQ is) into a buffer
    every block adds to."""
    dtype = c.one(("float16", "bfloat16"))
    d = c.one((32, 64))
    q = load(c, b, "shared", dtype, (b.block, d))
    o = b.new("fragment", "float32", (b.block, d), mag=0)
    m = b.new("fragment", "float32", (b.block,), mag=3)
    _emit(b, q + [{"op": "fill", "dst": o, "value": 0}, {"op": "fill", "dst": m, "value": -3}], [q[0]["dst"], o, m])
    outer, b.body = b.body, []
    k = load(c, b, "shared", dtype, (b.block, d), at="k")
    v = load(c, b, "shared", dtype, (b.block, d), at="k")
    s, p, ps = b.new("fragment", "float32", (b.block, b.block)), b.new("fragment", "float32", (b.block, b.block)), \
        b.new("shared", dtype, (b.block, b.block), swizzle=model.swizzles((b.block, b.block), dtype))
    inner = k + v + [
        {"op": "gemm", "a": q[0]["dst"], "b": k[0]["dst"], "c": s, "ta": False, "tb": True, "clear": True, "policy": "FullRow"},
        {"op": "map", "dst": s, "rows": b.block, "cols": b.block, "expr": ["where", ["col<n", "k"], ["buf", s], ["num", -2]]},
        {"op": "reduce", "src": s, "dst": m, "kind": "max", "dim": 1, "clear": False},
        {"op": "map", "dst": p, "rows": b.block, "cols": b.block, "expr": ["exp2", ["sub", ["buf", s], ["buf", m]]]},
        {"op": "copy", "src": p, "dst": ps, "at": "0", "row": 0, "col": 0, "form": "tile"},
        {"op": "gemm", "a": ps, "b": v[0]["dst"], "c": o, "ta": False, "tb": False, "clear": False, "policy": "FullRow"},
    ]
    b.body = outer
    stages = c.between((0, 3))
    trips = c.one(("n", "n", "n-1", "n//b"))  # a query block past the last key block sees none (54d466153e16's shape)
    kind = "pipelined" if stages else "serial"
    _emit(b, [{"op": "loop", "kind": kind, "trips": trips, "stages": stages, "body": tuple(inner)}])
    b.mag[o] = EXACT["float32"]
    out = b.new("global", "float32", ("n", d))
    acc = b.new("global", "float32", (b.block, d))
    store = [{"op": "copy", "src": o, "dst": out, "at": "bx", "row": 0, "col": 0, "form": "tile"}]
    if c.flip():  # O through a shared tile, which may take Q's shared memory once the loop is done (54d466153e16)
        os_ = b.new("shared", "float32", (b.block, d))
        store = [{"op": "copy", "src": o, "dst": os_, "at": "0", "row": 0, "col": 0, "form": "tile"},
                 {"op": "copy", "src": os_, "dst": out, "at": "bx", "row": 0, "col": 0, "form": "tile"}]
    _emit(b, store + [{"op": "atomic", "kind": "add", "src": o, "dst": acc, "at": "0", "row": 0, "col": 0,
                       "form": c.one(("element", "tile"))}])


def _pipelined_gemm(c, b):
    """C = sum over key blocks of A B_k (B loaded in the loop), plus a bias tile loaded before the loop and read
    only after it (in half the draws: tile-ai/tilelang#2443's construct), stored."""
    dtype = c.one(("float16", "bfloat16"))
    kdim, n = c.one(K), c.one(N)
    a = load(c, b, c.one(("shared", "fragment")), dtype, (b.block, kdim))
    acc = b.new("fragment", "float32", (b.block, n))
    bias = load(c, b, "shared", dtype, (b.block, n)) if c.flip() else []
    _emit(b, a + bias + [{"op": "fill", "dst": acc, "value": 0}], [a[0]["dst"], acc] + [s["dst"] for s in bias])
    outer, b.body = b.body, []
    tb = c.flip()
    bb = load(c, b, "shared", dtype, (n, kdim) if tb else (kdim, n), at="k")
    b.body = outer
    stages = c.between((0, 3))
    trips = c.one(("n", "n", "n-1", "n//b", 0, 1, 2))
    inner = bb + [{"op": "gemm", "a": a[0]["dst"], "b": bb[0]["dst"], "c": acc, "ta": False, "tb": tb, "clear": False,
                   "policy": c.one(POLICIES)}]
    _emit(b, [{"op": "loop", "kind": "pipelined", "trips": trips, "stages": stages, "body": tuple(inner)}])
    if bias:
        _emit(b, [{"op": "map", "dst": acc, "rows": b.block, "cols": n,
                   "expr": ["add", ["buf", acc], ["buf", bias[0]["dst"]]]}])
    out = b.new("global", "float32", ("n", n))
    _emit(b, [{"op": "copy", "src": acc, "dst": out, "at": "bx", "row": 0, "col": 0, "form": "tile"}])


def _reduce(c, b):
    """A tile's row max, min, sum, abs-sum or abs-max, broadcast back over the rows, stored."""
    w = c.one(b.widths("fragment"))
    x = load(c, b, "fragment", "float32", (b.block, w))
    r = b.new("fragment", "float32", (b.block,))
    kind = c.one(reduce.KINDS)
    y = b.new("fragment", "float32", (b.block, w))
    out = b.new("global", c.one(("float32", "float16")), ("n", w))
    _emit(b, x + [{"op": "reduce", "src": x[0]["dst"], "dst": r, "kind": kind, "dim": 1, "clear": True},
                  {"op": "map", "dst": y, "rows": b.block, "cols": w, "expr": ["sub", ["buf", x[0]["dst"]], ["buf", r]]},
                  {"op": "copy", "src": y, "dst": out, "at": "bx", "row": 0, "col": 0, "form": "tile"}],
          [x[0]["dst"], r, y])


def _scan(c, b):
    """A tile's cumulative sum or maximum along its rows or columns, in order or reversed, in shared memory or in
    registers (TileLang stages those through shared memory), in place or into another tile, stored."""
    scope, dtype, dim, kind = c.one(("shared", "fragment")), c.one(model.DTYPES), c.one((1, 0)), c.one(scan.KINDS)
    shape = (b.block, c.one(b.widths(scope)))
    x = load(c, b, scope, dtype, shape, swizzle=False)  # scanned in the plain layout only (scan.check)
    src = x[0]["dst"]
    dst = src if c.flip() else b.new(scope, dtype, shape)
    b.mag[dst] = b.mag[src] * (shape[dim] if kind == "sum" else 1)  # at most 2 * 64: exact in every dtype
    out = b.new("global", dtype, ("n", shape[1]))
    _emit(b, x + [{"op": "scan", "src": src, "dst": dst, "kind": kind, "dim": dim, "reverse": c.flip()},
                  {"op": "copy", "src": dst, "dst": out, "at": "bx", "row": 0, "col": 0, "form": "tile"}], [src, dst])


def _atomic(c, b):
    """A tile added atomically into the block's own rows and into a buffer every block adds to (and into a shared tile)."""
    dtype = c.one(("float32", "float16", "bfloat16"))
    w = c.one(b.widths("fragment"))
    x = load(c, b, "fragment", dtype, (b.block, w))
    own = b.new("global", dtype, ("n", w + c.one((0, 1, 8))))
    every = b.new("global", dtype, (b.block, w))
    form = c.one(("tile", "element"))
    _emit(b, x + [{"op": "atomic", "kind": "add", "src": x[0]["dst"], "dst": own, "at": "bx", "row": 0, "col": 0, "form": form},
                  {"op": "atomic", "kind": "add", "src": x[0]["dst"], "dst": every, "at": "0", "row": 0, "col": 0, "form": form}],
          [x[0]["dst"]])
    if c.flip():  # and into a shared tile of the block's own (as dQ into shared memory), then stored
        tile, out = b.new("shared", dtype, (b.block, w)), b.new("global", dtype, ("n", w))
        _emit(b, [{"op": "fill", "dst": tile, "value": 1},
                  {"op": "atomic", "kind": "add", "src": x[0]["dst"], "dst": tile, "at": "0", "row": 0, "col": 0, "form": form},
                  {"op": "copy", "src": tile, "dst": out, "at": "bx", "row": 0, "col": 0, "form": "tile"}], [tile])


def _copy(c, b):
    """A tile through shared memory and registers, odd widths and a ragged last block, stored."""
    w = c.one(b.widths("fragment"))
    dtype = c.one(("float16", "bfloat16", "float32"))
    x = load(c, b, "shared", dtype, (b.block, w))
    f = b.new("fragment", dtype, (b.block, w))
    out = b.new("global", dtype, ("n", w + c.one((0, 3, 8))))
    _emit(b, x + [{"op": "copy", "src": x[0]["dst"], "dst": f, "at": "0", "row": 0, "col": 0, "form": "tile"},
                  {"op": "copy", "src": f, "dst": out, "at": "bx", "row": 0, "col": c.between((0, b.buffers[out].shape[1] - w)),
                   "form": c.one(("tile", "loop"))}], [x[0]["dst"], f])


def _stream(c, b):
    """Q loaded by every thread; a producer streams K tiles through an mbarrier ring to the consumers, which compute
    S = Q K^T for each and add it atomically into a buffer every block adds to (as dQ is, in its layout or not)."""
    dtype = c.one(("float16", "bfloat16"))
    d = c.one((32, 64))
    q = load(c, b, "shared", dtype, (b.block, d))
    _emit(b, q, [q[0]["dst"]])
    threads, b.threads = b.threads, b.threads - stream.PRODUCER
    nk = c.one(N)
    k = b.new("shared", dtype, (nk, d))
    g = b.new("global", dtype, ("n", d + c.one((0, 8, 16))))
    s = b.new("fragment", "float32", (b.block, nk))
    laid = c.flip()
    acc = b.new("global", "float32", (b.block, nk), layout="dq" if laid else "")
    body = [{"op": "gemm", "a": q[0]["dst"], "b": k, "c": s, "ta": False, "tb": True, "clear": True,
             "policy": c.one(POLICIES)},
            {"op": "atomic", "kind": "add", "src": s, "dst": acc, "at": "0", "row": 0, "col": 0,
             "form": c.one(("tile", "element"))}]
    b.threads = threads
    _emit(b, [{"op": "stream", "src": g, "dst": k, "row": 0, "col": c.one(range(0, b.buffers[g].shape[1] - d + 1, 8)),
               "stages": c.between((1, 3)), "trips": c.one(("n", "n", "n-1", "n//b", 0, 1, 2)), "load": c.one(stream.LOADS),
               "body": tuple(body)}])


TEMPLATES = {"attention": _attention, "pipelined_gemm": _pipelined_gemm, "reduce": _reduce, "scan": _scan, "atomic": _atomic,
             "copy": _copy, "stream": _stream}
GEMM_TEMPLATES = ("attention", "pipelined_gemm")   # they need a thread count and block a gemm takes
# A stream's consumers run the gemm: 128 of 256 threads at block 64 or 128, or 256 of 384 at block 128.
STREAM_LAUNCHES = {256: (64, 128), 384: (128,)}


def construct(p: Program) -> str:
    """The chain a program is nearest to, by the constructs it holds (the covering array's program level)."""
    ops = [s["op"] for s in model.walk(p.body)]
    looped = [x["op"] for s in p.body if "body" in s for x in s["body"]]
    if "stream" in ops:
        return "stream"
    if "gemm" in looped and "reduce" in looped:
        return "attention"
    if "gemm" in looped:
        return "pipelined_gemm"
    if "atomic" in ops:
        return "atomic"
    if "scan" in ops:
        return "scan"
    if "reduce" in ops:
        return "reduce"
    return "copy"


# ------------------------------------------------------------------------------------- programs
class Drawn:
    """Choices drawn by Hypothesis (so that it shrinks them)."""

    def __init__(self, draw, st):
        self.draw, self.st = draw, st

    def one(self, options):
        return self.draw(self.st.sampled_from(tuple(options)))

    def between(self, bounds):
        return self.draw(self.st.integers(*bounds))

    def flip(self) -> bool:
        return self.draw(self.st.booleans())


class First:
    """The first choice every time: each template's simplest program (the covering array's rows)."""

    def __init__(self, template):
        self.template = template

    def one(self, options):
        options = tuple(options)
        return self.template if self.template in options else options[0]

    def between(self, bounds):
        return bounds[0]

    def flip(self) -> bool:
        return False


def write(c) -> Program | None:
    """One program from choices `c`: an attention chain (then changed) in two of three, free compositions in
    the rest; None when the rules refuse what was composed (shared memory over its limit, say)."""
    template = c.one((None, None, None) + tuple(TEMPLATES))
    if template == "stream":
        threads = c.one(tuple(STREAM_LAUNCHES))
        block = c.one(STREAM_LAUNCHES[threads])
    elif template in GEMM_TEMPLATES or template is None and c.flip():
        threads = c.one(tuple(M_BY_THREADS))
        block = c.one(M_BY_THREADS[threads])
    else:
        threads = c.one((64, 128, 256) if template in ("reduce", "scan") else PLAIN_THREADS)
        block = c.one((16, 32, 64))
    b = Builder(block, threads)
    chain = None
    if template:
        TEMPLATES[template](c, b)
        chain = _changed(c, b)
    else:
        for _ in range(c.between((1, 6))):
            c.one(OUTER)(c, b, "bx")
    if chain is None and not b.program().written():
        draw_store(c, b, "bx")
    try:
        return model.check(_used(chain or b.program()))
    except ProgramError:
        return None


def programs(st):
    """The Hypothesis strategy of programs (`st`: Hypothesis's strategies module)."""
    @st.composite
    def program(draw):
        return write(Drawn(draw, st))
    return program().filter(lambda p: p is not None)


def template(name: str) -> Program:
    """The simplest program of one of TEMPLATES."""
    return write(First(name))


def _changed(c, b: Builder) -> Program | None:
    """The chain with statements dropped, swapped in order, inserted or put under a `when` (in the chain or in
    its loop), each change kept only if the result is still valid (None: unchanged)."""
    p = b.program()
    for _ in range(c.between((0, 3))):
        body = list(p.body)
        what = c.one(("drop", "swap", "insert", "wrap", "schedule"))
        i = c.between((0, len(body) - 1))
        if what == "wrap":
            body = _wrapped(c, body, i)
        elif what == "schedule":
            plain = [j for j, s in enumerate(body) if s["op"] == "loop" and s["kind"] == "pipelined" and "schedule" not in s
                     and len(s["body"]) > 1]
            if plain:
                j = c.one(plain)
                body[j] = _scheduled(c, p, body[j]) or body[j]
        elif what == "drop":
            del body[i]
        elif what == "swap" and i + 1 < len(body):
            body[i], body[i + 1] = body[i + 1], body[i]
        elif what == "insert":
            before = len(b.body)
            c.one(OUTER)(c, b, "bx")
            body[i:i] = b.body[before:]
            p = dataclasses.replace(p, buffers=tuple(b.buffers.values()))
        candidate = dataclasses.replace(p, body=tuple(body))
        try:
            p = model.check(_used(candidate))
        except ProgramError:
            continue
    return p


def _wrapped(c, body: list, i: int, at="bx") -> list:
    """`body` with 1 to 3 statements from its i-th under a drawn `when`, or, if the i-th is a loop, in its body."""
    if at == "bx" and body[i]["op"] == "loop" and c.flip():
        loop = body[i]
        inner = _wrapped(c, list(loop["body"]), c.between((0, len(loop["body"]) - 1)), "k")
        return body[:i] + [dict(loop, body=tuple(inner))] + body[i + 1:]
    j = i + c.between((1, 3))
    test = c.one(when.TESTS if at == "bx" else when.TRIP_TESTS)
    return body[:i] + [{"op": "when", "at": at, "test": test, "body": tuple(body[i:j])}] + body[j:]


def _used(p: Program) -> Program:
    """`p` without buffers no statement names."""
    named = {n for s in model.walk(p.body) for n in model.kind(s).reads(s) + model.kind(s).writes(s)}
    return dataclasses.replace(p, buffers=tuple(x for x in p.buffers if x.name in named))


def _outside_loop(x):
    """A loop body's statement moved out of the loop: what it indexed by `k` it indexes by `bx`."""
    def rebased(e):
        return "bx" if e == "k" else [rebased(a) for a in e] if isinstance(e, list) else e
    return {key: "bx" if key == "at" and v == "k" else rebased(v) if key == "expr" else
            tuple(map(_outside_loop, v)) if key == "body" else v for key, v in x.items() if key != "stage"}


def _needed(body, needed: set) -> tuple:
    """The statements of `body` that what `needed` names depends on, walking back; `needed` grows by their reads.
    A loop's body is walked until nothing more is needed (a later statement may feed an earlier one next trip)."""
    kept = []
    for s in reversed(body):
        if "body" in s:
            while True:
                before = set(needed)
                inner = _needed(s["body"], needed)
                if needed == before:
                    break
            if inner or s["op"] == "stream" and set(model.kind(s).writes(s)) & needed:
                needed |= set(model.kind(s).reads(s))
                kept.append(dict(s, body=inner))
        elif set(model.kind(s).writes(s)) & needed:
            needed |= set(model.kind(s).reads(s)) | set(model.kind(s).writes(s))
            kept.append(s)
    return tuple(reversed(kept))


def _dependents_dropped(p: Program, target) -> tuple:
    """`p`'s body without `target` and every later statement that reads, directly or not, a buffer left undefined:
    one `target` wrote and no statement kept before defines whole."""
    defined, gone = set(), set()

    def locals_written(s):
        return {n for n in model.kind(s).writes(s) if p.buffer(n).local}

    def keep(body):
        out = []
        for s in body:
            if s is target and s["op"] == "stream":
                gone.update(locals_written(s) - defined)
            elif "body" in s:
                inner = keep(s["body"])
                if inner or s["op"] == "stream":
                    out.append(dict(s, body=inner))
            elif s is target or set(model.needs(s)) & gone:
                gone.update(locals_written(s) - defined)
            else:
                out.append(s)
                if model.kind(s).full(s, p):
                    defined.update(locals_written(s))
                    gone.difference_update(locals_written(s))
        return tuple(out)
    return keep(p.body)


def shrink(p: Program) -> list[tuple[str, Program]]:
    """Smaller valid programs, the largest steps first: only what one output depends on (a backward slice),
    a statement dropped with what reads it, a statement dropped alone (a loop's too), a loop or when unwrapped, its trips
    or stages lowered, a copy or atomic loop in its tile form, a gemm or reduce that clears first. The minimizer
    keeps one while the failure stays."""
    out = []
    size = len(list(model.walk(p.body)))
    for name in p.written():
        body = _needed(p.body, {name})
        if len(list(model.walk(body))) < size:
            try:
                out.append((f"only what {name} depends on", model.check(_used(dataclasses.replace(p, body=body)))))
            except ProgramError:
                pass
    for s in model.walk(p.body):
        body = _dependents_dropped(p, s)
        if len(list(model.walk(body))) < size - 1:
            try:
                out.append((f"drop {s['op']} and what reads it", model.check(_used(dataclasses.replace(p, body=body)))))
            except ProgramError:
                pass

    def bodies(body, path=()):
        for i, s in enumerate(body):
            yield path + (i,), body, i, s
            if "body" in s:
                yield from bodies(s["body"], path + (i,))

    def rebuilt(body, path, replacement):
        i = path[0]
        if len(path) == 1:
            return tuple(body[:i]) + tuple(replacement) + tuple(body[i + 1:])
        loop = dict(body[i], body=rebuilt(body[i]["body"], path[1:], replacement))
        return tuple(body[:i]) + (loop,) + tuple(body[i + 1:])

    for path, _, _, s in bodies(p.body):
        where = ".".join(map(str, path))
        options = [(f"drop statement {where} ({s['op']})", ())]
        if s["op"] == "stream":
            load = {"op": "copy", "src": s["src"], "dst": s["dst"], "at": "bx", "row": s["row"], "col": s["col"], "form": "tile"}
            options.append((f"unwrap stream {where}", (load,) + tuple(_outside_loop(x) for x in s["body"])))
            options += [(f"stream {where} stages {s['stages']} -> {x}", (dict(s, stages=x),)) for x in range(1, s["stages"])]
            if s["trips"] in model.SYMBOLIC_TRIPS or s["trips"] > 1:
                options.append((f"stream {where} trips {s['trips']} -> 1", (dict(s, trips=1),)))
        if s["op"] == "when":  # its statements take its stage in a scheduled loop
            options.append((f"unwrap when {where}", tuple(dict(x, stage=s["stage"]) if "stage" in s else x for x in s["body"])))
        if s["op"] == "loop":
            options.append((f"unwrap loop {where}", tuple(_outside_loop(x) for x in s["body"])))
            options += [(f"loop {where} stages {s['stages']} -> {x}", (dict(s, stages=x),)) for x in range(s["stages"])]
            if s["trips"] in model.SYMBOLIC_TRIPS or s["trips"] > 1:
                options.append((f"loop {where} trips {s['trips']} -> 1", (dict(s, trips=1),)))
        if "schedule" in s:
            unscheduled = {k: v for k, v in s.items() if k != "schedule"}
            options.append((f"loop {where} schedule -> num_stages", (dict(
                unscheduled, stages=1 + max(x["stage"] for x in s["body"]),
                body=tuple({k: v for k, v in x.items() if k != "stage"} for x in s["body"])),)))
        if s.get("form") in ("loop", "element"):
            options.append((f"statement {where} form {s['form']} -> tile", (dict(s, form="tile"),)))
        if s.get("clear") is False:  # what it folded into may then be dropped
            options.append((f"statement {where} ({s['op']}) clears first", (dict(s, clear=True),)))
        for step, replacement in options:
            try:
                out.append((step, model.check(_used(dataclasses.replace(p, body=rebuilt(p.body, path, replacement))))))
            except ProgramError:
                continue
    return out
