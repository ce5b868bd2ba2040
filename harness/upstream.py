"""`harness upstream`: a reproducer as a report ready to file on TileLang's tracker (markdown).

Built only from what the harness holds, with no network: the reproducer's JSON (title, environment,
expected and observed, links), the bisect state files of `harness bisect`, the standalone program
that harness.export writes, and, for a compile error, harness.triage run here. Nothing is written
that these do not say: an absent fact reads "not recorded", "not bisected", "not run" or "none known".

What the links of a reproducer mean is read from their text: a github.com/tile-ai/tilelang address is
an upstream issue or pull request; `reproducers/<id>.json` is another reproducer of the same root
cause (as is a title saying "the same ... as <id>"); "harness bisect ...: first bad release X" is a
bisect result; "searched ..." a search of the tracker that found nothing; anything else is listed as is.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from packaging.version import InvalidVersion, Version

from harness import bisect, export, kernels, record, replay, triage, untrusted
from harness import case as case_mod
from harness.environment import environment

TRACKER = "github.com/tile-ai/tilelang/"
ISSUE_LIMIT = 65536    # characters GitHub takes in an issue body
TITLE_LIMIT = 120      # the heading; a longer title follows it in full
_VERSION = r"v?\d+(?:\.\d+)+(?:\.?(?:post|rc|dev)\d+)?"
_REPRODUCER = re.compile(r"(?:^|/)([0-9a-f]{12})\.json\b")
_SAME_AS = re.compile(r"\bsame\b[^;]{0,200}?\bas\s+([0-9a-f]{12})\b")
_BISECTED = re.compile(r"\bbisect|\bfirst bad\b|\bfirst fixed\b|\bfixed in\b|\blast good\b", re.I)
_WORKAROUND = re.compile(r"\bworkaround\b|\bwork(?:s|ed)? around\b|\b(?:compiles?|passes) (?:with|without)\b|"
                         r"\bdefault passes compile\b", re.I)


@dataclass
class Links:
    """A reproducer's links, sorted by what they record."""
    tracker: list[str] = field(default_factory=list)
    reproducers: dict[str, str] = field(default_factory=dict)   # id -> the link's text
    bisects: list[str] = field(default_factory=list)
    searches: list[str] = field(default_factory=list)
    workarounds: list[str] = field(default_factory=list)
    other: list[str] = field(default_factory=list)


@dataclass
class Report:
    text: str
    summary: list[str]     # the one-line account the command prints


def sort_links(links: list[str]) -> Links:
    out = Links()
    for link in links:
        m = _REPRODUCER.search(link.split(" ", 1)[0])
        if TRACKER in link:
            out.tracker.append(link)
        elif m:
            out.reproducers[m.group(1)] = link
        elif _BISECTED.search(link):
            out.bisects.append(link)
        elif link.lower().startswith("searched"):
            out.searches.append(link)
        elif re.search(r"\bwork ?around\b", link, re.I):
            out.workarounds.append(link)
        else:
            out.other.append(link)
    return out


# ----------------------------------------------------------------------------- related reproducers
def others(directory: Path, own_id: str) -> dict[str, record.Reproducer]:
    """The readable reproducers of `directory` but `own_id`."""
    found = {}
    for path in sorted(Path(directory).glob("*.json")):
        try:
            rep = record.load(path)
        except record.RecordError:
            continue  # a broken file is `harness repro`'s to report
        if rep.id != own_id:
            found[rep.id] = rep
    return found


def same_root_cause(rep, known: dict) -> dict[str, str]:
    """{id: why} of the reproducers that share `rep`'s root cause: linked from either side, or a title
    saying "the same ... as <id>" (either side)."""
    why = {}
    for other, text in sort_links(rep.links).reproducers.items():
        why[other] = f"linked from this one: {text}"
    for other in _SAME_AS.findall(rep.title):
        why.setdefault(other, "this title says the same as it")
    for other, o in known.items():
        if rep.id in sort_links(o.links).reproducers:
            why.setdefault(other, f"links this one: {sort_links(o.links).reproducers[rep.id]}")
        elif rep.id in _SAME_AS.findall(o.title):
            why.setdefault(other, "its title says the same as this one")
    why.pop(rep.id, None)
    return why


