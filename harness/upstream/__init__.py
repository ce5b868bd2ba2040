"""`harness upstream`: a reproducer as the text a TileLang maintainer files (markdown). A bug already on
TileLang's tracker (an open tracker issue among its links) gets a comment for that issue; any other bug, a
report in the style of the tracker's own bug reports.

Built from what the harness holds, with no network: the reproducer's fields (reproducer_model.Reproducer: the case and
what was observed, the environment, its typed links, the release matrix, its triage, the report's own words),
those of the reproducers that share its root cause, `harness bisect` state files, and a program of at most
PROGRAM_LINES lines where one exists (a reduced `<id>.min.py`, a standalone `<id>.standalone.py`, one the links
name; a generated program's export). Nothing is written that these do not say: an absent fact reads "not
recorded", "not bisected" or "none known". A report is at most REPORT_LINES lines and under GitHub's
ISSUE_LIMIT characters. The outputs it pastes are captured, never written by hand (harness.upstream.outputs).
"""
from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from packaging.version import InvalidVersion, Version

from harness import (
    bisect,
    export,
    kernels,
    replay,
    reproducer_files,
    reproducer_loading,
    reproducer_model,
    status,
    triage,
    untrusted,
)
from harness import case as case_mod
from harness.bisect.search import search
from harness.environment import environment
from harness.upstream.outputs import OUTPUTS, PROGRAM_NAME, Output, captured

ISSUE_LIMIT = 65536    # characters GitHub takes in an issue body or comment
REPORT_LINES = 250
PROGRAM_LINES = 90     # a program embedded in a report: its lines after the module docstring (with --control)
TRACKER = "tile-ai/tilelang"
# The tracker's tag for each kind of failure, as TileLang's "[BUG][Fuzzer][...]" issues name them.
TAGS = {"MISMATCH": "wrong-code", "NONFINITE": "wrong-code", "OOB_WRITE": "wrong-code", "OOB_READ": "wrong-code",
        "COMPILE_ERROR": "ice-on-valid-code", "CRASH": "crash", "HANG": "hang"}


@dataclass
class Report:
    text: str
    summary: list[str]     # the one-line account the command prints
    comment_for: reproducer_model.Issue | None = None
    program: Path | None = None
    gaps: list = field(default_factory=list)   # the commands whose output is missing (needs a GPU)


# ----------------------------------------------------------------------------- related reproducers
def others(directory: Path, own_id: str) -> dict[str, reproducer_model.Reproducer]:
    """The readable reproducers under `directory` (every group) but `own_id`."""
    found = {}
    for path in reproducer_files.paths(directory):
        try:
            rep = reproducer_loading.load(path)
        except reproducer_model.RecordError:
            continue  # a broken file is `harness repro`'s to report
        if rep.id != own_id:
            found[rep.id] = rep
    return found


def same_root_cause(rep, known: dict) -> dict[str, str]:
    """{id: how it relates} of the reproducers that share `rep`'s root cause, linked from either side."""
    why = {s.id: s.note or "linked from this one" for s in rep.links.same_root_cause_as}
    for other, o in known.items():
        for s in o.links.same_root_cause_as:
            if s.id == rep.id:
                why.setdefault(other, f"links this one: {s.note}" if s.note else "links this one")
    why.pop(rep.id, None)
    return why


def primary(rep, directory: Path):
    """The reproducer whose report covers `rep`'s bug, so that one root cause gets one report: of `rep` and
    those sharing its root cause, the one with the report's own words recorded (reproducer_model.Upstream), then the one the
    others link most, then the smallest id."""
    known = {**others(directory, rep.id), rep.id: rep}
    group = sorted({rep.id, *(o for o in same_root_cause(rep, known) if o in known)})

    def named(i: str) -> int:
        return sum(any(s.id == i for s in known[o].links.same_root_cause_as) for o in group if o != i)

    return known[max(group, key=lambda i: (known[i].upstream is not None, named(i), [-ord(c) for c in i]))]


# ----------------------------------------------------------------------------- bisects and releases
def _version(text) -> Version | None:
    try:
        return Version(str(text))
    except InvalidVersion:
        return None


class _Untested(Exception):
    pass


