"""The attention prior: chains of statements as attention kernels write them (TEMPLATES), each a program of its
own and the start of a changed one (harness.programs.generate), and `construct`, the chain a program is nearest to
(the covering array's program level). A template names statement kinds: it is a program, written by hand."""
from __future__ import annotations

from harness.programs import model, reduce, scan, stream
from harness.programs.atomic import Atomic
from harness.programs.builder import EXACT, PLAIN_THREADS, load
from harness.programs.copy import Copy
from harness.programs.fill import Fill
from harness.programs.gemm import M_BY_THREADS, POLICIES, Gemm, K, N
from harness.programs.loop import Loop
from harness.programs.model import Program
from harness.programs.parallel import Map
from harness.programs.reduce import Reduce
from harness.programs.scan import Scan
from harness.programs.stream import Stream


def _attention(c, b):
    """Load Q; per key block: load K and V, S = QK^T, mask the keys past n, the running max, P = exp2(S - m),
    O += PV; store O (directly, or through a shared tile), and accumulate it atomically (as dQ is) into a buffer
    every block adds to."""
    dtype = c.one(("float16", "bfloat16"))
    d = c.one((32, 64))
    q = load(c, b, "shared", dtype, (b.block, d))
    o = b.new("fragment", "float32", (b.block, d), mag=0)
    m = b.new("fragment", "float32", (b.block,), mag=3)
    b.emit(q + [Fill(dst=o, value=0), Fill(dst=m, value=-3)], [q[0].dst, o, m])
    outer, b.body = b.body, []
    k = load(c, b, "shared", dtype, (b.block, d), at="k")
    v = load(c, b, "shared", dtype, (b.block, d), at="k")
    s, p, ps = b.new("fragment", "float32", (b.block, b.block)), b.new("fragment", "float32", (b.block, b.block)), \
        b.new("shared", dtype, (b.block, b.block), swizzle=model.swizzles((b.block, b.block), dtype))
    inner = k + v + [
        Gemm(a=q[0].dst, b=k[0].dst, c=s, ta=False, tb=True, clear=True, policy="FullRow"),
        Map(dst=s, rows=b.block, cols=b.block, expr=["where", ["col<n", "k"], ["buf", s], ["num", -2]]),
        Reduce(src=s, dst=m, kind="max", dim=1, clear=False),
        Map(dst=p, rows=b.block, cols=b.block, expr=["exp2", ["sub", ["buf", s], ["buf", m]]]),
        Copy(src=p, dst=ps, at="0", row=0, col=0, form="tile"),
        Gemm(a=ps, b=v[0].dst, c=o, ta=False, tb=False, clear=False, policy="FullRow"),
    ]
    b.body = outer
    stages = c.between((0, 3))
    trips = c.one(("n", "n", "n-1", "n//b"))  # a query block past the last key block sees none (54d466153e16's shape)
    kind = "pipelined" if stages else "serial"
    b.emit([Loop(kind=kind, trips=trips, stages=stages, body=tuple(inner))])
    b.mag[o] = EXACT["float32"]
    out = b.new("global", "float32", ("n", d))
    acc = b.new("global", "float32", (b.block, d))
    store = [Copy(src=o, dst=out, at="bx", row=0, col=0, form="tile")]
    if c.flip():  # O through a shared tile, which may take Q's shared memory once the loop is done (54d466153e16)
        os_ = b.new("shared", "float32", (b.block, d))
        store = [Copy(src=o, dst=os_, at="0", row=0, col=0, form="tile"),
                 Copy(src=os_, dst=out, at="bx", row=0, col=0, form="tile")]
    b.emit(store + [Atomic(kind="add", src=o, dst=acc, at="0", row=0, col=0, form=c.one(("element", "tile")))])


