"""The reports in reproducers/upstream/*.md are read by people who have never seen this project: two checks on what
they hold, each shown to fail on a planted report (tests/fixtures/upstream_planted/) before it passes on the real ones.

1. The deny list (DENY below): nothing of the tool that wrote a report is in it: no command of the tool, none of its
   words (knob, campaign, run numbers, the code scan, ...), no path into this project, no date, no JSON block of the
   tool's case, and no reproducer id except in the one footer line (FOOTER).
2. The printed error: a report's program, where the record observed a compile error, prints the error TileLang raised,
   and it is the one the record observed: the record's message, whitespace aside, is in the output pasted under
   "## Output". A program that prints the error it expects (a constant) instead of the one raised fails.
"""
import re
from pathlib import Path

import pytest

from harness import reproducer_files, reproducer_loading

ROOT = Path(__file__).resolve().parent.parent
PLANTED = Path(__file__).resolve().parent / "fixtures" / "upstream_planted"
REPORTS = sorted((ROOT / "reproducers" / "upstream").glob("*.md"))

# The deny list: (pattern, what it catches). Case-insensitive; each is something a maintainer cannot act on or
# that names this project rather than TileLang.
DENY = [
    (r"\bharness\b", "the tool's name and its commands (harness repro/triage/bisect/reduce/export/upstream)"),
    (r"\bknobs?\b", "the tool's word for a pass config it flips"),
    (r"\bcampaigns?\b", "the tool's runs"),
    (r"\bruns? \d+(\s*/\s*\d+)*\b(?! (?:times|launches|of|out))", "a run number of the tool ('run 15', 'run 11/15')"),
    (r"own draw\b", "the tool's random draws ('CI's own draw')"),
    (r"\bcode scan\b", "the tool's scan of generated CUDA"),
    (r"\bpacked tree\b|\bTILELANG_SRC\b|\bstored copy\b", "how the tool fetched TileLang or the trackers"),
    (r"\bguard bands?\b|\bsentinel\b", "the tool's out-of-bounds bands"),
    (r"\b(?:signature|verdict|triage)\b", "the tool's record fields"),
    # Upper case only: TileLang's own messages say "Unsupported ...".
    (r"(?-i:\b(?:COMPILE_ERROR|OOB_WRITE|OOB_READ|NONFINITE|HARNESS_ERROR|UNSUPPORTED)\b)", "the tool's verdict names"),
    (r"\bminimi[sz](?:ed|er|ation)\b|\breduced by\b", "the tool's reduction of the case"),
    (r"(?<![\w/])(?:reproducers|findings|cases|scripts|harness|docs)/|/work/|\.min\.py\b|\.standalone\.py\b",
     "a path into this project"),
    (r"\b20\d\d-\d\d-\d\d\b", "a date (in a control cell or a search)"),
    (r"```json", "a JSON block (the tool's case)"),
    (r"\bthis project\b|\bour (?:tool|harness)\b", "the project speaking of itself"),
]
ID = re.compile(r"\b[0-9a-f]{12}\b")
FOOTER = re.compile(r"^Reproducer id: [0-9a-f]{12}$")


def leaks(text: str) -> list[str]:
    """Each denied word in `text` with the line it is on; the footer (the last line, FOOTER) alone may name an id."""
    lines = text.rstrip("\n").splitlines()
    found = []
    if not lines or not FOOTER.match(lines[-1]):
        found.append("no footer line 'Reproducer id: <id>' at the end")
    body = lines[:-1] if lines and FOOTER.match(lines[-1]) else lines
    for n, line in enumerate(body, 1):
        for pattern, what in DENY:
            m = re.search(pattern, line, re.IGNORECASE)
            if m:
                found.append(f"line {n}: {m.group(0)!r} ({what})")
        for m in ID.finditer(line):
            found.append(f"line {n}: {m.group(0)!r} (an id outside the footer)")
    return found


def printed_output(text: str) -> str:
    """The first fenced block under '## Output': what the program printed, pasted from its run."""
    part = text.split("\n## Output\n", 1)
    if len(part) < 2:
        return ""
    m = re.search(r"^(`{3,})text\n(.*?)\n\1$", part[1].split("\n## ", 1)[0], re.S | re.M)
    return m.group(2) if m else ""


def _flat(s: str) -> str:
    return " ".join(s.split())


def wrong_error(text: str, observed: str) -> str | None:
    """Why the program's printed output does not hold the error observed, or None."""
    out = printed_output(text)
    if not out:
        return "no output pasted under '## Output'"
    if _flat(observed) not in _flat(out):
        return f"the output does not hold the error observed ({observed[:80]!r}...): {out[:200]!r}"
    return None


# ----------------------------------------------------------------------------- the checks fail on a planted report
def test_the_deny_list_catches_the_planted_report():
    found = leaks((PLANTED / "19be18df3f5c.md").read_text())
    for word in ("'harness'", "'knob'", "'run 11'", "'2026-11-27'", "'```json'", "'campaign'",
                 "'05fb3376a592'", "'19be18df3f5c'", "'.min.py'", "no footer line"):
        assert any(word in f for f in found), (word, found)


def test_the_printed_error_check_catches_a_program_printing_the_expected_error():
    observed = (PLANTED / "19be18df3f5c.observed.txt").read_text().strip()
    text = (PLANTED / "19be18df3f5c.md").read_text()
    assert wrong_error(text, observed) is not None
    # The same report with the error TileLang raised pasted passes.
    fixed = text.replace('REPRODUCED: InternalError )) has errors: ("The iterations do not traverse full iter space", '
                         '"Index mapping does not form a bijective transform.")', "REPRODUCED: " + observed)
    assert wrong_error(fixed, observed) is None


def test_a_clean_report_passes_the_deny_list():
    text = ("# [BUG] T.clear of a shared tile before a pipelined loop fails layout inference\n\n## Output\n\n"
            "```text\nREPRODUCED: InternalError: x\n```\n\nRan 20 launches; run 3 of 20 times. ValueError: Unsupported gemm.\n"
            "\nReproducer id: 2778bbcd62f3\n")
    assert leaks(text) == []
    assert leaks(text.replace("Ran 20", "UNSUPPORTED: ran 20")) != []


# ----------------------------------------------------------------------------- the reports committed
@pytest.mark.parametrize("path", REPORTS, ids=[p.stem for p in REPORTS])
def test_a_report_holds_nothing_of_the_tool(path):
    assert leaks(path.read_text()) == []


@pytest.mark.parametrize("path", REPORTS, ids=[p.stem for p in REPORTS])
def test_a_report_prints_the_error_observed(path):
    rep = reproducer_loading.load(reproducer_files.find(path.stem, ROOT / "reproducers"))
    if rep.result.verdict != "COMPILE_ERROR":
        pytest.skip("not a compile error: its output is numbers")
    why = wrong_error(path.read_text(), rep.result.message)
    assert why is None, why
