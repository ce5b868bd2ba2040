"""Writing programs: a composer that knows no statement kind by name.

Each statement kind (harness.programs.STATEMENT_KINDS) declares how it is drawn: `draw(c, b, at)` adds statements to the
program being written (harness.programs.builder.Builder), and `PLACES` says where it may stand and how often it is
drawn there ("top": the block's own level, "trip": a body run once per trip, "guarded": under a condition). A kind may also
declare `SWARM` (features it draws from, for the swarm configuration), `LAUNCHES` (the thread counts and blocks it
needs), `wrap` (it holds statements drawn before it), `vary` (a change of a drawn statement), `shrink` (its own
smaller forms) and `ends` (how a program that wrote no output ends).

`programs(st)` is the Hypothesis strategy. A program is either an attention chain (harness.programs.templates),
then changed, or a free composition within a swarm configuration (Groce et al., ISSTA 2012): each program first
draws which statement kinds, dtypes, scopes, loop kinds, trip counts and thread counts it may use, a random subset
of each, and then its statements within them, so that one feature's absence lets the others pile up. Every
statement is drawn so that its rules hold where it stands (model.check confirms each program). It is handed
Hypothesis's strategies module, so that the layers below the campaign never import Hypothesis; Hypothesis shrinks
a program by drawing fewer and simpler choices, and `shrink` makes smaller valid programs from a recorded one.
"""
from __future__ import annotations

import dataclasses

from harness.programs import STATEMENT_KINDS, model, templates
from harness.programs.builder import EXACT, PLAIN_THREADS, Builder, Drawn, First
from harness.programs.model import Program, ProgramError
from harness.programs.templates import TEMPLATES

# Features every program's configuration draws a subset of, beside the kinds' own (their SWARM).
SWARM = {"dtype": model.DTYPES, "scope": ("shared", "fragment"), "threads": PLAIN_THREADS}


def swarm() -> dict:
    """Each swarm feature and its values: the statement kinds that draw, then the features."""
    features = {"kinds": tuple(name for name, k in STATEMENT_KINDS.items() if hasattr(k, "draw")), **SWARM}
    for k in STATEMENT_KINDS.values():
        for name, values in getattr(k, "SWARM", {}).items():
            features[name] = tuple(dict.fromkeys(features.get(name, ()) + tuple(values)))
    return features


def configuration(c) -> dict:
    """A random subset of each swarm feature's values (a value is left out on a flip; none left: all of them)."""
    config = {}
    for feature, values in swarm().items():
        kept = tuple(v for v in values if not c.flip())
        config[feature] = kept or values
    return config


def statement(c, b: Builder, at, place) -> None:
    """One statement of a kind the configuration allows at `place`, drawn as often as the kind asks to be there."""
    allowed = b.config.get("kinds")
    options = [k for name, k in STATEMENT_KINDS.items() if hasattr(k, "draw") and (allowed is None or name in allowed)
               for _ in range(getattr(k, "PLACES", {}).get(place, 0))]
    if options:
        c.one(options).draw(c, b, at)


def _launch(c, config) -> tuple:
    """(threads, block): in half the draws one that a kind in the configuration needs (a gemm's warp partition)."""
    launches: dict = {}
    for name in config["kinds"]:
        for threads, blocks in getattr(STATEMENT_KINDS[name], "LAUNCHES", {}).items():
            launches[threads] = tuple(dict.fromkeys(launches.get(threads, ()) + tuple(blocks)))
    if launches and c.flip():
        threads = c.one(sorted(launches))
        return threads, c.one(launches[threads])
    return c.one(config["threads"]), c.one((16, 32, 64))


