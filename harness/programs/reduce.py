"""reduce: max, min, sum, abs-sum or abs-max of a 2-D fragment over one dimension into a 1-D fragment (T.reduce_*),
clearing it first or folding into what it holds (abs-sum and abs-max always clear: TileLang's reduce_abssum takes no
clear, and whether a folded abs-max takes the absolute value of what the destination held is not documented)."""
from dataclasses import dataclass, replace

from harness.programs.builder import LENGTH_BLOCKS
from harness.programs.model import Statement, fields, local, need


@dataclass(frozen=True, kw_only=True)
class Reduce(Statement):
    op = "reduce"
    src: str
    dst: str
    kind: str
    dim: int
    clear: bool


STATEMENT = Reduce

REDUCE_OPS = ("max", "min", "sum", "abssum", "absmax")
CLEARING = ("abssum", "absmax")  # always clear


def check(s, p, scope):
    fields(s, src=str, dst=str, kind=REDUCE_OPS, dim=(0, 1), clear=bool)
    src, dst = local(p, s.src, 2, ("fragment",)), local(p, s.dst, 1, ("fragment",))
    need(src.dtype == dst.dtype == "float32", "a reduce runs over float32 fragments")
    need(dst.shape[0] == src.shape[1 - s.dim], f"{dst.name} must hold {src.shape[1 - s.dim]} values")
    need(s.clear or s.kind not in CLEARING, f"{s.kind} always clears")


def reads(s):
    return [s.src] + ([] if s.clear else [s.dst])


def writes(s):
    return [s.dst]


def full(s, p):
    return True


def tilelang(s, p, ind):
    clear = "" if s.kind == "abssum" else f", clear={s.clear}"
    return [f"{ind}T.reduce_{s.kind}({s.src}, {s.dst}, dim={s.dim}{clear})"]


def torch(s, p, ind):
    x = {"max": f"{s.src}.amax(dim={s.dim})", "min": f"{s.src}.amin(dim={s.dim})",
         "sum": f"{s.src}.sum(dim={s.dim})", "abssum": f"{s.src}.abs().sum(dim={s.dim})",
         "absmax": f"{s.src}.abs().amax(dim={s.dim})"}[s.kind]
    if not s.clear:
        fold = {"max": f"torch.maximum({s.dst}, {x})", "min": f"torch.minimum({s.dst}, {x})"}
        x = fold.get(s.kind, f"{s.dst} + {x}")
    return [f'{ind}{s.dst}[:] = rnd({x}, "float32")']


# ------------------------------------------------------------------------------------------- drawing
PLACES = {"top": 1, "trip": 1, "guarded": 1}
CHOICES = {"kind": REDUCE_OPS, "dim": (0, 1)}


def draw(c, b, at):
    srcs = [n for n in b.locals(scope="fragment", dtype="float32") if len(b.buffers[n].shape) == 2]
    if not srcs:
        return
    src = c.one(srcs)
    dim = c.one((1, 1, 0))
    length = b.buffers[src].shape[1 - dim]
    kind = c.one(REDUCE_OPS)
    dsts = b.locals(shape=(length,), scope="fragment", dtype="float32")
    clear = kind in CLEARING or not dsts or c.flip()
    dst = b.new("fragment", "float32", (length,)) if clear and (not dsts or c.flip()) else c.one(dsts)
    grow = b.mag[src] * (b.buffers[src].shape[dim] if kind in ("sum", "abssum") else 1)
    mag = grow if clear else b.mag[dst] + grow * (LENGTH_BLOCKS if at == "k" else 1)
    if not b.fits(dst, mag):
        return
    b.mag[dst] = mag
    b.emit([Reduce(src=src, dst=dst, kind=kind, dim=dim, clear=clear)], [dst])


def shrink(s, where):
    return [] if s.clear else [(f"statement {where} (reduce) clears first", (replace(s, clear=True),))]


def access(s, p):
    """The source read whole; the destination read (when folded into) and written whole."""
    from harness.programs.access import whole
    folded = [] if s.clear else [whole(p, s.dst, "read")]
    return [whole(p, s.src, "read"), *folded, whole(p, s.dst, "write")]
