"""Where in the compiler a bug comes from. For a compile error: the pass that raised, and the earlier
pass whose output first holds what it rejects. For a kernel that compiles into a generated-code hazard
(harness.codegen; e.g. 54d466153e16's unwaited TMA load): the first pass whose output holds the
construct behind it (HAZARD_IR).

The failing compile runs once with a TVM PassInstrument that keeps the module after every pass (TVM
modules are immutable: keeping them is cheap; their text is made only when searched; the hook is
harness.compat.observing_passes). The pass that
was entered and never left raised. The lines of its input that mention what the error names (buffer
and variable names, layouts) are the evidence; the first pass whose output contains such a line is
where that construct appeared. `trace` is the only part that needs TileLang; the rest reads traces.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from harness import result as result_mod

CONTEXT = 3    # lines of IR shown around each matching line
EXCERPT = 40   # at most this many lines of IR excerpt


@dataclass
class Trace:
    """The passes a compile ran, in order, with the module after each (`after`), and the one it was
    inside when it raised (`raised_in`, with the module it was given)."""
    passes: list[str] = field(default_factory=list)
    after: list = field(default_factory=list)
    raised_in: str | None = None
    given: object = None
    error: str = ""
    result: object = None  # what the build returned, when it compiled


@dataclass(frozen=True)
class ErrorOrigin:
    """Where a compile error comes from: the pass that raised it (after `passes_before` passes ran), the line of its
    input that the error names (`evidence`), the first pass whose output held that line, and the lines around it."""
    raised_in: str
    passes_before: int
    introduced_by: str | None     # the first pass whose output holds the evidence line
    evidence: str | None
    excerpt: list[str]


# What an error message points at: identifiers with an underscore, digit or dot (buffers, variables,
# passes), and numbers of two digits or more (extents, thread counts).
_TOKENS = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*[_0-9.][A-Za-z0-9_.]*|\b\d{2,}\b")
MOST_LINES = 6  # a clue that many lines mention singles nothing out

# Generated-code hazards whose construct has a shape in the IR, so the pass that made it can be named:
# check name -> (the construct's pattern in TVMScript, what it is).
HAZARD_IR = {
    result_mod.ScanCheck.unwaited_async_loads: (re.compile(r"if \w+ == 0:\n\s*T\.mbarrier_wait_parity\("),
                                                "a barrier wait made only in a loop's first iteration: a loop that "
                                                "runs zero times never waits for that load"),
}


@dataclass(frozen=True)
class Made:
    hazard: result_mod.ScanFinding  # what the check found (harness.codegen, through harness.worker.scan)
    made_by: str | None       # the first pass whose output holds the construct; None: no pass's output does
    construct: str
    excerpt: list[str]


def hazards_made(trace: Trace, hazards, script: Callable[[object], str]) -> list[Made]:
    """For each hazard (a ScanFinding) whose check has a known IR shape, the first pass whose output holds it."""
    out, texts = [], {}

    def text(t: Trace, i: int) -> str:
        return texts.setdefault(i, script(t.after[i]))

    for hazard in hazards:
        shape = HAZARD_IR.get(hazard.check)
        if shape is None:
            continue
        pattern, what = shape
        found = first_holding(trace, _pattern_holder(pattern), text)
        out.append(Made(hazard, trace.passes[found[0]], what, excerpt(text(trace, found[0]), [found[1], found[1] + 1]))
                   if found else Made(hazard, None, what, []))
    return out


def clues(error: str) -> list[str]:
    """The tokens of an error message the IR may show, in the order they appear, without duplicates."""
    tokens = (t.strip(".") for t in _TOKENS.findall(error))
    return list(dict.fromkeys(t for t in tokens if t.isdigit() or any(c in t for c in "_.0123456789")))


def evidence_lines(text: str, names: list[str]) -> list[int]:
    """The lines of `text` that mention the most specific of `names`: the one on the fewest lines
    (at least one, at most MOST_LINES); none when no clue singles out a few lines."""
    lines, best = text.splitlines(), []
    for name in names:
        pattern = re.compile(r"(?<![A-Za-z0-9_.])" + re.escape(name) + r"(?![A-Za-z0-9_])")
        hits = [i for i, line in enumerate(lines) if pattern.search(line)]
        if hits and len(hits) <= MOST_LINES and (not best or len(hits) < len(best)):
            best = hits
    return best


def excerpt(text: str, lines: list[int]) -> list[str]:
    """The matching lines with CONTEXT lines around each, numbered, at most EXCERPT lines."""
    all_lines, keep = text.splitlines(), set()
    for i in lines:
        keep.update(range(max(0, i - CONTEXT), min(len(all_lines), i + CONTEXT + 1)))
    return [f"{i + 1:5d}  {all_lines[i]}" for i in sorted(keep)][:EXCERPT]


def introduced_by(passes: list[str], texts: Callable[[int], str], line: str) -> str | None:
    """The first pass whose output contains `line` (stripped), or None when even the first one's
    does: then it came from the program as written."""
    holds = _line_holder(line)
    for i, name in enumerate(passes):
        if holds(texts(i)) is not None:
            return name if i > 0 else None
    return None


def find(trace: Trace, script: Callable[[object], str]) -> ErrorOrigin | None:
    """What `trace` shows about its error, or None if no pass raised (the error came before the
    passes, or after them: the program builder or the CUDA compiler)."""
    if trace.raised_in is None:
        return None
    given = script(trace.given)
    hits = evidence_lines(given, clues(trace.error))
    first = given.splitlines()[hits[0]] if hits else None
    cache: dict[int, str] = {}

    def text(i: int) -> str:
        if i not in cache:
            cache[i] = script(trace.after[i])
        return cache[i]

    return ErrorOrigin(trace.raised_in, len(trace.passes), introduced_by(trace.passes, text, first) if first else None,
                       first.strip() if first else None, excerpt(given, hits))


def describe(f: ErrorOrigin | None, trace: Trace) -> list[str]:
    """The report's lines."""
    error = trace.error
    if f is None:
        last = f"after {len(trace.passes)} passes ran, the last {trace.passes[-1]}" if trace.passes else "before any pass"
        return [f"error: {error}", f"raised outside the passes ({last}): by the program builder, code generation "
                                   "or the CUDA compiler"]
    lines = [f"error: {error}", f"raised in pass: {f.raised_in} (after {f.passes_before} passes ran)"]
    if f.evidence:
        origin = f.introduced_by or "the program as written (present before the first pass)"
        lines += [f"its input mentions what the error names: {f.evidence}", f"that line first appears after: {origin}"]
    if f.excerpt:
        lines += [f"IR given to {f.raised_in} (lines naming what the error names):", *f.excerpt]
    else:
        lines.append(f"no few lines of the IR given to {f.raised_in} name what the error names")
    return lines


