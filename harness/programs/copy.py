"""copy: T.copy of a tile between a global buffer and a shared/fragment one (either way), or between two local
buffers of one shape; or the same as an element loop (`form: "loop"`, a guarded T.Parallel).

The tile is the local buffer's shape, at row `base(at) + row` and column `col` of the global one. Rows past
`n` read as 0 and are not written: T.copy's own guard on a ragged tail, which the loop form spells out.
A block stores only into its own rows (at "bx", within `block`), and never into a fixed-row global.
"""
from dataclasses import dataclass, replace

from harness.programs.builder import EXACT, load
from harness.programs.model import Statement, base, cast, fields, local, need


@dataclass(frozen=True, kw_only=True)
class Copy(Statement):
    op = "copy"
    src: str
    dst: str
    at: str            # "bx", "k" or "0": the tile's base row (model.base)
    row: int
    col: int
    form: str          # "tile" or "loop"


STATEMENT = Copy


def check(s, p, scope):
    fields(s, src=str, dst=str, at=("bx", "k", "0"), row=int, col=int, form=("tile", "loop"))
    src, dst = p.buffer(s.src), p.buffer(s.dst)
    if src.local and dst.local:
        need(src.shape == dst.shape, f"a local copy needs one shape, got {src.shape} and {dst.shape}")
        need((s.at, s.row, s.col) == ("0", 0, 0), "a local copy has at '0', row 0 and col 0")
        return
    need(src.local != dst.local, "one side of a copy is global, the other shared or fragment")
    g, t = (src, dst) if dst.local else (dst, src)
    local(p, t.name, dims=2)
    h, w = t.shape
    need(0 <= s.col and s.col + w <= g.shape[1], f"columns {s.col}..{s.col + w} exceed {g.name}'s {g.shape[1]}")
    need(s.row >= 0, "row must be >= 0")
    if g.rows == "n":
        need(s.at in ("bx", "k"), f"{g.name} has n rows: a tile is at 'bx' or 'k'")
        need(s.at != "k" or scope.in_loop, "at 'k' only inside a loop")
        if g is dst:
            need(s.at == "bx" and s.row + h <= p.block,
                 "a block stores only into its own rows (at 'bx', row + rows <= block)")
    else:
        need(g is src, f"{g.name} has fixed rows that every block would store into: use an atomic")
        need(s.at == "0" and s.row + h <= g.rows, f"rows {s.row}..{s.row + h} exceed {g.name}'s {g.rows}")


def reads(s):
    return [s.src]


def writes(s):
    return [s.dst]


def full(s, p):
    return True


def _parts(s, p):
    src, dst = p.buffer(s.src), p.buffer(s.dst)
    g, t = (src, dst) if dst.local else (dst, src)
    return src, dst, g, t, f"{base(s.at, p.block)} + {s.row}"


def tilelang(s, p, ind):
    src, dst = p.buffer(s.src), p.buffer(s.dst)
    if src.local and dst.local:
        if s.form == "tile":
            return [f"{ind}T.copy({src.name}, {dst.name})"]
        idx = "i, j" if len(dst.shape) == 2 else "i"
        return [f"{ind}for {idx} in T.Parallel({', '.join(map(str, dst.shape))}):",
                f"{ind}    {dst.name}[{idx}] = {cast(f'{src.name}[{idx}]', src.dtype, dst.dtype)}"]
    src, dst, g, t, row = _parts(s, p)
    if s.form == "tile":
        at = f"{g.name}[{row}, {s.col}]"
        return [f"{ind}T.copy({at}, {t.name})" if g is src else f"{ind}T.copy({t.name}, {at})"]
    h, w = t.shape
    elem = f"{g.name}[{row} + i, {s.col} + j]"
    lines = [f"{ind}for i, j in T.Parallel({h}, {w}):"]
    if g is src:
        value = f'T.if_then_else({row} + i < n, {elem}, T.cast(0, "{g.dtype}"))' if g.rows == "n" else elem
        return lines + [f"{ind}    {t.name}[i, j] = {cast(value, g.dtype, t.dtype)}"]
    value = cast(f"{t.name}[i, j]", t.dtype, g.dtype)
    return lines + [f"{ind}    if {row} + i < n:", f"{ind}        {elem} = {value}"]


def torch(s, p, ind):
    src, dst = p.buffer(s.src), p.buffer(s.dst)
    if src.local and dst.local:
        return [f'{ind}{dst.name}[:] = rnd({src.name}, "{dst.dtype}")']
    src, dst, g, t, row = _parts(s, p)
    if g is src:
        return [f'{ind}{t.name}[:] = rnd(load({g.name}, {row}, {s.col}, {t.shape[0]}, {t.shape[1]}), "{t.dtype}")']
    return [f'{ind}store({g.name}, "{g.dtype}", {row}, {s.col}, {t.name})']


# ------------------------------------------------------------------------------------------- drawing
PLACES = {"top": 3, "trip": 3, "guarded": 3}
CHOICES = {"form": ("tile", "loop"), "row": (0, 1, 3), "at": ("bx", "k", "0")}


def draw(c, b, at):
    """A load of a tile from a global input (two in three), or a store of a local tile into a new output."""
    c.one((_draw_load, _draw_load, _draw_store))(c, b, at)


def _draw_load(c, b, at):
    scope = b.pick(c, "scope", ("shared", "fragment"))
    dtype = b.pick(c, "dtype", ("float16", "bfloat16", "float32"))
    shape = (b.block, c.one(b.widths(scope)))
    existing = b.locals(shape=shape, scope=scope, dtype=dtype, defined=False)
    into = c.one(existing) if existing and c.flip() else None
    stmts = load(c, b, scope, dtype, shape, at=at, into=into)
    b.emit(stmts, [stmts[0].dst])


def _draw_store(c, b, at):
    store(c, b)


def store(c, b):
    """A local tile stored into a new n-row output at the block's own rows (what every program ends with)."""
    srcs = [n for n in b.locals() if len(b.buffers[n].shape) == 2 and b.buffers[n].shape[0] <= b.block]
    if not srcs:
        return
    src = c.one(srcs)
    h, w = b.buffers[src].shape
    dtype = b.pick(c, "dtype", ("float32", "float16", "bfloat16"))
    if b.mag[src] > EXACT[dtype]:
        dtype = "float32"
    g = b.new("global", dtype, ("n", w + c.one((0, 0, 3, 8))))
    col = c.between((0, b.buffers[g].shape[1] - w))
    b.emit([Copy(src=src, dst=g, at="bx", row=c.between((0, b.block - h)), col=col, form=c.one(("tile", "tile", "loop")))])


def shrink(s, where):
    return [(f"statement {where} form loop -> tile", (replace(s, form="tile"),))] if s.form == "loop" else []


def access(s, p):
    """The source read and the destination written: a local buffer whole, a global at the tile's row and column."""
    from harness.programs.access import region, whole
    src, dst = p.buffer(s.src), p.buffer(s.dst)
    tile, loop = (dst if dst.local else src).shape, s.form == "loop"

    def side(b, mode):
        return whole(p, b.name, mode, loop) if b.local else region(p, b.name, mode, (s.row, s.col), tile, loop)
    return [side(src, "read"), side(dst, "write")]
