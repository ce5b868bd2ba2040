"""A tile program as data: its launch, its buffers and its statements; JSON round trip and validation.

    {"block": 64, "threads": 128,
     "buffers": [{"name": "A", "scope": "global", "dtype": "float16", "shape": ["n", 64]}, ...],
     "body": [{"op": "copy", "src": "A", "dst": "As", "at": "bx", "row": 0, "col": 0}, ...]}

Global buffers have `n` rows (block `bx` owns rows bx * block .. + block, the last block a ragged tail)
or a fixed row count (every block sees all of it). A global is read or written, never both: blocks run
in any order. Shared and fragment buffers are each block's own, and every element is written before it
is read. `check` enforces all of it, so a program loaded from an untrusted file is as valid as a
generated one: its names become identifiers in generated code, and are checked as such.

That is the JSON form, read once (`from_json`, `from_dict`) into records and written back from them (`to_json`):
each statement kind's module declares its record (a Statement), so a statement in memory is typed, and a body
is a tuple of them.
"""
from __future__ import annotations

import dataclasses
import functools
import json
import keyword
import re
from dataclasses import dataclass
from typing import ClassVar

SCOPES = ("global", "shared", "fragment")
DTYPES = ("float16", "bfloat16", "float32")
BLOCKS = (16, 32, 64, 128)
THREADS = (64, 96, 128, 160, 192, 256, 384)
MAX_DIM = 256            # any fixed extent
MAX_STATEMENTS = 64
INPUT_RANGE = 2          # every global's initial contents are integers in [-2, 2] (harness.programs.interpret.initial)
_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,15}\Z")
_RESERVED = {"T", "n", "bx", "k", "i", "j", "tilelang", "torch", "program", "expected", "main", "F",
             "tx", "ring", "full", "empty", "s"}   # the names a stream's text declares (stream.py)
# Layouts a float32 global may be annotated with: "dq" stores element (r, c) of [R, C] at [r // 8, c // 8, c % 2,
# 4 * (r % 8) + (c % 8) // 2] of [R / 8, C / 8, 2, 32]: the order a gemm accumulator's fragment holds it, so that
# atomic adds from it can be vectorized (make_dq_layout in TileLang's flash-attention backward examples).
LAYOUTS = ("dq",)


class ProgramError(ValueError):
    """A program that is not well formed: the one reason, naming the statement or buffer."""


@dataclass(frozen=True)
class Buffer:
    name: str
    scope: str
    dtype: str
    shape: tuple            # ints; a global's first extent may be "n"
    swizzle: bool = False   # shared: a swizzled layout annotated
    layout: str = ""        # global: "dq", the layout TileLang's backward examples annotate on dQ (LAYOUTS)

    @property
    def rows(self):
        return self.shape[0]

    @property
    def local(self) -> bool:
        return self.scope != "global"


@dataclass(frozen=True, eq=False)
class Program:
    """Equal, and hashed alike, when their canonical texts are: a Case holds one, and a compiled kernel's key with it."""
    block: int
    threads: int
    buffers: tuple          # Buffer, in declaration order (globals are the kernel's parameters, in this order)
    body: tuple             # Statement, in program order

    @functools.cached_property
    def text(self) -> str:
        """to_json(self), computed once."""
        return to_json(self)

    def __eq__(self, other):
        return self.text == other.text if isinstance(other, Program) else NotImplemented

    def __hash__(self):
        return hash(self.text)

    def buffer(self, name) -> Buffer:
        for b in self.buffers:
            if b.name == name:
                return b
        raise ProgramError(f"no buffer named {name!r}")

    @property
    def globals(self) -> tuple:
        return tuple(b for b in self.buffers if b.scope == "global")

    def written(self) -> list[str]:
        """The global buffers some statement writes: the program's outputs."""
        return [b.name for b in self.globals if any(b.name in kind(s).writes(s) for s in walk(self.body))]


@dataclass(frozen=True, kw_only=True)
class Statement:
    """A statement: each kind's module declares its record as a subclass, its `op` (the JSON form's name) and its
    fields; a field that is None is absent from the JSON form. A kind with a body holds it as a tuple of statements."""
    op: ClassVar[str]
    stage: int | None = None   # its pipeline stage, on each statement of a scheduled loop's body (harness.programs.loop)


def kind(stmt):
    from harness.programs import STATEMENT_KINDS
    return STATEMENT_KINDS[stmt.op]


def needs(stmt) -> list:
    """What must hold values before `stmt` runs: what it reads, and what it updates in place (an atomic's destination)."""
    return kind(stmt).reads(stmt) + getattr(kind(stmt), "updates", lambda _: [])(stmt)


