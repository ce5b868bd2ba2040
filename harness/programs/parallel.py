"""map: a T.Parallel loop over `rows` x `cols` elements of a shared/fragment buffer, the first ones or those from
`offset` ([row] or [row, col]: it writes X[row + i, col + j]), assigning an expression of the loop indices (i, j),
of buffers of its shape (X[i, j]) or one value per row (X[i]), and of small constants, computed in float32 and
cast to the buffer's dtype. A map at an offset does not read the buffer it writes (its iterations would race).

    expr := ["buf", name] | ["num", v] | [op, expr, expr] (op: add sub mul max min div) | ["exp2", expr]
          | ["neg", expr] | ["where", pred, expr, expr]
    pred := ["i<", t] | ["j<", t] | ["row<n", at] | ["col<n", at]   (at: "bx" or "k": base(at) + i < n)
"""
from dataclasses import dataclass

from harness.programs.model import Statement, base, cast, fields, local, need


@dataclass(frozen=True, kw_only=True)
class Map(Statement):
    op = "map"
    dst: str
    rows: int
    expr: list
    cols: int | None = None      # a 2-D buffer's
    offset: list | None = None   # [row] or [row, col]; None: from the start


STATEMENT = Map

BINARY = {"add": ("({} + {})", "({} + {})"), "sub": ("({} - {})", "({} - {})"), "mul": ("({} * {})", "({} * {})"),
          "max": ("T.max({}, {})", "torch.maximum({}, {})"), "min": ("T.min({}, {})", "torch.minimum({}, {})"),
          "div": ("({} / {})", "({} / {})")}
UNARY = {"exp2": ("T.exp2({})", "torch.exp2({})"), "neg": ("(-{})", "(-{})")}
NUMBERS = (0, 1, -1, 2, 3, -2, 0.5, 0.25, 8)
MAX_DEPTH = 5


def check(s, p, scope):
    dst = local(p, s.dst)
    optional = {"offset": list} if s.offset is not None else {}
    if len(dst.shape) == 2:
        fields(s, dst=str, rows=int, cols=int, expr=list, **optional)
    else:
        fields(s, dst=str, rows=int, expr=list, **optional)
    at = _offset(s, dst)
    need(len(at) == len(dst.shape) and all(type(x) is int and x >= 0 for x in at),
         f"offset is [row] of a 1-D buffer or [row, col] of a 2-D one, got {s.offset!r}")
    extents = [s.rows] + ([s.cols] if len(dst.shape) == 2 else [])
    need(all(1 <= e and a + e <= d for a, e, d in zip(at, extents, dst.shape)),
         f"{extents} elements from {at} exceed {dst.name}'s {list(dst.shape)}")
    need(not any(at) or dst.name not in _refs(s.expr), f"a map at an offset does not read {dst.name}")
    _expr(s.expr, p, dst, scope, 0)


def _offset(s, dst) -> list:
    return list([0] * len(dst.shape) if s.offset is None else s.offset)


def _expr(e, p, dst, scope, depth):
    need(isinstance(e, list) and e and depth <= MAX_DEPTH, f"an expression is a non-empty list, at most {MAX_DEPTH} deep")
    op, args = e[0], e[1:]
    if op == "buf":
        need(len(args) == 1 and isinstance(args[0], str), "['buf', name]")
        b = local(p, args[0])
        need(b.shape == dst.shape or (len(b.shape) == 1 and b.shape[0] == dst.shape[0]),
             f"{b.name} must have {dst.name}'s shape or one value per row")
    elif op == "num":
        need(len(args) == 1 and type(args[0]) in (int, float) and args[0] in NUMBERS, f"a number is one of {NUMBERS}")
    elif op in BINARY:
        need(len(args) == 2, f"{op} takes two operands")
        for a in args:
            _expr(a, p, dst, scope, depth + 1)
    elif op in UNARY:
        need(len(args) == 1, f"{op} takes one operand")
        _expr(args[0], p, dst, scope, depth + 1)
    elif op == "where":
        need(len(args) == 3, "['where', pred, then, else]")
        _pred(args[0], p, dst, scope)
        for a in args[1:]:
            _expr(a, p, dst, scope, depth + 1)
    else:
        need(False, f"unknown expression {op!r}")


