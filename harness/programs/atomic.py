"""atomic: add, max or min of a local tile into a global or shared buffer: the whole tile in one T.atomic_add
(`form: "tile"`, add only), or element by element in a T.Parallel loop. Into the block's own rows of an
n-row buffer (rows past n skipped), or into a fixed-row buffer every block accumulates into, or into a block's
own shared tile (at "0"; it must hold values already: an atomic updates what is there). Max and min go into
float32 (CUDA has no 16-bit atomic max); a tile add keeps the source's dtype (the element form casts)."""
from dataclasses import dataclass, replace

from harness.programs.builder import EXACT, LENGTH_BLOCKS
from harness.programs.model import Statement, base, cast, fields, global_updates, local, need


@dataclass(frozen=True, kw_only=True)
class Atomic(Statement):
    op = "atomic"
    kind: str
    src: str
    dst: str
    at: str
    row: int
    col: int
    form: str          # "tile" or "element"


STATEMENT = Atomic

OPS = ("add", "max", "min")


def check(s, p, scope):
    fields(s, kind=OPS, src=str, dst=str, at=("bx", "0"), row=int, col=int, form=("tile", "element"))
    t, g = local(p, s.src, 2), p.buffer(s.dst)
    need(g.scope in ("global", "shared") and len(g.shape) == 2 and g.name != t.name,
         f"{g.name} must be global or another 2-D shared buffer")
    h, w = t.shape
    need(s.row >= 0 and 0 <= s.col and s.col + w <= g.shape[1], f"columns exceed {g.name}'s {g.shape[1]}")
    if g.rows == "n":
        need(s.at == "bx" and s.row + h <= p.block, "into its own rows only (at 'bx', row + rows <= block)")
    else:
        need(s.at == "0" and s.row + h <= g.rows, f"rows exceed {g.name}'s {g.rows}")
    need(s.form == "element" or (s.kind == "add" and t.dtype == g.dtype), "a tile atomic adds, in the source's dtype")
    need(s.kind == "add" or g.dtype == "float32", "atomic max and min go into float32")


def reads(s):
    return [s.src]


def updates(s):
    """Read and written in place: defined before (a shared tile), and commuting across blocks (a global)."""
    return [s.dst]


def writes(s):
    return [s.dst]


def full(s, p):
    return False


def tilelang(s, p, ind):
    t, g = p.buffer(s.src), p.buffer(s.dst)
    row = f"{base(s.at, p.block)} + {s.row}"
    if s.form == "tile":
        return [f"{ind}T.atomic_add({g.name}[{row}, {s.col}], {t.name})"]
    lines = [f"{ind}for i, j in T.Parallel({t.shape[0]}, {t.shape[1]}):"]
    if g.rows == "n":  # a shared or fixed-row destination holds every row the tile names (check)
        lines, ind = lines + [f"{ind}    if {row} + i < n:"], ind + "    "
    value = cast(f"{t.name}[i, j]", t.dtype, g.dtype)
    return lines + [f"{ind}    T.atomic_{s.kind}({g.name}[{row} + i, {s.col} + j], {value})"]


def torch(s, p, ind):
    t, g = p.buffer(s.src), p.buffer(s.dst)
    row = f"{base(s.at, p.block)} + {s.row}"
    return [f'{ind}accumulate({g.name}, "{g.dtype}", {row}, {s.col}, rnd({t.name}, "{g.dtype}"), "{s.kind}")']


# ------------------------------------------------------------------------------------------- drawing
PLACES = {"top": 1, "trip": 1, "guarded": 1}
CHOICES = {"form": ("tile", "element")}


def draw(c, b, at):
    """A local tile added (or maxed, minned) into a shared tile of the block's own, into the block's rows of an
    n-row output, or into a fixed-row output every block accumulates into (as dQ and dK/dV across groups are)."""
    srcs = [n for n in b.locals() if len(b.buffers[n].shape) == 2 and b.buffers[n].shape[0] <= b.block]
    if not srcs:
        return
    src = c.one(srcs)
    t = b.buffers[src]
    h, w = t.shape
    kind = c.one(("add", "add", "max", "min"))
    form = c.one(("tile", "element")) if kind == "add" else "element"
    widened = "float32" if kind != "add" else b.pick(c, "dtype", ("float32", "float16", "bfloat16"))
    dtype = t.dtype if form == "tile" else widened
    tiles = [n for n in b.locals(scope="shared", dtype=dtype) if n != src and len(b.buffers[n].shape) == 2
             and b.buffers[n].shape[0] >= h and b.buffers[n].shape[1] >= w]
    if tiles and c.flip():  # into a shared tile of the block's own
        g = b.buffers[c.one(tiles)]
        mag = b.mag[g.name] + b.mag[src] * (LENGTH_BLOCKS if at == "k" else 1)
        if mag > EXACT[g.dtype] or b.mag[src] > EXACT[g.dtype]:
            return
        b.mag[g.name] = mag
        b.emit([Atomic(kind=kind, src=src, dst=g.name, at="0", row=c.between((0, g.shape[0] - h)),
                       col=c.between((0, g.shape[1] - w)), form=form)])
        return
    whole = c.flip()
    how = global_updates(b.program())   # only atomics of this kind commute with this one (model.check)
    outs = [g for g in b.outputs() if g.dtype == dtype and g.shape[1] >= w and (g.rows != "n") == whole
            and (not whole or g.rows >= h) and how.get(g.name, {f"updated by {kind}"}) == {f"updated by {kind}"}]
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
    b.emit([Atomic(kind=kind, src=src, dst=g.name, at="0" if whole else "bx", row=row,
                   col=c.between((0, g.shape[1] - w)), form=form)])


def shrink(s, where):
    return [(f"statement {where} form element -> tile", (replace(s, form="tile"),))] if s.form == "element" else []


def access(s, p):
    """The source read whole; the destination updated atomically at the tile's row and column."""
    from harness.programs.access import region, whole
    t, loop = p.buffer(s.src), s.form == "element"
    return [whole(p, t.name, "read", loop), region(p, s.dst, "update", (s.row, s.col), t.shape, loop, how="atomic")]
