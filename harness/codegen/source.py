"""Reading TileLang's generated CUDA: the finding a check reports, the patterns several checks share, and
C integer expressions evaluated in Python."""
from __future__ import annotations

import re
from dataclasses import dataclass

from harness.result import ScanCheck

_FOR = re.compile(r"^\s*for \(int (\w+) = (.+?); \1 < (.+); \+\+\1\)")
_BUFFER = re.compile(r"void\* (\w+) = \(\(void\*\)\(\(char\*\)buf_dyn_shmem \+ (\d+)\)\)")  # a tile carved out of the pool
# A tile declared as its own array, `extern __shared__` (dynamic, not carved from the pool) or `__shared__` (static):
# element type, name. Neither the pool itself (buf_dyn_shmem) nor an mbarrier array's storage (uint64_t) is a tile.
_OWN_TILE = re.compile(r"(?:extern )?__shared__ (?:__align__\(\d+\) )?(?!uint64_t )([\w:]+) (?!buf_dyn_shmem\[)(\w+)\[\d*\];")


def shared_tiles(source: str) -> set[str]:
    """The names of the kernel's shared-memory tiles, however declared."""
    return {name for name, _ in _BUFFER.findall(source)} | {name for _, name in _OWN_TILE.findall(source)}


@dataclass
class LineFinding:
    """What a check found at a line of the generated code; harness.worker passes on its
    check and message (a result.ScanFinding)."""
    check: ScanCheck
    line: int
    message: str


# C integer expressions as TileLang prints them -> Python (casts dropped, `/` on ints is floor division
# for the non-negative values here).
_C_TO_PY = ((re.compile(r"\(int\)|\(int64_t\)"), ""),
            (re.compile(r"&&"), " and "), (re.compile(r"\|\|"), " or "), (re.compile(r"!(?!=)"), " not "),
            (re.compile(r"(?<!/)/(?!/)"), "//"))


class _Fixed(dict):
    """Loop variables, and one fixed value for every other name (lengths, block indices): a ring's
    index and parity depend on those only through the loop's start, which shifts with them."""
    def __missing__(self, name):
        return {"max": max, "min": min}.get(name, _FIXED)


class _Dim:
    x = y = z = 3


_FIXED = 1000  # any length; blockIdx.* are _Dim's


def _eval(expr: str, env: dict, fixed=False):
    """`expr` over the loop variables in `env`; with `fixed`, over the fixed values of every other
    name too (else an unknown name raises)."""
    for pattern, repl in _C_TO_PY:
        expr = pattern.sub(repl, expr)
    names = _Fixed(env, blockIdx=_Dim) if fixed else {**env, "max": max, "min": min}
    return eval(expr, {"__builtins__": {}}, names)


_ELEM = {"uchar": 1, "char": 1, "signed char": 1, "int8_t": 1, "uint8_t": 1, "bool": 1, "half_t": 2, "bfloat16_t": 2,
         "half": 2, "short": 2, "float": 4, "int": 4, "uint": 4, "double": 8, "int64_t": 8}
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
