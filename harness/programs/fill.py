"""fill: T.fill of a shared/fragment buffer with a constant (T.clear for 0), whole or a region of it at an offset
(`region`: [row, rows] of a 1-D buffer, [row, col, rows, cols] of a 2-D one).

A region is a slice, `T.fill(X[r:r + h, c:c + w], v)`: only those elements change, and a fill of a region does
not define the buffer unless the region is all of it."""
from dataclasses import dataclass

from harness.programs.model import Statement, fields, local, need


@dataclass(frozen=True, kw_only=True)
class Fill(Statement):
    op = "fill"
    dst: str
    value: int | float
    region: list | None = None   # [row, rows] or [row, col, rows, cols]; None: the whole buffer


STATEMENT = Fill

VALUES = (0, 1, -1, 2, -3, 0.5)


def check(s, p, scope):
    region = s.region
    fields(s, dst=str, value=VALUES, **({"region": list} if region is not None else {}))
    b = local(p, s.dst)
    need(type(s.value) in (int, float), "value must be a number")
    if region is not None:
        need(len(region) == 2 * len(b.shape) and all(type(x) is int for x in region),
             f"region is [row, rows] of a 1-D buffer or [row, col, rows, cols] of a 2-D one, got {region!r}")
        starts, extents = region[:len(b.shape)], region[len(b.shape):]
        need(all(0 <= a and 1 <= e and a + e <= d for a, e, d in zip(starts, extents, b.shape)),
             f"region {region} lies outside {b.name}'s {list(b.shape)}")


def _slices(s, b) -> str:
    region = s.region
    starts, extents = region[:len(b.shape)], region[len(b.shape):]
    return ", ".join(f"{a}:{a + e}" for a, e in zip(starts, extents))


def reads(s):
    return []


def writes(s):
    return [s.dst]


def full(s, p):
    b = p.buffer(s.dst)
    return s.region is None or list(s.region) == [0] * len(b.shape) + list(b.shape)


def tilelang(s, p, ind):
    target = s.dst if s.region is None else f"{s.dst}[{_slices(s, p.buffer(s.dst))}]"
    return [f"{ind}T.clear({target})" if s.value == 0 else f"{ind}T.fill({target}, {float(s.value)!r})"]


def torch(s, p, ind):
    target = s.dst if s.region is None else f"{s.dst}[{_slices(s, p.buffer(s.dst))}]"
    return [f"{ind}{target}.fill_({float(s.value)!r})"]


# ------------------------------------------------------------------------------------------- drawing
PLACES = {"top": 1, "trip": 1, "guarded": 1}
CHOICES = {"value": VALUES}


def draw(c, b, at):
    """A region of what a buffer holds (tile-ai/tilelang#2942 fills the wrong rows), or a whole buffer, new or not."""
    held = b.locals()
    if held and c.flip():
        dst = c.one(held)
        shape, value = b.buffers[dst].shape, c.one(VALUES)
        starts = [c.between((0, d - 1)) for d in shape]
        extents = [c.between((1, d - a)) for a, d in zip(starts, shape)]
        b.mag[dst] = max(b.mag[dst], abs(value))
        b.emit([Fill(dst=dst, value=value, region=starts + extents)])
        return
    existing = b.locals(defined=False)
    if existing and c.flip():
        dst = c.one(existing)
    else:
        scope = b.pick(c, "scope", ("shared", "fragment"))
        shapes = [(b.block, w) for w in b.widths(scope)] + [(b.block,)] * (scope == "fragment")
        dst = b.new(scope, b.pick(c, "dtype", ("float32", "float16")), c.one(shapes))
    value = c.one((0,) + VALUES)
    b.mag[dst] = abs(value)
    b.emit([Fill(dst=dst, value=value)], [dst])


def access(s, p):
    """The destination written, whole or its region."""
    from harness.programs.access import region, whole
    b = p.buffer(s.dst)
    if s.region is None:
        return [whole(p, b.name, "write")]
    dims = len(b.shape)
    return [region(p, b.name, "write", s.region[:dims], s.region[dims:])]
