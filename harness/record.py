"""Reproducer files: reproducers/<group>/<id>.json, one per failure signature.

The id is the first 12 hex digits of the SHA-1 of the failure signature, so it is stable
across machines and across minimization (which keeps the signature), and one bug gets one
file. Loading is strict: every malformed file raises RecordError naming the field.

Each file says what it is, in its `kind` (KINDS): a bug of the compiler, a bug of one of TileLang's example programs
itself, or a candidate not yet confirmed as either; the kind names the group, the folder of reproducers/ it lives in.
Every lookup of a reproducer's file goes through here: `paths` lists them, `find` resolves an id or a unique prefix
of one, `file_path` says where one goes.

Besides what a run records (the case, what was observed, the environment), a reproducer holds what was
learned about it later, each fact in a typed field: its links (`Links`: the tracker issue that is this bug,
the nearest issues and why they differ, the reproducers of the same root cause, the bisects that placed it,
the pull requests that introduced or fix it, the searches run, files kept beside it), the release matrix
(`releases`: what each release did with the case), the triage (`Triage`: the culprit pass and its source, and
the controls, one knob or one shape flipped, with their results), and the words of a report to TileLang's
tracker (`Upstream`). harness.upstream and the index read these fields; nothing parses them back out of text.
"""
from __future__ import annotations

import hashlib
import json
import re
from dataclasses import MISSING, dataclass, field, fields, replace
from pathlib import Path

from harness import case as case_mod
from harness import kernels, oracle, untrusted
from harness.environment import NO_GPU
from harness.programs.model import fingerprint
from harness.result import Result

SCHEMA = 3  # 3: `kind`, a required field
_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")  # fullmatch only: `$` would let a final newline through
MATRIX = ("reproduced", "not reproduced", "fails differently", "cannot test")  # a release's result for a case
# A reproducer's kind -> its group, the folder of reproducers/ that holds it. compiler: TileLang's bug; example: a
# bug of the example program itself (TileLang does what the program says); candidate: not yet confirmed as either.
KINDS = {"compiler": "compiler", "example": "examples", "candidate": "candidates"}
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
class Bisect:
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
    bisected_by: tuple = ()         # Bisect
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
    kind: str = "compiler"     # one of KINDS: a new recording is the compiler's until triage says otherwise
    description: str = ""      # what the title leaves out: the shape, the evidence, how it was found

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
        """The code-scan checks that explain a recorded hang (its `predicted` cause): without a GPU they are its
        evidence."""
        seen = self.result
        return list(seen.predicted or ()) if seen.verdict == "HANG" else []

    @property
    def needs_gpu(self) -> bool:
        """Replaying needs a GPU: all but a compile error and a hang that the code scan explains."""
        return self.result.verdict != "COMPILE_ERROR" and not self.scan_checks

    def to_dict(self) -> dict:
        return {"schema": SCHEMA, "id": self.id, "title": self.title, "description": self.description, "kind": self.kind,
                "case": case_mod.to_dict(self.case),
                "expected": self.expected, "observed": self.observed, "environment": self.environment,
                "links": _links_dict(self.links), "releases": {v: _plain(r) for v, r in self.releases.items()},
                "triage": _plain(self.triage) if self.triage else None,
                "upstream": _plain(self.upstream) if self.upstream else None,
                "minimized_from": case_mod.to_dict(self.minimized_from) if self.minimized_from else None}


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
    return {name: [x if isinstance(x, str) else _plain(x) for x in getattr(links, name)]
            for name in _LINKS if getattr(links, name)}


# ----------------------------------------------------------------------------- building
def signature_id(signature) -> str:
    return hashlib.sha1(json.dumps(list(signature)).encode()).hexdigest()[:12]


def expected_text(case) -> str:
    names = ", ".join(name for name, _ in kernels.family(case.family).judge.tensors(case))
    if case.program:
        return (f"the program compiles, runs without a CUDA error, writes nothing past a buffer, and {names} hold what "
                "the program means (its torch meaning in float64): bit for bit where the arithmetic is exact, else within "
                "the tolerance rule; compiled with its knobs, bit for bit what it gives without them")
    return (f"the {case.family} kernel compiles, runs without a CUDA error or hang, and {names} match the "
            f"float64 reference within the FlashAttention tolerance rule "
            f"max|t - ref| <= k * max|base - ref| + atol (k = {oracle.K_FORWARD} forward, "
            f"{oracle.K_GRADIENT} gradients)")


