"""The barrier handshake replayed: the kernel body as a tree of barrier operations, split into its warp roles,
each run as a process over concrete trip counts (mbarrier_protocol, named_barrier_counts,
overwritten_before_read)."""
from __future__ import annotations

import itertools
import re

from harness.codegen.source import _FOR, LineFinding, _eval
from harness.result import ScanCheck

_INIT = re.compile(r"(\w+)\[(\d+)\]\.init\((\d+)\);")

# (kind, pattern with the barrier's name, its index and, for a wait, the parity): the forms 0.1.15 emits.
# A cp.async arrive without .noinc adds to the count what it later takes back: no arrival.
_OPS = (("wait", re.compile(r"(\w+)\[([^\]]+)\]\.wait\((.*?)\);")),
        ("arrive", re.compile(r"(\w+)\[([^\]]+)\]\.(?:arrive|arrive_and_expect_tx)\(()")),
        ("arrive", re.compile(r"tl::mbarrier_cp_async_arrive_noinc\((\w+)\[([^\]]+)\]()\)")),
        ("load", re.compile(r"tl::tma_load\(\w+, (\w+)\[([^\]]+)\]()")))
_IF = re.compile(r"^\s*(?:\} else )?if \((.*)\) \{\s*$")
_LAUNCH = re.compile(r"__launch_bounds__\((\d+)")
_ROLE = re.compile(r"^\(?(\d+) <= \(\(int\)threadIdx\.x\)\)?$|^\(?\(\(int\)threadIdx\.x\) < (\d+)\)?$")
_ELECT = re.compile(r"tl_shuffle_elect<(\d+)>")
TRIPS = (0, 1, 2, 3, 4, 5, 9)  # symbolic trip counts replayed: empty, one, and past every ring depth <= 4


def _tree(source: str, ops=_OPS) -> list:
    """The kernel body as nested nodes, barrier operations only:
    ("for", var, start, bound, body), ("if", condition, then, else), ("op", kind, name, index, arg, line)
    with kind wait, arrive or load (a TMA load completing on that barrier), or the kinds of `ops`."""
    root: list = []
    stack = [root]
    for n, line in enumerate(source.splitlines(), 1):
        text = line.strip()
        m = _FOR.match(line)
        if m:
            node = ("for", m.group(1), m.group(2), m.group(3), [])
            stack[-1].append(node)
            stack.append(node[4])
            continue
        m = _IF.match(line)
        if m:
            node = ("if", m.group(1), [], [])
            if text.startswith("}"):  # `} else if (...) {`: an if inside the else branch
                stack.pop()
                stack[-1][-1][3].append(node)
            else:
                stack[-1].append(node)
            stack.append(node[2])
            continue
        if text == "} else {":
            stack.pop()
            stack.append(stack[-1][-1][3])
            continue
        found = sorted((m.start(), kind, m.groups()) for kind, pattern in ops for m in pattern.finditer(line))
        for _, kind, (name, index, arg) in found:
            stack[-1].append(("op", kind, name, index, arg, n))
        opened, closed = text.count("{"), text.count("}")
        for _ in range(opened - closed):
            stack.append(stack[-1])  # a plain scope: same statement list
        for _ in range(closed - opened):
            if len(stack) > 1:
                stack.pop()
    return root


def _has_ops(nodes) -> bool:
    return any(n[0] == "op" or (n[0] == "for" and _has_ops(n[4])) or (n[0] == "if" and (_has_ops(n[2]) or _has_ops(n[3])))
               for n in nodes)


def _roles(body: list, threads: int) -> list:
    """[(name, thread count, nodes)]: the branches of the first top-level `if` on threadIdx with
    barrier operations, and what the whole block runs around it; else the body as one role."""
    for i, node in enumerate(body):
        if node[0] == "if" and (_has_ops(node[2]) or _has_ops(node[3])):
            m = _ROLE.match(node[1])
            if m:
                low = int(m.group(1) or m.group(2))
                upper = m.group(1) is not None  # the `then` branch holds threads low..threads-1
                high, rest = f">= {low}", f"< {low}"
                then, other = (node[2], node[3]) if upper else (node[3], node[2])
                around = body[:i] + body[i + 1:]
                return ([("all threads", threads, around)] if _has_ops(around) else []) + [
                    (f"threads {high}", threads - low, then), (f"threads {rest}", low, other)]
    return [("all threads", threads, body)]


class _Unknown(Exception):
    """An expression the replay cannot evaluate: the kernel is not judged."""