def walk(body):
    """Every statement, loop bodies included, in program order."""
    for s in body:
        yield s
        yield from walk(getattr(s, "body", ()))


def outside_loop(x):
    """A loop body's statement moved out of the loop: what it indexed by `k` it indexes by `bx`."""
    def rebased(e):
        return "bx" if e == "k" else [rebased(a) for a in e] if isinstance(e, list) else e

    def moved(key, v):
        return "bx" if key == "at" and v == "k" else rebased(v) if key == "expr" else \
            tuple(map(outside_loop, v)) if key == "body" else None if key == "stage" else v
    return dataclasses.replace(x, **{f.name: moved(f.name, getattr(x, f.name)) for f in dataclasses.fields(x)})


def used(p: Program) -> Program:
    """`p` without buffers no statement names."""
    named = {n for s in walk(p.body) for n in kind(s).reads(s) + kind(s).writes(s)}
    return dataclasses.replace(p, buffers=tuple(x for x in p.buffers if x.name in named))


def fingerprint(program: Program) -> str:
    """The statement kinds, in order (a loop's, stream's or when's body in brackets): what a shrunk failure is made of."""
    def words(body):
        return " ".join(f"{s.op}[{words(s.body)}]" if hasattr(s, "body") else s.op for s in body)
    return words(program.body)


# ------------------------------------------------------------------------------------------- JSON
def to_dict(p: Program) -> dict:
    """The JSON object, as json.loads gives it back: keys sorted, lists (a case's file writes it as it is)."""
    buffers = [{"name": b.name, "scope": b.scope, "dtype": b.dtype, "shape": list(b.shape),
                **({"swizzle": True} if b.swizzle else {}), **({"layout": b.layout} if b.layout else {})}
               for b in p.buffers]
    return _plain({"block": p.block, "threads": p.threads, "buffers": buffers, "body": [_thawed(s) for s in p.body]})


def _thawed(s: Statement) -> dict:
    """A statement's JSON form: its op and its fields that are not None (a body as a list)."""
    out = {"op": s.op}
    for f in dataclasses.fields(s):
        v = getattr(s, f.name)
        if v is not None:
            out[f.name] = [_thawed(x) for x in v] if f.name == "body" else v
    return out


def _plain(x):
    if isinstance(x, dict):
        return {k: _plain(x[k]) for k in sorted(x)}
    return [_plain(v) for v in x] if isinstance(x, (list, tuple)) else x


def to_json(p: Program) -> str:
    """The canonical text (sorted keys, no spaces): what Program equality and hashing compare."""
    return json.dumps(to_dict(p), sort_keys=True, separators=(",", ":"))


def from_json(text: str) -> Program:
    try:
        return from_dict(json.loads(text))
    except json.JSONDecodeError as e:
        raise ProgramError(f"program is not valid JSON: {e}") from None


def from_dict(d) -> Program:
    if not isinstance(d, dict) or set(d) != {"block", "threads", "buffers", "body"}:
        raise ProgramError("a program is an object with exactly block, threads, buffers and body")
    _one_of("block", d["block"], BLOCKS)
    _one_of("threads", d["threads"], THREADS)
    if not isinstance(d["buffers"], list) or not isinstance(d["body"], list):
        raise ProgramError("buffers and body must be lists")
    buffers = tuple(_buffer(b) for b in d["buffers"])
    names = [b.name for b in buffers]
    if len(set(names)) != len(names):
        raise ProgramError(f"buffer names must be distinct, got {names}")
    p = Program(d["block"], d["threads"], buffers, _statements(d["body"]))
    return check(p)


def _statements(body: list) -> tuple:
    out = []
    for index, s in enumerate(body):
        if not isinstance(s, dict) or s.get("op") not in _kinds():
            raise ProgramError(f"a statement is an object whose op is one of {sorted(_kinds())}, got {s!r:.80}")
        try:
            out.append(_statement(s))
        except ProgramError as e:
            raise ProgramError(f"statement {index} ({s['op']}): {e}") from None
    return tuple(out)


def _statement(s: dict) -> Statement:
    """The record of a statement's JSON form: its kind's (STATEMENT), with exactly the fields it declares."""
    record = _kinds()[s["op"]].STATEMENT
    declared = {f.name: f for f in dataclasses.fields(record)}
    extra = sorted(set(s) - set(declared) - {"op"})
    need(not extra, f"unknown field(s) {extra}")
    for name, f in declared.items():
        need(name in s or f.default is not dataclasses.MISSING, f"missing field {name!r}")
        need(name not in s or s[name] is not None, f"{name} must not be null")
    values = {key: v for key, v in s.items() if key != "op"}
    if "body" in values:
        need(isinstance(values["body"], list), f"a {s['op']}'s body must be a list")
        values["body"] = _statements(values["body"])
    return record(**values)


