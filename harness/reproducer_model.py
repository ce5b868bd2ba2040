"""A reproducer: one failure of the compiler (or of an example program), what was observed, and what was learned.

Each reproducer says what it is, in its `kind` (FOLDER_OF_KIND): a bug of the compiler, a bug of one of TileLang's
example programs itself, or a candidate not yet confirmed as either; the kind names the group, the folder of
reproducers/ its file lives in (harness.reproducer_files).

Besides what a run records (the case, what was observed, the environment), a reproducer holds what was
learned about it later, each fact in a typed field: its links (`Links`: the tracker issue that is this bug,
the nearest issues and why they differ, the reproducers of the same root cause, the bisects that placed it,
the pull requests that introduced or fix it, the searches run, files kept beside it), the release matrix
(`releases`: what each release did with the case), its witness (`witness`: the code-scan checks its generated code
shows where the failure shows, checked against the release matrix, so that a machine without a GPU can judge a
replay, compile-only; a race's witness shows where the failure can happen, which is where its defect entered), the
triage (`Triage`: the culprit pass and its source, and the controls, one knob or one shape flipped, with their
results), and the words of a report to TileLang's tracker (`Upstream`). harness.upstream and the index read these
fields; nothing parses them back out of text.
`to_dict` writes a reproducer's JSON; harness.reproducer_loading reads it back, strictly.
"""
from __future__ import annotations

import re
from dataclasses import MISSING, dataclass, field, fields

from harness import case as case_mod
from harness.result import Result

SCHEMA = 3  # 3: `kind`, a required field
ID = re.compile(r"[A-Za-z0-9_-]{1,64}")  # what an id may be; fullmatch only: `$` would let a final newline through
MATRIX = ("reproduced", "not reproduced", "fails differently", "cannot test")  # a release's result for a case
# A reproducer's kind -> its group, the folder of reproducers/ that holds it. compiler: TileLang's bug; example: a
# bug of the example program itself (TileLang does what the program says); candidate: not yet confirmed as either.
FOLDER_OF_KIND = {"compiler": "compiler", "example": "examples", "candidate": "candidates"}
KNOWN = ("compiler", "example")  # the kinds a campaign knows: a failure of one is a known bug, a candidate's is new
TITLE_MAX = 100  # a title is one line a person scans in INDEX.md; the rest goes to the description


class RecordError(ValueError):
    """A reproducer file that cannot be read; the message is one line naming the field."""


# ----------------------------------------------------------------------------- what was learned later
@dataclass(frozen=True)
class Issue:
    """An issue or pull request on GitHub. `release`: for a fix, the first release that holds it."""
    repo: str                  # owner/name, e.g. tile-ai/tilelang
    number: int
    kind: str = "issue"        # issue | pull
    state: str = ""            # open | closed | merged; "" not recorded
    note: str = ""
    release: str = ""

    @property
    def url(self) -> str:
        return f"https://github.com/{self.repo}/{'pull' if self.kind == 'pull' else 'issues'}/{self.number}"

    @property
    def ref(self) -> str:
        """#2643, PR #2737 on tile-ai/tilelang; TileOPs#1852 elsewhere in tile-ai."""
        owner, name = self.repo.split("/", 1)
        where = "" if self.repo == "tile-ai/tilelang" else (name if owner == "tile-ai" else self.repo)
        return ("PR " if self.kind == "pull" else "") + f"{where}#{self.number}"


@dataclass(frozen=True)
class Sibling:
    """Another reproducer of the same root cause, and how this one relates to it."""
    id: str
    note: str = ""


@dataclass(frozen=True)
class RecordedBisect:
    """A bisect that ran (`harness bisect`), across releases or commits, from its --good to its --bad: the first
    bad and the last good it found. `fixes`: it looked for the fix (--good newer than --bad), so `last_good` is the
    first without the bug and `first_bad` the last with it."""
    kind: str                  # release | commit
    good: str
    bad: str
    first_bad: str
    last_good: str
    fixes: bool = False
    note: str = ""             # where and how it ran


@dataclass(frozen=True)
class Search:
    """A search of a tracker for this bug, and what it found."""
    query: str
    result: str


@dataclass(frozen=True)
class File:
    """A file kept with the reproducer. kind: standalone (a program that needs only tilelang and torch), cuda
    (generated code), study (a findings page)."""
    path: str
    kind: str
    note: str = ""


@dataclass(frozen=True)
class Links:
    tracker_issue: tuple = ()       # Issue: this bug on a tracker
    related: tuple = ()             # Issue: the nearest issues and pull requests; each note says how it differs
    same_root_cause_as: tuple = ()  # Sibling
    bisected_by: tuple = ()         # RecordedBisect
    fixed_by: tuple = ()            # Issue: merged (in `release`), or open: a proposed fix
    introduced_by: tuple = ()       # Issue: the pull request that introduced the construct
    searches: tuple = ()            # Search
    files: tuple = ()               # File
    notes: tuple = ()               # str: anything else, as written

    def issues(self) -> list:
        """Every issue and pull request linked, this bug's first."""
        return [*self.tracker_issue, *self.fixed_by, *self.introduced_by, *self.related]


@dataclass(frozen=True)
class Release:
    """What one release did with the case (`harness matrix`, `harness repro` with that release)."""
    result: str                # one of MATRIX
    note: str = ""
    predicted: bool = False    # judged compile-only by the reproducer's witness: predicted, not run