def state_result(path: Path, rep_id: str) -> tuple[reproducer_model.RecordedBisect | None, str] | None:
    """A `harness bisect` state file of `rep_id`: (the bisect it concluded, or None; where and how far it went).
    None for another reproducer's file, or one that cannot be read."""
    try:
        state = untrusted.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(state, dict) or state.get("reproducer") != reproducer_files.file_name(rep_id):
        return None
    order, steps = [str(v) for v in state.get("order") or []], state.get("steps") or {}
    # What it bisected, as the state says; a state written before it said so: releases if every step is one.
    kind = state.get("kind") or ("release" if order and all(_version(v) for v in order) else "commit")
    done = ", ".join(f"{v} {status.WORDS.get(s.get('status'), s.get('status'))}" for v, s in steps.items()) or "none"
    where = f"state {path}: --good {state.get('good')} --bad {state.get('bad')}"

    def test(v):
        if v not in steps:
            raise _Untested(v)
        return steps[v]["status"]

    if len(order) < 2:
        return None, f"not finished ({where}; steps: {done})"
    try:
        lo, hi, skipped = search(order, test)
    except _Untested as e:
        return None, f"not finished ({where}; steps so far: {done}; next: {e})"
    except bisect.BisectError as e:
        return None, f"did not conclude: {e} ({where})"
    fixes = kind == "release" and _version(order[0]) > _version(order[-1])
    note = f"{where}; steps: {done}" + (f"; untestable between them: {', '.join(order[i] for i in skipped)}"
                                        if skipped else "")
    return reproducer_model.RecordedBisect(kind, order[0], order[-1], order[hi], order[lo], fixes, note), note


def state_files(rep_id: str, envs: Path | None, extra=()) -> list[Path]:
    """The state files `harness bisect` leaves under --envs for `rep_id`, and those named."""
    found = sorted(Path(envs).expanduser().glob(f"bisect-{rep_id}-*.json")) if envs else []
    return found + [Path(p) for p in extra if Path(p) not in found]


def bisects(rep, states: list[Path]) -> tuple[list[reproducer_model.RecordedBisect], list[str]]:
    """The bisects recorded in `rep`'s links and concluded in its state files; and the state files' words for
    those not concluded."""
    done, pending = list(rep.links.bisected_by), []
    for path in states:
        found = state_result(path, rep.id)
        if found and found[0]:
            done.append(found[0])
        elif found:
            pending.append(found[1])
    return done, pending


def describe_bisect(b: reproducer_model.RecordedBisect) -> str:
    what = (f"fixed in {b.last_good}, the last {b.kind} with it {b.first_bad}" if b.fixes
            else f"first bad {b.kind} {b.first_bad}, last good {b.last_good}")
    return f"{what} (`harness bisect --good {b.good} --bad {b.bad}`" + (f"; {b.note})" if b.note else ")")


def releases(rep) -> dict[str, reproducer_model.Release]:
    """The release matrix, the release it was recorded on counted as reproduced, oldest first."""
    found = dict(rep.releases)
    recorded = rep.environment.get("tilelang", "")
    if _version(recorded) and recorded not in found:
        found[recorded] = reproducer_model.Release("reproduced", "recorded there")
    return dict(sorted(((v, r) for v, r in found.items() if _version(v)), key=lambda vr: _version(vr[0])))


@dataclass
class Provenance:
    """Where the bug came in, as far as the recorded data says: `after` (a release without it, the newest before
    `at_or_before`) and `at_or_before` (the oldest release with it); equal bounds from a bisect are exact."""
    first_bad: str = ""          # exact, from a release bisect
    after: str = ""
    at_or_before: str = ""
    fixed_in: str = ""
    lines: list[str] = field(default_factory=list)