def _kinds():
    from harness.programs import STATEMENT_KINDS
    return STATEMENT_KINDS


def _buffer(d) -> Buffer:
    keys = {"name", "scope", "dtype", "shape"}
    if not isinstance(d, dict) or not keys <= set(d) <= keys | {"swizzle", "layout"}:
        raise ProgramError(f"a buffer is an object with name, scope, dtype, shape (and swizzle or layout), got {d!r:.80}")
    name = d["name"]
    if not isinstance(name, str) or not _NAME.match(name) or keyword.iskeyword(name) or name in _RESERVED:
        raise ProgramError(f"buffer name {name!r} must be a letter then up to 15 letters, digits or _, not reserved")
    _one_of(f"{name}: scope", d["scope"], SCOPES)
    _one_of(f"{name}: dtype", d["dtype"], DTYPES)
    shape = d["shape"]
    if not isinstance(shape, list) or not 1 <= len(shape) <= 2:
        raise ProgramError(f"{name}: shape must be a list of 1 or 2 extents")
    for i, e in enumerate(shape):
        if not (e == "n" and i == 0 and d["scope"] == "global" and len(shape) == 2) and \
                not (type(e) is int and 1 <= e <= MAX_DIM):
            raise ProgramError(f"{name}: extent {e!r} must be an int in [1, {MAX_DIM}] (a global's rows may be 'n')")
    if d["scope"] == "global" and len(shape) != 2:
        raise ProgramError(f"{name}: a global buffer is 2-D")
    swizzle = d.get("swizzle", False)
    if swizzle is not False and not (swizzle is True and d["scope"] == "shared" and swizzles(shape, d["dtype"])):
        raise ProgramError(f"{name}: swizzle is for 2-D 16-bit shared buffers of 64 columns and rows in multiples of 8")
    lay = d.get("layout", "")
    if lay != "" and not (lay in LAYOUTS and d["scope"] == "global" and d["dtype"] == "float32" and shape[0] != "n"
                          and shape[0] % 8 == 0 and shape[1] % 8 == 0):
        raise ProgramError(f"{name}: layout is one of {list(LAYOUTS)}, for a float32 global of fixed rows, "
                           "rows and columns multiples of 8")
    return Buffer(name, d["scope"], d["dtype"], tuple(shape), swizzle, lay)


def swizzles(shape, dtype) -> bool:
    """Shapes TileLang's make_swizzled_layout takes: 128-byte rows (64 half-precision columns), whole 8-row groups."""
    return len(shape) == 2 and dtype != "float32" and shape[1] == 64 and shape[0] % 8 == 0


def _one_of(what, value, allowed):
    if type(value) is not type(allowed[0]) or value not in allowed:
        raise ProgramError(f"{what} must be one of {list(allowed)}, got {value!r}")


# ------------------------------------------------------------------------------------- validity
class Scope:
    """What a statement may rely on where it stands: the threads that run it (a stream's body runs on its
    consumers only), the buffers whose every element is defined, and the loop variable it may index by ("k"
    inside a loop), and whether it stands inside a `when` (harness.programs.when)."""

    def __init__(self, threads, defined=(), in_loop=False, in_when=False):
        self.threads, self.defined, self.in_loop, self.in_when = threads, set(defined), in_loop, in_when


def check(p: Program) -> Program:
    """`p`, or ProgramError naming the first statement that breaks a rule."""
    if len(list(walk(p.body))) > MAX_STATEMENTS:
        raise ProgramError(f"at most {MAX_STATEMENTS} statements")
    if shared_bytes(p) > 96 * 1024:
        raise ProgramError("shared buffers exceed 96 KiB")
    need(any(b.rows == "n" for b in p.globals), "no global buffer has n rows: n would be bound by nothing")
    check_body(p, p.body, Scope(p.threads))
    read = {name for s in walk(p.body) for name in kind(s).reads(s)}
    outputs = p.written()
    if not outputs:
        raise ProgramError("no statement writes a global buffer: the program has no output")
    both = sorted(set(outputs) & read)
    if both:
        raise ProgramError(f"global {both[0]} is both read and written (blocks run in any order)")
    for name, how in sorted(global_updates(p).items()):
        need(len(how) == 1, f"global {name} is {' and '.join(sorted(how))}: threads and blocks run in any order, and "
                            "these do not commute (one atomic kind, or a store, per global)")
    return p