def _run(nodes, env, threads, elect, trips):
    """Yield (kind, name, slot, parity or arrivals, line) in program order."""
    for node in nodes:
        if node[0] == "for":
            _, var, start, bound, body = node
            literal = start.strip().isdigit() and bound.strip().isdigit()
            count = int(bound) - int(start) if literal else trips
            try:
                first = _eval(start, env, fixed=True)
            except Exception as e:
                raise _Unknown(start) from e
            for i in range(first, first + count):
                yield from _run(body, {**env, var: i}, threads, elect, trips)
        elif node[0] == "if":
            _, cond, then, other = node
            m = _ELECT.search(cond)
            if m:  # one elected thread per group of that many (0: per block)
                group = int(m.group(1))
                yield from _run(then, env, threads, max(1, threads // group) if group else 1, trips)
                continue
            if "threadIdx" in cond:
                yield from _run(then, env, threads, 1, trips)  # some threads: at least one
                continue
            try:
                taken = bool(_eval(cond, env))
            except Exception:
                taken = True  # a data-dependent guard: assume the barrier operation runs
            yield from _run(then if taken else other, env, threads, elect, trips)
        else:
            _, kind, name, index, arg, line = node
            try:
                slot = _eval(index, env, fixed=True)
                value = _eval(arg, env, fixed=True) if kind in ("wait", "fill") else (elect or threads)
            except Exception as e:
                raise _Unknown(f"{name}[{index}]") from e
            yield kind, name, slot, value, line


def _replay(roles, inits, trips) -> list[LineFinding]:
    """Run the roles as processes against the barriers, each as far as it can before the next
    (the first role runs ahead, the last lags); findings of this trip count and schedule."""
    procs = [(name, _run(nodes, {}, count, None, trips)) for name, count, nodes in roles]
    # Barriers that TMA loads complete: a wait there that passes at once reads a slot not yet filled.
    loaded = {(op[1], op[2]) for name, count, nodes in roles for op in _run(nodes, {}, count, None, trips)
              if op[0] == "load"}
    phases = {key: 0 for key in inits}                # completed phases
    pending = dict(inits)                             # arrivals still missing in the current phase
    waited: dict = {}                                 # (role, barrier) -> (parity, phases) of its last wait
    stale: list = []                                  # (barrier, phases, finding) of repeated waits
    current = [next(gen, None) for _, gen in procs]
    while any(op is not None for op in current):
        progressed = False
        for i, op in enumerate(current):
            while op is not None:
                kind, name, slot, value, line = op
                key, role = (name, slot), procs[i][0]
                if key not in inits:
                    return [LineFinding(ScanCheck.mbarrier_protocol, line, f"{name}[{slot}] is used but never initialized")]
                if kind == "wait":
                    if phases[key] % 2 == value:  # the phase of that parity has not completed
                        break
                    if waited.get((role, key)) == (value, phases[key]):  # the same phase again: stale if more come
                        stale.append((key, phases[key], LineFinding(
                            ScanCheck.mbarrier_protocol, line, f"{role}: successive waits on {name}[{slot}] for parity "
                            f"{value} return on the same phase, though the barrier completes later ones")))
                    if phases[key] == 0 and key in loaded:
                        return [LineFinding(ScanCheck.mbarrier_protocol, line, f"{role}: wait on {name}[{slot}] (parity {value}) "
                                            "returns before any phase completed: its TMA data has not landed")]
                    waited[(role, key)] = (value, phases[key])
                elif kind != "load":
                    pending[key] -= value
                    if pending[key] < 0:
                        return [LineFinding(ScanCheck.mbarrier_protocol, line, f"{name}[{slot}]: more arrivals in one phase than "
                                            f"its count {inits[key]}")]
                    if pending[key] == 0:
                        phases[key] += 1
                        pending[key] = inits[key]
                progressed = True
                op = current[i] = next(procs[i][1], None)
        if not progressed:
            break
    deadlocked = any(op is not None for op in current)
    # A repeated wait is stale where the barrier goes on to a later phase, or the replay stalls after it.
    confirmed = [f for key, seen, f in stale if phases[key] > seen or deadlocked]
    if confirmed or not deadlocked:
        return confirmed[:1]
    blocked = [(procs[i][0], op) for i, op in enumerate(current) if op is not None]
    role, (_, name, slot, parity, line) = blocked[0]
    others = "; ".join(f"{r} at {n}[{s}] line {ln}" for r, (_, n, s, _, ln) in blocked[1:])
    also = f" (also blocked: {others})" if others else ""
    return [LineFinding(ScanCheck.mbarrier_protocol, line, f"deadlock at trip count {trips}: {role} waits on {name}[{slot}] "
                        f"for parity {parity}, which no arrival completes{also}")]


def mbarrier_protocol(source: str) -> list[LineFinding]:
    inits = {(name, int(slot)): int(count) for name, slot, count in _INIT.findall(source)}
    body = _tree(source)
    if not _has_ops(body):
        return []
    m = _LAUNCH.search(source)
    roles = _roles(body, int(m.group(1)) if m else 1)
    for trips in TRIPS:
        for order in (roles, roles[::-1]):  # each role once ahead of the others
            try:
                found = _replay(order, inits, trips)
            except _Unknown:
                return []  # an index or parity the replay cannot compute: no verdict
            if found:
                return found
    return []


def _roles_with(source: str, ops) -> list:
    """_roles of the kernel's tree of `ops`; none without __launch_bounds__ (the block size)."""
    m = _LAUNCH.search(source)
    return _roles(_tree(source, ops), int(m.group(1))) if m else []


# A named barrier (bar.sync id, count) releases once `count` threads arrived. Run by a role of another
# size, its arrivals split into instances that never fill up: the last one waits forever.
_NAMED_BARRIER = (("sync", re.compile(r"tl::__sync_thread_partial\((\d+), (\d+)\)()")),)


def named_barrier_counts(source: str) -> list[LineFinding]:
    """A named barrier whose thread count differs from the threads of the role that runs it.
    Syncs under a further test on threadIdx (a subgroup's own barrier) are not judged."""
    findings = []

    def visit(nodes, role, count):
        for node in nodes:
            if node[0] == "op" and int(node[3]) != count:
                findings.append(LineFinding(ScanCheck.named_barrier_counts, node[5], f"bar.sync {node[2]} counts {node[3]} "
                                            f"threads but {role} ({count} threads) run it: a deadlock"))
            elif node[0] == "for":
                visit(node[4], role, count)
            elif node[0] == "if" and "threadIdx" not in node[1]:
                visit(node[2], role, count)
                visit(node[3], role, count)

    for role, count, nodes in _roles_with(source, _NAMED_BARRIER):
        visit(nodes, role, count)
    return findings


# A TMA load as an operation on the barrier it completes, its argument the destination's element offset.
_FILL = ("fill", re.compile(r"tl::tma_load\(\w+, (\w+)\[([^\]]+)\], \(&\((?:\(\(\w+\*\)\w+\)|\w+)\[(.*?)\]\)\)"))
_FILL_INTO = re.compile(r"tl::tma_load\(\w+, \w+\[[^\]]+\], \(&\((?:\(\(\w+\*\)(\w+)\)|(\w+))\[")


def _fills(roles, inits, trips, dests) -> LineFinding | None:
    """Replay the roles in program order (the block's own code, then each role as far as its barriers let it run
    ahead): a TMA load into a tile that an earlier load filled, issued before any thread waited for that earlier
    load's barrier, overwrites data nobody has read."""
    procs = [_run(nodes, {}, count, None, trips) for _, count, nodes in roles]
    phases, pending = {key: 0 for key in inits}, dict(inits)
    unread: dict = {}  # (buffer, offset) -> (barrier, line) of the load whose data no wait has reached yet
    current = [next(gen, None) for gen in procs]
    while any(op is not None for op in current):
        progressed = False
        for i, op in enumerate(current):
            while op is not None:
                kind, name, slot, value, line = op
                key = (name, slot)
                if key not in inits:
                    return None  # mbarrier_protocol reports it
                if kind == "wait":
                    if phases[key] % 2 == value:
                        break
                    unread = {tile: load for tile, load in unread.items() if load[0] != key}
                elif kind == "fill":
                    tile = (dests[line], value)
                    if tile in unread:
                        return LineFinding(ScanCheck.overwritten_before_read, line, f"TMA load into {tile[0]} (element {value}) "
                                           f"on {name}[{slot}] while the load at line {unread[tile][1]} into it (on "
                                           f"{unread[tile][0][0]}[{unread[tile][0][1]}]) is still waited for by no thread: "
                                           "its data is overwritten before anyone reads it")
                    unread[tile] = (key, line)
                elif kind == "arrive":
                    pending[key] -= value
                    if pending[key] <= 0:
                        phases[key] += 1
                        pending[key] = inits[key]
                progressed = True
                op = current[i] = next(procs[i], None)
        if not progressed:
            return None
    return None


def overwritten_before_read(source: str) -> list[LineFinding]:
    """A shared tile loaded by TMA, then loaded again before any thread waited for the first load: a pipelined loop
    whose producer refills, in its first trip (its wait on an empty slot passing at once), a buffer that the code
    before the loop filled for the loop to read."""
    dests = {n: a or b for n, line in enumerate(source.splitlines(), 1) for a, b in _FILL_INTO.findall(line)}
    if len(dests) < 2:
        return []
    inits = {(name, int(slot)): int(count) for name, slot, count in _INIT.findall(source)}
    roles = _roles_with(source, _OPS[:3] + (_FILL,))
    first = roles[:1] if roles and roles[0][0] == "all threads" else []  # the block's own code comes first
    for trips in TRIPS[1:4]:
        for rest in itertools.permutations(roles[len(first):]):  # each role once running ahead of the others
            try:
                found = _fills(first + list(rest), inits, trips, dests)
            except _Unknown:
                return []
            if found:
                return [found]
    return []