def provenance(rep, found: list[reproducer_model.RecordedBisect],
               related: dict[str, list[reproducer_model.RecordedBisect]]) -> Provenance:
    p = Provenance()
    matrix = releases(rep)
    present = [v for v, r in matrix.items() if r.result == "reproduced"]
    absent = [v for v, r in matrix.items() if r.result == "not reproduced"]
    own = [b for b in found if b.kind == "release"]
    regression = [b for b in own if not b.fixes]
    fixes = [b for b in own if b.fixes]
    if regression:
        b = regression[0]
        p.first_bad, p.after, p.at_or_before = b.first_bad, b.last_good, b.first_bad
        p.lines.append(f"**First bad release: {b.first_bad}** (a release bisect: {describe_bisect(b)}).")
    elif present:
        oldest = present[0]
        before = [v for v in absent if _version(v) < _version(oldest)]
        p.at_or_before, p.after = oldest, before[-1] if before else ""
        untested = [v for v, r in matrix.items() if r.result in ("fails differently", "cannot test")
                    and (not p.after or _version(v) > _version(p.after)) and _version(v) < _version(oldest)]
        span = (f"after {p.after}, at or before {oldest}" if p.after
                else f"at or before {oldest} (no older release tested without it)")
        # "not bisected" would contradict a recorded commit bisect that names the change inside the range; one
        # over other ends (a witness's, which sees the defect in code a release ran without failing) says its ends
        commit = next((b for b in found if b.kind == "commit" and not b.fixes), None)
        how = "not bisected"
        if commit:
            elsewhere = any(_version(ref.removeprefix("v")) not in (None, _version(want))
                            for ref, want in ((commit.good, p.after), (commit.bad, oldest)))
            how = (f"a commit bisect from {commit.good} to {commit.bad}" if elsewhere else "a commit bisect") \
                + f" names {commit.first_bad[:9]}"
        p.lines.append(f"**First bad release: {span}** (the release matrix; {how}"
                       + (f"; {', '.join(untested)} could not tell" if untested else "") + ").")
    else:
        p.lines.append("**First bad release:** not recorded (no release matrix, no bisect).")
    for b in fixes:
        p.fixed_in = b.last_good
        p.lines.append(f"**Fixed in {b.last_good}** ({describe_bisect(b)}).")
    if matrix:
        p.lines.append("Release matrix: " + "; ".join(f"{v} {r.result}" + (f" ({r.note})" if r.note else "")
                                                     for v, r in matrix.items()) + ".")
    commits = [b for b in found if b.kind == "commit"]
    p.lines += [f"**Commit bisect:** {describe_bisect(b)}." for b in commits] or [
        "**Commit bisect:** not run" + (f" (between {p.after} and {p.at_or_before}: `harness bisect {rep.id} --repo "
                                         f"TILELANG_SRC --good v{p.after} --bad v{p.at_or_before}`)."
                                         if p.after and p.at_or_before and p.first_bad else ".")]
    if not regression and p.after and p.at_or_before:
        p.lines.append(f"To place the release: `harness bisect {rep.id} --good {p.after} --bad {p.at_or_before}`"
                       + (" (needs a GPU: the reproducer is numerical)." if rep.needs_gpu else "."))
    for other, bs in related.items():
        p.lines += [f"For `{other}` (same root cause): {describe_bisect(b)}." for b in bs]
    for label, issues in (("Introduced by", rep.links.introduced_by), ("Fixed by", rep.links.fixed_by)):
        p.lines += [f"**{label}:** {_issue(i)}" for i in issues]
    return p


# ----------------------------------------------------------------------------- the program
def code_lines(text: str) -> int:
    """A program's lines after its module docstring (what it says, the report says too)."""
    lines = text.rstrip("\n").splitlines()
    try:
        body = ast.parse(text).body
    except SyntaxError:
        return len(lines)
    first = body[0] if body else None
    if isinstance(first, ast.Expr) and isinstance(getattr(first, "value", None), ast.Constant) \
            and isinstance(first.value.value, str):
        return len(lines) - first.end_lineno
    return len(lines)


def program_files(rep, directory: Path, beside: Path) -> list[Path]:
    """Where a program of `rep` may be, in the order preferred: a reduced one, standalone ones (beside its file in its
    group, then beside the report), those linked."""
    directory, beside = Path(directory), Path(beside)
    own = reproducer_files.file_path(directory, rep.kind, rep.id).parent
    filed = directory / "upstream"  # where the committed reports and their programs live
    names = [filed / f"{rep.id}.min.py", own / f"{rep.id}.min.py", beside / f"{rep.id}.min.py",
             own / f"{rep.id}.standalone.py", filed / f"{rep.id}.standalone.py", beside / f"{rep.id}.standalone.py"]
    names += [directory.parent / f.path for f in rep.links.files if f.kind == "standalone"]
    return list(dict.fromkeys(names))


def generated(rep) -> bool:
    """A generated program (harness.programs): its export is small by construction."""
    return bool(rep.case.program)


