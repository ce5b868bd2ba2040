"""copy: T.copy of a tile between a global buffer and a shared/fragment one (either way), or between two local
buffers of one shape; or the same as an element loop (`form: "loop"`, a guarded T.Parallel).

The tile is the local buffer's shape, at row `base(at) + row` and column `col` of the global one. Rows past
`n` read as 0 and are not written: T.copy's own guard on a ragged tail, which the loop form spells out.
A block stores only into its own rows (at "bx", within `block`), and never into a fixed-row global.
"""
from harness.programs.model import base, cast, fields, local, need, parallel


def check(s, p, scope):
    fields(s, src=str, dst=str, at=("bx", "k", "0"), row=int, col=int, form=("tile", "loop"))
    src, dst = p.buffer(s["src"]), p.buffer(s["dst"])
    if s["form"] == "loop":
        parallel(scope, *(dst if dst.local else src).shape)
    if src.local and dst.local:
        need(src.shape == dst.shape, f"a local copy needs one shape, got {src.shape} and {dst.shape}")
        need((s["at"], s["row"], s["col"]) == ("0", 0, 0), "a local copy has at '0', row 0 and col 0")
        return
    need(src.local != dst.local, "one side of a copy is global, the other shared or fragment")
    g, t = (src, dst) if dst.local else (dst, src)
    local(p, t.name, dims=2)
    h, w = t.shape
    need(0 <= s["col"] and s["col"] + w <= g.shape[1], f"columns {s['col']}..{s['col'] + w} exceed {g.name}'s {g.shape[1]}")
    need(s["row"] >= 0, "row must be >= 0")
    if g.rows == "n":
        need(s["at"] in ("bx", "k"), f"{g.name} has n rows: a tile is at 'bx' or 'k'")
        need(s["at"] != "k" or scope.in_loop, "at 'k' only inside a loop")
        if g is dst:
            need(s["at"] == "bx" and s["row"] + h <= p.block,
                 "a block stores only into its own rows (at 'bx', row + rows <= block)")
    else:
        need(g is src, f"{g.name} has fixed rows that every block would store into: use an atomic")
        need(s["at"] == "0" and s["row"] + h <= g.rows, f"rows {s['row']}..{s['row'] + h} exceed {g.name}'s {g.rows}")


def reads(s):
    return [s["src"]]


def writes(s):
    return [s["dst"]]


def full(s, p):
    return True


def _parts(s, p):
    src, dst = p.buffer(s["src"]), p.buffer(s["dst"])
    g, t = (src, dst) if dst.local else (dst, src)
    return src, dst, g, t, f"{base(s['at'], p.block)} + {s['row']}"


def tilelang(s, p, ind):
    src, dst = p.buffer(s["src"]), p.buffer(s["dst"])
    if src.local and dst.local:
        if s["form"] == "tile":
            return [f"{ind}T.copy({src.name}, {dst.name})"]
        idx = "i, j" if len(dst.shape) == 2 else "i"
        return [f"{ind}for {idx} in T.Parallel({', '.join(map(str, dst.shape))}):",
                f"{ind}    {dst.name}[{idx}] = {cast(f'{src.name}[{idx}]', src.dtype, dst.dtype)}"]
    src, dst, g, t, row = _parts(s, p)
    if s["form"] == "tile":
        at = f"{g.name}[{row}, {s['col']}]"
        return [f"{ind}T.copy({at}, {t.name})" if g is src else f"{ind}T.copy({t.name}, {at})"]
    h, w = t.shape
    elem = f"{g.name}[{row} + i, {s['col']} + j]"
    lines = [f"{ind}for i, j in T.Parallel({h}, {w}):"]
    if g is src:
        value = f'T.if_then_else({row} + i < n, {elem}, T.cast(0, "{g.dtype}"))' if g.rows == "n" else elem
        return lines + [f"{ind}    {t.name}[i, j] = {cast(value, g.dtype, t.dtype)}"]
    value = cast(f"{t.name}[i, j]", t.dtype, g.dtype)
    return lines + [f"{ind}    if {row} + i < n:", f"{ind}        {elem} = {value}"]


def torch(s, p, ind):
    src, dst = p.buffer(s["src"]), p.buffer(s["dst"])
    if src.local and dst.local:
        return [f'{ind}{dst.name}[:] = rnd({src.name}, "{dst.dtype}")']
    src, dst, g, t, row = _parts(s, p)
    if g is src:
        return [f'{ind}{t.name}[:] = rnd(load({g.name}, {row}, {s["col"]}, {t.shape[0]}, {t.shape[1]}), "{t.dtype}")']
    return [f'{ind}store({g.name}, "{g.dtype}", {row}, {s["col"]}, {t.name})']


def access(s, p):
    """The source read and the destination written: a local buffer whole, a global at the tile's row and column."""
    from harness.programs.access import region, whole
    src, dst = p.buffer(s["src"]), p.buffer(s["dst"])
    tile, loop = (dst if dst.local else src).shape, s["form"] == "loop"

    def side(b, mode):
        return whole(p, b.name, mode, loop) if b.local else region(p, b.name, mode, (s["row"], s["col"]), tile, loop)
    return [side(src, "read"), side(dst, "write")]