def describe_made(made: list[Made], hazards) -> list[str]:
    """The report's lines for a kernel that compiled: its hazards and the passes that made them."""
    if not hazards:
        return ["compiled, and the generated-code checks find no hazard: nothing to triage here"]
    lines = [f"hazard: {h}" for h in hazards]
    for m in made:
        check = m.hazard.check
        if m.made_by is None:
            lines.append(f"{check}: no pass's output holds its construct ({m.construct})")
            continue
        lines += [f"{check}: made by pass {m.made_by}: its output first holds {m.construct}",
                  f"IR after {m.made_by}:", *m.excerpt]
    if not made:
        lines.append("no IR shape is known for these checks (harness.triage.HAZARD_IR): no pass named")
    return lines


# ----------------------------------------------------------------------------- a passing neighbour
# One-step changes that make a neighbour of the failing case: a compile knob toggled, the controls
# TileLang's own bug reports use (warp specialization on and off, TMA on and off, shared-memory reuse).
NEIGHBOUR_KNOBS = ("no_warp_specialize", "no_tma", "no_smem_reuse")


def neighbours(case) -> list[tuple[str, object]]:
    """(how it differs, the case) for each one-knob neighbour of `case`."""
    return [(f"knob {k} {'removed' if k in case.knobs else 'added'}",
             case.replace(knobs=tuple(sorted(set(case.knobs) ^ {k})))) for k in NEIGHBOUR_KNOBS]


@dataclass(frozen=True)
class Divergence:
    """Where a failing compile and a passing neighbour part: the first pass whose output holds the
    construct behind the bug in the failing trace (`turn`), and in the neighbour's (None: never)."""
    neighbour: str
    turn: str | None
    neighbour_holds: str | None
    excerpt: list[str]   # the neighbour's IR after the turn, where the failing one holds the construct
    ran_turn: bool = True  # whether the neighbour's compile ran that pass at all


def first_holding(t: Trace, holds: Callable[[str], int | None], texts: Callable[[Trace, int], str]) -> tuple[int, int] | None:
    """(pass index, line) of the first pass output of `t` in which `holds` finds the construct."""
    for i in range(len(t.passes)):
        line = holds(texts(t, i))
        if line is not None:
            return i, line
    return None


def diverge(bad: Trace, good: Trace, holds: Callable[[str], int | None], script: Callable[[object], str],
            neighbour: str) -> Divergence:
    """Where `bad` takes the turn that `good`, a neighbour that compiles clean, does not take."""
    cache: dict[tuple[int, int], str] = {}

    def texts(t: Trace, i: int) -> str:
        return cache.setdefault((id(t), i), script(t.after[i]))

    mine, theirs = first_holding(bad, holds, texts), first_holding(good, holds, texts)
    turn = bad.passes[mine[0]] if mine else None
    shown = []
    if mine and turn in good.passes:
        text = texts(good, good.passes.index(turn))
        shown = excerpt(text, [min(mine[1], text.count("\n"))])
    return Divergence(neighbour, turn, good.passes[theirs[0]] if theirs else None, shown, turn in good.passes)


