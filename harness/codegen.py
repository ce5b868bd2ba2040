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
"""
from __future__ import annotations

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


def check(source: str, contiguous: dict[str, int] | None = None) -> list[Finding]:
    return unwaited_async_loads(source) + vectorized_atomics(source, contiguous or {}) + atomics_on_locals(source)
