"""Races on shared memory, shown on one instance: each access's bytes evaluated for every thread, and two warps
meeting at one address with nothing ordering them (racing_shared_writes, overwritten_while_read)."""
from __future__ import annotations

import re
from dataclasses import dataclass

from harness.codegen.barriers import _LAUNCH
from harness.codegen.source import (
    _BASE,
    _BUFFER,
    _C_TO_PY,
    _ELEM,
    _FOR,
    _OWN_TILE,
    _VEC_TYPE,
    LineFinding,
    _closing,
    _Dim,
    _eval,
    _Fixed,
)
from harness.result import ScanCheck

_SCALAR_AT = re.compile(r"\(\((\w+)\*\)(\w+)\)\[")                 # ((half_t*)S1)[off]
_VECTOR_AT = re.compile(r"\*\((\w+)\*\)\(\(\((\w+)\*\)(\w+)\) \+ ")  # *(uint4*)(((half_t*)S1) + off)
_CP_ASYNC_INTO = re.compile(r"cp_async_gs(?:_conditional)?<(\d+)>\(")
_IF_LINE = re.compile(r"^\s*(\} else )?if \((.*)\) \{\s*$")

# Lines that order the threads (or some of them) or wait for a copy: a race is shown only with none of them between.
_ORDERS = re.compile(r"__syncthreads\(\)|__sync_thread_partial\(|\bbar\.sync\b|__syncwarp|\.wait\(|mbarrier_wait|"
                     r"NamedBarrier|cp_async_wait|tma_store_wait")

# Lines whose shared accesses the instance cannot evaluate (a warp's matrix, a descriptor, an elected thread's copy).
_OPAQUE = re.compile(r"ldmatrix|stmatrix|wgmma|tma_load|tma_store|Atomic")
MAX_INSTANCES = 1 << 16  # thread x trip combinations evaluated per access; a larger one is not judged
WARP = 32


@dataclass
class _Access:
    line: int
    memory: str           # buf_dyn_shmem, or an extern array's name
    buffer: str
    write: bool
    offset: str           # C expression of the element index
    base: int             # bytes: the buffer's offset in its memory
    size: int             # bytes per element
    width: int            # bytes the access covers
    loops: tuple          # enclosing loops: (line, var, start, bound)
    conds: tuple          # enclosing conditions (C), an else branch's negated
    epoch: int            # lines that order threads (_ORDERS) before it


def _shared_layout(source: str) -> dict:
    """buffer -> (memory, byte offset, element type or None): where each shared buffer lives. Views of buf_dyn_shmem
    at one offset are one memory (TileLang gives a buffer's bytes to another once the first is dead); a tile declared
    as its own array is its own memory."""
    out = {name: ("buf_dyn_shmem", int(off), None) for name, off in _BUFFER.findall(source)}
    out.update((name, (name, 0, t)) for t, name in _OWN_TILE.findall(source))
    return out


def _bytes_of(type_name: str) -> int | None:
    if type_name in _ELEM:
        return _ELEM[type_name]
    m = _VEC_TYPE.fullmatch(type_name)
    return _BASE[m.group(1)] * int(m.group(2) or 1) if m else None


