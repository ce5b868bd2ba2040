"""Compile-only checks on generated CUDA: hazards that need no GPU to see.

vectorized_atomics: an AtomicAddx2/x4 writes N consecutive addresses. That is right only where
N consecutive elements of the atomic's loop land on N consecutive addresses: a global buffer
with an annotated layout (the fragment-matched dQ keeps none adjacent) or an invariant
destination (every row adding into one dSinks cell) must get scalar atomics, and shared memory
has no vector float atomics at all. The kernel family says which buffers are which.

atomics_on_locals: an atomic add whose target is a local scalar (TileLang 0.1.6.post2 copies a
bounds-checked destination into `condval_N` and adds to the copy) updates nothing in memory:
the contribution is lost.

unwaited_async_loads: a TMA load issued before a loop whose barrier is waited on only inside
that loop. When the loop can run zero times (its bound is symbolic), no thread ever waits for
the load: the kernel reads or reuses the destination while the copy is still in flight (and
may exit with it pending). Where the destination shares shared memory with another buffer,
the late copy overwrites that buffer.

unaligned_vectors: a vector load or store of N bytes (`*(uint4*)(Mask + off)`, a cp.async of N
bytes from `&(Mask[off])`) needs its address to be a multiple of N. Named buffers only (a family's
mask and bias, whose rows may start anywhere): the check computes what the offset expression is
provably a multiple of (literal factors and shifts, through sums and products; a symbolic length
proves nothing) and flags an access whose width that does not divide.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

_FOR = re.compile(r"^\s*for \(int (\w+) = 0; \1 < (.+); \+\+\1\)")
_WAIT = re.compile(r"mbarrier\[(\d+)\]\.wait\(")
_TMA_LOAD = re.compile(r"tl::tma_load\(\w+, mbarrier\[(\d+)\], \(&\(\(\(\w+\*\)(\w+)\)")
_BUFFER = re.compile(r"void\* (\w+) = \(\(void\*\)\(\(char\*\)buf_dyn_shmem \+ (\d+)\)\)")


@dataclass
class Finding:
    check: str
    line: int
    message: str


def _scopes(source: str):
    """Yield (line number, line, enclosing for-loop conditions) with brace-depth tracking."""
    stack = []  # one entry per open brace: the loop condition if that brace opened a for, else None
    for n, line in enumerate(source.splitlines(), 1):
        loops = [c for c in stack if c is not None]
        yield n, line, loops
        m = _FOR.match(line)
        for ch in line:
            if ch == "{":
                stack.append(m.group(2) if m else None)
                m = None
            elif ch == "}" and stack:
                stack.pop()


def _may_skip(condition: str) -> bool:
    """A loop may run zero times unless its bound is a positive literal."""
    return not re.fullmatch(r"\d+", condition.strip()) or int(condition) == 0


def unwaited_async_loads(source: str) -> list[Finding]:
    offsets = {name: int(off) for name, off in _BUFFER.findall(source)}
    loads, waits = {}, {}
    for n, line, loops in _scopes(source):
        for barrier, dest in _TMA_LOAD.findall(line):
            if not loops:
                loads.setdefault(barrier, (n, dest))
        for barrier in _WAIT.findall(line):
            waits.setdefault(barrier, []).append(loops)
    findings = []
    for barrier, (n, dest) in loads.items():
        seen = waits.get(barrier, [])
        if any(not any(_may_skip(c) for c in loops) for loops in seen):
            continue  # some wait is reached on every path
        aliases = sorted(b for b, off in offsets.items() if b != dest and off == offsets.get(dest))
        where = "never waited on" if not seen else "waited on only inside a loop that may run zero times"
        alias = f"; {dest} shares shared memory with {', '.join(aliases)}" if aliases else ""
        findings.append(Finding("unwaited_async_loads", n, f"TMA load into {dest} on mbarrier[{barrier}] {where}{alias}"))
    return findings


_VEC_ATOMIC = re.compile(r"AtomicAddx(\d)\(\(?&\(+(?:\(\w+\*\))?(\w+)\)?\[")


def vectorized_atomics(source: str, contiguous: dict[str, int]) -> list[Finding]:
    """`contiguous[buffer]`: how many consecutive loop elements land on consecutive addresses."""
    shared = {name for name, _ in _BUFFER.findall(source)}
    findings, seen = [], set()
    for n, line in enumerate(source.splitlines(), 1):
        for width, buf in _VEC_ATOMIC.findall(line):
            width = int(width)
            if buf in shared:
                why = f"AtomicAddx{width} into shared-memory buffer {buf}: no vector float atomics there"
            elif width > contiguous.get(buf, width):
                why = (f"AtomicAddx{width} into {buf}, where only {contiguous[buf]} consecutive "
                       f"element(s) of the loop land on consecutive addresses")
            else:
                continue
            if why not in seen:
                seen.add(why)
                findings.append(Finding("vectorized_atomics", n, why))
    return findings


_ATOMIC_ON_NAME = re.compile(r"\bAtomicAdd(?:x\d)?\(\s*([A-Za-z_]\w*)\s*,")


def atomics_on_locals(source: str) -> list[Finding]:
    findings, seen = [], set()
    for n, line in enumerate(source.splitlines(), 1):
        for name in _ATOMIC_ON_NAME.findall(line):
            if name not in seen and re.search(rf"^\s*[\w:]+ {name};", source, re.M):
                seen.add(name)
                findings.append(Finding("atomics_on_locals", n, f"atomic add into local variable {name}: "
                                        "the update never reaches memory"))
    return findings


_TOKEN = re.compile(r"\s*(?:(\d+)[uUlL]*|([A-Za-z_][\w.]*)|(<<|>>|&&|\|\||[-+*/%&|()<>,?:!~^]))")
_TYPES = {"int", "int64_t", "int32_t", "uint", "uint32_t", "uint64_t", "long", "unsigned", "signed", "char",
          "short", "size_t"}
_ANY = 1 << 30  # the divisor of 0: a multiple of everything


def _tokens(expr: str) -> list[str]:
    out, pos = [], 0
    expr = expr.strip()
    while pos < len(expr):
        m = _TOKEN.match(expr, pos)
        if not m or m.end() == pos:
            raise ValueError(f"cannot read {expr[pos:pos + 20]!r}")
        out.append(m.group(m.lastindex))
        pos = m.end()
    return out


def divisor(expr: str) -> int:
    """A d such that `expr` is a multiple of d whatever its symbols hold (1 when nothing is known)."""
    try:
        toks = _tokens(expr)
    except ValueError:
        return 1
    pos = 0

    def peek():
        return toks[pos] if pos < len(toks) else None

    def take():
        nonlocal pos
        if pos == len(toks):
            raise ValueError(f"{expr!r} ends early")
        pos += 1
        return toks[pos - 1]

    def primary():
        """(divisor, the value if it is a literal)."""
        t = take()
        if t == "(":
            if peek() in _TYPES and pos + 1 < len(toks) and toks[pos + 1] == ")":  # a cast
                take(), take()
                return primary()
            d = binary(0)
            take()  # ")"
            return d
        if t in ("-", "+"):
            return primary()
        if t.isdigit():
            return int(t) or _ANY, int(t)
        if peek() == "(":  # a call (max, min, ...): nothing known
            depth = 0
            while True:
                u = take()
                depth += u == "("
                depth -= u == ")"
                if depth == 0:
                    return 1, None
        return 1, None

    levels = [("||",), ("&&",), ("|",), ("&",), ("<<", ">>"), ("+", "-"), ("*", "/", "%")]

    def binary(level):
        if level == len(levels):
            return primary()
        d, value = binary(level + 1)
        while peek() in levels[level]:
            op = take()
            rhs, rhs_value = binary(level + 1)
            if op in ("+", "-"):
                d = math.gcd(d, rhs)
            elif op == "*":
                d = min(d * rhs, _ANY)
            elif op == "<<" and rhs_value is not None:
                d = min(d * 2 ** rhs_value, _ANY)
            else:
                d = 1
            value = None
        return d, value

    try:
        d = binary(0)[0]
    except ValueError:  # not an expression read here: nothing proved
        return 1
    return d if pos == len(toks) else 1  # a part not read (a comparison, a ?:) may change anything


_ELEM = {"uchar": 1, "char": 1, "signed char": 1, "int8_t": 1, "uint8_t": 1, "bool": 1, "half_t": 2, "bfloat16_t": 2,
         "half": 2, "short": 2, "float": 4, "int": 4, "uint": 4, "double": 8, "int64_t": 8}
_PARAM = re.compile(r"(?:const )?((?:signed |unsigned )?\w+)\* __restrict__ (\w+)")
_VEC_TYPE = re.compile(r"u?(char|short|int|longlong|long|float|double|half|bfloat16)(\d?)")
_BASE = {"char": 1, "short": 2, "half": 2, "bfloat16": 2, "int": 4, "float": 4, "long": 8, "longlong": 8,
         "double": 8}


def _closing(text: str, start: int, open_: str, close: str) -> int:
    """Index of the bracket closing the one opened at text[start]."""
    depth = 0
    for i in range(start, len(text)):
        depth += text[i] == open_
        depth -= text[i] == close
        if depth == 0:
            return i
    return len(text)


def _vector_accesses(line: str, buffers):
    """(bytes, buffer, offset expression) of each vector access to `buffers` on a line."""
    names = "|".join(map(re.escape, buffers))
    for m in re.finditer(rf"cp_async_gs(?:_conditional)?<(\d+)>\(.*?&\(({names})\[", line):
        end = _closing(line, m.end() - 1, "[", "]")
        yield int(m.group(1)), m.group(2), line[m.end():end]
    for m in re.finditer(rf"\*\((\w+)\*\)\(({names}) \+ ", line):
        t = _VEC_TYPE.fullmatch(m.group(1))
        if t:
            end = _closing(line, m.start(2) - 1, "(", ")")
            yield _BASE[t.group(1)] * int(t.group(2) or 1), m.group(2), line[m.end():end]


def unaligned_vectors(source: str, buffers) -> list[Finding]:
    """Vector accesses to `buffers` (global parameters) at offsets not provably a multiple of their width."""
    elem = {name: _ELEM.get(t, 1) for t, name in _PARAM.findall(source) if name in buffers}
    findings, seen = [], set()
    for n, line in enumerate(source.splitlines(), 1):
        for width, buf, offset in _vector_accesses(line, elem):
            size = elem[buf]
            if width <= size:
                continue
            d = divisor(offset)
            if d * size % width and (buf, width) not in seen:
                seen.add((buf, width))
                findings.append(Finding("unaligned_vectors", n, f"{width}-byte vector access to {buf} at an offset "
                                        f"provably a multiple of only {d} element(s) ({d * size} bytes)"))
    return findings


def check(source: str, contiguous: dict[str, int] | None = None, aligned=()) -> list[Finding]:
    return (unwaited_async_loads(source) + vectorized_atomics(source, contiguous or {}) + atomics_on_locals(source)
            + unaligned_vectors(source, aligned))