def primary(rep, directory: Path):
    """The reproducer whose report covers `rep`'s bug, so that one root cause gets one report: of `rep`
    and those sharing its root cause, the one the others name most (in their titles and links); ties go
    to the smallest id. The others are listed in its report as more faces of the same bug."""
    known = {**others(directory, rep.id), rep.id: rep}
    group = sorted({rep.id, *(o for o in same_root_cause(rep, known) if o in known)})

    def named(i: str) -> int:
        return sum(json.dumps([known[o].title, known[o].links]).count(i) for o in group if o != i)

    return known[max(group, key=named)]


# ----------------------------------------------------------------------------- bisects
def link_bisect(text: str) -> tuple[str, str]:
    """A recorded bisect note: (the releases it names, or "recorded"; the note itself, quoted)."""
    found = []
    for label, pattern in (("first bad", r"first bad(?: release| commit)? (" + _VERSION + r"|[0-9a-f]{7,40})\b"),
                           ("last good", r"last good(?: release| commit)? (" + _VERSION + r"|[0-9a-f]{7,40})\b"),
                           ("first fixed", r"(?:first fixed(?: release)?|fixed in(?: release)?) (" + _VERSION + r")\b")):
        m = re.search(pattern, text)
        if m:
            found.append(f"{label} {m.group(1)}")
    return ", ".join(found) or "recorded", f'recorded: "{text}"'


def _is_commit_note(text: str) -> bool:
    """A note of a bisect across commits (`harness bisect --repo`), not releases."""
    return "--repo" in text or bool(re.search(r"\b(?:first bad|last good|first fixed) commit\b", text))


class _Untested(Exception):
    pass


def state_result(path: Path, rep_id: str) -> tuple[str, tuple[str, str]] | None:
    """("release" or "commit", (result, where it is recorded)) for a `harness bisect` state file of
    `rep_id`, else None."""
    try:
        state = untrusted.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(state, dict) or state.get("reproducer") != f"{rep_id}.json":
        return None
    order, steps = [str(v) for v in state.get("order") or []], state.get("steps") or {}
    kind = "release" if all(_version(v) for v in order) and order else "commit"
    done = ", ".join(f"{v} {bisect.WORDS.get(s.get('status'), s.get('status'))}" for v, s in steps.items()) or "none"

    def test(v):
        if v not in steps:
            raise _Untested(v)
        return steps[v]["status"]

    where = f"state {path}: --good {state.get('good')} --bad {state.get('bad')}"
    if len(order) < 2:
        return kind, ("not finished", f"{where}; steps: {done}")
    try:
        lo, hi, skipped = bisect.search(order, test)
    except _Untested as e:
        return kind, ("not finished", f"{where}; steps so far: {done}; next: {e}")
    except bisect.BisectError as e:
        return kind, (f"did not conclude: {e}", where)
    first_bad, last_good = order[hi], order[lo]
    if kind == "release" and _version(order[0]) > _version(order[-1]):
        line = f"first fixed release {last_good}, the last with the bug {first_bad}"
    else:
        line = f"first bad {kind} {first_bad}, last good {last_good}"
    if skipped:
        line += f" (untestable between them: {', '.join(order[i] for i in skipped)})"
    return kind, (line, f"{where}; steps: {done}")


def _version(text) -> Version | None:
    try:
        return Version(str(text))
    except InvalidVersion:
        return None


def state_files(rep_id: str, envs: Path | None, extra=()) -> list[Path]:
    """The state files `harness bisect` leaves under --envs for `rep_id`, and those named."""
    found = sorted(Path(envs).expanduser().glob(f"bisect-{rep_id}-*.json")) if envs else []
    return found + [Path(p) for p in extra if Path(p) not in found]