def _pipelined_gemm(c, b):
    """C = sum over key blocks of A B_k (B loaded in the loop), plus a bias tile loaded before the loop and read
    only after it (in half the draws: tile-ai/tilelang#2443's construct), stored."""
    dtype = c.one(("float16", "bfloat16"))
    kdim, n = c.one(K), c.one(N)
    a = load(c, b, c.one(("shared", "fragment")), dtype, (b.block, kdim))
    acc = b.new("fragment", "float32", (b.block, n))
    bias = load(c, b, "shared", dtype, (b.block, n)) if c.flip() else []
    b.emit(a + bias + [Fill(dst=acc, value=0)], [a[0].dst, acc] + [s.dst for s in bias])
    outer, b.body = b.body, []
    tb = c.flip()
    bb = load(c, b, "shared", dtype, (n, kdim) if tb else (kdim, n), at="k")
    b.body = outer
    stages = c.between((0, 3))
    trips = c.one(("n", "n", "n-1", "n//b", 0, 1, 2))
    inner = bb + [Gemm(a=a[0].dst, b=bb[0].dst, c=acc, ta=False, tb=tb, clear=False, policy=c.one(POLICIES))]
    b.emit([Loop(kind="pipelined", trips=trips, stages=stages, body=tuple(inner))])
    if bias:
        b.emit([Map(dst=acc, rows=b.block, cols=n, expr=["add", ["buf", acc], ["buf", bias[0].dst]])])
    out = b.new("global", "float32", ("n", n))
    b.emit([Copy(src=acc, dst=out, at="bx", row=0, col=0, form="tile")])


def _reduce(c, b):
    """A tile's row max, min, sum, abs-sum or abs-max, broadcast back over the rows, stored."""
    w = c.one(b.widths("fragment"))
    x = load(c, b, "fragment", "float32", (b.block, w))
    r = b.new("fragment", "float32", (b.block,))
    kind = c.one(reduce.REDUCE_OPS)
    y = b.new("fragment", "float32", (b.block, w))
    out = b.new("global", c.one(("float32", "float16")), ("n", w))
    b.emit(x + [Reduce(src=x[0].dst, dst=r, kind=kind, dim=1, clear=True),
                Map(dst=y, rows=b.block, cols=w, expr=["sub", ["buf", x[0].dst], ["buf", r]]),
                Copy(src=y, dst=out, at="bx", row=0, col=0, form="tile")],
           [x[0].dst, r, y])


def _scan(c, b):
    """A tile's cumulative sum or maximum along its rows or columns, in order or reversed, in shared memory or in
    registers (TileLang stages those through shared memory), in place or into another tile, stored."""
    scope, dtype, dim, kind = c.one(("shared", "fragment")), c.one(model.DTYPES), c.one((1, 0)), c.one(scan.SCAN_OPS)
    shape = (b.block, c.one(b.widths(scope)))
    x = load(c, b, scope, dtype, shape, swizzle=False)  # scanned in the plain layout only (scan.check)
    src = x[0].dst
    dst = src if c.flip() else b.new(scope, dtype, shape)
    b.mag[dst] = b.mag[src] * (shape[dim] if kind == "sum" else 1)  # at most 2 * 64: exact in every dtype
    out = b.new("global", dtype, ("n", shape[1]))
    b.emit(x + [Scan(src=src, dst=dst, kind=kind, dim=dim, reverse=c.flip()),
                Copy(src=dst, dst=out, at="bx", row=0, col=0, form="tile")], [src, dst])