def _feature(name, value) -> str:
    if isinstance(value, bool):
        return name
    if name == "program":
        return f"program [{fingerprint(value)}]"
    if name == "forms":
        value = case_mod.form_names(value)
    return value if isinstance(value, str) else f"{name}={list(value) if isinstance(value, tuple) else value}"


def split_title(text: str) -> tuple[str, str]:
    """(title, rest): `text` on one line, cut at the last word boundary within TITLE_MAX characters."""
    words = " ".join(text.split())
    if len(words) <= TITLE_MAX:
        return words, ""
    cut = words.rfind(" ", 0, TITLE_MAX + 1)
    cut = cut if cut > 0 else TITLE_MAX  # one word longer than a title: cut inside it
    return words[:cut].rstrip(), words[cut:].strip()


def _made_title(result: Result) -> str:
    """The construct and the symptom: family/variant, verdict, where; the features and shape go to the description."""
    c = result.case
    what = " ".join(x for x in (result.verdict, result.tensor, result.region) if x)
    return f"{c.family}/{c.variant}: {what} at stage {result.stage}"


def default_title(result: Result) -> str:
    """The title build() makes when none is given."""
    return split_title(_made_title(result))[0]


def default_description(result: Result) -> str:
    """The case's static features and its shape, which a default title leaves out."""
    c = result.case
    feats = [_feature(name, value) for name, value in case_mod.features_on(c, static_only=True).items()]
    if c.program:  # its shape is the program's own
        p = c.program
        shape = f"n={c.seqlen_q} block={p.block} threads={p.threads}"
    else:
        shape = (f"b={c.batch} h={c.heads}/{c.kv_heads} sq={c.seqlen_q} sk={c.seqlen_k} "
                 f"d={c.head_dim}/{c.head_dim_v} tile={c.block_m}x{c.block_n}/{c.num_stages}/{c.threads}")
    return ", ".join(feats + [shape])


def observed(result: Result, flaky: dict | None = None) -> dict:
    """A reproducer's `observed` section (with the cause the code scan predicts, for a HANG it explains)."""
    return {"verdict": result.verdict.value, "stage": result.stage, "tensor": result.tensor, "region": result.region,
            "message": result.message, "kernel": result.kernel, "traceback": result.traceback,
            "signature": list(result.signature), "checks": result.checks if result.checks is not None else [],
            "flaky": flaky, **({"predicted": list(result.predicted)} if result.predicted else {})}


def build(result: Result, env: dict, title=None, flaky=None, minimized_from=None, id=None,
          description=None) -> Reproducer:
    """`description`: None for the case's features and shape (default_description); a title longer than TITLE_MAX
    is cut, its rest put before the description."""
    if not result.failed:  # a HARNESS_ERROR is ours, never the compiler's
        raise ValueError(f"only compiler failures {oracle.FAILURES} are recorded, not {result.verdict}")
    case = result.case
    title, rest = split_title(title or _made_title(result))
    about = default_description(result) if description is None else description
    return Reproducer(id or signature_id(result.signature), title, case, expected_text(case), observed(result, flaky),
                      {**env, **program_of(case)}, Links(), minimized_from,
                      description="; ".join(x for x in (rest, about) if x))


def program_of(case) -> dict:
    """For a kernel nobody here wrote: the TileLang examples' release, the file and its sha256,
    so that a reproducer names the program it ran (--examples must give the same file)."""
    module = kernels.family(case.family).runner.module
    if module is None:
        return {}
    from harness.outside import source
    return {"examples_release": source.version(source.root()) or "", "examples_module": module,
            "examples_sha256": source.digest(module)}


# ----------------------------------------------------------------------------- files
def file_name(id: str) -> str:
    """The name of a reproducer's file, in whichever group (a bisect state names its reproducer so)."""
    return f"{id}.json"


