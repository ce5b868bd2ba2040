"""thread_atomic: a scalar atomic from every thread, `T.atomic_add(X[..], v)` (or max, min) with the thread index
`tx = T.get_thread_binding()` choosing the element and the value, into

    element   X[row, col]                          every thread into one element
    row       X[row, tx % w]                       a row of X, threads wrapping around it
    whole     X[(tx // w) % h, tx % w]             all of X, threads wrapping around it

of a 2-D shared buffer that holds values already, or of a fixed-row global every block updates (no layout). The
value is 1 or tx % 3 - 1, cast to X's dtype: float32, float16 and bfloat16 all take add, max and min (0.1.15
compiles each; CUDA has no 16-bit atomic max, so TileLang's own code does it). Values stay small integers: the
sums are exact in any order. The threads are those that run it (`threads`, numbered from 0); its meaning applies
every thread's update at once (a scatter-reduce).
"""
from dataclasses import dataclass

from harness.programs.builder import EXACT, LENGTH_BLOCKS
from harness.programs.model import Statement, fields, need


@dataclass(frozen=True, kw_only=True)
class ThreadAtomic(Statement):
    op = "thread_atomic"
    kind: str
    dst: str
    target: str
    row: int
    col: int
    value: str
    threads: int


STATEMENT = ThreadAtomic

OPS = ("add", "max", "min")
TARGETS = ("element", "row", "whole")
VALUES = ("one", "mod3")
PLACES = {"top": 2, "trip": 2, "guarded": 2}
THREAD_INDEXED = True


def check(s, p, scope):
    fields(s, kind=OPS, dst=str, target=TARGETS, row=int, col=int, value=VALUES, threads=int)
    g = p.buffer(s.dst)
    need(s.threads == scope.threads, f"threads is the count that runs it here, {scope.threads}")
    need(len(g.shape) == 2 and (g.scope == "shared" or g.scope == "global" and g.rows != "n" and not g.layout),
         f"{g.name} must be a 2-D shared buffer or a fixed-row global without a layout")
    h, w = g.shape
    need(0 <= s.row < h, f"row is 0 to {h - 1}")
    need(0 <= s.col < w, f"col is 0 to {w - 1}")
    need(s.target == "element" or s.col == 0, "col is for target 'element' (else 0)")
    need(s.target != "whole" or s.row == 0, "row is 0 for target 'whole'")


def reads(s):
    return []


def updates(s):
    """Read and written in place: defined before (a shared buffer), and commuting across blocks (a global)."""
    return [s.dst]


def writes(s):
    return [s.dst]


def full(s, p):
    return False


def _index(s, p) -> tuple:
    """The element thread `tx` updates, as text both languages read alike."""
    h, w = p.buffer(s.dst).shape
    if s.target == "element":
        return str(s.row), str(s.col)
    if s.target == "row":
        return str(s.row), f"tx % {w}"
    return f"tx // {w} % {h}", f"tx % {w}"


def tilelang(s, p, ind):
    g = p.buffer(s.dst)
    r, c = _index(s, p)
    value = "1" if s.value == "one" else "tx % 3 - 1"
    return [f"{ind}tx = T.get_thread_binding()",
            f'{ind}T.atomic_{s.kind}({g.name}[{r}, {c}], T.cast({value}, "{g.dtype}"))']


def torch(s, p, ind):
    g = p.buffer(s.dst)
    r, c = _index(s, p)
    value = "torch.ones_like(tx)" if s.value == "one" else "tx % 3 - 1"
    op = {"add": "sum", "max": "amax", "min": "amin"}[s.kind]
    return [f"{ind}tx = torch.arange({s.threads})",
            f"{ind}i = ({r}) * {g.shape[1]} + ({c}) + 0 * tx",   # each thread's element, flat
            f'{ind}{g.name}.view(-1)[:] = rnd({g.name}.view(-1).scatter_reduce(0, i, ({value}).to({g.name}.dtype), "{op}"), '
            f'"{g.dtype}")']


def draw(c, b, at):
    """Every thread's atomic into a new fixed-row global or a defined shared tile, when its values stay exact."""
    if getattr(b, "first_thread", 0):   # the threads here are not numbered from 0 (split.py)
        return
    kind, target, value = c.one(OPS), c.one(TARGETS), c.one(VALUES)
    dtype = c.one(("float32", "float16", "bfloat16"))
    tiles = [n for n in b.locals(scope="shared", dtype=dtype) if len(b.buffers[n].shape) == 2]
    if tiles and c.flip():
        dst, blocks = c.one(tiles), 1
    else:
        dst, blocks = b.new("global", dtype, (c.one((1, 2, 8)), c.one((1, 16, 32, 64)))), LENGTH_BLOCKS
    h, w = b.buffers[dst].shape
    per_element = -(-b.threads // {"element": 1, "row": w, "whole": h * w}[target])
    mag = b.mag[dst] + (per_element * blocks * (LENGTH_BLOCKS if at == "k" else 1) if kind == "add" else 1)
    if mag > EXACT[dtype]:
        return
    b.mag[dst] = mag
    row = c.between((0, h - 1)) if target != "whole" else 0
    col = c.between((0, w - 1)) if target == "element" else 0
    b.emit([ThreadAtomic(kind=kind, dst=dst, target=target, row=row, col=col, value=value, threads=b.threads)])


def access(s, p):
    """Every thread updates the destination atomically (one element, a row or the whole buffer)."""
    from harness.programs.access import Access
    return [Access(s.dst, p.buffer(s.dst).scope, "update", "atomic")]