def _pred(e, p, dst, scope):
    need(isinstance(e, list) and len(e) == 2, "a predicate is [kind, value]")
    kind, v = e
    if kind in ("i<", "j<"):
        need(type(v) is int and 0 <= v <= 256, "a bound is an int in [0, 256]")
    else:
        need(kind in ("row<n", "col<n") and v in ("bx", "k"), "a predicate is i<, j<, row<n or col<n")
        need(v != "k" or scope.in_loop, "'k' only inside a loop")
    need(kind[0] != "j" and kind != "col<n" or len(dst.shape) == 2, "a 1-D buffer has no j")


def _refs(e):
    if e[0] == "buf":
        return [e[1]]
    return [r for a in e[1:] if isinstance(a, list) for r in _refs(a)]


def reads(s):
    return list(dict.fromkeys(_refs(s.expr)))


def writes(s):
    return [s.dst]


def full(s, p):
    dst = p.buffer(s.dst)
    return not any(_offset(s, dst)) and s.rows == dst.shape[0] and (len(dst.shape) == 1 or s.cols == dst.shape[1])


def _render(e, p, dst, lang):
    op, args = e[0], e[1:]
    two = len(dst.shape) == 2
    if op == "buf":
        b = p.buffer(args[0])
        if lang == "tilelang":
            return cast(f"{b.name}[i, j]" if len(b.shape) == 2 else f"{b.name}[i]", b.dtype, "float32")
        return f"{b.name}[:h, :w]" if len(b.shape) == 2 else (f"{b.name}[:h, None]" if two else f"{b.name}[:h]")
    if op == "num":
        return f"T.float32({float(args[0])!r})" if lang == "tilelang" else f"torch.tensor({float(args[0])!r}, dtype=F)"
    side = 0 if lang == "tilelang" else 1
    if op in BINARY:
        return BINARY[op][side].format(*(_render(a, p, dst, lang) for a in args))
    if op in UNARY:
        return UNARY[op][side].format(_render(args[0], p, dst, lang))
    pred, then, other = args
    kind, v = pred
    index = "i" if kind in ("i<", "row<n") else "j"
    cond = f"{index} < {v}" if kind in ("i<", "j<") else f"{base(v, p.block)} + {index} < n"
    if lang == "tilelang":
        return f"T.if_then_else({cond}, {_render(then, p, dst, lang)}, {_render(other, p, dst, lang)})"
    return f"torch.where({cond}, {_render(then, p, dst, lang)}, {_render(other, p, dst, lang)})"


def tilelang(s, p, ind):
    dst = p.buffer(s.dst)
    value = cast(_render(s.expr, p, dst, "tilelang"), "float32", dst.dtype)
    at = _offset(s, dst)
    if len(dst.shape) == 2:
        target = f"{dst.name}[{at[0]} + i, {at[1]} + j]" if any(at) else f"{dst.name}[i, j]"
        return [f"{ind}for i, j in T.Parallel({s.rows}, {s.cols}):", f"{ind}    {target} = {value}"]
    target = f"{dst.name}[{at[0]} + i]" if any(at) else f"{dst.name}[i]"
    return [f"{ind}for i in T.Parallel({s.rows}):", f"{ind}    {target} = {value}"]


def torch(s, p, ind):
    dst = p.buffer(s.dst)
    value = _render(s.expr, p, dst, "torch")
    at = _offset(s, dst)
    rows = f"{at[0]}:{at[0]} + h" if any(at) else ":h"
    if len(dst.shape) == 2:
        cols = f"{at[1]}:{at[1]} + w" if any(at) else ":w"
        return [f"{ind}h, w = {s.rows}, {s.cols}", f"{ind}i, j = grid(h, w)",
                f'{ind}{dst.name}[{rows}, {cols}] = rnd(({value}).expand(h, w), "{dst.dtype}")']
    return [f"{ind}h = {s.rows}", f"{ind}i = torch.arange(h)",
            f'{ind}{dst.name}[{rows}] = rnd(({value}).expand(h), "{dst.dtype}")']


# ------------------------------------------------------------------------------------------- drawing
PLACES = {"top": 1, "trip": 1, "guarded": 1}