def file_path(root, kind: str, id: str) -> Path:
    """Where the reproducer `id` of `kind` lives under the reproducers folder `root`: root/<group>/<id>.json."""
    return Path(root) / KINDS[kind] / file_name(id)


def paths(root) -> list[Path]:
    """Every reproducer file under `root`, group by group in KINDS' order, each sorted by id. A folder of
    reproducers without groups (one group's, as `--dir reproducers/examples`) lists its own."""
    root = Path(root)
    return [p for folder in (root, *(root / group for group in KINDS.values())) for p in sorted(folder.glob("*.json"))]


def save(rep: Reproducer, root) -> Path:
    """Write `rep` into its group under `root` (file_path()), replacing what was there."""
    return save_as(rep, file_path(root, rep.kind, rep.id))


def save_as(rep: Reproducer, to) -> Path:
    """Write `rep` to the file `to`, replacing what was there (a minimized reproducer replaces its file)."""
    to = Path(to)
    to.parent.mkdir(parents=True, exist_ok=True)
    to.write_text(json.dumps(rep.to_dict(), indent=2) + "\n")
    return to


def write(result: Result, env: dict, root, title=None, flaky=None, minimized_from=None) -> Path:
    """Record a failure in the compiler's group under `root`, unless its signature is already recorded (in any
    group, a candidate's too): then return that file."""
    sig = result.signature
    known = known_signatures(root, kinds=tuple(KINDS)).get(sig)
    if known:
        return known
    return save(build(result, env, title, flaky, minimized_from, id=free_id(sig, root)), root)


def free_id(signature, root) -> str:
    """The signature's id, unless a reproducer whose signature was edited since (a sharper
    message) holds that id: then the first free id of (signature, 2), (signature, 3), ..."""
    taken = {p.stem for p in paths(root)}
    id, n = signature_id(signature), 1
    while id in taken:
        n += 1
        id = signature_id([*signature, n])
    return id


def known_signatures(root, broken: list | None = None, kinds=KNOWN) -> dict:
    """{signature: path} of the readable reproducers of `kinds` under `root` (the known bugs: no candidate); the
    unreadable files' paths go to `broken`."""
    known = {}
    for p in paths(root):
        try:
            rep = load(p)
        except RecordError:
            if broken is not None:
                broken.append(p)
            continue
        if rep.kind in kinds:
            known.setdefault(rep.signature, p)
    return known


def skipped_line(root, broken: list) -> str:
    """The one warning for the files under `root` that are not reproducers (known_signatures' `broken`)."""
    names = ", ".join(p.name for p in broken[:3]) + (f" and {len(broken) - 3} more" if len(broken) > 3 else "")
    return f"{root}: {len(broken)} .json file(s) are not reproducers, skipped ({names}; `harness repro FILE` says why)"


def find(id_or_path, root="reproducers") -> Path:
    """A path to an existing file, an id under `root` (in any group), or a unique prefix of one."""
    p = Path(id_or_path)
    try:
        if p.is_file():
            return p
        folder = p.is_dir()
    except OSError as e:  # a name too long for a file, say
        raise RecordError(f"no reproducer file {str(id_or_path)[:60]!r}: {e.strerror or e}") from None
    if not _ID.fullmatch(str(id_or_path)):  # a path (loop.json, dir/x), not an id: no <dir>/loop.json.json to name
        raise RecordError(f"no reproducer file {str(id_or_path)[:80]!r}" + (f": {p} is a directory" if folder else "")
                          + ("" if folder or "/" in str(id_or_path) else
                             "; an id is 1 to 64 letters, digits, '_' or '-'"))
    matches = [m for m in paths(root) if m.stem.startswith(str(id_or_path))]
    exact = [m for m in matches if m.stem == str(id_or_path)]
    if exact or len(matches) == 1:
        return (exact or matches)[0]
    if matches:
        raise RecordError(f"{id_or_path!r} is ambiguous in {root}: {', '.join(m.stem for m in matches)}")
    raise RecordError(f"no reproducer {id_or_path!r}: not a file, and no {file_name(id_or_path)} in {root} or its "
                      f"groups ({', '.join(KINDS.values())})")


