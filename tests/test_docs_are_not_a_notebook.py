"""docs/ describes the tool as it is; dated studies live in findings/, listed newest first in its README.

A date (2026-11-24, 2026-11, "November 2026") or a git commit hash in docs/ marks a lab-notebook line: such a
line belongs in a dated findings file. docs/ name such a file by its topic (its name after the date) in a link
to findings/README.md, `[fast-math](../findings/README.md)`, so that no date enters docs/ even as a path; each
such topic must name exactly one file. A hex token of 7 to 40 characters is taken for a commit hash unless a
reproducer of that id exists (reproducers/<group>/<id>.json): reproducer ids are hex too, and docs may name them.
"""
import re
from pathlib import Path

import pytest

from harness import reproducer_files

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
FINDINGS = ROOT / "findings"

_MONTH = (r"(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?|Sep(?:t(?:ember)?)?"
          r"|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)")
DATES = [
    re.compile(r"(?<!\d)20\d\d[-/.][01]\d(?:[-/.][0-3]\d)?(?!\d)"),                  # 2026-11-24, 2026-11, 2026/11/24
    re.compile(rf"\b{_MONTH}\.?\s+(?:[0-3]?\d(?:st|nd|rd|th)?,?\s+)?20\d\d\b"),        # November 2026, Nov 24, 2026
    re.compile(rf"\b[0-3]?\d(?:st|nd|rd|th)?\s+{_MONTH}\.?,?\s+20\d\d\b"),            # 24 November 2026
]
# Lowercase hex, as git prints it, with a digit and a letter in it: no English word (defaced) and no plain
# number (4294967295) counts. A hash of digits alone escapes; at 7 characters one in 27 is so.
HEX = re.compile(r"(?<![0-9A-Za-z_])(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}(?![0-9A-Za-z_])")
TOPIC_LINK = re.compile(r"\[([^\]]+)\]\((?:\.\./)*findings/(?:README\.md)?\)")
FINDING = re.compile(r"^(\d{4}-\d{2}-\d{2})-[a-z0-9]+(?:-[a-z0-9]+)*\.md$")


def reproducer_ids():
    return {p.stem for p in reproducer_files.paths(ROOT / "reproducers")}


def notebook_lines(text, known_ids):
    """(line number, what) for every date or commit hash in `text`."""
    found = []
    for n, line in enumerate(text.splitlines(), 1):
        found += [(n, f"date {m.group(0)!r}") for pattern in DATES for m in pattern.finditer(line)]
        found += [(n, f"commit hash {m.group(0)!r}") for m in HEX.finditer(line) if m.group(0) not in known_ids]
    return found


def text_files(folder):
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        try:
            yield path, path.read_text(encoding="utf-8")
        except UnicodeDecodeError:  # not a text file
            continue


def test_docs_hold_no_dates_and_no_commit_hashes():
    known = reproducer_ids()
    bad = [f"{path.relative_to(ROOT)}:{n}: {what}"
           for path, text in text_files(DOCS) for n, what in notebook_lines(text, known)]
    assert not bad, ("docs/ describes the tool, not when or at which commit something was measured; move these "
                     "lines to a dated file in findings/ and point to it:\n" + "\n".join(bad))


@pytest.mark.parametrize("planted", [
    "Measured: [the campaigns](../findings/2026-11-25-outside-kernel-campaigns.md).",
    "Measured on the H100 (2026-11-24): 300 PASS.",
    "As of 2026-11 the rule holds.",
    "Rerun in November 2026.",
    "Rerun on Nov 24, 2026.",
    "Rerun on 24 November 2026.",
    "Recorded in commit 865c79a.",
    "Fixed in b07ec47b450e87b749551d5a74ce6853606ba127.",
])
def test_a_planted_date_or_hash_is_found(planted):
    assert notebook_lines(f"# A page\n\n{planted}\n", known_ids=set()), planted


@pytest.mark.parametrize("clean", [
    "Reproducer 54d466153e16 is the numerical consequence.",
    "A PYTHONHASHSEED in [0, 4294967295]; 65536 registers; 0xA5A5A5A5 bytes; sm_90a; fp16.",
    "TileLang 0.1.6.post2 and 0.1.15; PR #2406; tile-ai/tilelang#2566.",
])
def test_reproducer_ids_and_plain_numbers_are_not_notebook_lines(clean):
    assert not notebook_lines(clean, known_ids={"54d466153e16"}), clean


def by_topic():
    """topic (a findings file's name after its date) -> the files of that topic."""
    found = {}
    for p in sorted(FINDINGS.glob("*.md")):
        if FINDING.match(p.name):
            found.setdefault(p.name[len("YYYY-MM-DD-"):-len(".md")], []).append(p.name)
    return found


def topic_links(known):
    """Links from docs/ to findings/README.md whose text names no findings file, or several."""
    return [f"{path.relative_to(ROOT)}: [{topic}] names {known.get(topic) or 'no findings/YYYY-MM-DD-' + topic + '.md'}"
            for path, text in text_files(DOCS) for topic in TOPIC_LINK.findall(text)
            if topic != "findings/" and len(known.get(topic, ())) != 1]


def test_docs_name_each_finding_by_the_topic_of_one_file():
    bad = topic_links(by_topic())
    assert not bad, ("a link from docs/ to findings/README.md names its study by topic, one file's:\n"
                     + "\n".join(bad))


def listed_findings():
    text = (FINDINGS / "README.md").read_text()
    return re.findall(r"^- \[([^\]]+)\]\(([^)]+)\)", text, re.M)


def test_findings_are_dated_files():
    files = sorted(p.name for p in FINDINGS.iterdir() if p.name != "README.md")
    misnamed = [name for name in files if not FINDING.match(name)]
    assert not misnamed, f"findings/ files are named YYYY-MM-DD-<topic>.md (the date the study ran): {misnamed}"


def test_findings_readme_lists_every_finding_newest_first():
    listed = listed_findings()
    assert all(title == target for title, target in listed), f"each line links its file by name: {listed}"
    names = [target for _, target in listed]
    files = sorted(p.name for p in FINDINGS.iterdir() if p.name != "README.md")
    assert sorted(names) == files, (f"findings/README.md lists {sorted(set(names) - set(files))} that do not exist "
                                    f"and misses {sorted(set(files) - set(names))}")
    assert len(set(names)) == len(names), f"listed twice: {sorted(n for n in names if names.count(n) > 1)}"
    dates = [FINDING.match(name).group(1) for name in names]
    assert dates == sorted(dates, reverse=True), f"findings/README.md lists them newest first: {names}"


def anchors(path):
    headings = re.findall(r"^#+ (.+)$", path.read_text(), re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


@pytest.mark.parametrize("page", sorted(FINDINGS.glob("*.md")), ids=lambda p: p.name)
def test_findings_links_resolve(page):
    broken = []
    for link in re.findall(r"\]\(([^)\s]+)\)", page.read_text()):
        if re.match(r"[a-z]+:", link):
            continue
        file, _, anchor = link.partition("#")
        target = (page.parent / file).resolve() if file else page
        if not target.exists():
            broken.append(f"{link} (no file)")
        elif anchor and target.suffix == ".md" and anchor not in anchors(target):
            broken.append(f"{link} (no heading #{anchor})")
    assert not broken, f"findings/{page.name}: broken relative links: {broken}"
