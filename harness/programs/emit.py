"""A program as Python source: the TileLang prim_func `program`, and `expected`, its meaning in torch.

`expected(n, *globals, F=torch.float64)` takes every global buffer's initial contents (in declaration
order) and returns {name: contents after the kernel} for the buffers the program writes. Every value
is computed in F and rounded to a buffer's dtype whenever it is stored there, as the kernel stores it:
F = float64 is the reference; F = float32 (the kernel's own arithmetic) the baseline that measures what
rounding alone may cost. A block's shared and fragment buffers start as NaN, so a read of an element never
written shows. Blocks run one after another: the program's rules make their order immaterial.

The text needs only torch and TileLang: `harness export` writes it as it is, with a main that runs it.
"""
from __future__ import annotations

from harness.programs.model import Program, kind, walk

# The reference's helpers: rounding to a buffer's dtype, and T.copy's and the atomics' guards on a ragged tail.
_HELPERS = {
    "rnd": '''def rnd(x, dtype):
    """x rounded to dtype, kept in x's own dtype."""
    return x.to(getattr(torch, dtype)).to(x.dtype)''',
    "load": '''def load(g, row, col, h, w):
    """A tile of g; rows past its end read as 0."""
    out = torch.zeros(h, w, dtype=g.dtype)
    rows = max(0, min(h, g.shape[0] - row))
    out[:rows] = g[row:row + rows, col:col + w]
    return out''',
    "store": '''def store(g, dtype, row, col, t):
    """A tile into g; rows past its end are not written."""
    rows = max(0, min(t.shape[0], g.shape[0] - row))
    g[row:row + rows, col:col + t.shape[1]] = rnd(t[:rows], dtype)''',
    "accumulate": '''def accumulate(g, dtype, row, col, t, op):
    """An atomic add, max or min of a tile into g; rows past its end are skipped."""
    rows = max(0, min(t.shape[0], g.shape[0] - row))
    f = {"add": torch.add, "max": torch.maximum, "min": torch.minimum}[op]
    g[row:row + rows, col:col + t.shape[1]] = rnd(f(g[row:row + rows, col:col + t.shape[1]], t[:rows]), dtype)''',
    "grid": '''def grid(h, w):
    return torch.arange(h)[:, None], torch.arange(w)[None, :]''',
    "dq_order": '''def dq_order(g):
    """Where the "dq" layout stores each element of g: [r // 8, c // 8, c % 2, 4 * (r % 8) + (c % 8) // 2], flat."""
    r, c = torch.arange(g.shape[0])[:, None], torch.arange(g.shape[1])[None, :]
    return (((r // 8) * (g.shape[1] // 8) + c // 8) * 2 + c % 2) * 32 + 4 * (r % 8) + (c % 8) // 2''',
}
HELPER_NAMES = tuple(_HELPERS)


def helpers(names, compact=False) -> str:
    """The helpers `names` need (rnd always: every store rounds); `compact`: without docstrings or blank lines."""
    chosen = [_HELPERS[n] for n in HELPER_NAMES if n in names or n == "rnd"]
    if compact:
        return "\n".join(line for text in chosen for line in text.splitlines() if not line.strip().startswith('"""')) + "\n"
    return "\n\n\n".join(chosen) + "\n"


HELPERS = helpers(HELPER_NAMES)


def body_lines(body, p: Program, ind: str, lang: str) -> list[str]:
    return [line for s in body for line in getattr(kind(s), lang)(s, p, ind)]


def _shape(b) -> str:
    return "(" + ", ".join(map(str, b.shape)) + ("," if len(b.shape) == 1 else "") + ")"


def tilelang_source(p: Program) -> str:
    params = ", ".join(f'{b.name}: T.Tensor({_shape(b)}, "{b.dtype}")' for b in p.globals)
    lines = ["@T.prim_func", f"def program({params}):",
             f"    with T.Kernel(T.ceildiv(n, {p.block}), threads={p.threads}) as bx:"]
    for b in p.buffers:
        if b.local:
            alloc = "alloc_shared" if b.scope == "shared" else "alloc_fragment"
            lines.append(f'        {b.name} = T.{alloc}({_shape(b)}, "{b.dtype}")')
    for s in walk(p.body):
        lines += getattr(kind(s), "allocations", lambda *_: [])(s, p, "        ")
    layouts = [f"{b.name}: tilelang.layout.make_swizzled_layout({b.name})" for b in p.buffers if b.swizzle] + \
        [f"{b.name}: T.Layout({_shape(b)}, lambda r, c: [r // 8, c // 8, c % 2, 4 * (r % 8) + (c % 8) // 2])"
         for b in p.buffers if b.layout == "dq"]
    if layouts:
        lines.append("        T.annotate_layout({" + ", ".join(layouts) + "})")
    return "\n".join(lines + body_lines(p.body, p, "        ", "tilelang")) + "\n"


def torch_source(p: Program) -> str:
    """`expected`: the program's meaning (shared and fragment buffers start as NaN, so an element read before it
    is written would show)."""
    names = [b.name for b in p.globals]
    local = [b for b in p.buffers if b.local]
    lines = [f"def expected(n, {', '.join(names)}, F=torch.float64):",
             f"    {', '.join(names)}{',' * (len(names) == 1)} = (x.to(F).clone() for x in ({', '.join(names)},))",
             f"    for bx in range(-(-n // {p.block})):",
             f"        {', '.join(b.name for b in local)}{',' * (len(local) == 1)} = "
             f"(torch.full(s, float('nan'), dtype=F) for s in ({', '.join(_shape(b) for b in local)},))"]
    laid = [b.name for b in p.globals if b.layout == "dq"]
    # A "dq" global's memory holds its elements in the layout's order: read it in logical order, give it back laid.
    lines[2:2] = [f"    {x} = {x}.flatten()[dq_order({x})]" for x in laid]
    lines += body_lines(p.body, p, "        ", "torch")
    lines += [f"    {x} = torch.empty_like({x}).flatten().index_put_((dq_order({x}),), {x}).view_as({x})" for x in laid]
    lines.append("    return {" + ", ".join(f'"{x}": {x}' for x in p.written()) + "}")
    return "\n".join(lines) + "\n"


def module(p: Program) -> str:
    """The program and its reference as one importable module (TileLang parses a prim_func from a real file)."""
    return "\n".join(["import tilelang", "import tilelang.language as T", "import torch", "",
                      'n = T.symbolic("n")', "", "", tilelang_source(p), "", HELPERS, "", torch_source(p)])