def write(c) -> Program | None:
    """One program from choices `c`: an attention chain (then changed) in half the draws, a free composition within a
    swarm configuration in the rest; None when the rules refuse what was composed (shared memory over its limit, say)."""
    template = c.one((None,) * len(TEMPLATES) + tuple(TEMPLATES))
    chain = None
    if template:
        threads, block = templates.launch(c, template)
        b = Builder(block, threads, statement=statement)
        TEMPLATES[template](c, b)
        chain = _changed(c, b)
    else:
        config = configuration(c)
        threads, block = _launch(c, config)
        b = Builder(block, threads, config, statement)
        for _ in range(c.between((1, 6))):
            statement(c, b, "bx", "top")
    if chain is None and not b.program().written():
        for k in STATEMENT_KINDS.values():
            if hasattr(k, "ends"):
                k.ends(c, b)
                break
    try:
        return model.check(model.used(chain or b.program()))
    except ProgramError:
        return None


def programs(st):
    """The Hypothesis strategy of programs (`st`: Hypothesis's strategies module)."""
    @st.composite
    def program(draw):
        return write(Drawn(draw, st))
    return program().filter(lambda p: p is not None)


def insert(p: Program, c, at) -> tuple | None:
    """A fresh statement for a mutant of `p` (harness.programs.mutate): drawn with choices `c` where `at` ("bx", or
    "k" in a loop) indexes tiles, as (statements, new buffers); None if nothing was drawn. Every local of `p` counts
    as defined (model.check refuses the mutant where it is not) and as large as its dtype holds exactly, so no value
    the insert computes leaves the exact integers."""
    b = Builder(p.block, p.threads, statement=statement)
    for x in p.buffers:
        b.buffers[x.name] = x
        b.mag[x.name] = EXACT[x.dtype] if x.local else model.INPUT_RANGE
    b.defined = {x.name for x in p.buffers if x.local}
    b.count = max((int(x.name[1:]) for x in p.buffers if x.name[1:].isdigit()), default=0)
    statement(c, b, at, "trip" if at == "k" else "top")
    if not b.body:
        return None
    added = tuple(x for name, x in b.buffers.items() if name not in {y.name for y in p.buffers})
    return tuple(b.body), added


def template(name: str) -> Program:
    """The simplest program of one of TEMPLATES."""
    return write(First(name))


def _changed(c, b: Builder) -> Program | None:
    """The chain with statements dropped, swapped in order, inserted, put under a `when` (in the chain or in its
    loop) or varied (a loop's schedule), each change kept only if the result is still valid (None: unchanged)."""
    p = b.program()
    wrappers = [k for k in STATEMENT_KINDS.values() if hasattr(k, "wrap")]
    for _ in range(c.between((0, 3))):
        body = list(p.body)
        what = c.one(("drop", "swap", "insert", "wrap", "vary"))
        i = c.between((0, len(body) - 1))
        if what == "wrap" and wrappers:
            body = _wrapped(c, c.one(wrappers), body, i)
        elif what == "vary":
            varied = [j for j, s in enumerate(body) if hasattr(model.kind(s), "vary")]
            if varied:
                j = c.one(varied)
                body[j] = model.kind(body[j]).vary(c, p, body[j]) or body[j]
        elif what == "drop":
            del body[i]
        elif what == "swap" and i + 1 < len(body):
            body[i], body[i + 1] = body[i + 1], body[i]
        elif what == "insert":
            before = len(b.body)
            statement(c, b, "bx", "top")
            body[i:i] = b.body[before:]
            p = dataclasses.replace(p, buffers=tuple(b.buffers.values()))
        candidate = dataclasses.replace(p, body=tuple(body))
        try:
            p = model.check(model.used(candidate))
        except ProgramError:
            continue
    return p


def _wrapped(c, wrapper, body: list, i: int, at="bx") -> list:
    """`body` with 1 to 3 statements from its i-th wrapped (a `when`), or, if the i-th has a body at the trip (a loop),
    in its body."""
    if at == "bx" and getattr(model.kind(body[i]), "BODY_AT", None) == "k" and c.flip():
        holder = body[i]
        inner = _wrapped(c, wrapper, list(holder.body), c.between((0, len(holder.body) - 1)), "k")
        return body[:i] + [dataclasses.replace(holder, body=tuple(inner))] + body[i + 1:]
    j = i + c.between((1, 3))
    return body[:i] + [wrapper.wrap(c, body[i:j], at)] + body[j:]


