"""thread: a statement indexed by the thread: `tx = T.get_thread_binding()`, then each thread writes elements of a
shared buffer by its own index, element e = s * threads + tx for s in 0 .. ceil(count / threads) - 1, the first
`count` elements (in row-major order; any count, a partial one or one the threads do not divide):

    dst[e // w, e % w] = src[(e + shift) % count // w', ... % w'] + (tx % 3 - 1)     if e < count and test(tx)

`test` is the thread index in a condition: every thread, the even ones, or those below `bound`. A thread reads
another thread's element of `src` (shift), which another statement wrote: the barrier between them is the
compiler's to place. In place (src is dst) only with shift 0: each thread reads the element it writes.

Shared buffers only. A fragment's elements belong to the threads TileLang's layout gives them, so `F[tx]` outside
a T.Parallel names no element the language defines (0.1.15, sm_90a, compiles `F[tx // 32, tx % 32] = ...` on a
[16, 32] fragment into a 512-element register array in every thread: each thread's own copy of the whole tile).

The threads are those that run the statement (`threads`: the block's, or a stream's consumers), numbered from 0.
Its meaning emulates them all at once: for every e below count whose thread passes the test, the same value.
"""
from dataclasses import dataclass

from harness.programs.builder import EXACT, LENGTH_BLOCKS, load
from harness.programs.model import Statement, cast, fields, local, need


@dataclass(frozen=True, kw_only=True)
class Thread(Statement):
    op = "thread"
    dst: str
    src: str
    count: int
    shift: int
    test: str
    bound: int
    threads: int


STATEMENT = Thread

TESTS = ("all", "even", "below")
PLACES = {"top": 2, "trip": 2, "guarded": 2}
THREAD_INDEXED = True


def _elements(b) -> int:
    return b.shape[0] * (b.shape[1] if len(b.shape) == 2 else 1)


def check(s, p, scope):
    fields(s, dst=str, src=str, count=int, shift=int, test=TESTS, bound=int, threads=int)
    d, src = local(p, s.dst, scopes=("shared",)), local(p, s.src, scopes=("shared",))
    need(s.threads == scope.threads, f"threads is the count that runs it here, {scope.threads}")
    need(1 <= s.count <= min(_elements(d), _elements(src)), f"count is 1 to the elements of {d.name} and {src.name}")
    need(0 <= s.shift < s.count, "shift is 0 to count - 1")
    need(src.name != d.name or s.shift == 0, "in place only with shift 0 (a thread reads what it writes)")
    need(s.test == "below" or s.bound == 0, "bound is for test 'below' (else 0)")
    need(s.test != "below" or 1 <= s.bound < s.threads, "bound is 1 to threads - 1")


def reads(s):
    return [s.src]


def writes(s):
    return [s.dst]


def full(s, p):
    return s.test == "all" and s.count == _elements(p.buffer(s.dst))


def _at(b, e) -> str:
    return f"{b.name}[{e} // {b.shape[1]}, {e} % {b.shape[1]}]" if len(b.shape) == 2 else f"{b.name}[{e}]"


def tilelang(s, p, ind):
    d, src, threads, count = p.buffer(s.dst), p.buffer(s.src), s.threads, s.count
    trips = -(-count // threads)
    lines = [f"{ind}tx = T.get_thread_binding()"]
    e = "tx"
    if trips > 1:   # `s` and `tx` are reserved names (model._RESERVED): no buffer takes them
        lines, ind, e = lines + [f"{ind}for s in T.serial({trips}):"], ind + "    ", f"(s * {threads} + tx)"
    tests = ([f"{e} < {count}"] if trips * threads > count else []) + \
        {"all": [], "even": ["tx % 2 == 0"], "below": [f"tx < {s.bound}"]}[s.test]
    for t in tests:
        lines, ind = lines + [f"{ind}if {t}:"], ind + "    "
    read = _at(src, f"(({e} + {s.shift}) % {count})" if s.shift else e)
    value = f'{cast(read, src.dtype, "float32")} + T.cast(tx % 3 - 1, "float32")'
    return lines + [f"{ind}{_at(d, e)} = {cast(value, 'float32', d.dtype)}"]


def torch(s, p, ind):
    d, count = p.buffer(s.dst), s.count
    keep = {"all": "tx >= 0", "even": "tx % 2 == 0", "below": f"tx < {s.bound}"}[s.test]
    return [f"{ind}i = torch.arange({count})",   # the elements, and the thread that writes each
            f"{ind}tx = i % {s.threads}",
            f"{ind}i, tx = i[{keep}], tx[{keep}]",
            f'{ind}{d.name}.view(-1)[i] = rnd({s.src}.flatten()[(i + {s.shift}) % {count}] + (tx % 3 - 1), "{d.dtype}")']


def draw(c, b, at):
    """A thread-indexed write of a shared buffer from a defined one (loaded now if there is none)."""
    if getattr(b, "first_thread", 0):   # the threads here are not numbered from 0 (split.py)
        return
    srcs = b.locals(scope="shared")
    if srcs and c.flip():
        src = c.one(srcs)
    else:
        stmts = load(c, b, "shared", c.one(("float16", "bfloat16", "float32")), (b.block, c.one(b.widths("shared"))), at=at)
        b.emit(stmts, [stmts[0].dst])
        src = stmts[0].dst
    sb = b.buffers[src]
    in_place = c.one((False, False, True))
    if in_place:
        dst = src
    else:
        like = [n for n in b.locals(scope="shared", defined=False) if n != src]
        dst = c.one(like) if like and c.flip() else b.new("shared", c.one(("float32", "float16", "bfloat16")), sb.shape)
    most = min(_elements(sb), _elements(b.buffers[dst]))
    count = c.one((most, most, c.between((1, most))))
    shift = 0 if in_place else c.one((0, 1, c.between((0, count - 1))))
    test = c.one(TESTS)
    bound = c.between((1, b.threads - 1)) if test == "below" else 0
    mag = b.mag[src] + (LENGTH_BLOCKS if in_place and at == "k" else 1)   # in place, it adds once a trip
    if mag > EXACT[b.buffers[dst].dtype]:
        return
    stmt = Thread(dst=dst, src=src, count=count, shift=shift, test=test, bound=bound, threads=b.threads)
    b.mag[dst] = max(mag, b.mag.get(dst, 0))
    b.emit([stmt], [dst] if full(stmt, b.program()) else [])


def access(s, p):
    """Each thread reads the source and writes the destination at indices of its own."""
    from harness.programs.access import Access
    return [Access(name, p.buffer(name).scope, mode, "thread") for name, mode in ((s.src, "read"), (s.dst, "write"))]