def global_updates(p: Program) -> dict:
    """{global: how statements write it}: "updated by <kind>" per atomic kind (add, max, min) and "stored" for a plain
    write. Atomics of one kind commute with each other; nothing else does, and no barrier orders blocks, nor threads'
    writes to global memory."""
    out: dict = {}
    for s in walk(p.body):
        k = kind(s)
        updated = set(getattr(k, "updates", lambda _: [])(s))
        for name in k.writes(s):
            if p.buffer(name).scope == "global":
                out.setdefault(name, set()).add(f"updated by {s.kind}" if name in updated else "stored")
    return out


def _elements(shape) -> int:
    size = 1
    for e in shape:
        size *= e
    return size


def spreads(shape, threads) -> bool:
    """Whole elements per thread, or whole threads per element (replicated): a fragment or T.Parallel extent that does
    not spread this way is valid, but TileLang finds no layout for many (tile-ai/tilelang#2398, a known failure)."""
    return _elements(shape) % threads == 0 or threads % _elements(shape) == 0


def _bytes(b: Buffer) -> int:
    return _elements(b.shape) * (4 if b.dtype == "float32" else 2)


def shared_bytes(p: Program) -> int:
    return sum(_bytes(b) for b in p.buffers if b.scope == "shared")


def check_body(p, body, scope, staged=False):
    """Check each statement where it stands; `staged`: the body of a loop with a manual pipeline schedule, whose
    statements each carry their `stage` (harness.programs.loop), which no other statement carries."""
    for index, s in enumerate(body):
        try:
            need((s.stage is not None) == staged, "a stage only on each statement of a scheduled loop's body")
            kind(s).check(s, p, scope)
            undefined = [n for n in needs(s) if p.buffer(n).local and n not in scope.defined]
            if undefined:
                raise ProgramError(f"reads {undefined[0]} before every element of it is written")
        except ProgramError as e:
            raise ProgramError(f"statement {index} ({s.op}): {e}") from None
        if kind(s).full(s, p):
            scope.defined |= {n for n in kind(s).writes(s) if p.buffer(n).local}


# Helpers the statement kinds share.
def need(cond, message):
    if not cond:
        raise ProgramError(message)


def fields(s, **types):
    """Check a statement's fields where it stands: `types` maps each field it has here to its type, or to a tuple of
    allowed values; any other field must be absent (None)."""
    extra = sorted(f.name for f in dataclasses.fields(s)   # a scheduled loop checks its statements' stages
                   if f.name not in types and f.name != "stage" and getattr(s, f.name) is not None)
    need(not extra, f"unknown field(s) {extra}")
    for key, allowed in types.items():
        v = getattr(s, key, None)
        need(v is not None, f"missing field {key!r}")
        if isinstance(allowed, tuple):
            need(type(v) in {type(a) for a in allowed} and v in allowed, f"{key} must be one of {list(allowed)}, got {v!r}")
        else:
            need(type(v) is allowed, f"{key} must be {allowed.__name__}, got {v!r}")


def local(p, name, dims=None, scopes=("shared", "fragment")) -> Buffer:
    b = p.buffer(name)
    need(b.scope in scopes, f"{name} must be {' or '.join(scopes)}, not {b.scope}")
    need(dims is None or len(b.shape) == dims, f"{name} must be {dims}-D")
    return b


SYMBOLIC_TRIPS = ("n", "n-1", "n//b")


def trips(t, block, lang) -> str:
    """A loop's trip count as TileLang or torch text: a constant, one per block of n's rows ("n"), one fewer
    ("n-1": none at all when n fits one block, which the compiler cannot know), or one per whole block ("n//b":
    none when n is under a block; an extent that is a division, where "n-1"'s is a subtraction, which 0.1.15's
    pipeline lowering refuses in many programs: 752120de86bc's Downcast)."""
    if t == "n//b":
        return f"n // {block}"
    if t in SYMBOLIC_TRIPS:
        text = f"T.ceildiv(n, {block})" if lang == "tilelang" else f"-(-n // {block})"
        return text + (" - 1" if t == "n-1" else "")
    return str(t)


def surely_runs(t) -> bool:
    """What a loop's body defines is defined after it only if the loop surely runs."""
    return t not in SYMBOLIC_TRIPS and t >= 1


def base(at, block) -> str:
    """The first row of the tile `at` names, as an expression in both languages."""
    return {"bx": f"bx * {block}", "k": f"k * {block}", "0": "0"}[at]


def cast(expr, frm, to) -> str:
    """TileLang text of `expr` (of dtype `frm`) as dtype `to`."""
    return expr if frm == to else f'T.cast({expr}, "{to}")'
