"""unaligned_vectors: a vector access to a named global buffer at an offset not provably a multiple of its
width (divisor: what an offset expression is provably a multiple of)."""
from __future__ import annotations

import math
import re

from harness.codegen.source import _BASE, _ELEM, _VEC_TYPE, LineFinding, _closing
from harness.result import ScanCheck

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


_PARAM = re.compile(r"(?:const )?((?:signed |unsigned )?\w+)\* __restrict__ (\w+)")


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


def unaligned_vectors(source: str, buffers) -> list[LineFinding]:
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
                findings.append(LineFinding(ScanCheck.unaligned_vectors, n, f"{width}-byte vector access to {buf} at an offset "
                                            f"provably a multiple of only {d} element(s) ({d * size} bytes)"))
    return findings