@dataclass(frozen=True)
class Culprit:
    """Where in TileLang the bug comes from, as read in the release's source."""
    pass_name: str             # the pass (tl.LowerTileOp), or the stage (CUDA codegen)
    file: str = ""             # under the TileLang source tree
    function: str = ""
    note: str = ""             # what it does wrong, as read


@dataclass(frozen=True)
class Control:
    """The case with one thing changed. `knob`: the compile knob toggled (harness.case.KNOBS), "" for a change of
    shape or program; `ok`: whether the changed case is right (compiles, or runs correctly)."""
    change: str
    result: str
    ok: bool
    knob: str = ""
    source: str = ""           # how it was seen: harness triage, a GPU run, the standalone program


@dataclass(frozen=True)
class Triage:
    culprit: Culprit | None = None
    controls: tuple = ()       # Control


@dataclass(frozen=True)
class Variant:
    """A control of the report's program: `python repro.py --control NAME` runs the program with one change."""
    name: str                  # the --control argument
    change: str                # what it changes, in the language's terms
    gpu: bool = False          # its output needs a GPU (numbers); else it shows compile-only
    workaround: bool = False   # a change a user can make in their program; its output shows it works


@dataclass(frozen=True)
class Upstream:
    """The report's own words: a tracker-style title, and expected / observed in the language's semantics; the root
    cause as read in TileLang's source, the program's controls, and what to do with it (`withdrawn`: why it is not
    filed, kept here)."""
    title: str = ""
    expected: str = ""
    observed: str = ""
    fix: str = ""              # a suggested fix, where the cause is read
    cause: str = ""            # the root cause in TileLang's terms, with the source lines read
    workaround: str = ""       # in words; a control with workaround=True shows it
    provenance: str = ""       # where it came in, beyond the release matrix (a pull request, checked against it)
    gpu: bool = False          # the program's own output needs a GPU
    controls: tuple = ()       # Variant
    withdrawn: str = ""        # why it is not to be filed (the venue is then none)
    hold: str = ""             # what must happen before it is filed (read an answer, a GPU run)
    review: tuple = ()         # str: each point of a maintainer's review, and how it is answered


@dataclass(frozen=True)
class Reproducer:
    id: str
    title: str
    case: case_mod.Case
    expected: str
    observed: dict
    environment: dict
    links: Links = Links()
    minimized_from: case_mod.Case | None = None
    releases: dict = field(default_factory=dict)   # version -> Release
    triage: Triage | None = None
    upstream: Upstream | None = None
    kind: str = "compiler"     # one of FOLDER_OF_KIND: a new recording is the compiler's until triage says otherwise
    description: str = ""      # what the title leaves out: the shape, the evidence, how it was found
    witness: tuple = ()        # ScanCheck names: a compile showing one stands for the recorded failure, where no GPU is

    @property
    def result(self) -> Result:
        """What was observed, as the Result of the case (its keys "case", then those of `observed`)."""
        return Result.from_dict(self.observed, case=self.case)

    @property
    def signature(self) -> tuple:
        """Recomputed from the case and what was observed, so it follows harness.result.normalize."""
        return self.result.signature

    @property
    def scan_checks(self) -> list[str]:
        """The code-scan checks that stand for the recorded failure without a GPU: a hang's `predicted` cause, or the
        `witness` learned for any other failure."""
        seen = self.result
        return list(seen.predicted or ()) if seen.verdict == "HANG" and seen.predicted else list(self.witness)

    @property
    def needs_gpu(self) -> bool:
        """Replaying needs a GPU: all but a compile error and a failure that the code scan explains or witnesses."""
        return self.result.verdict != "COMPILE_ERROR" and not self.scan_checks

    def to_dict(self) -> dict:
        return {"schema": SCHEMA, "id": self.id, "title": self.title, "description": self.description, "kind": self.kind,
                "case": case_mod.to_dict(self.case),
                "expected": self.expected, "observed": self.observed, "environment": self.environment,
                "links": _links_dict(self.links), "releases": {v: _plain(r) for v, r in self.releases.items()},
                "triage": _plain(self.triage) if self.triage else None,
                "upstream": _plain(self.upstream) if self.upstream else None,
                "minimized_from": case_mod.to_dict(self.minimized_from) if self.minimized_from else None,
                **({"witness": list(self.witness)} if self.witness else {})}


def _plain(obj) -> dict:
    """A typed fact as JSON: its fields, those at their default left out."""
    if isinstance(obj, Triage):
        return {"culprit": _plain(obj.culprit) if obj.culprit else None, "controls": [_plain(c) for c in obj.controls]}
    d = {f.name: getattr(obj, f.name) for f in fields(obj)
         if f.default is MISSING or getattr(obj, f.name) != f.default}
    if isinstance(obj, Culprit):
        d["pass"] = d.pop("pass_name")
    if isinstance(obj, Upstream):
        d = {k: ([_plain(c) for c in v] if k == "controls" else list(v) if k == "review" else v) for k, v in d.items()}
    return d


def _links_dict(links: Links) -> dict:
    return {f.name: [x if isinstance(x, str) else _plain(x) for x in getattr(links, f.name)]
            for f in fields(links) if getattr(links, f.name)}