def program(rep, directory: Path, beside: Path) -> tuple[Path | None, str, str]:
    """(the program to embed or None, its text, one line on what was found): the first of `program_files` of at
    most PROGRAM_LINES lines. A generated program (the `program` family) is exported beside the report first,
    when no file is there: its export is small. A hand-written kernel's export (about 1,000 lines) is never
    embedded."""
    out = Path(beside) / f"{rep.id}.standalone.py"
    note = ""
    written = (Path(directory) / "upstream" / f"{rep.id}.min.py").is_file()
    if generated(rep) and not out.exists() and not written:
        try:
            export.export(rep, out)
        except (export.ExportError, case_mod.CaseError, ImportError, OSError) as e:
            note = f"`harness export {rep.id}` failed here: {f'{type(e).__name__}: {e}'.splitlines()[0]}; "
    too_long = []
    for path in program_files(rep, directory, beside):
        if path.is_file():
            text = path.read_text()
            n = code_lines(text)
            if n <= PROGRAM_LINES:
                return path, text, f"{path.name}: {n} lines"
            too_long.append(f"{path.name} has {n}")
    return None, "", note + (f"{', '.join(too_long)} lines" if too_long else "no program file")


def _fence(text: str, lang="") -> list[str]:
    longest = max((len(run) for run in "".join(c if c == "`" else " " for c in text).split()), default=0)
    fence = "`" * max(3, longest + 1)
    return [fence + lang, text.rstrip("\n"), fence]


def program_section(rep, path: Path | None, text: str, account: str) -> list[str]:
    if path is None:
        fam = kernels.family(rep.case.family)
        if fam.runner.module:  # export refuses outside kernels, so the reducer has nothing to start from
            return ["## Program", "", f"No program of at most {PROGRAM_LINES} lines yet ({account}); `harness reduce` "
                    f"cannot make one (`harness export` refuses outside kernels). It is TileLang's own "
                    f"`examples/{fam.runner.module}` at the case given at the end: `harness repro {rep.id}`.", ""]
        how = ("the generated program given at the end" if generated(rep)
               else f"the harness's {rep.case.family} kernel at the case given at the end")
        return ["## Program", "", f"No program of at most {PROGRAM_LINES} lines yet ({account}): `harness reduce {rep.id}` "
                f"makes one. Until then it is {how}: `harness repro {rep.id}`.", ""]
    run = next((f.note for f in rep.links.files if Path(f.path).name == path.name and f.note), "")
    if not run and path.name.endswith(".standalone.py") and generated(rep):
        run = "prints REPRODUCED and exits 1 while the bug is present, 0 when not, 125 without a GPU for a numerical bug"
    return ["## Program", "", f"`{path.name}` (tilelang and torch only)" + (f": {run}." if run else "."), "",
            *_fence(text, "python"), ""]


# ----------------------------------------------------------------------------- venue
@dataclass
class Venue:
    """Where a report goes, decided from the record's typed links: a new issue, a comment on an open issue, a test
    case for an open pull request, withdrawn (the reason kept in the record), or in another reproducer's report
    (the same root cause)."""
    kind: str                              # new issue | comment | test case | withdrawn | folded
    issue: reproducer_model.Issue | None = None  # the thread, for a comment or a test case
    into: str = ""                         # folded: the reproducer whose report covers it
    reason: str = ""                       # withdrawn: why

    def words(self) -> str:
        if self.kind in ("comment", "test case"):
            return f"{self.kind} on {self.issue.ref}" if self.kind == "comment" else f"test case for {self.issue.ref}"
        if self.kind == "withdrawn":
            return "withdrawn: " + self.reason.split(". ")[0].rstrip(".")
        if self.kind == "folded":
            return f"in {self.into}'s report"
        return "new issue"


def venue(rep, directory: Path | None = None) -> Venue:
    if rep.upstream and rep.upstream.withdrawn:
        return Venue("withdrawn", reason=rep.upstream.withdrawn)
    if directory is not None:
        cover = primary(rep, Path(directory))
        if cover.id != rep.id:
            return Venue("folded", into=cover.id)
    issue = known_issue(rep)
    if issue:
        return Venue("comment" if issue.kind == "issue" else "test case", issue)
    return Venue("new issue")


def known_issue(rep) -> reproducer_model.Issue | None:
    """The open issue or pull request on TileLang's tracker that is this bug, if any: then the text is a comment
    for it (a pull request's: the program as its test case)."""
    return next((i for i in rep.links.tracker_issue if i.repo == TRACKER and i.state == "open"), None)


