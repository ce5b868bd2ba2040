"""scan: the inclusive cumulative sum or maximum of a shared or fragment buffer along one dimension (T.cumsum,
T.cummax), in order or reversed, into a buffer of the same shape, dtype and scope, or in place.

TileLang scans a shared buffer where it is and stages a fragment through a shared copy of it."""
from dataclasses import dataclass

from harness.programs.model import Statement, fields, local, need


@dataclass(frozen=True, kw_only=True)
class Scan(Statement):
    op = "scan"
    src: str
    dst: str
    kind: str
    dim: int
    reverse: bool


STATEMENT = Scan

SCAN_OPS = ("sum", "max")


def check(s, p, scope):
    fields(s, src=str, dst=str, kind=SCAN_OPS, dim=(0, 1), reverse=bool)
    src, dst = local(p, s.src), local(p, s.dst)
    need(s.dim < len(src.shape), f"{src.name} is {len(src.shape)}-D: no dimension {s.dim}")
    need((dst.scope, dst.dtype, dst.shape) == (src.scope, src.dtype, src.shape),
         f"{dst.name} must be a {src.scope} {src.dtype} buffer of {list(src.shape)}, as {src.name} is")


def reads(s):
    return [s.src]


def writes(s):
    return [s.dst]


def full(s, p):
    return True


def tilelang(s, p, ind):
    into = "" if s.dst == s.src else f", {s.dst}"
    return [f"{ind}T.cum{s.kind}({s.src}{into}, dim={s.dim}, reverse={s.reverse})"]


def torch(s, p, ind):
    d, x = s.dim, s.src
    if s.reverse:
        x = f"{x}.flip({d})"
    x = f"{x}.cumsum({d})" if s.kind == "sum" else f"{x}.cummax({d}).values"
    if s.reverse:
        x = f"{x}.flip({d})"
    return [f'{ind}{s.dst}[:] = rnd({x}, "{p.buffer(s.dst).dtype}")']


# ------------------------------------------------------------------------------------------- drawing
PLACES = {"top": 1, "trip": 1, "guarded": 1}
CHOICES = {"kind": SCAN_OPS, "reverse": (False, True)}


def draw(c, b, at):
    srcs = b.locals()
    if not srcs:
        return
    src = c.one(srcs)
    buf = b.buffers[src]
    kind, dim = c.one(SCAN_OPS), c.one(tuple(range(len(buf.shape))))
    like = [n for n in b.locals(shape=buf.shape, scope=buf.scope, dtype=buf.dtype, defined=False) if n != src]
    dst = src if c.flip() else c.one(like) if like and c.flip() else b.new(buf.scope, buf.dtype, buf.shape)
    if kind == "sum" and dst == src and at == "k":  # a sum in place every trip grows as length ** trips
        return
    mag = b.mag[src] * (buf.shape[dim] if kind == "sum" else 1)
    if not b.fits(dst, mag):
        return
    b.mag[dst] = mag
    b.emit([Scan(src=src, dst=dst, kind=kind, dim=dim, reverse=c.flip())], [dst])


def access(s, p):
    """The source read whole, the destination (the source itself, in place) written whole."""
    from harness.programs.access import whole
    return [whole(p, s.src, "read"), whole(p, s.dst, "write")]