def bisects(rep, links: Links, states: list[Path]) -> dict[str, list[tuple[str, str]]]:
    """{"release": [(result, where recorded)], "commit": [...]} from the reproducer's links and the
    state files."""
    out = {"release": [], "commit": []}
    for text in links.bisects:
        out["commit" if _is_commit_note(text) else "release"].append(link_bisect(text))
    for path in states:
        found = state_result(path, rep.id)
        if found:
            out[found[0]].append(found[1])
    return out


def bisect_command(rep, known: dict, related: dict[str, dict]) -> tuple[str, str]:
    """The `harness bisect` command to run, and where its --good comes from. --bad is the release the
    reproducer was recorded on; --good the last good release recorded for a reproducer of the same
    root cause, else the oldest release a reproducer here was recorded on (the newest, when this one
    is the oldest: then the bisect looks for the fix). Neither is known good for this case: the
    bisect tests both ends first."""
    bad = rep.environment.get("tilelang", "")
    command = f"harness bisect {rep.id} --good {{}} --bad {bad or 'BAD'}"
    for other, found in related.items():
        for short, _ in found["release"]:
            m = re.search(r"last good (" + _VERSION + ")", short)
            if m and _version(bad) and (_version(m.group(1)) or _version(bad)) < _version(bad):
                return (command.format(m.group(1)), f"--good {m.group(1)}: the last good release recorded for {other} "
                        "(same root cause); not known good for this case")
    releases = sorted({v for v in (_version(o.environment.get("tilelang")) for o in [rep, *known.values()]) if v})
    if not _version(bad) or len(releases) < 2:
        return command.format("GOOD"), "GOOD: a release where the case behaves; none recorded"
    if _version(bad) == releases[0]:
        good, where = releases[-1], "the newest release a reproducer here was recorded on (looking for the fix)"
    else:
        good, where = releases[0], "the oldest release a reproducer here was recorded on"
    return command.format(good), f"--good {good}: {where}; not known good for this case"


# ----------------------------------------------------------------------------- the sections
def _fence(text: str, lang="") -> list[str]:
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return [fence + lang, text.rstrip("\n"), fence]


def _recorded(value) -> str:
    return value if value not in (None, "") else "not recorded"


def heading(rep) -> list[str]:
    title = " ".join(rep.title.split())
    short = title if len(title) <= TITLE_LIMIT else title[:TITLE_LIMIT - 1].rsplit(" ", 1)[0] + "…"
    lines = [f"# {short}", ""]
    if short != title:
        lines += [f"> {title}", ""]
    return lines + [f"Reproducer `{rep.id}` of a correctness harness for TileLang attention kernels: "
                    f"{rep.result.verdict}.", ""]


def environment_section(rep) -> list[str]:
    env = rep.environment
    version = _recorded(env.get("tilelang"))
    if env.get("tilelang_commit"):
        version += f" (commit {env['tilelang_commit']})"
    rows = [("TileLang", version), ("GPU", _recorded(env.get("gpu"))), ("Driver", _recorded(env.get("driver"))),
            ("CUDA", _recorded(env.get("cuda")))]
    rows += [(name, env[key]) for name, key in (("Compute capability", "capability"), ("nvcc", "nvcc"),
                                                ("torch", "torch"), ("Python", "python")) if env.get(key)]
    if env.get("examples_module"):
        release, digest = _recorded(env.get("examples_release")), _recorded(env.get("examples_sha256"))
        rows.append(("TileLang example", f"examples/{env['examples_module']} of release {release}, sha256 {digest}"))
    return ["## Environment (as recorded)", "", "| | |", "|---|---|", *[f"| {k} | {v} |" for k, v in rows], ""]


