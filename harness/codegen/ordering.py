"""Checks that follow the text's order of writes, waits and barriers through its loops: unwaited_async_loads,
unsynced_tma_stores, reads_after_release, barriers_in_skipped_loops."""
from __future__ import annotations

import re

from harness.codegen.source import _BUFFER, _FOR, LineFinding, shared_tiles
from harness.result import ScanCheck

_WAIT = re.compile(r"(\w+)\[([^\]]+)\]\.wait\(")
# The address of a tile's element: a view of the pool, (&(((half_t*)S1)[, or an array of its own, (&(S4[.
_TILE_AT = r"\(&\((?:\(\(\w+\*\))?(\w+)[)\[]"
_TMA_LOAD = re.compile(r"tl::tma_load\(\w+, (\w+)\[([^\]]+)\], " + _TILE_AT)


def _scopes(source: str):
    """Yield (line number, line, enclosing loops as (start, bound)) with brace-depth tracking."""
    stack = []  # one entry per open brace: (start, bound) if that brace opened a for, else None
    for n, line in enumerate(source.splitlines(), 1):
        loops = [c for c in stack if c is not None]
        yield n, line, loops
        m = _FOR.match(line)
        for ch in line:
            if ch == "{":
                stack.append(m.group(2, 3) if m else None)
                m = None
            elif ch == "}" and stack:
                stack.pop()


def _may_skip(loop: tuple) -> bool:
    """A loop may run zero times unless its start and bound are literals, the bound the larger."""
    start, bound = (x.strip() for x in loop)
    return not (start.isdigit() and bound.isdigit() and int(bound) > int(start))


def _barrier_key(name: str, index: str) -> tuple:
    """A literal slot is one barrier; a computed one (a ring index) stands for its whole array."""
    index = index.strip("() ")
    return (name, index) if index.isdigit() else (name, None)


def _covers(wait_loops, load_loops) -> bool:
    """A wait reaches every load it serves: each loop around it that may run zero times also
    encloses the load (as many times: the same bound)."""
    left = list(load_loops)
    for c in wait_loops:
        if c in left:
            left.remove(c)
        elif _may_skip(c):
            return False
    return True


def unwaited_async_loads(source: str) -> list[LineFinding]:
    offsets = {name: int(off) for name, off in _BUFFER.findall(source)}
    loads, waits = {}, {}
    for n, line, loops in _scopes(source):
        for name, index, dest in _TMA_LOAD.findall(line):
            loads.setdefault((_barrier_key(name, index), dest), (n, loops))
        for name, index in _WAIT.findall(line):
            waits.setdefault(_barrier_key(name, index), []).append(loops)
    findings = []
    for (key, dest), (n, load_loops) in loads.items():
        seen = waits.get(key, []) + (waits.get((key[0], None), []) if key[1] is not None else [])
        if any(_covers(loops, load_loops) for loops in seen):
            continue  # some wait is reached whenever the load is issued
        aliases = sorted(b for b, off in offsets.items() if b != dest and off == offsets.get(dest))
        where = "never waited on" if not seen else "waited on only inside a loop that may run zero times"
        alias = f"; {dest} shares shared memory with {', '.join(aliases)}" if aliases else ""
        slot = key[1] if key[1] is not None else "*"
        findings.append(LineFinding(ScanCheck.unwaited_async_loads, n,
                                    f"TMA load into {dest} on {key[0]}[{slot}] {where}{alias}"))
    return findings


_SYNC = re.compile(r"__syncthreads\(\)|__sync_thread_partial\(|\bbar\.sync\b")
_PROXY_FENCE = re.compile(r"fence_proxy_async|fence\.proxy\.async")
# A reference to a shared tile: a view of the pool, `((half_t*)S1)`, or an array of its own, `S4[` or `(S4 + `.
_SHARED_REF = re.compile(r"\(\(\w+\*\)(\w+)\)|\b(\w+)\[|\((\w+) \+ ")
_STMATRIX = re.compile(r"ptx_stmatrix\w*\(" + _TILE_AT)
_TMA_STORE = re.compile(r"tl::tma_store\(\w+, " + _TILE_AT)