# ----------------------------------------------------------------------------- strict loading
_NUMBER = (int, float)
_TOP = {"schema": int, "id": str, "title": str, "description": (str, None), "kind": str, "case": dict,
        "expected": str, "observed": dict, "environment": dict, "links": dict, "releases": (dict, None),
        "triage": (dict, None), "upstream": (dict, None), "minimized_from": (dict, None)}
_OBSERVED = {"verdict": str, "stage": str, "tensor": str, "region": str, "message": str, "kernel": (str, None),
             "traceback": str, "signature": list, "checks": list, "flaky": (dict, None), "predicted": (list, None)}
_FLAKY = {"runs": int, "reproduced": int, "deterministic": bool}
_CHECK = {"tensor": str, "ok": bool, "verdict": str, "error": _NUMBER, "tolerance": _NUMBER}  # extra keys allowed


_ISSUE = {"repo": str, "number": int, "kind": (str, None), "state": (str, None), "note": (str, None), "release": (str, None)}
_FACTS = {Issue: _ISSUE, Sibling: {"id": str, "note": (str, None)},
          Bisect: {"kind": str, "good": str, "bad": str, "first_bad": str, "last_good": str, "fixes": (bool, None),
                   "note": (str, None)},
          Search: {"query": str, "result": str}, File: {"path": str, "kind": str, "note": (str, None)},
          Release: {"result": str, "note": (str, None)},
          Culprit: {"pass": str, "file": (str, None), "function": (str, None), "note": (str, None)},
          Control: {"change": str, "result": str, "ok": bool, "knob": (str, None), "source": (str, None)},
          Variant: {"name": str, "change": str, "gpu": (bool, None), "workaround": (bool, None)},
          Upstream: {"title": (str, None), "expected": (str, None), "observed": (str, None), "fix": (str, None),
                     "cause": (str, None), "workaround": (str, None), "provenance": (str, None), "gpu": (bool, None),
                     "controls": (list, None), "withdrawn": (str, None), "hold": (str, None),
                     "review": (list, None)}}
# links: field -> the type of its items (str: as written)
_LINKS = {"tracker_issue": Issue, "related": Issue, "same_root_cause_as": Sibling, "bisected_by": Bisect,
          "fixed_by": Issue, "introduced_by": Issue, "searches": Search, "files": File, "notes": str}
_CHOICES = {(Issue, "kind"): ("issue", "pull"), (Issue, "state"): ("open", "closed", "merged"),
            (Bisect, "kind"): ("release", "commit"), (File, "kind"): ("standalone", "cuda", "study"),
            (Release, "result"): MATRIX}


def _fact(cls, d, where: str):
    """One typed fact read from a file: the fields its type declares, of their types, and no others."""
    if not isinstance(d, dict):
        raise RecordError(f"field '{where}' must be object, got {type(d).__name__}")
    _fields(d, _FACTS[cls], where + ".")
    for (c, name), allowed in _CHOICES.items():
        if c is cls and d.get(name) not in (*allowed, None, ""):
            raise RecordError(f"field '{where}.{name}' must be one of {', '.join(allowed)}, got {d[name]!r}")
    if cls is Issue and "/" not in d["repo"]:
        raise RecordError(f"field '{where}.repo' must be owner/name, got {d['repo']!r}")
    kwargs = {("pass_name" if k == "pass" else k): v for k, v in d.items() if v is not None}
    return cls(**kwargs)


def _links(d: dict) -> Links:
    unknown = sorted(set(d) - set(_LINKS))
    if unknown:
        raise RecordError(f"unknown field 'links.{unknown[0]}'")
    out = {}
    for name, cls in _LINKS.items():
        items = d.get(name, [])
        if not isinstance(items, list):
            raise RecordError(f"field 'links.{name}' must be array, got {type(items).__name__}")
        if cls is str:
            bad = next((i for i, x in enumerate(items) if not isinstance(x, str)), None)
            if bad is not None:
                raise RecordError(f"field 'links.{name}[{bad}]' must be string, got {type(items[bad]).__name__}")
            out[name] = tuple(items)
        else:
            out[name] = tuple(_fact(cls, x, f"links.{name}[{i}]") for i, x in enumerate(items))
    return Links(**out)