def describe_divergence(d: Divergence | None, tried: list[str]) -> list[str]:
    if d is None:
        return [f"no passing neighbour among: {', '.join(tried)} (each fails the same way or cannot be built)"]
    lines = [f"passing neighbour: {d.neighbour} (compiles clean)"]
    if d.turn is None:
        return lines + ["the error names nothing the passes' output shows, so no pass is named where they part"]
    if d.neighbour_holds is None:
        lines.append(f"where they part: {d.turn}. Its output holds the construct in the failing compile; "
                     "no pass's output of the neighbour's does")
    else:
        lines.append(f"not where they part: the neighbour's trace holds the construct too, first after "
                     f"{d.neighbour_holds} (the failing one's after {d.turn})")
    if d.excerpt:
        lines += [f"the neighbour's IR after {d.turn}, at the same place:", *d.excerpt]
    elif not d.ran_turn:
        lines.append(f"the neighbour's compile does not run {d.turn}")
    return lines


def _passing_neighbour(fam, case, target: str, failing: Callable[[Trace, object], bool], holds, bad: Trace):
    """The first one-knob neighbour of `case` that compiles clean, traced, and where it parts from `bad`."""
    tried = []
    for what, other in neighbours(case):
        if fam.offer.unsupported(other) is not None:
            continue
        tried.append(what)
        t = trace(lambda other=other: fam.runner.build(other, target))
        if t.passes and not failing(t, other):
            return diverge(bad, t, holds, script, what), tried
    return None, tried


def _line_holder(line: str) -> Callable[[str], int | None]:
    wanted = line.strip()
    return lambda text: next((i for i, c in enumerate(text.splitlines()) if c.strip() == wanted), None)


def _pattern_holder(pattern) -> Callable[[str], int | None]:
    def holds(text: str) -> int | None:
        m = pattern.search(text)
        return text.count("\n", 0, m.start()) if m else None
    return holds


def run(fam, case, target: str) -> tuple[list[str], str, bool]:
    """Trace one compile of `case` and say where its bug comes from: (lines, a one-line account,
    whether something was found), with the first one-knob neighbour that compiles clean and the pass
    where the two part."""
    from harness import worker

    t = trace(lambda: fam.runner.build(case, target))
    if t.error:
        found = find(t, script)
        account = ("raised outside the passes" if found is None else f"raised in {found.raised_in}"
                   + (f", input from {found.introduced_by}" if found.introduced_by else ""))
        lines = describe(found, t)
        holds = _line_holder(found.evidence) if found is not None and found.evidence else (lambda text: None)
        d, tried = _passing_neighbour(fam, case, target, lambda n, _: bool(n.error), holds, t)
        lines += describe_divergence(d, tried)
        if d:
            account += (f"; {d.neighbour} compiles" +
                        (f": they part at {d.turn}" if d.turn and not d.neighbour_holds else ""))
        return lines, account, True
    if not t.passes:
        return ["compiled without running a pass (a kernel cache hit?): nothing traced"], "not traced", False
    hazards = worker.scan(fam, case, t.result)[0]
    made = hazards_made(t, hazards, script)
    named = [m for m in made if m.made_by]
    account = ("; ".join(f"{m.hazard.check} made by {m.made_by}" for m in named)
               or ("hazard with no pass named" if hazards else "compiled, no hazard"))
    lines = describe_made(made, hazards)
    if named:
        checks = {m.hazard.check for m in named}

        def failing(n: Trace, other) -> bool:
            return bool(n.error) or any(f.check in checks for f in worker.scan(fam, other, n.result)[0])

        d, tried = _passing_neighbour(fam, case, target, failing, _pattern_holder(HAZARD_IR[named[0].hazard.check][0]), t)
        lines += describe_divergence(d, tried)
        account += f"; {d.neighbour} is clean: they part at {d.turn}" if d and d.turn and not d.neighbour_holds else ""
    return lines, account, bool(named)


def script(mod) -> str:
    """A module's text for the search: its TVMScript, or str() where a release's printer cannot show it."""
    try:
        return mod.script()
    except Exception:  # a module some release's printer cannot show as TVMScript
        return str(mod)


def trace(build: Callable[[], object]) -> Trace:
    """Run `build` (a compile expected to fail) under tracing; the Trace holds its error's first line."""
    from harness import compat

    t = Trace()

    def before(mod, name):
        t.raised_in, t.given = name, mod

    def after(mod, name):
        t.passes.append(name)
        t.after.append(mod)
        t.raised_in = None

    with compat.observing_passes(before, after):
        try:
            t.result = build()
        except Exception as e:  # the error under study, whatever raised it
            t.error = next((line.strip() for line in str(e).splitlines() if line.strip()), type(e).__name__)
            t.error = f"{type(e).__name__}: {t.error}" if not t.error.startswith(type(e).__name__) else t.error
    return t