def _refs(text: str) -> set:
    return {a or b or c for a, b, c in _SHARED_REF.findall(text)}


def _thread_writes(line: str) -> set:
    """Buffers the threads themselves write on this line: an stmatrix, or an assignment's target."""
    m = _STMATRIX.search(line)
    lhs, eq, _ = line.partition(" = ")
    return {m.group(1)} if m else _refs(lhs) if eq else set()


def _merge(*pending: dict) -> dict:
    """Tiles pending on any of the paths, each at its latest write."""
    out: dict = {}
    for p in pending:
        for tile, n in p.items():
            out[tile] = max(n, out.get(tile, n))
    return out


def unsynced_tma_stores(source: str) -> list[LineFinding]:
    """A TMA store's one thread reads the tile through the async proxy: the threads' writes to it need a barrier
    before the store (one in another branch of an `if` orders other threads only) and a fence.proxy.async between
    the writes and the store (PTX's proxy rule: without it the copy may read stale shared memory)."""
    shared = shared_tiles(source)
    unsynced: dict[str, int] = {}  # tile -> line of the threads' latest write not yet behind a barrier
    unfenced: dict[str, int] = {}  # ... not yet behind a proxy fence
    # One frame per open brace: (unsynced, unfenced) at its opening, the writes inside it, and for a later branch of an
    # if-else, (unsynced, unfenced) merged over the ends of the earlier branches.
    frames: list = []
    found = []
    for n, line in enumerate(source.splitlines(), 1):
        if line.lstrip().startswith("} else") and frames:
            # Another branch runs on other threads: none of the previous branch's barriers, all of its writes.
            opened, writes, ends = frames.pop()
            ends = (_merge(unsynced, ends[0]), _merge(unfenced, ends[1])) if ends else (unsynced, unfenced)
            opened = (_merge(opened[0], writes), _merge(opened[1], writes))
            unsynced, unfenced = dict(opened[0]), dict(opened[1])
            frames.append((opened, dict(writes), ends))
            continue
        if _SYNC.search(line):
            unsynced.clear()
        if _PROXY_FENCE.search(line):
            unfenced.clear()
        for tile in _thread_writes(line) & shared:
            unsynced[tile] = unfenced[tile] = n
            if frames:
                frames[-1][1][tile] = n
        m = _TMA_STORE.search(line)
        if m and (m.group(1) in unsynced or m.group(1) in unfenced):
            tile = m.group(1)
            missing = ("neither a barrier nor a fence.proxy.async" if tile in unsynced and tile in unfenced
                       else "no barrier" if tile in unsynced else "no fence.proxy.async")
            wrote = max(unsynced.pop(tile, 0), unfenced.pop(tile, 0))
            found.append(LineFinding(ScanCheck.unsynced_tma_stores, n, f"TMA store of {tile} after threads wrote it "
                                     f"(line {wrote}) with {missing} in between"))
        for ch in line:
            if ch == "{":
                frames.append(((dict(unsynced), dict(unfenced)), {}, None))
            elif ch == "}" and frames:
                _, writes, ends = frames.pop()
                if ends:  # an if-else joins: pending on any branch
                    unsynced, unfenced = _merge(unsynced, ends[0]), _merge(unfenced, ends[1])
                if frames:
                    frames[-1][1].update(writes)
    return found


_MBAR_OP = re.compile(r"(\w+)\[(.*)\]\.(wait|arrive)\((.*)\);")
_PHASE = re.compile(r"\b(?:producer|consumer)_phase_cnt\b")
_ASYNC_DST = re.compile(r"(?:cp_async\w*<\d+>\(|tma_load\w*\([^;]*?)" + _TILE_AT)

# A numbered copy of a name (`k_1`, `i_5`, `ki_1`): TileLang numbers a loop variable again in each loop it emits.
_NUMBERED = re.compile(r"\b([A-Za-z]\w*?)_\d+\b")


def _slot(name, index) -> str:
    """A barrier slot as producer and consumer both name it: their phase counters differ, and so do their loop
    variables (the producer's loop over k, the consumer's over k_1)."""
    return name + "[" + _NUMBERED.sub(r"\1", _PHASE.sub("phase", index.replace(" ", ""))) + "]"