# ----------------------------------------------------------------------------- the sections
def _issue(i: reproducer_model.Issue) -> str:
    state = f" ({i.state}{', in ' + i.release if i.release else ''})" if i.state or i.release else ""
    return f"[{i.ref}]({i.url}){state}" + (f": {i.note}" if i.note else "")


def title(rep) -> str:
    words = " ".join((rep.upstream.title if rep.upstream and rep.upstream.title else "").split())
    return words or f"[BUG][{TAGS.get(rep.result.verdict, 'bug')}] " + " ".join(rep.title.split())


def environment_line(rep, outs: list[Output]) -> str:
    """The TileLang and machine of the outputs pasted (else the record's)."""
    env = rep.environment
    versions = sorted({o.tilelang for o in outs}) or [env.get("tilelang") or "not recorded"]
    def machine(o: Output) -> str:
        where = o.gpu if o.gpu is not None else f"a machine without a GPU, compiling for {o.arch}"
        versions = ", ".join(v for v in o.versions.split(", ") if v and v != "CUDA None")
        return where + (f" ({versions})" if versions else "")

    machines = list(dict.fromkeys(machine(o) for o in outs))
    return (f"**Environment:** TileLang {' and '.join(versions)} (pip wheel); the outputs below come from "
            + ("; ".join(machines) if machines else "no run yet") + ".")


def _gap(command: str, why: str) -> list[str]:
    return [f"> **Output missing** ({why}): run `{command}` there and paste its output here.",
            f"<!-- GAP: {command} -->"]


def output_block(command: str, out: Output | None, gpu: bool) -> list[str]:
    if out is None:
        return _gap(command, "needs an sm_90 GPU" if gpu else "not run yet")
    where = out.gpu if out.gpu is not None else f"on a machine without a GPU, compile-only, {out.arch}"
    return [f"`{command}` ({where}, TileLang {out.tilelang}):", "", *_fence(out.text or "(no output)", "text"),
            "", f"Exit status {out.status}."]


def provenance_lines(rep, prov: Provenance) -> list[str]:
    matrix = releases(rep)
    lines = [line for line in prov.lines if line.startswith("**First bad release") or line.startswith("**Fixed in")]
    lines = [re.sub(r" \((?:a release bisect: )?`harness[^)]*\)", "", line) for line in lines]
    if matrix:
        lines.append("Releases tested (this program or the kernel it was reduced from): "
                     + "; ".join(f"{v} {r.result}" + (" (predicted)" if r.predicted else "") for v, r in matrix.items())
                     + ".")
        if any(r.predicted for r in matrix.values()):
            lines.append("Predicted: compiled without a GPU and judged by whether the generated CUDA holds the defect "
                         "described above; not run.")
    if rep.upstream and rep.upstream.provenance:
        lines.append(rep.upstream.provenance)
    lines += [f"**Introduced by:** {_issue(i)}" for i in rep.links.introduced_by]
    # A pull request not merged fixes nothing yet: it is proposed.
    lines += [f"**{'Fixed by' if i.state == 'merged' else 'Proposed fix'}:** {_issue(i)}" for i in rep.links.fixed_by]
    return lines


def related_lines(rep, v: Venue) -> list[str]:
    items = [i for i in rep.links.tracker_issue if v.issue is None or i is not v.issue] + list(rep.links.related)
    above = v.issue is not None or rep.links.fixed_by or rep.links.introduced_by
    return [f"- {_issue(i)}" for i in items] or [f"- None {'besides those linked above' if above else 'found'}."]


def culprit_section(rep, arch, env, unavailable) -> tuple[list[str], str]:
    found = rep.triage.culprit if rep.triage else None
    if found:
        where = ", ".join(x for x in (f"`{found.file}`" if found.file else "", f"`{found.function}`" if found.function
                                      else "") if x)
        line = f"**{found.pass_name}**" + (f" ({where}, read in the {rep.environment.get('tilelang', '')} source)"
                                            if where else "")
        note = found.note.rstrip(".") + "." if found.note else ""
        return ["## Root cause", "", line + (f": {note}" if note else "."), ""], \
            f"culprit: {found.pass_name} (recorded)"
    if rep.triage is not None:  # triaged, and no pass named
        return ["## Root cause", "", "Not traced to a pass or a source line.", ""], "culprit: not traced (recorded)"
    lines, account = culprit(rep, arch, env, unavailable)
    return ["## Root cause", "", *lines, ""], f"culprit: {account}"