def _needed(body, needed: set) -> tuple:
    """The statements of `body` that what `needed` names depends on, walking back; `needed` grows by their reads.
    A loop's body is walked until nothing more is needed (a later statement may feed an earlier one next trip)."""
    kept = []
    for s in reversed(body):
        if hasattr(s, "body"):
            while True:
                before = set(needed)
                inner = _needed(s.body, needed)
                if needed == before:
                    break
            if inner or set(model.kind(s).writes(s)) & needed:   # a stream writes its tile
                needed |= set(model.kind(s).reads(s))
                kept.append(dataclasses.replace(s, body=inner))
        elif set(model.kind(s).writes(s)) & needed:
            needed |= set(model.kind(s).reads(s)) | set(model.kind(s).writes(s))
            kept.append(s)
    return tuple(reversed(kept))


def _dependents_dropped(p: Program, target) -> tuple:
    """`p`'s body without `target` and every later statement that reads, directly or not, a buffer left undefined:
    one `target` wrote and no statement kept before defines whole."""
    defined, gone = set(), set()

    def locals_written(s):
        return {n for x in model.walk((s,)) for n in model.kind(x).writes(x) if p.buffer(n).local}

    def keep(body):
        out = []
        for s in body:
            if s is target and hasattr(s, "body"):
                gone.update(locals_written(s) - defined)
            elif hasattr(s, "body"):
                inner = keep(s.body)
                if inner or model.kind(s).writes(s):   # a stream still loads its tile
                    out.append(dataclasses.replace(s, body=inner))
            elif s is target or set(model.needs(s)) & gone:
                gone.update(locals_written(s) - defined)
            else:
                out.append(s)
                if model.kind(s).full(s, p):
                    defined.update(locals_written(s))
                    gone.difference_update(locals_written(s))
        return tuple(out)
    return keep(p.body)


def shrink(p: Program) -> list[tuple[str, Program]]:
    """Smaller valid programs, the largest steps first: only what one output depends on (a backward slice),
    a statement dropped with what reads it, a statement dropped alone (a loop's too), a loop or when unwrapped, its trips
    or stages lowered, a copy or atomic loop in its tile form, a gemm or reduce that clears first. The minimizer
    keeps one while the failure stays."""
    out = []
    size = len(list(model.walk(p.body)))
    for name in p.written():
        body = _needed(p.body, {name})
        if len(list(model.walk(body))) < size:
            try:
                out.append((f"only what {name} depends on", model.check(model.used(dataclasses.replace(p, body=body)))))
            except ProgramError:
                pass
    for s in model.walk(p.body):
        body = _dependents_dropped(p, s)
        if len(list(model.walk(body))) < size - 1:
            try:
                out.append((f"drop {s.op} and what reads it", model.check(model.used(dataclasses.replace(p, body=body)))))
            except ProgramError:
                pass

    def bodies(body, path=()):
        for i, s in enumerate(body):
            yield path + (i,), body, i, s
            if hasattr(s, "body"):
                yield from bodies(s.body, path + (i,))

    def rebuilt(body, path, replacement):
        i = path[0]
        if len(path) == 1:
            return tuple(body[:i]) + tuple(replacement) + tuple(body[i + 1:])
        holder = dataclasses.replace(body[i], body=rebuilt(body[i].body, path[1:], replacement))
        return tuple(body[:i]) + (holder,) + tuple(body[i + 1:])

    for path, _, _, s in bodies(p.body):
        where = ".".join(map(str, path))
        options = [(f"drop statement {where} ({s.op})", ())]
        options += getattr(model.kind(s), "shrink", lambda s, where: [])(s, where)
        for step, replacement in options:
            try:
                out.append((step, model.check(model.used(dataclasses.replace(p, body=rebuilt(p.body, path, replacement))))))
            except ProgramError:
                continue
    return out