def _triage(d) -> Triage | None:
    if d is None:
        return None
    _fields(d, {"culprit": (dict, None), "controls": list}, "triage.")
    culprit = _fact(Culprit, d["culprit"], "triage.culprit") if d.get("culprit") is not None else None
    return Triage(culprit, tuple(_fact(Control, c, f"triage.controls[{i}]") for i, c in enumerate(d["controls"])))


def _upstream(d) -> Upstream:
    up = _fact(Upstream, d, "upstream")
    controls = tuple(_fact(Variant, c, f"upstream.controls[{i}]") for i, c in enumerate(up.controls))
    names = [c.name for c in controls]
    if len(set(names)) != len(names) or not all(re.match(r"^[a-z0-9][a-z0-9-]*$", n) for n in names):
        raise RecordError(f"field 'upstream.controls' must name each control once, in a-z0-9-: {names}")
    bad = next((i for i, x in enumerate(up.review) if not isinstance(x, str)), None)
    if bad is not None:
        raise RecordError(f"field 'upstream.review[{bad}]' must be string")
    return replace(up, controls=controls, review=tuple(up.review))


def _type_name(t) -> str:
    ts = t if isinstance(t, tuple) else (t,)
    return " or ".join("null" if x is None else {"dict": "object", "list": "array", "str": "string"}.get(
        x.__name__, x.__name__) for x in ts)


def _is(value, t) -> bool:
    ts = t if isinstance(t, tuple) else (t,)
    return any(value is None if x is None else
               (type(value) is x if x in (bool, int) else isinstance(value, x) and type(value) is not bool)
               for x in ts)


def _fields(d: dict, spec: dict, where: str, strict=True) -> None:
    if strict:
        unknown = sorted(set(d) - set(spec))
        if unknown:
            raise RecordError(f"unknown field '{where}{unknown[0]}'")
    for name, t in spec.items():
        if name not in d:
            if isinstance(t, tuple) and None in t:  # nullable fields may be left out
                continue
            raise RecordError(f"missing field '{where}{name}'")
        if not _is(d[name], t):
            raise RecordError(f"field '{where}{name}' must be {_type_name(t)}, "
                              f"got {type(d[name]).__name__} {json.dumps(d[name])[:60]}")


def checked_case(d) -> case_mod.Case:
    """A Case read from a file: valid, of a registered family, and of a variant that family declares (a
    name that reaches kernel and file names: never taken on trust). CaseError otherwise."""
    case = kernels.check(case_mod.from_dict(d))
    variants = kernels.family(case.family).offer.variants
    if case.variant not in variants:
        raise case_mod.CaseError(f"{case.family} has no variant {case.variant[:60]!r}; it has: {', '.join(variants)}")
    return case


def _case(d, name) -> case_mod.Case:
    try:
        return checked_case(d)
    except (case_mod.CaseError, TypeError) as e:
        raise RecordError(f"field {name!r}: {e}") from None


