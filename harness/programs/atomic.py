"""atomic: add, max or min of a local tile into a global or shared buffer: the whole tile in one T.atomic_add
(`form: "tile"`, add only), or element by element in a T.Parallel loop. Into the block's own rows of an
n-row buffer (rows past n skipped), or into a fixed-row buffer every block accumulates into, or into a block's
own shared tile (at "0"; it must hold values already: an atomic updates what is there). Max and min go into
float32 (CUDA has no 16-bit atomic max); a tile add keeps the source's dtype (the element form casts)."""
from harness.programs.model import base, cast, fields, local, need, parallel

OPS = ("add", "max", "min")


def check(s, p, scope):
    fields(s, kind=OPS, src=str, dst=str, at=("bx", "0"), row=int, col=int, form=("tile", "element"))
    t, g = local(p, s["src"], 2), p.buffer(s["dst"])
    need(g.scope in ("global", "shared") and len(g.shape) == 2 and g.name != t.name,
         f"{g.name} must be global or another 2-D shared buffer")
    h, w = t.shape
    if s["form"] == "element":
        parallel(scope, h, w)
    need(s["row"] >= 0 and 0 <= s["col"] and s["col"] + w <= g.shape[1], f"columns exceed {g.name}'s {g.shape[1]}")
    if g.rows == "n":
        need(s["at"] == "bx" and s["row"] + h <= p.block, "into its own rows only (at 'bx', row + rows <= block)")
    else:
        need(s["at"] == "0" and s["row"] + h <= g.rows, f"rows exceed {g.name}'s {g.rows}")
    need(s["form"] == "element" or (s["kind"] == "add" and t.dtype == g.dtype), "a tile atomic adds, in the source's dtype")
    need(s["kind"] == "add" or g.dtype == "float32", "atomic max and min go into float32")


def reads(s):
    return [s["src"]]


def updates(s):
    """Read and written in place: defined before (a shared tile), and commuting across blocks (a global)."""
    return [s["dst"]]


def writes(s):
    return [s["dst"]]


def full(s, p):
    return False


def tilelang(s, p, ind):
    t, g = p.buffer(s["src"]), p.buffer(s["dst"])
    row = f"{base(s['at'], p.block)} + {s['row']}"
    if s["form"] == "tile":
        return [f"{ind}T.atomic_add({g.name}[{row}, {s['col']}], {t.name})"]
    lines = [f"{ind}for i, j in T.Parallel({t.shape[0]}, {t.shape[1]}):"]
    if g.rows == "n":  # a shared or fixed-row destination holds every row the tile names (check)
        lines, ind = lines + [f"{ind}    if {row} + i < n:"], ind + "    "
    value = cast(f"{t.name}[i, j]", t.dtype, g.dtype)
    return lines + [f"{ind}    T.atomic_{s['kind']}({g.name}[{row} + i, {s['col']} + j], {value})"]


def torch(s, p, ind):
    t, g = p.buffer(s["src"]), p.buffer(s["dst"])
    row = f"{base(s['at'], p.block)} + {s['row']}"
    return [f'{ind}accumulate({g.name}, "{g.dtype}", {row}, {s["col"]}, rnd({t.name}, "{g.dtype}"), "{s["kind"]}")']


def access(s, p):
    """The source read whole; the destination updated atomically at the tile's row and column."""
    from harness.programs.access import region, whole
    t, loop = p.buffer(s["src"]), s["form"] == "element"
    return [whole(p, t.name, "read", loop), region(p, s["dst"], "update", (s["row"], s["col"]), t.shape, loop, how="atomic")]