def _atomic(c, b):
    """A tile added atomically into the block's own rows and into a buffer every block adds to (and into a shared tile)."""
    dtype = c.one(("float32", "float16", "bfloat16"))
    w = c.one(b.widths("fragment"))
    x = load(c, b, "fragment", dtype, (b.block, w))
    own = b.new("global", dtype, ("n", w + c.one((0, 1, 8))))
    every = b.new("global", dtype, (b.block, w))
    form = c.one(("tile", "element"))
    b.emit(x + [Atomic(kind="add", src=x[0].dst, dst=own, at="bx", row=0, col=0, form=form),
                Atomic(kind="add", src=x[0].dst, dst=every, at="0", row=0, col=0, form=form)],
           [x[0].dst])
    if c.flip():  # and into a shared tile of the block's own (as dQ into shared memory), then stored
        tile, out = b.new("shared", dtype, (b.block, w)), b.new("global", dtype, ("n", w))
        b.emit([Fill(dst=tile, value=1),
                Atomic(kind="add", src=x[0].dst, dst=tile, at="0", row=0, col=0, form=form),
                Copy(src=tile, dst=out, at="bx", row=0, col=0, form="tile")], [tile])


def _copy(c, b):
    """A tile through shared memory and registers, odd widths and a ragged last block, stored."""
    w = c.one(b.widths("fragment"))
    dtype = c.one(("float16", "bfloat16", "float32"))
    x = load(c, b, "shared", dtype, (b.block, w))
    f = b.new("fragment", dtype, (b.block, w))
    out = b.new("global", dtype, ("n", w + c.one((0, 3, 8))))
    b.emit(x + [Copy(src=x[0].dst, dst=f, at="0", row=0, col=0, form="tile"),
                Copy(src=f, dst=out, at="bx", row=0, col=c.between((0, b.buffers[out].shape[1] - w)),
                     form=c.one(("tile", "loop")))], [x[0].dst, f])


def _stream(c, b):
    """Q loaded by every thread; a producer streams K tiles through an mbarrier ring to the consumers, which compute
    S = Q K^T for each and add it atomically into a buffer every block adds to (as dQ is, in its layout or not)."""
    dtype = c.one(("float16", "bfloat16"))
    d = c.one((32, 64))
    q = load(c, b, "shared", dtype, (b.block, d))
    b.emit(q, [q[0].dst])
    threads, b.threads = b.threads, b.threads - stream.PRODUCER
    nk = c.one(N)
    k = b.new("shared", dtype, (nk, d))
    g = b.new("global", dtype, ("n", d + c.one((0, 8, 16))))
    s = b.new("fragment", "float32", (b.block, nk))
    laid = c.flip()
    acc = b.new("global", "float32", (b.block, nk), layout="dq" if laid else "")
    body = [Gemm(a=q[0].dst, b=k, c=s, ta=False, tb=True, clear=True, policy=c.one(POLICIES)),
            Atomic(kind="add", src=s, dst=acc, at="0", row=0, col=0, form=c.one(("tile", "element")))]
    b.threads = threads
    b.emit([Stream(src=g, dst=k, row=0, col=c.one(range(0, b.buffers[g].shape[1] - d + 1, 8)),
                   stages=c.between((1, 3)), trips=c.one(("n", "n", "n-1", "n//b", 0, 1, 2)), load=c.one(stream.LOADS),
                   body=tuple(body))])


TEMPLATES = {"attention": _attention, "pipelined_gemm": _pipelined_gemm, "reduce": _reduce, "scan": _scan, "atomic": _atomic,
             "copy": _copy, "stream": _stream}
GEMM_TEMPLATES = ("attention", "pipelined_gemm")   # they need a thread count and block a gemm takes


def construct(p: Program) -> str:
    """The chain a program is nearest to, by the constructs it holds (the covering array's program level)."""
    ops = [s.op for s in model.walk(p.body)]
    looped = [x.op for s in p.body if hasattr(s, "body") for x in s.body]
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




def launch(c, name) -> tuple:
    """(threads, block) a template is drawn with."""
    if name == "stream":
        threads = c.one(tuple(stream.LAUNCHES))
        return threads, c.one(stream.LAUNCHES[threads])
    if name in GEMM_TEMPLATES:
        threads = c.one(tuple(M_BY_THREADS))
        return threads, c.one(M_BY_THREADS[threads])
    return c.one((64, 128, 256) if name in ("reduce", "scan") else PLAIN_THREADS), c.one((16, 32, 64))