def _line_accesses(line: str, layout: dict):
    """(buffer, write, offset expression, element bytes, access bytes) of each plain shared access on a line."""
    lhs_end = line.find(" = ")
    async_width = _CP_ASYNC_INTO.search(line)
    found = []
    for m in _VECTOR_AT.finditer(line):
        vec, elem, buf = m.groups()
        if buf in layout:
            end = _closing(line, m.start() + len(f"*({vec}*)"), "(", ")")
            found.append((m.start(), buf, line[m.end():end], _bytes_of(elem), _bytes_of(vec)))
    for m in _SCALAR_AT.finditer(line):
        elem, buf = m.groups()
        if buf in layout:
            end = _closing(line, m.end() - 1, "[", "]")
            found.append((m.start(), buf, line[m.end():end], _bytes_of(elem), _bytes_of(elem)))
    for name, (_, _, elem) in layout.items():
        if elem is None:
            continue
        for m in re.finditer(rf"\*\((\w+)\*\)\({name} \+ ", line):
            end = _closing(line, m.start() + len(m.group(1)) + 4, "(", ")")
            found.append((m.start(), name, line[m.end():end], _bytes_of(elem), _bytes_of(m.group(1))))
        for m in re.finditer(rf"(?<![\w*)])\b{name}\[", line):
            end = _closing(line, m.end() - 1, "[", "]")
            found.append((m.start(), name, line[m.end():end], _bytes_of(elem), _bytes_of(elem)))
    for i, (start, buf, offset, size, width) in enumerate(sorted(found)):
        if size is None or width is None:
            continue
        write = 0 <= lhs_end and start < lhs_end
        if async_width and i == 0:  # cp.async's destination, its first argument
            write, width = True, int(async_width.group(1))
        yield buf, write, offset, size, width


def _shared_accesses(source: str) -> list[_Access]:
    layout = _shared_layout(source)
    if not layout:
        return []
    stack, accesses, epoch = [], [], 0  # stack: one entry per open brace: ("for", ...), ("if", cond) or None
    for n, line in enumerate(source.splitlines(), 1):
        if _ORDERS.search(line):
            epoch += 1
        elif not _OPAQUE.search(line) and "__shared__" not in line:
            loops = tuple(e[1:] for e in stack if e and e[0] == "for")
            conds = tuple(e[1] for e in stack if e and e[0] == "if")
            for buf, write, offset, size, width in _line_accesses(line, layout):
                memory, base, _ = layout[buf]
                accesses.append(_Access(n, memory, buf, write, offset, base, size, width, loops, conds, epoch))
        text = line.strip()
        m_for, m_if = _FOR.match(line), _IF_LINE.match(line)
        if m_if and m_if.group(1):  # `} else if (c) {`: the previous branch's negation is not kept: unknown
            stack.pop()
            stack.append(("if", "?"))
            continue
        if text == "} else {":
            entry = stack.pop()
            stack.append(("if", f"!({entry[1]})" if entry and entry[0] == "if" else "?"))
            continue
        for ch in text:
            if ch == "{":
                stack.append(("for", n, *m_for.group(1, 2, 3)) if m_for else ("if", m_if.group(2)) if m_if else None)
                m_for = m_if = None
            elif ch == "}" and stack:
                stack.pop()
    return accesses


class _Thread:
    def __init__(self, x):
        self.x = x


def _compiled(expr: str):
    for pattern, repl in _C_TO_PY:
        expr = pattern.sub(repl, expr)
    return compile(expr.strip(), "<cuda>", "eval")


def _intervals(a: _Access, threads: int, fixed: dict) -> list | None:
    """[(first byte, end byte, thread)] the access touches with the loops of `fixed` at their values and every other
    loop around it over its trips (capped), each thread that passes its conditions; None if not evaluable."""
    try:
        offset = _compiled(a.offset)
        conds = [_compiled(c) for c in a.conds]
        free = []
        for line, var, start, bound in a.loops:
            if line not in fixed:
                first, end = _eval(start, {}, fixed=True), _eval(bound, {}, fixed=True)
                free.append((var, range(first, min(end, first + 64))))
    except Exception:
        return None
    combos = threads
    for _, r in free:
        combos *= max(len(r), 1)
    if combos > MAX_INSTANCES:
        return None
    env = _Fixed({var: fixed[line] for line, var, _, _ in a.loops if line in fixed}, blockIdx=_Dim)
    out = []

    def visit(i):
        if i < len(free):
            var, r = free[i]
            for v in r:
                env[var] = v
                visit(i + 1)
            return
        for t in range(threads):
            env["threadIdx"] = _Thread(t)
            if all(eval(c, {"__builtins__": {}}, env) for c in conds):
                first = a.base + eval(offset, {"__builtins__": {}}, env) * a.size
                out.append((first, first + a.width, t))
    try:
        visit(0)
    except Exception:
        return None
    return out