def culprit(rep, arch="sm_90a", env=None, unavailable: str | None = None) -> tuple[list[str], str]:
    """What `harness triage <id>` prints, run here (the pass that raised a compile error, or the pass that made
    a generated-code hazard), or one line saying why not; and a one-line account."""
    if unavailable:
        return [f"Not triaged: {unavailable}"], "not triaged"
    env = env or environment()
    target, why = replay.target(rep, env, arch, compile_only=True)
    if target is None:
        return [f"Not triaged: cannot compile {rep.id} here: {why}"], "not triaged (cannot compile here)"
    try:
        lines, account, _ = triage.run(kernels.family(rep.case.family), rep.case, target)
    except Exception as e:  # the compiler's hooks or TileLang itself: said in one line, not raised
        first = str(e).splitlines()[0] if str(e).strip() else ""
        return [f"Not triaged: triage failed: {type(e).__name__}" + (f": {first}" if first else "")], "triage failed"
    return [f"`harness triage {rep.id}`, run here (TileLang {env.get('tilelang')}, target {target}):", "",
            *_fence("\n".join(lines), "text")], account


# ----------------------------------------------------------------------------- drafts
def _recorded(value) -> str:
    return value if value not in (None, "") else "not recorded"


def draft_environment_line(rep) -> str:
    env = rep.environment
    gpu = ("none (compile-only)" if env["compile_only"]
           else _recorded(env.get("gpu")) + (f" ({env['capability']})" if env.get("capability") else ""))
    parts = [f"TileLang {_recorded(env.get('tilelang'))}" + (f" (commit {env['tilelang_commit']})"
                                                             if env.get("tilelang_commit") else " (commit not recorded)"),
             f"GPU {gpu}"]
    parts += [f"{name} {env[key]}" for name, key in (("CUDA", "cuda"), ("driver", "driver"), ("torch", "torch"),
                                                     ("Python", "python")) if env.get(key) not in (None, "", "None", "none")]
    if env.get("examples_module"):
        parts.append(f"TileLang's example `{env['examples_module']}` of release {_recorded(env.get('examples_release'))}")
    return "**Environment:** " + ", ".join(parts) + "."


def observed_lines(rep) -> list[str]:
    """What was observed, in the report's words where recorded; then the error as TileLang printed it, or
    each wrong output's largest difference from the float64 reference."""
    seen = rep.result
    lines = [rep.upstream.observed, ""] if rep.upstream and rep.upstream.observed else []
    if seen.verdict in ("COMPILE_ERROR", "CRASH", "HANG") or not seen.checks:
        lines += _fence(seen.message or "(no message recorded)", "text")
    else:
        for c in seen.checks:
            if not c.get("ok"):
                where = (c.get("where") or {}).get("index")
                lines.append(f"- {c['tensor']}: max |kernel - float64 reference| = {c['error']:.4g}"
                             + (f" at {where}" if where else ""))
    flaky = rep.observed.get("flaky")
    if flaky and flaky["reproduced"] < flaky["runs"]:
        lines.append(f"- seen in {flaky['reproduced']} of {flaky['runs']} runs")
    return lines


FAILED = {"MISMATCH": "wrong values", "NONFINITE": "NaN or inf values", "OOB_WRITE": "writes past a buffer",
          "OOB_READ": "reads past a buffer", "COMPILE_ERROR": "fails to compile", "CRASH": "crashes", "HANG": "hangs"}


def controls(rep) -> list[reproducer_model.Control]:
    return list(rep.triage.controls) if rep.triage else []


def control_section(rep) -> list[str]:
    rows = controls(rep)
    if not rows:
        return ["## Control", "", "No control recorded: `harness triage` tries one knob at a time.", ""]
    lines = ["## Control", "", "| change | result |", "|---|---|",
             f"| none (as recorded) | **{FAILED.get(rep.result.verdict, rep.result.verdict)}** |"]
    lines += [f"| {c.change} | {c.result}" + (f" ({c.source})" if c.source else "") + " |" for c in rows]
    return lines + [""]


def workaround_lines(rep) -> list[str]:
    """The controls that are right: a knob is a workaround as it is; a change of the program is one too."""
    knobs = [c for c in controls(rep) if c.ok and c.knob]
    shapes = [c for c in controls(rep) if c.ok and not c.knob]
    lines = [f"- {c.change}: {c.result}" + (f" ({c.source})" if c.source else "") for c in knobs]
    lines += [f"- changing the program: {c.change}: {c.result}" for c in shapes]
    return lines or ["None known: no recorded control is right."]


