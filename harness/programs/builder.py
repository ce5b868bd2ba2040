"""What the statement kinds' `draw` functions share: the program being written (Builder), the choices (Drawn, First),
and a load of a tile from a global input, which most kinds need before they have anything to work on.

Values stay small integers wherever the arithmetic allows: inputs lie in [-2, 2], and a statement whose result
could leave a dtype's exactly representable integers is not drawn (`fits`), so most checks are bit-exact.
"""
from __future__ import annotations

from harness.programs import model
from harness.programs.model import INPUT_RANGE, Buffer, Program

# Exactly representable integers by dtype: a value drawn past these is rounded, and checked by tolerance.
EXACT = {"float16": 2048, "bfloat16": 256, "float32": 1 << 24}
LENGTH_BLOCKS = 5                  # n stays below 5 blocks (harness.strategies draws it): trips <= 5
PLAIN_THREADS = (64, 96, 128, 160, 192, 256, 384)   # thread counts without a gemm, powers of two or not
WIDTHS = (16, 32, 64, 48, 80, 96)   # the last three spread over 96, 160, 192 and 384 threads


class Builder:
    """A program being written: its buffers, statements, what is defined and how large its values may be.

    `config` is the program's swarm configuration (harness.programs.generate.SWARM): for each feature, the values
    this program may use; `pick` draws within it. `statement(c, at, place)` draws one statement of a kind the
    configuration allows where it stands (set by the composer: a kind with a body draws its body with it)."""

    def __init__(self, block, threads, config=None, statement=None):
        self.block, self.threads = block, threads
        self.config = config or {}
        self.statement = statement
        self.buffers: dict[str, Buffer] = {}
        self.body: list = []
        self.mag: dict[str, float] = {}      # name -> a bound on |value| (inputs: INPUT_RANGE)
        self.defined: set = set()
        self.count = 0

    def pick(self, c, feature, options):
        """One of `options` that the configuration allows for `feature` (all of them if it allows none)."""
        allowed = self.config.get(feature)
        kept = tuple(o for o in options if allowed is None or o in allowed)
        return c.one(kept or tuple(options))

    def new(self, scope, dtype, shape, swizzle=False, mag=INPUT_RANGE, layout="") -> str:
        self.count += 1
        prefix = {"global": "G", "shared": "S", "fragment": "F"}[scope]
        name = f"{prefix}{self.count}"
        self.buffers[name] = Buffer(name, scope, dtype, tuple(shape), swizzle, layout)
        self.mag[name] = mag
        return name

    def emit(self, stmts, defines=()):
        self.body.extend(stmts)
        self.defined |= set(defines)

    def nested(self, c, at, place, count, threads=None) -> tuple:
        """`count` statements drawn for a body (a loop's, a when's) at `at`; the builder's body and threads are restored."""
        outer, outer_threads, self.body = self.body, self.threads, []
        self.threads = threads or self.threads
        for _ in range(count):
            self.statement(c, self, at, place)
        inner, self.body, self.threads = self.body, outer, outer_threads
        return tuple(inner)

    def program(self) -> Program:
        return Program(self.block, self.threads, tuple(self.buffers.values()), tuple(self.body))

    def locals(self, shape=None, scope=None, dtype=None, defined=True):
        return [b.name for b in self.buffers.values() if b.local and (not defined or b.name in self.defined)
                and (shape is None or b.shape == tuple(shape)) and (scope is None or b.scope == scope)
                and (dtype is None or b.dtype == dtype)]

    def widths(self, scope, threads=None) -> tuple:
        """Widths of a [block, width] tile: powers of two, and at thread counts that are not, the widths that spread
        over them too (one that does not spread is drawn as well: tile-ai/tilelang#2398's class, a known failure)."""
        threads = threads or self.threads
        if threads & (threads - 1) == 0 or scope == "shared":
            return WIDTHS[:3]
        return WIDTHS[:3] + tuple(w for w in WIDTHS[3:] if model.spreads((self.block, w), threads))

    def fits(self, name, mag) -> bool:
        return mag <= EXACT[self.buffers[name].dtype]

    def written(self) -> set:
        return {n for s in model.walk(self.body) for n in model.kind(s).writes(s)}

    def inputs(self):
        written = self.written()
        return [b for b in self.buffers.values() if b.scope == "global" and b.name not in written]

    def outputs(self):
        read = {n for s in model.walk(self.body) for n in model.kind(s).reads(s)}
        return [b for b in self.buffers.values() if b.scope == "global" and b.name not in read]


def load(c, b: Builder, scope, dtype, shape, at="bx", into=None, swizzle=None) -> list:
    """Statements that define a local tile of `shape` from an n-row global input (new, or one wide enough),
    at row base(at) + row: a read-only input may be read from any row, past the block's own ones too."""
    from harness.programs.copy import Copy  # copy.py draws with this module's helpers
    h, w = shape
    if into is None:
        sw = swizzle if swizzle is not None else (scope == "shared" and model.swizzles(shape, dtype) and c.flip())
        into = b.new(scope, dtype, shape, swizzle=sw)
    candidates = [g for g in b.inputs() if g.shape[1] >= w and g.rows == "n"]
    if candidates and c.flip():
        g = c.one(candidates)
    else:
        width = w + c.one((0, 0, 0, 4, 8, 13))
        g = b.buffers[b.new("global", b.pick(c, "dtype", ("float16", "float16", "bfloat16", "float32")), ("n", width))]
    col = c.between((0, g.shape[1] - w))
    row = c.one((0, 0, 1, 3))
    stmt = Copy(src=g.name, dst=into, at=at, row=row, col=col, form=c.one(("tile", "tile", "loop")))
    b.mag[into] = b.mag[g.name]
    return [stmt]


def operand(c, b: Builder, scope, dtype, shape, at) -> str:
    """A defined local of this spec, or one loaded now."""
    have = b.locals(shape=shape, scope=scope, dtype=dtype)
    if have and c.flip():
        return c.one(have)
    stmts = load(c, b, scope, dtype, shape, at=at)
    b.emit(stmts, [stmts[0].dst])
    return stmts[0].dst


_RANGES: dict = {}  # (low, high) -> st.integers(low, high)


class Drawn:
    """Choices drawn by Hypothesis (so that it shrinks them)."""

    def __init__(self, draw, st):
        self.draw, self.st = draw, st

    def one(self, options):
        options = tuple(options)
        return options[self.between((0, len(options) - 1))]

    def between(self, bounds):
        # One strategy per range, built once: a program draws hundreds of choices, and building and validating
        # a strategy for each took 8% of a campaign's draw (13.6 s -> 12.5 s for 600 cases).
        if bounds not in _RANGES:
            _RANGES[bounds] = self.st.integers(*bounds)
        return self.draw(_RANGES[bounds])

    def flip(self) -> bool:
        return self.between((0, 1)) == 1


class First:
    """The first choice every time: each template's simplest program (the covering array's rows)."""

    def __init__(self, template):
        self.template = template

    def one(self, options):
        options = tuple(options)
        return self.template if self.template in options else options[0]

    def between(self, bounds):
        return bounds[0]

    def flip(self) -> bool:
        return False