def draw(c, b, at):
    """A map over a local buffer: all of it (a new one, or one held), or its first or offset rows and columns; in a
    third of the draws followed by a map over part of what it wrote (loops of two extents over one buffer: a shape
    the tracker's layout bugs take)."""
    dst = _map(c, b, at)
    if dst and c.one((False, False, True)):
        _map(c, b, at, over=dst)


def _map(c, b, at, over=None):
    """One map (over part of `over` if given); the buffer it wrote, or None if its values would not stay exact."""
    dsts = b.locals()
    new = over is None and (not dsts or c.flip())
    if new:
        shape = c.one([b.buffers[n].shape for n in dsts] or [(b.block, 32)])
        dst = b.new(b.pick(c, "scope", ("fragment", "shared")) if len(shape) == 2 else "fragment",
                    b.pick(c, "dtype", ("float32", "float16")), shape)
    else:
        dst = over or c.one(dsts)
    shape = b.buffers[dst].shape
    whole = new or over is None and c.flip()
    rows = shape[0] if whole else c.between((1, shape[0]))
    cols = None if len(shape) == 1 else (shape[1] if whole else c.between((1, shape[1])))
    offset = [] if whole or not c.flip() else \
        [c.between((0, shape[0] - rows))] + ([c.between((0, shape[1] - cols))] if cols is not None else [])
    operands = [n for n in b.locals() if (n != dst or not new) and not (n == dst and any(offset))]
    refs = [n for n in operands if b.buffers[n].shape in (shape, (shape[0],))]
    expr, mag = _expression(c, b, refs, len(shape), at, 3)
    if not b.fits(dst, mag):
        return None
    b.mag[dst] = max(mag, b.mag.get(dst, 0) if not whole else 0)
    stmt = Map(dst=dst, rows=rows, expr=expr, cols=cols, offset=offset if any(offset) else None)
    b.emit([stmt], [dst] if rows == shape[0] and (cols is None or cols == shape[1]) else [])
    return dst


def _expression(c, b, refs, dims, at, depth):
    """(expression, bound on its magnitude)."""
    choice = c.between((0, 9)) if depth else 0
    if choice <= 2 or depth == 0:
        if refs and c.between((0, 3)):
            name = c.one(refs)
            return ["buf", name], b.mag[name]
        v = c.one((0, 1, -1, 2, 3, -2, 0.5, 0.25, 8))
        return ["num", v], abs(v)
    if choice <= 6:
        op = c.one(("add", "sub", "mul", "max", "min", "div"))
        x, mx = _expression(c, b, refs, dims, at, depth - 1)
        if op == "div":  # by a power of two: exact, and never by zero
            d = c.one((2, 0.5, 8, -2))
            return [op, x, ["num", d]], mx / abs(d)
        y, my = _expression(c, b, refs, dims, at, depth - 1)
        return [op, x, y], (mx * my if op == "mul" else mx + my if op in ("add", "sub") else max(mx, my))
    if choice == 7:
        x, mx = _expression(c, b, refs, dims, at, depth - 1)
        if mx > 8:
            return ["neg", x], mx
        return ["exp2", x], 2.0 ** mx
    kinds = ["i<", "row<n"] + (["j<", "col<n"] if dims == 2 else [])
    kind = c.one(kinds)
    pred = [kind, c.between((0, b.block))] if kind in ("i<", "j<") else [kind, c.one(("bx", at) if at == "k" else ("bx",))]
    (x, mx), (y, my) = (_expression(c, b, refs, dims, at, depth - 1) for _ in range(2))
    return ["where", pred, x, y], max(mx, my)


def access(s, p):
    """Element by element over rows x cols: each buffer the expression reads from its start (a buffer of one value
    per row over the rows only), the destination written from its offset."""
    from harness.programs.access import region
    dst = p.buffer(s.dst)
    extent = (s.rows, 1 if s.cols is None else s.cols)[:len(dst.shape)]
    read = [region(p, name, "read", (0,) * len(p.buffer(name).shape), extent[:len(p.buffer(name).shape)], loop=True)
            for name in reads(s)]
    return read + [region(p, dst.name, "write", _offset(s, dst), extent, loop=True)]