def program_section(rep, program: Path, other_links: list[str]) -> tuple[list[str], str]:
    """The standalone program, written by harness.export and embedded; or why not, with the harness
    command that reproduces it instead. Also the one-line account."""
    lines = ["## Reproducer", ""]
    fam = kernels.family(rep.case.family)
    repro = f"harness repro {rep.id}"
    if fam.module is not None:
        lines += [f"An outside kernel: TileLang's own `examples/{fam.module}` at the case below. `harness export` "
                  "refuses outside kernels, so there is no standalone program; with the harness:", "",
                  *_fence(f"{repro} --examples PATH   # PATH: that release's examples "
                          "(`harness examples fetch --version RELEASE`)", "sh"), ""]
        account = "program: outside kernel, not exported"
    else:
        try:
            written, calls = export.export(rep, program)
        except (export.ExportError, case_mod.CaseError, ImportError, OSError) as e:
            why = f"{type(e).__name__}: {e}".splitlines()[0]
            lines += [f"`harness export` could not write the standalone program here ({why}); with the harness:", "",
                      *_fence(repro, "sh"), ""]
            account = f"program: not exported ({why})"
        else:
            text = Path(written).read_text()
            lines += [f"A standalone program (needs only tilelang and torch), written by `harness export {rep.id}` "
                      f"to `{written}`. `python {Path(written).name}` exits 1 while the recorded failure is there, "
                      "0 when it is not, 125 when it cannot test (a numerical failure needs a GPU).", "",
                      *_fence(text, "python"), ""]
            account = f"program {written} ({', '.join(c.kernel for c in calls)})"
    if other_links:
        lines += ["Also recorded with the reproducer:", "", *[f"- {link}" for link in other_links], ""]
    return lines, account


def outcome_section(rep) -> list[str]:
    seen = rep.result
    where = ", ".join(f"{k} {v}" for k, v in (("stage", seen.stage), ("tensor", seen.tensor), ("region", seen.region),
                                                ("kernel", seen.kernel)) if v)
    lines = ["## Expected", "", rep.expected, "", "## Observed", "", f"{seen.verdict}" + (f" ({where})" if where else "")
             + ":", "", *_fence(seen.message or "(no message recorded)", "text"), ""]
    lines += [f"- {c['tensor']}: {c['verdict']}, error {c['error']:.4g} against tolerance {c['tolerance']:.4g}"
              for c in seen.checks or []]
    if rep.observed.get("flaky"):
        f = rep.observed["flaky"]
        lines.append(f"- reproduced {f['reproduced']} of {f['runs']} runs"
                     + (" (deterministic)" if f.get("deterministic") else " (not deterministic)"))
    if lines[-1] != "":
        lines.append("")
    lines += ["The case (the harness's; the program above is built from it):", "",
              *_fence(json.dumps(case_mod.to_dict(rep.case)), "json"), ""]
    return lines


def bisect_section(rep, found: dict, related: dict[str, dict], command: tuple[str, str]) -> list[str]:
    """Release and commit bisects as recorded (this reproducer's, then those of the same root cause);
    with none of its own, "not bisected" and the command to run, or "not run"."""
    gpu = "; needs a GPU: the reproducer is numerical" if rep.needs_gpu else ""
    lines = []
    for kind, heading_, none in (("release", "## Release bisect", [f"Not bisected. To run ({command[1]}{gpu}):", "",
                                                                    *_fence(command[0], "sh")]),
                                 ("commit", "## Commit bisect", ["Not run."])):
        own = [f"- {short} ({where})" for short, where in found[kind]]
        theirs = [f"- {other} (same root cause): {short} ({where})" for other, f in related.items()
                  for short, where in f[kind]]
        lines += [heading_, "", *(own or none), *([""] + theirs if theirs else []), ""]
    return lines


def culprit(rep, arch="sm_90a", env=None, unavailable: str | None = None) -> tuple[list[str], str]:
    """What `harness triage <id>` prints, run here (the pass that raised a compile error, or the pass
    that made a generated-code hazard, with the IR excerpt), or one line saying why not; and a
    one-line account."""
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