def from_dict(d) -> Reproducer:
    if not isinstance(d, dict):
        raise RecordError(f"a reproducer must be a JSON object, got {type(d).__name__}")
    if "schema" not in d:
        raise RecordError("missing field 'schema'")
    if d["schema"] != SCHEMA or type(d["schema"]) is not int:
        raise RecordError(f"field 'schema' is {json.dumps(d['schema'])}; this harness reads schema {SCHEMA}")
    _fields(d, _TOP, "")
    _encodable(d, "")
    if not _ID.fullmatch(d["id"]):
        raise RecordError(f"field 'id' must be 1 to 64 letters, digits, '_' or '-', got {d['id'][:80]!r}")
    if d["kind"] not in KINDS:
        raise RecordError(f"field 'kind' must be one of {', '.join(KINDS)}, got {d['kind'][:60]!r}")
    obs = d["observed"]
    _fields(obs, _OBSERVED, "observed.")
    if obs["verdict"] not in oracle.FAILURES:
        raise RecordError(f"field 'observed.verdict' must be one of {oracle.FAILURES}, got {obs['verdict']!r}")
    if len(obs["signature"]) != 7 or not all(isinstance(s, str) for s in obs["signature"]):
        raise RecordError("field 'observed.signature' must be an array of 7 strings")
    for i, c in enumerate(obs["checks"]):
        if not isinstance(c, dict):
            raise RecordError(f"field 'observed.checks[{i}]' must be object, got {type(c).__name__}")
        _fields(c, _CHECK, f"observed.checks[{i}].", strict=False)
    if obs.get("flaky") is not None:
        _fields(obs["flaky"], _FLAKY, "observed.flaky.")
    bad = next((i for i, c in enumerate(obs.get("predicted") or []) if not isinstance(c, str)), None)
    if bad is not None:
        raise RecordError(f"field 'observed.predicted[{bad}]' must be string, got {type(obs['predicted'][bad]).__name__}")
    obs = {**obs, "flaky": obs.get("flaky"), "kernel": obs.get("kernel")}
    for k, v in d["environment"].items():
        if not isinstance(v, bool if k == "compile_only" else str):
            raise RecordError(f"field 'environment.{k}' must be {'boolean' if k == 'compile_only' else 'string'}, "
                              f"got {type(v).__name__}")
    links = _links(d["links"])
    releases = {v: _fact(Release, r, f"releases.{v}") for v, r in (d.get("releases") or {}).items()}
    upstream = _upstream(d["upstream"]) if d.get("upstream") is not None else None
    original = _case(d["minimized_from"], "minimized_from") if d.get("minimized_from") is not None else None
    return Reproducer(d["id"], d["title"], _case(d["case"], "case"), d["expected"], obs, _environment(d["environment"]),
                      links, original, releases, _triage(d.get("triage")), upstream, d["kind"], d.get("description") or "")


def _environment(env: dict) -> dict:
    """The recorded environment, with `compile_only` (harness.environment): read where it was recorded, else (a file
    recorded before the field was) told by its `gpu`, which a machine without one wrote as NO_GPU."""
    return env if "compile_only" in env else {**env, "compile_only": env.get("gpu") == NO_GPU}


def _encodable(value, name) -> None:
    """RecordError naming the first string under `value` that UTF-8 cannot encode (a lone surrogate, which JSON's
    \\ud800 makes): every field ends up in a file, a title, a terminal."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as e:
            raise RecordError(f"field {name or 'key'!r} holds {value[e.start]!r} at {e.start}, which is not text "
                              "(a lone surrogate)") from None
    elif isinstance(value, dict):
        for k, v in value.items():
            _encodable(k, name)
            _encodable(v, f"{name}.{k}" if name else k)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _encodable(v, f"{name}[{i}]")


def load(path) -> Reproducer:
    path = Path(path)
    try:
        text = path.read_bytes().decode("utf-8")
    except OSError as e:
        raise RecordError(f"{path}: cannot read: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise RecordError(f"{path}: not UTF-8 text (byte {e.start}): not a reproducer file") from None
    try:
        d = untrusted.loads(text)
    except json.JSONDecodeError as e:
        raise RecordError(f"{path}: not valid JSON (truncated?): {e}") from None
    except ValueError as e:  # too large or too deep
        raise RecordError(f"{path}: not a reproducer file: {e}") from None
    try:
        return from_dict(d)
    except RecordError as e:
        raise RecordError(f"{path}: {e}") from None


def describe(result: Result) -> str:
    """One line: verdict, where, and every tensor's error against its tolerance."""
    where = " ".join(x for x in (result.stage, result.tensor, result.region) if x)
    checks = "; ".join(f"{c['tensor']} error {c['error']:.4g} {'<=' if c['ok'] else '>'} tolerance {c['tolerance']:.4g}"
                       for c in result.checks or [])
    message = result.message if result.verdict != "PASS" else ""
    return " | ".join(x for x in (f"{result.verdict} ({where})" if where else result.verdict, checks, message) if x)