def duplicates_section(rep, comment_for) -> list[str]:
    links = rep.links
    lines = ["## Duplicates", ""]
    lines += [f"- Searched {s.query}: {s.result}." for s in links.searches]
    if not links.searches:
        lines.append("- No search of the tracker recorded.")
    lines += [f"- This bug: {_issue(i)}" for i in links.tracker_issue if i is not comment_for]
    lines += [f"- Nearest: {_issue(i)}" for i in links.related]
    return lines + [""]


def same_cause_lines(why: dict[str, str], known: dict) -> list[str]:
    lines = []
    for other, note in why.items():
        o = known.get(other)
        where = f"{o.result.verdict}, TileLang {o.environment.get('tilelang', '?')}" if o else "no such reproducer here"
        lines.append(f"- `{other}` ({where}): {note}")
    return lines


def details(rep) -> list[str]:
    return ["<details><summary>The harness's reproducer</summary>", "",
            f"Reproducer `{rep.id}` of a correctness harness for TileLang: `harness repro {rep.id}` replays it "
            f"({rep.result.verdict} as recorded). The case:", "",
            *_fence(json.dumps(case_mod.to_dict(rep.case)), "json"), "", "</details>"]


def draft(rep, beside: Path, directory: Path, states=(), envs: Path | None = None, arch="sm_90a",
          unavailable: str | None = None, env=None) -> Report:
    """A draft for a record without the report's own words or program: everything the record holds, in the
    harness's terms (its commands to go further), marked DRAFT on its first line; not a text to file."""
    known = others(directory, rep.id)
    why = same_root_cause(rep, known)
    found, pending = bisects(rep, state_files(rep.id, envs, states))
    related = {o: bisects(known[o], state_files(o, envs))[0] for o in why if o in known}
    prov = provenance(rep, found, {o: bs for o, bs in related.items() if bs})
    prov.lines += [f"Bisect {p}." for p in pending]
    path, text, account = program(rep, directory, beside)
    cause, cause_account = culprit_section(rep, arch, env, unavailable)
    comment_for = known_issue(rep)
    expected = rep.upstream.expected if rep.upstream and rep.upstream.expected else rep.expected
    fix = ["## Suggested fix", "", rep.upstream.fix, ""] if rep.upstream and rep.upstream.fix else []
    faces = same_cause_lines(why, known)
    if comment_for:
        head = [f"<!-- a comment for {comment_for.url}; reproducer {rep.id} -->",
                f"**Still present in TileLang {rep.environment.get('tilelang', '?')}.** {draft_environment_line(rep)}", ""]
        head += ["Also:", "", *faces, ""] if faces else []
        faces = []
    else:
        head = [f"# {title(rep)}", "", draft_environment_line(rep), ""]
    body = [*program_section(rep, path, text, account), "## Expected", "", expected, "", "## Observed", "",
            *observed_lines(rep), "", *control_section(rep), *cause, *fix, "## Provenance", "",
            *[f"- {line}" for line in prov.lines], "", "## Workaround", "", *workaround_lines(rep), "",
            *([] if comment_for else duplicates_section(rep, comment_for))]
    if faces:
        body += ["## Same root cause", "", *faces, ""]
    out = ["<!-- DRAFT: not a report to file (no report words or no program recorded) -->", ""] + head + body
    text_out = "\n".join(out + details(rep)).rstrip("\n") + "\n"
    if len(text_out.splitlines()) > REPORT_LINES or len(text_out) >= ISSUE_LIMIT:
        text_out = "\n".join(out).rstrip("\n") + "\n"  # the harness's case goes first
    summary = [f"draft, {'comment for ' + comment_for.ref if comment_for else 'report'}: {len(text_out.splitlines())} lines, "
               f"{len(text_out)} characters", f"program: {account}",
               "first bad release: " + (prov.first_bad or (f"after {prov.after}, " if prov.after else "")
                                        + (f"at or before {prov.at_or_before}" if prov.at_or_before else "not recorded")),
               cause_account, f"tracker links: {len(rep.links.issues())}", "same root cause: " + (", ".join(why) or "none")]
    return Report(text_out, summary, comment_for, path)