def _overlap(first: list, second: list) -> tuple | None:
    """(byte, thread of first, thread of second) where intervals of threads of different warps meet, or None."""
    events = sorted([(s, e, t, 0) for s, e, t in first] + [(s, e, t, 1) for s, e, t in second])
    open_ = ([], [])  # per side: (end, thread) of intervals still open
    for s, e, t, side in events:
        for k in (0, 1):
            open_[k][:] = [(end, u) for end, u in open_[k] if end > s]
        other = next((u for _, u in open_[1 - side] if u // WARP != t // WARP), None)
        if other is not None:
            return (s, other, t) if side == 1 else (s, t, other)
        open_[side].append((e, t))
    return None


def _fixed_loops(a: _Access, b: _Access) -> dict | None:
    """The loops around both, each at its first trip (one trip of them: the same for both accesses)."""
    fixed = {}
    for la, lb in zip(a.loops, b.loops):
        if la != lb:
            break
        try:
            first, end = _eval(la[2], {}, fixed=True), _eval(la[3], {}, fixed=True)
        except Exception:
            return None
        if end <= first:
            return None
        fixed[la[0]] = first
    return fixed


def _races(source: str, pairs) -> list[tuple]:
    """(earlier access, later access, byte, their threads) for each pair of `pairs(accesses)` that threads of two
    warps reach at one address in one trip of their common loops."""
    m = _LAUNCH.search(source)
    if not m:
        return []
    threads, found = int(m.group(1)), []
    for a, b in pairs(_shared_accesses(source)):
        fixed = _fixed_loops(a, b)
        if fixed is None:
            continue
        first, second = _intervals(a, threads, fixed), _intervals(b, threads, fixed)
        hit = first and second and _overlap(first, second)
        if hit:
            found.append((a, b, *hit))
    return found


def _same_epoch(accesses, first_writes: bool):
    """Pairs (a, b), a before b with no ordering line between, on one memory: a a write (or a read) and b a write."""
    for i, a in enumerate(accesses):
        for b in accesses[i + 1:]:
            if b.epoch != a.epoch or b.memory != a.memory or b.line == a.line:
                continue
            if b.write and a.write == first_writes:
                yield a, b


def racing_shared_writes(source: str) -> list[LineFinding]:
    """Two statements writing one shared address from threads of different warps, with nothing that orders threads
    between them: which value stays depends on timing. Shown on one instance (the first trip of the loops around
    both, every trip of the others, one length and block index); accesses it cannot evaluate are not judged."""
    found, seen = [], set()
    for a, b, byte, t1, t2 in _races(source, lambda acc: _same_epoch(acc, True)):
        if (a.buffer, b.buffer) not in seen:
            seen.add((a.buffer, b.buffer))
            found.append(LineFinding(ScanCheck.racing_shared_writes, b.line, f"{b.buffer} written here and {a.buffer} at line "
                                     f"{a.line}, with no barrier between: byte {byte} of {a.memory} by threads {t1} and {t2}"))
    return found


def overwritten_while_read(source: str) -> list[LineFinding]:
    """In a loop, a shared address read and then written in the same trip by threads of different warps with nothing
    that orders threads between: the write (the next stage's tile) may land before the read (this stage's) is done.
    Shown on one instance, as racing_shared_writes."""
    def in_loop(accesses):
        return ((a, b) for a, b in _same_epoch(accesses, False) if a.loops and b.loops and a.loops[0] == b.loops[0])
    found, seen = [], set()
    for a, b, byte, t1, t2 in _races(source, in_loop):
        if (a.buffer, b.buffer) not in seen:
            seen.add((a.buffer, b.buffer))
            loop = next(la for la, lb in zip(a.loops, b.loops) if la == lb)
            found.append(LineFinding(ScanCheck.overwritten_while_read, b.line,
                                     f"{b.buffer} written here by thread {t2} in the same "
                                     f"trip of the loop over {loop[1]} (line {loop[0]}) in which thread {t1} read byte {byte} "
                                     f"of {a.memory} ({a.buffer}, line {a.line}), with no barrier between"))
    return found
