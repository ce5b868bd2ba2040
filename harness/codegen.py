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
the late copy overwrites that buffer. A load inside loops is waited on if some wait on its
barrier sits in no loop that the load's own loops do not also run (a producer's ring loop and
its consumer's loop share one bound).

mbarrier_protocol: the barrier handshake, replayed. The kernel body is parsed into its roles
(the branches of a top-level `if` on threadIdx: producer and consumer warps) and their loops,
keeping only barrier operations; each role then runs as a process over concrete trip counts of
the symbolic loops (0, 1, ... past every ring depth), arrivals counting once per thread that
executes them (once per elected group under tl_shuffle_elect). Findings: a barrier waited on or
arrived at but never initialized; a wait that no arrival ever completes (deadlock: e.g. a ring
slot nobody primed); two successive waits of one role on one slot for the same parity
with a phase completed in between (the second returns on a stale phase); a wait on a barrier that TMA loads complete passing
before any phase of it completed (reading a slot before its data landed); more arrivals in one
phase than the barrier was initialized for.

reads_after_release: a pipeline's consumer reads a shared buffer after it released that buffer's
stage in the same loop iteration. A buffer belongs to the stage of a barrier when something writes
it (a store, cp.async or TMA load) after a wait on that barrier (the producer's refill); the
release is a plain `.arrive()` on the same barrier (the producer's and consumer's phase counters
are taken as one). TileLang 0.1.15's `T.Pipelined` masked forward releases K's stage after QK^T,
then reads that stage's mask_s.

unsynced_tma_stores: a TMA store of a shared buffer issued by one elected thread after the block's
threads wrote that buffer, with no barrier (`__syncthreads`, `__sync_thread_partial`) in between:
the bulk copy may read rows other warps have not written yet (TileLang 0.1.12's warp-specialized
O epilogue, reproducer 80929a5b6a72). Straight-line order only: writes and stores in one body.

barriers_in_skipped_loops: a shared buffer the threads write, then read after a loop that may run zero
times, where every barrier between the write and the read lies inside that loop (TileLang 0.1.15's ThreadSync
counts the loop's own barrier as the one the write and the read need, 2c4e73a32b9e): with no trip, the read
races the write. A read at the same offset expression as the write (each thread its own elements) is fine.

unaligned_vectors: a vector load or store of N bytes (`*(uint4*)(Mask + off)`, a cp.async of N
bytes from `&(Mask[off])`) needs its address to be a multiple of N. Named buffers only (a family's
mask and bias, whose rows may start anywhere): the check computes what the offset expression is
provably a multiple of (literal factors and shifts, through sums and products; a symbolic length
proves nothing) and flags an access whose width that does not divide.

racing_shared_writes: two statements write one shared-memory address from threads of different warps with no
barrier (nor mbarrier wait, named barrier or cp.async wait) between them in the text: which value stays depends on
timing. Shown, not guessed: the offsets, vector widths and enclosing conditions are evaluated for every thread on one
instance (the first trip of the loops around both, every trip of the other loops up to 64, one length and block
index), buffers that share bytes of buf_dyn_shmem compared by address; an access the instance cannot evaluate (a
data-dependent index or guard, a warp's ldmatrix/stmatrix, a descriptor, an atomic) is not judged.

overwritten_while_read: inside a loop, threads read a shared address and, later in the same trip with nothing that
orders threads between, threads of another warp write it: a pipelined loop loading the next tile into a buffer this
stage still reads. Shown on one instance as racing_shared_writes.

overwritten_before_read: a shared tile loaded by TMA, then loaded again (the same buffer and element offset) before
any thread waited on the first load's barrier. The barrier replay of mbarrier_protocol runs the block's own code
first, then each role ahead of the others as far as its waits let it: TileLang 0.1.15's warp-specialized pipeline of a
loop that reads a tile and then loads the next one into it (the tile loaded before the loop) has its producer's first
wait on an empty slot pass at once, so the loop's first load lands on the tile loaded before the loop, unread; with
num_stages 2 or 3 every slot of the ring loads into the same buffer.

short_register_arrays: a fragment's register array (its name at the kernel's top level) with fewer elements than
the fragment's elements (the caller's `fragments`) over the block's threads as launched, rounded up. Every element
lies in some thread's registers and every thread's array has one size, so a shorter array has lost elements.
"""
from __future__ import annotations

import itertools
import math
import re
from dataclasses import dataclass

from harness import cuda_features

_FOR = re.compile(r"^\s*for \(int (\w+) = (.+?); \1 < (.+); \+\+\1\)")
_WAIT = re.compile(r"(\w+)\[([^\]]+)\]\.wait\(")
_TMA_LOAD = re.compile(r"tl::tma_load\(\w+, (\w+)\[([^\]]+)\], \(&\(\(\(\w+\*\)(\w+)\)")
_BUFFER = re.compile(r"void\* (\w+) = \(\(void\*\)\(\(char\*\)buf_dyn_shmem \+ (\d+)\)\)")


@dataclass
class Finding:
    check: str
    line: int
    message: str


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


def unwaited_async_loads(source: str) -> list[Finding]:
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
        findings.append(Finding("unwaited_async_loads", n, f"TMA load into {dest} on {key[0]}[{slot}] {where}{alias}"))
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


def _replay(roles, inits, trips) -> list[Finding]:
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
                    return [Finding("mbarrier_protocol", line, f"{name}[{slot}] is used but never initialized")]
                if kind == "wait":
                    if phases[key] % 2 == value:  # the phase of that parity has not completed
                        break
                    if waited.get((role, key)) == (value, phases[key]):  # the same phase again: stale if more come
                        stale.append((key, phases[key], Finding(
                            "mbarrier_protocol", line, f"{role}: successive waits on {name}[{slot}] for parity "
                            f"{value} return on the same phase, though the barrier completes later ones")))
                    if phases[key] == 0 and key in loaded:
                        return [Finding("mbarrier_protocol", line, f"{role}: wait on {name}[{slot}] (parity {value}) "
                                        "returns before any phase completed: its TMA data has not landed")]
                    waited[(role, key)] = (value, phases[key])
                elif kind != "load":
                    pending[key] -= value
                    if pending[key] < 0:
                        return [Finding("mbarrier_protocol", line, f"{name}[{slot}]: more arrivals in one phase than "
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
    return [Finding("mbarrier_protocol", line, f"deadlock at trip count {trips}: {role} waits on {name}[{slot}] "
                    f"for parity {parity}, which no arrival completes{also}")]


def mbarrier_protocol(source: str) -> list[Finding]:
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


def named_barrier_counts(source: str) -> list[Finding]:
    """A named barrier whose thread count differs from the threads of the role that runs it.
    Syncs under a further test on threadIdx (a subgroup's own barrier) are not judged."""
    findings = []

    def visit(nodes, role, count):
        for node in nodes:
            if node[0] == "op" and int(node[3]) != count:
                findings.append(Finding("named_barrier_counts", node[5], f"bar.sync {node[2]} counts {node[3]} "
                                        f"threads but {role} ({count} threads) run it: a deadlock"))
            elif node[0] == "for":
                visit(node[4], role, count)
            elif node[0] == "if" and "threadIdx" not in node[1]:
                visit(node[2], role, count)
                visit(node[3], role, count)

    for role, count, nodes in _roles_with(source, _NAMED_BARRIER):
        visit(nodes, role, count)
    return findings


_SETMAXNREG = (("setmaxnreg", re.compile(r"tl::warpgroup_reg_(alloc|dealloc)<(\d+)>\(\)()")),)
REGISTERS_PER_SM = 65536  # sm_90: setmaxnreg.inc waits until the SM's register file can grant it


def register_budget(source: str) -> list[Finding]:
    """Warp-specialized roles whose setmaxnreg targets, times their threads, exceed the register
    file: the increase can never be granted and its warps wait forever (a one-block-per-SM kernel)."""
    asked, line = [], 0
    for role, count, nodes in _roles_with(source, _SETMAXNREG):
        regs = [n for n in nodes if n[0] == "op"]
        if regs:
            asked.append((role, count, int(regs[0][3])))
            line = max(line, regs[0][5])
    total = sum(count * regs for _, count, regs in asked)
    if total <= REGISTERS_PER_SM:
        return []
    parts = " + ".join(f"{count} x {regs} ({role})" for role, count, regs in asked)
    return [Finding("register_budget", line, f"setmaxnreg asks {parts} = {total} registers, more than the "
                    f"{REGISTERS_PER_SM} of an SM: a deadlock")]


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


_SYNC = re.compile(r"__syncthreads\(\)|__sync_thread_partial\(|\bbar\.sync\b")
_SHARED_REF = re.compile(r"\(\(\w+\*\)(\w+)\)")
_STMATRIX = re.compile(r"ptx_stmatrix\w*\(\(&\(\(\(\w+\*\)(\w+)\)")
_TMA_STORE = re.compile(r"tl::tma_store\(\w+, \(&\(\(\(\w+\*\)(\w+)\)")


def _shared(source: str) -> set:
    return {m.group(1) for m in _BUFFER.finditer(source)}


def _thread_writes(line: str) -> set:
    """Buffers the threads themselves write on this line: an stmatrix, or an assignment's target."""
    m = _STMATRIX.search(line)
    lhs, eq, _ = line.partition(" = ")
    return {m.group(1)} if m else set(_SHARED_REF.findall(lhs)) if eq else set()


def unsynced_tma_stores(source: str) -> list[Finding]:
    shared = _shared(source)
    written: dict[str, int] = {}  # shared buffer -> line of its latest write since the last barrier
    found = []
    for n, line in enumerate(source.splitlines(), 1):
        if _SYNC.search(line):
            written.clear()
        written.update((name, n) for name in _thread_writes(line) & shared)
        m = _TMA_STORE.search(line)
        if m and m.group(1) in written:
            found.append(Finding("unsynced_tma_stores", n, f"TMA store of {m.group(1)} after threads wrote it "
                                 f"(line {written.pop(m.group(1))}) with no barrier in between"))
    return found


_MBAR_OP = re.compile(r"(\w+)\[(.*)\]\.(wait|arrive)\((.*)\);")
_PHASE = re.compile(r"\b(?:producer|consumer)_phase_cnt\b")
_ASYNC_DST = re.compile(r"(?:cp_async\w*<\d+>\(|tma_load\w*\([^;]*?)\(&\(\(\(\w+\*\)(\w+)\)")


# A numbered copy of a name (`k_1`, `i_5`, `ki_1`): TileLang numbers a loop variable again in each loop it emits.
_NUMBERED = re.compile(r"\b([A-Za-z]\w*?)_\d+\b")


def _slot(name, index) -> str:
    """A barrier slot as producer and consumer both name it: their phase counters differ, and so do their loop
    variables (the producer's loop over k, the consumer's over k_1)."""
    return name + "[" + _NUMBERED.sub(r"\1", _PHASE.sub("phase", index.replace(" ", ""))) + "]"


def _inside(loops, outer) -> bool:
    """Whether a line in `loops` is still inside the loop iteration that was at `outer`."""
    return loops[:len(outer)] == outer


def reads_after_release(source: str) -> list[Finding]:
    shared = _shared(source)
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
            refs = set(_SHARED_REF.findall(rhs if eq else line)) - set(_ASYNC_DST.findall(line))
            for buf in sorted(refs & guarded[released[0]]):
                if (buf, released[0]) not in seen:
                    seen.add((buf, released[0]))
                    found.append(Finding("reads_after_release", n, f"{buf} read after this iteration released its "
                                         f"stage ({released[0]}.arrive() at line {released[2]}): the producer may "
                                         f"overwrite it meanwhile"))
    return found


def _offset_of(line: str, buf: str) -> str:
    """The offset expression after the buffer's name on `line` (to its ` = ` or `;`, closing parentheses dropped),
    with numbered loop variables (`i_1`, `i_5`: _NUMBERED) as one name: two accesses alike in it touch the same elements."""
    i = line.find(f"*){buf})")
    text = re.split(r" = |;", line[i + len(buf) + 2:])[0] if i >= 0 else ""
    return _NUMBERED.sub(r"\1", text).rstrip(") ")


def barriers_in_skipped_loops(source: str) -> list[Finding]:
    shared = _shared(source)
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
        for buf in sorted((set(_SHARED_REF.findall(rhs if eq else line)) & shared) - written):
            w = pending.get(buf)
            if w and w[3] is not None and w[3] not in loops and _offset_of(line, buf) != w[2] and buf not in seen:
                seen.add(buf)
                found.append(Finding("barriers_in_skipped_loops", n, f"{buf} written by the threads at line {w[0]} "
                                     f"and read here, after a loop that may run zero times (for ... < {w[3][1]}); "
                                     "every barrier between them is inside that loop"))
        for buf in written:
            pending[buf] = [n, loops, _offset_of(line, buf), None]
    return found


_LOCAL_ARRAY = re.compile(r"^  (?:float|half_t|bfloat16_t|double|int) (\w+)\[\d+\];$")  # at the kernel's top level
_NAME = re.compile(r"[A-Za-z_]\w*")
_SPLIT = re.compile(r"^  if \((.+)\) \{$")
# What an assignment writes: `((float2*)(&x))[0] = `, `*(float4*)(x + i) = `, `uint2 x = `, `x[0] = `.
_TARGET = (re.compile(r"\(&\(?(\w+)\)?\)"), re.compile(r"^\*\([^)]*\*\)\((\w+)"), re.compile(r"(\w+)(?:\[[^\]]*\])*$"))


def _target(lhs: str) -> str | None:
    lhs = lhs.strip()
    m = next((m for m in (p.search(lhs) for p in _TARGET) if m), None)
    return m.group(1) if m else None


def registers_across_roles(source: str) -> list[Finding]:
    """A register array (a fragment) filled with data the block's threads loaded, before the kernel splits into
    warp-specialized roles, then read inside one role: the role's threads are fewer than those that hold the data,
    so each reads its own share of a layout meant for all (12eba470b947: half the tile is never stored, or stored
    at another thread's place). Data: a value that depends on threadIdx, through any chain of assignments; a
    constant fill is the same in every thread and is fine."""
    lines = source.splitlines()
    split = next((n for n, line in enumerate(lines) if (m := _SPLIT.match(line)) and _ROLE.match(m.group(1))), None)
    if split is None:
        return []
    arrays = {m.group(1) for line in lines[:split] if (m := _LOCAL_ARRAY.match(line))}
    loaded = {"threadIdx"}  # names whose value differs from thread to thread, in program order
    for line in lines[:split]:
        lhs, eq, rhs = line.partition(" = ")
        if eq and set(_NAME.findall(rhs)) & loaded and (target := _target(lhs)):
            loaded.add(target)
    found, seen, depth = [], set(), 0
    for n, line in enumerate(lines[split:], split + 1):
        _, eq, rhs = line.partition(" = ")
        for name in sorted((set(_NAME.findall(rhs if eq else line)) & arrays & loaded) - seen):
            seen.add(name)
            found.append(Finding("registers_across_roles", n, f"{name} holds data every thread loaded before the "
                                 f"warp-specialized split (line {split + 1}: `{lines[split].strip()}`) and is read here, "
                                 "inside one role, whose threads are fewer than those that hold it"))
        depth += line.count("{") - line.count("}")
        if depth == 0:  # the end of the split's if/else: every thread again
            break
    return found


# ------------------------------------------------------------------ races on shared memory, shown on one instance
# Where each shared buffer lives: (the memory it is carved from, its byte offset there). Views of buf_dyn_shmem at
# one offset are one memory: TileLang gives a buffer's bytes to another once the first is dead.
_EXTERN = re.compile(r"extern __shared__ __align__\(\d+\) (\w+) (\w+)\[\];")
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
    """buffer -> (memory, byte offset, element type or None)."""
    out = {name: ("buf_dyn_shmem", int(off), None) for name, off in _BUFFER.findall(source)}
    out.update((name, (name, 0, t)) for t, name in _EXTERN.findall(source) if t != "uchar")
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


def racing_shared_writes(source: str) -> list[Finding]:
    """Two statements writing one shared address from threads of different warps, with nothing that orders threads
    between them: which value stays depends on timing. Shown on one instance (the first trip of the loops around
    both, every trip of the others, one length and block index); accesses it cannot evaluate are not judged."""
    found, seen = [], set()
    for a, b, byte, t1, t2 in _races(source, lambda acc: _same_epoch(acc, True)):
        if (a.buffer, b.buffer) not in seen:
            seen.add((a.buffer, b.buffer))
            found.append(Finding("racing_shared_writes", b.line, f"{b.buffer} written here and {a.buffer} at line "
                                 f"{a.line}, with no barrier between: byte {byte} of {a.memory} by threads {t1} and {t2}"))
    return found


def overwritten_while_read(source: str) -> list[Finding]:
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
            found.append(Finding("overwritten_while_read", b.line, f"{b.buffer} written here by thread {t2} in the same "
                                 f"trip of the loop over {loop[1]} (line {loop[0]}) in which thread {t1} read byte {byte} "
                                 f"of {a.memory} ({a.buffer}, line {a.line}), with no barrier between"))
    return found


# A TMA load as an operation on the barrier it completes, its argument the destination's element offset.
_FILL = ("fill", re.compile(r"tl::tma_load\(\w+, (\w+)\[([^\]]+)\], \(&\((?:\(\(\w+\*\)\w+\)|\w+)\[(.*?)\]\)\)"))
_FILL_INTO = re.compile(r"tl::tma_load\(\w+, \w+\[[^\]]+\], \(&\((?:\(\(\w+\*\)(\w+)\)|(\w+))\[")


def _fills(roles, inits, trips, dests) -> Finding | None:
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
                        return Finding("overwritten_before_read", line, f"TMA load into {tile[0]} (element {value}) "
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


def overwritten_before_read(source: str) -> list[Finding]:
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


def short_register_arrays(source: str, fragments: dict[str, int]) -> list[Finding]:
    """A fragment's register array smaller than the elements each thread of the block must hold of it (`fragments`:
    name -> elements; cuda_features.per_thread): the layout has lost elements."""
    wanted = cuda_features.per_thread(source, fragments)
    return [Finding("short_register_arrays", 0, f"register array {name}[{size}] holds fewer than the {wanted[name]} "
                    f"elements per thread of fragment {name} ({fragments[name]} over the block's threads)")
            for name, size in cuda_features.register_arrays(source).items() if size < wanted.get(name, 0)]


def check(source: str, contiguous: dict[str, int] | None = None, aligned=(), fragments=None) -> list[Finding]:
    """Every check on one kernel's source; `fragments`: fragment name -> its elements."""
    return (unwaited_async_loads(source) + mbarrier_protocol(source) + vectorized_atomics(source, contiguous or {})
            + atomics_on_locals(source) + unaligned_vectors(source, aligned) + unsynced_tma_stores(source)
            + reads_after_release(source) + named_barrier_counts(source) + register_budget(source)
            + barriers_in_skipped_loops(source) + registers_across_roles(source) + racing_shared_writes(source)
            + overwritten_while_read(source) + overwritten_before_read(source) + short_register_arrays(source, fragments or {}))