# ----------------------------------------------------------------------------- the whole
def report(rep, beside: Path, directory: Path, states=(), envs: Path | None = None, arch="sm_90a",
           unavailable: str | None = None, env=None, outputs: Path | None = None, run: bool = True) -> Report:
    """The text to file for `rep`: its program, the program's output and each control's, captured (from `outputs`,
    from DIR/upstream/outputs/, or run here where that shows it), never written by hand; a gap, marked, for each
    that needs a GPU and was not run on one."""
    v = venue(rep, directory)
    path, text, account = program(rep, directory, beside)
    up = rep.upstream
    if up is None or path is None or up.withdrawn:
        return draft(rep, beside, directory, states, envs, arch, unavailable, env)
    stores = ([Path(outputs)] if outputs else []) + [Path(directory) / "upstream" / OUTPUTS]
    gaps, outs = [], []

    def block(control: str, gpu: bool) -> list[str]:
        command = f"python {PROGRAM_NAME}" + (f" --control {control}" if control else "")
        out = captured(rep.id, control, gpu, stores, path, run, arch)
        if out is None:
            gaps.append(command)
        else:
            outs.append(out)
        return output_block(command, out, gpu)

    main = block("", up.gpu)
    comment = v.kind in ("comment", "test case")
    body = ([up.observed, ""] if comment and up.observed else []) + ["## Program", "",
            f"`{PROGRAM_NAME}` ({code_lines(text)} lines; tilelang and torch" + ("; its check needs an sm_90 GPU"
                                                                                if up.gpu else ", compile-only") + "):",
            "", *_fence(text, "python"), "", "## Output", "", *main, ""]
    body += [up.observed, ""] if up.observed and not comment else []
    body += ["## Expected", "", up.expected or rep.expected, ""]
    if up.controls:
        body += ["## Controls", "", "Each is the same program with one change (`--control NAME`)."]
        for c in up.controls:
            body += ["", f"**{c.name}**: {c.change}", "", *block(c.name, c.gpu)]
        body.append("")
    cause = up.cause or (rep.triage.culprit.note if rep.triage and rep.triage.culprit else "")
    body += ["## Root cause", "", cause or "Not traced to a source line.", ""]
    body += ["## Suggested fix", "", up.fix, ""] if up.fix else []
    found, pending = bisects(rep, state_files(rep.id, envs, states))
    prov = provenance(rep, found, {})
    body += ["## Provenance", "", *[f"- {line}" for line in provenance_lines(rep, prov)], ""]
    missing = {g.split("--control ", 1)[1] for g in gaps if "--control " in g}
    shown = [c.name for c in up.controls if c.workaround and c.name not in missing]
    pending = [c.name for c in up.controls if c.workaround and c.name in missing]
    body += ["## Workaround", "", (up.workaround or "None found.")
             + (" Shown by " + ", ".join(f"**{c}**" for c in shown) + " above." if shown else "")
             + (" Not shown yet: the output of " + ", ".join(f"**{c}**" for c in pending) + " above is missing."
                if pending else ""), ""]
    body += ["## Related", "", *related_lines(rep, v), ""]
    if comment:
        head = [f"<!-- a comment for {v.issue.url} -->", "",
                f"**{title(rep)}**" if up.title else "", "", environment_line(rep, outs), ""]
    else:
        head = [f"# {title(rep)}", "", environment_line(rep, outs), ""]
    if v.kind in ("withdrawn", "folded"):
        head = [f"<!-- NOT TO FILE: {v.words()} -->", "", *head]
    text_out = "\n".join(head + body).rstrip("\n") + f"\n\n---\n\nReproducer id: {rep.id}\n"
    text_out = re.sub(r"\n{3,}", "\n\n", text_out)
    summary = [f"{v.words()}: {len(text_out.splitlines())} lines, {len(text_out)} characters", f"program: {account}",
               f"outputs: {len(outs)} pasted" + (f", {len(gaps)} missing (GPU): " + "; ".join(gaps) if gaps else "")]
    return Report(text_out, summary, v.issue, path, gaps)


def write(rep, to: Path, directory: Path, **kwargs) -> Report:
    """Write the text to `to` (a generated program's export beside it, <id>.standalone.py)."""
    to = Path(to)
    to.parent.mkdir(parents=True, exist_ok=True)
    out = report(rep, to.parent, directory, **kwargs)
    to.write_text(out.text)
    return out