def workaround_section(rep, links: Links) -> list[str]:
    said = [f"- {link}" for link in links.workarounds]
    said += [f'- the title records: "{clause.strip()}"' for clause in re.split(r"(?<=[.;])\s+", rep.title)
             if _WORKAROUND.search(clause)]
    lines = ["## Workaround", "", *(said or ["None known."])]
    if rep.case.knobs:
        lines += ["", f"The case turns on these compile knobs (TileLang pass configs): {', '.join(rep.case.knobs)}."]
    return lines + [""]


def duplicates_section(rep, links: Links, related: dict[str, record.Reproducer]) -> list[str]:
    lines = ["## Duplicates searched", ""]
    theirs = [(other, link) for other, o in related.items() for link in sort_links(o.links).tracker
              if link not in links.tracker]
    if links.tracker or theirs:
        lines += [f"- {link}" for link in links.tracker] + [f"- {link} (recorded on {other})" for other, link in theirs]
    else:
        searched = "; ".join(links.searches) or "nothing recorded"
        lines.append(f"no upstream issue or pull request found (searched: {searched})")
    return lines + [""]


def same_cause_section(why: dict[str, str], known: dict) -> list[str]:
    if not why:
        return []
    lines = ["## Same root cause", ""]
    for other, reason in why.items():
        o = known.get(other)
        title = " ".join(o.title.split()) if o else "(no such reproducer here)"
        title = title if len(title) <= 160 else title[:159].rsplit(" ", 1)[0] + "…"
        verdict = f"{o.result.verdict}, TileLang {o.environment.get('tilelang', '?')}: " if o else ""
        lines.append(f"- `{other}` ({verdict}{title}); {reason}; its own program: `harness export {other}`")
    return lines + [""]


# ----------------------------------------------------------------------------- the whole
def report(rep, program: Path, directory: Path, states=(), envs: Path | None = None, arch="sm_90a",
           unavailable: str | None = None, env=None) -> Report:
    """The report's text; writes the standalone program to `program` on the way."""
    links = sort_links(rep.links)
    known = others(directory, rep.id)
    why = same_root_cause(rep, known)
    related = {o: known[o] for o in why if o in known}
    found = bisects(rep, links, state_files(rep.id, envs, states))
    related_bisects = {o: bisects(r, sort_links(r.links), state_files(o, envs)) for o, r in related.items()}
    program_lines, program_account = program_section(rep, program, links.other)
    triaged, triage_account = culprit(rep, arch, env, unavailable)
    body = [*environment_section(rep), *program_lines, *outcome_section(rep),
            *bisect_section(rep, found, related_bisects, bisect_command(rep, known, related_bisects)),
            "## Culprit pass", "", *triaged, "", *workaround_section(rep, links),
            *duplicates_section(rep, links, related), *same_cause_section(why, known)]
    head = heading(rep)
    text = "\n".join(head + body).rstrip("\n") + "\n"
    if len(text) > ISSUE_LIMIT:
        note = [f"> This report is {len(text)} characters; GitHub takes {ISSUE_LIMIT} in an issue body: attach "
                f"`{program.name}` and leave out the embedded program.", ""]
        text = "\n".join(head + note + body).rstrip("\n") + "\n"
    summary = [program_account,
               "release bisect: " + ("; ".join(short for short, _ in found["release"]) or "not bisected"),
               "commit bisect: " + ("; ".join(short for short, _ in found["commit"]) or "not run"),
               f"culprit: {triage_account}", f"tracker links: {len(links.tracker)}",
               "same root cause: " + (", ".join(why) or "none")]
    return Report(text, summary)


def write(rep, to: Path, directory: Path, **kwargs) -> Report:
    """Write the report to `to` and the standalone program beside it (<id>.standalone.py)."""
    to = Path(to)
    to.parent.mkdir(parents=True, exist_ok=True)
    out = report(rep, to.with_name(f"{rep.id}.standalone.py"), directory, **kwargs)
    to.write_text(out.text)
    return out