def _inside(loops, outer) -> bool:
    """Whether a line in `loops` is still inside the loop iteration that was at `outer`."""
    return loops[:len(outer)] == outer


def reads_after_release(source: str) -> list[LineFinding]:
    shared = shared_tiles(source)
    guarded: dict[str, set] = {}  # slot -> shared buffers written after a wait on it, in the wait's loop
    waited = None  # (slot, loops at the wait)
    for _, line, loops in _scopes(source):
        if waited and not _inside(loops, waited[1]):
            waited = None
        m = _MBAR_OP.search(line)
        if m and m.group(3) == "wait":
            waited = (_slot(m.group(1), m.group(2)), loops) if loops else None
        elif waited:
            written = _thread_writes(line) | set(_ASYNC_DST.findall(line))
            guarded.setdefault(waited[0], set()).update(written & shared)
    found, seen = [], set()
    released = None  # (slot, loops at the release, line): a plain arrive inside a loop, not a priming one
    for n, line, loops in _scopes(source):
        if released and not _inside(loops, released[1]):
            released = None
        m = _MBAR_OP.search(line)
        if m and m.group(3) == "arrive" and not m.group(4) and loops and guarded.get(_slot(m.group(1), m.group(2))):
            released = (_slot(m.group(1), m.group(2)), loops, n)
            continue
        if released and not m:
            lhs, eq, rhs = line.partition(" = ")
            refs = _refs(rhs if eq else line) - set(_ASYNC_DST.findall(line))
            for buf in sorted(refs & guarded[released[0]]):
                if (buf, released[0]) not in seen:
                    seen.add((buf, released[0]))
                    found.append(LineFinding(ScanCheck.reads_after_release, n, f"{buf} read after this iteration released its "
                                             f"stage ({released[0]}.arrive() at line {released[2]}): the producer may "
                                             f"overwrite it meanwhile"))
    return found


def _offset_of(line: str, buf: str) -> str:
    """The offset expression after the buffer's name on `line` (to its ` = ` or `;`, closing parentheses dropped),
    with numbered loop variables (`i_1`, `i_5`: _NUMBERED) as one name: two accesses alike in it touch the same elements."""
    m = re.search(rf"\*\){buf}\)|\b{buf}(?=\[)|\({buf}(?= \+ )", line)  # ((half_t*)S1)[, S4[, (S4 +
    text = re.split(r" = |;", line[m.end():])[0] if m else ""
    return _NUMBERED.sub(r"\1", text).rstrip(") ")


def barriers_in_skipped_loops(source: str) -> list[LineFinding]:
    shared = shared_tiles(source)
    pending = {}  # buffer -> [line of the threads' last write, loops there, its offset, the skippable loop whose barrier]
    found, seen = [], set()
    for n, line, loops in _scopes(source):
        if _SYNC.search(line):
            for buf, w in list(pending.items()):
                common = next((i for i, (a, b) in enumerate(zip(loops, w[1])) if a != b), min(len(loops), len(w[1])))
                skip = next((c for c in loops[common:] if _may_skip(c)), None)  # loops the write is not in
                if skip is None:
                    del pending[buf]  # reached whenever the write was
                elif w[3] is None:
                    w[3] = skip
            continue
        written = _thread_writes(line) & shared
        lhs, eq, rhs = line.partition(" = ")
        for buf in sorted((_refs(rhs if eq else line) & shared) - written):
            w = pending.get(buf)
            if w and w[3] is not None and w[3] not in loops and _offset_of(line, buf) != w[2] and buf not in seen:
                seen.add(buf)
                found.append(LineFinding(ScanCheck.barriers_in_skipped_loops, n, f"{buf} written by the threads at line {w[0]} "
                                         f"and read here, after a loop that may run zero times (for ... < {w[3][1]}); "
                                         "every barrier between them is inside that loop"))
        for buf in written:
            pending[buf] = [n, loops, _offset_of(line, buf), None]
    return found
