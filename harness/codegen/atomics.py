"""Checks on atomic adds: vectorized_atomics (a vector atomic where the addresses are not consecutive) and
atomics_on_locals (an atomic into a local copy)."""
from __future__ import annotations

import re

from harness.codegen.source import LineFinding, shared_tiles
from harness.result import ScanCheck

_VEC_ATOMIC = re.compile(r"AtomicAddx(\d)\(\(?&\(+(?:\(\w+\*\))?(\w+)\)?\[")


def vectorized_atomics(source: str, contiguous: dict[str, int]) -> list[LineFinding]:
    """`contiguous[buffer]`: how many consecutive loop elements land on consecutive addresses."""
    shared = shared_tiles(source)
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
                findings.append(LineFinding(ScanCheck.vectorized_atomics, n, why))
    return findings


# The atomic's target: a name (0.1.6.post2's `AtomicAdd(condval_4, ...)`) or an element's address
# (0.1.15's `AtomicAdd((&(G6_local_cast[vec])), ...)`).
_ATOMIC_ON_NAME = re.compile(r"\bAtomicAdd(?:x\d)?\(\s*(?:\(?&\()?([A-Za-z_]\w*)\s*[,\[]")


def atomics_on_locals(source: str) -> list[LineFinding]:
    """An atomic add into a variable or array the kernel declares as its own (`float condval_4;`,
    `float G6_local_cast[2];`) lands in one thread's registers: the add never reaches memory."""
    findings, seen = [], set()
    for n, line in enumerate(source.splitlines(), 1):
        for name in _ATOMIC_ON_NAME.findall(line):
            if name not in seen and re.search(rf"^\s*[\w:]+ {name}(?:\[\d+\])?;", source, re.M):
                seen.add(name)
                findings.append(LineFinding(ScanCheck.atomics_on_locals, n, f"atomic add into local variable {name}: "
                                            "the update never reaches memory"))
    return findings
