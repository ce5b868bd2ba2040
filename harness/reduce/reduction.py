"""The whole reduction: the passes in rounds until one changes nothing, then the lines, the layout (ruff) and
the header; the result written to a file that holds the smallest reproducing text at every moment."""
from __future__ import annotations

import ast
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness.reduce.candidates import SIGNAL, TRACEBACK, Predicate, reproduced_line
from harness.reduce.ddmin import lines, statements, text_of
from harness.reduce.simplify import MAX_CHANGES, simplify

MAX_ROUNDS = 8      # statement + simplification rounds


class ReduceError(ValueError):
    """A file that cannot be reduced here, in one line; `status`: the command's exit status (2: bad input, a file
    that is not Python; 125: the file does not reproduce here)."""

    def __init__(self, message: str, status: int = 125):
        super().__init__(message)
        self.status = status


def formatted(text: str) -> str | None:
    """`text` laid out by ruff (imports sorted, unused names dropped, `ruff format`), or None where ruff is not
    installed or fails. The caller keeps it only if it still reproduces (the fixes drop code)."""
    ruff = shutil.which("ruff") or shutil.which("ruff", path=str(Path(sys.executable).parent))
    if not ruff:
        return None
    out = text
    # Imports sorted; what ruff's fixes drop: unused imports, `with ... as x` where x is unused.
    for argv in (["check", "--isolated", "--select", "I,F401,F841", "--fix", "--unsafe-fixes", "--quiet",
                  "--stdin-filename", "repro.py", "-"],
                 ["format", "--isolated", "--line-length", "120", "--stdin-filename", "repro.py", "-"]):
        p = subprocess.run([ruff, *argv], input=out, capture_output=True, text=True)
        if p.returncode != 0 or not p.stdout.strip():
            return None
        out = p.stdout
    return out


class Reduction:
    """What reduce() did: the text, sizes, tests run and skipped, seconds; `stopped`: the budget ran out first (the
    text is the smallest reproducing one found by then, not a 1-minimal one)."""

    def __init__(self, before: str, after: str, runs: int, skipped: int, seconds: float, line: str,
                 stopped: bool = False):
        self.before, self.after, self.runs, self.skipped, self.seconds, self.line = \
            before, after, runs, skipped, seconds, line
        self.stopped = stopped

    def summary(self, name: str) -> str:
        b, a = self.before, self.after
        return (f"reduced {name}: {len(b.splitlines())} -> {len(a.splitlines())} lines, {len(b):,} -> {len(a):,} "
                f"characters; {self.runs} tests run, {self.skipped} candidates skipped (no compile()), "
                f"{self.seconds:.0f} s" + ("; stopped at the budget: the smallest reproducing file so far, not "
                                          "1-minimal (rerun with the same --cache to go on)" if self.stopped else ""))


def reduce(text: str, jobs: int = 1, timeout: float = 120.0, cache: Path | None = None, log=None,
           python: str = sys.executable, header: str = "", budget: float | None = None,
           best: Path | None = None) -> Reduction:
    """`text` reduced while it prints the REPRODUCED line it prints now (ReduceError if it prints none).
    `cache`: a directory of outcomes to keep (and resume from); `log(line)`: progress; `header`: comment lines put
    first in the result (checked too); `budget`: seconds after which no candidate runs (the passes then end at
    once, each keeping what it has, which still reproduces); `best`: a file that always holds the smallest
    reproducing text found so far."""
    log = log or (lambda line: None)
    t0 = time.monotonic()
    deadline = None if budget is None else t0 + budget
    with tempfile.TemporaryDirectory(prefix="harness-reduce-") as scratch:
        probe = Predicate(Path(cache or scratch) / "outcomes", timeout, python=python)
        status, out, err = probe.run(text)
        want = reproduced_line(out)
        if want is None:
            said = (out.strip().splitlines() or err.strip().splitlines() or [""])[-1]
            why = f"timed out after {timeout:g} s" if status is None else f"exit {status}: {said[:200]}"
            raise ReduceError(f"the file does not print {SIGNAL} here ({why})")
        tb = TRACEBACK in err
        log(f"predicate: prints {want!r} and exits {status}{'' if tb else ', no uncaught exception'}")
        if best is not None:
            best.parent.mkdir(parents=True, exist_ok=True)
            Predicate._store(best, text)  # what reproduces so far: the file itself
        test = Predicate(probe.cache, timeout, want, status, python, traceback=tb, deadline=deadline, best=best)
        result = text
        try:
            tree = ast.parse(text)
        except SyntaxError as e:
            raise ReduceError(f"not Python: line {e.lineno}: {e.msg}", status=2) from None
        if test(text_of(tree)):
            changes = [MAX_CHANGES]
            late = False
            for round_ in range(MAX_ROUNDS):
                if test.spent():
                    break
                before = text_of(tree)
                tree = statements(tree, test, jobs)
                log(f"round {round_ + 1}: statements -> {len(text_of(tree).splitlines())} lines")
                tree, kept = simplify(tree, test, jobs, changes, late)
                log(f"round {round_ + 1}: {kept} {'operand ' if late else ''}simplifications -> "
                    f"{len(text_of(tree).splitlines())} lines")
                if text_of(tree) == before:
                    if late:
                        break
                    late = True  # the rest is done: now every operand, then the rest again
                else:
                    late = False
            result = text_of(tree)
        else:
            log("the unparsed file does not reproduce: lines only")
        result = lines(result, test, jobs)
        log(f"lines -> {len(result.splitlines())} lines")
        pretty = formatted(result)
        if pretty is not None and pretty != result and test(pretty):
            result = pretty
        if header:
            labelled = "".join(f"# {h}\n" if h else "#\n" for h in header.splitlines()) + result
            if test(labelled):
                result = labelled
        runs, skipped = test.counts()
        stopped = test.spent()
    if stopped:
        log(f"budget of {budget:g} s spent: the passes stopped")
    return Reduction(text, result, runs, skipped, time.monotonic() - t0, want, stopped)


def default_out(given: Path, rep_id: str | None, directory: Path) -> Path:
    """DIR/upstream/<id>.min.py for a reproducer, else the file's name with .min.py (.standalone dropped)."""
    if rep_id:
        return directory / "upstream" / f"{rep_id}.min.py"
    return given.with_name(given.name.removesuffix(".py").removesuffix(".standalone") + ".min.py")


def reduce_file(given: Path, to: Path, jobs: int = 1, timeout: float = 120.0, log=None, cache: Path | None = None,
                budget: float | None = None, header: str = "") -> Reduction:
    """Reduce the file `given` and write the result to `to`, which holds the smallest reproducing text found from
    the start on; `header`: comment lines put first in the result."""
    r = reduce(given.read_text(), jobs, timeout, cache=cache, log=log, header=header, budget=budget, best=to)
    to.write_text(r.after)
    return r
