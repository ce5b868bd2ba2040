"""One case's outcome (a Result), its verdict, its code-scan findings and its failure signature.

A Result holds typed facts: the `Case` it ran, a `Verdict`, the code scan's `ScanFinding`s, the checks a HANG's
cause is predicted by. They become text only at the worker pipe and in the files (results.jsonl, a
reproducer's `observed` section): `to_dict()` gives the JSON object written today, key for key and in the
same order, and `from_dict()` reads one back (an older line too: keys this version does not know stay in
`extra`, and are written again where they stood). Nothing above reads a fact back out of a message.
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from enum import Enum, StrEnum
from types import MappingProxyType
from typing import Any

from harness import case as case_mod
from harness.programs import model as programs

VERDICTS = ("PASS", "COMPILED", "MISMATCH", "NONFINITE", "OOB_WRITE", "OOB_READ", "COMPILE_ERROR", "REJECTED",
            "ACCEPTS_INVALID", "REFUSES_INVALID", "UNSUPPORTED", "CRASH", "HANG", "HARNESS_ERROR")
# The compiler's, recordable. REJECTED: TileLang's frontend refused a well-formed generated program ("rejects
# valid"), kept apart from COMPILE_ERROR (a lowering pass or nvcc failed) so that such findings are counted apart.
# ACCEPTS_INVALID: it compiled a program invalid on purpose (harness.programs.overrun); refusing one is
# REFUSES_INVALID, the right answer, as PASS is.
FAILURES = ("MISMATCH", "NONFINITE", "OOB_WRITE", "OOB_READ", "COMPILE_ERROR", "REJECTED", "ACCEPTS_INVALID", "CRASH",
            "HANG")

# The exit status of a command whose harness failed itself (a HARNESS_ERROR verdict, an exception the
# command did not expect): never 1, which says "a bug found"; harness repro and the bisect steps, which
# `git bisect run` reads, say 125 ("cannot test") instead.
HARNESS_ERROR_STATUS = 4


class Verdict(str, Enum):
    """A case's verdict (VERDICTS). A str whose value is its name: JSON, CSV and the report write it as
    they always did, and Verdict.HANG == "HANG"."""
    PASS = "PASS"
    COMPILED = "COMPILED"
    MISMATCH = "MISMATCH"
    NONFINITE = "NONFINITE"
    OOB_WRITE = "OOB_WRITE"
    OOB_READ = "OOB_READ"
    COMPILE_ERROR = "COMPILE_ERROR"
    REJECTED = "REJECTED"
    ACCEPTS_INVALID = "ACCEPTS_INVALID"
    REFUSES_INVALID = "REFUSES_INVALID"
    UNSUPPORTED = "UNSUPPORTED"
    CRASH = "CRASH"
    HANG = "HANG"
    HARNESS_ERROR = "HARNESS_ERROR"

    def __str__(self) -> str:
        return self.value

    def __repr__(self) -> str:  # as the name was shown before (a signature printed as a list)
        return repr(self.value)

    __format__ = str.__format__

    @property
    def failed(self) -> bool:
        """The compiler's failure, to be recorded (FAILURES): not PASS or COMPILED, not UNSUPPORTED, and never
        HARNESS_ERROR, the harness's own."""
        return self.value in FAILURES


class ScanCheck(StrEnum):
    """A code-scan check (harness.codegen, one function each; docs/codegen-checks.md), named as its findings are
    written. Each name is its value, as a Verdict's is: it hashes and compares as that str."""
    unwaited_async_loads = "unwaited_async_loads"
    mbarrier_protocol = "mbarrier_protocol"
    vectorized_atomics = "vectorized_atomics"
    atomics_on_locals = "atomics_on_locals"
    unaligned_vectors = "unaligned_vectors"
    unsynced_tma_stores = "unsynced_tma_stores"
    reads_after_release = "reads_after_release"
    named_barrier_counts = "named_barrier_counts"
    register_budget = "register_budget"
    barriers_in_skipped_loops = "barriers_in_skipped_loops"
    registers_across_roles = "registers_across_roles"
    racing_shared_writes = "racing_shared_writes"
    overwritten_while_read = "overwritten_while_read"
    overwritten_before_read = "overwritten_before_read"
    short_register_arrays = "short_register_arrays"


@dataclass(frozen=True)
class ScanFinding:
    """What one code-scan check found in a kernel's generated code (the scan's own finding,
    harness.codegen.source.LineFinding, also has its line). Written "check: message" in results.jsonl and on the worker
    pipe, as always."""
    check: ScanCheck  # a str is taken as its ScanCheck
    message: str

    def __post_init__(self):
        if not isinstance(self.check, ScanCheck):
            object.__setattr__(self, "check", ScanCheck(self.check))

    def __str__(self) -> str:
        return f"{self.check}: {self.message}"

    def to_json(self) -> str:
        return str(self)

    @classmethod
    def from_json(cls, text) -> ScanFinding:
        """The finding written as `text`: the check is the one whose name begins it; ValueError for a text that names
        no check."""
        check = next((c for c in ScanCheck if isinstance(text, str) and text.startswith(f"{c}: ")), None)
        if check is None:
            raise ValueError(f"a code-scan finding is \"check: message\" of one of the checks, got {str(text)[:80]!r}")
        return cls(check, text[len(check) + 2:])


class ScopeKind(Enum):
    VARIANT = "variant"  # the case's variant (of its family)
    KERNEL = "kernel"    # a shared kernel the failure is pinned on (Result.kernel)
    PROGRAM = "program"  # a generated program, by its construct fingerprint


class Scope(str):
    """A signature's second element: what the failure is scoped by. A str as the files write it: the variant's
    name, "kernel:NAME" or "program:FINGERPRINT"; its kind is held beside that text, never read back out of it."""
    kind: ScopeKind
    name: str

    def __new__(cls, kind: ScopeKind, name: str):
        scope = super().__new__(cls, name if kind is ScopeKind.VARIANT else f"{kind.value}:{name}")
        scope.kind, scope.name = kind, name
        return scope

    def __getnewargs__(self):  # a copy (copy, pickle) keeps the kind
        return self.kind, self.name


# The keys every Result has, first and in this order, as results have always been written.
_FIRST = ("case_id", "case", "verdict", "stage", "message", "tensor", "region")


@dataclass(frozen=True)
class Result:
    case_id: str
    case: case_mod.Case
    verdict: Verdict                # a str is taken as its Verdict
    stage: str = ""
    message: str = ""
    tensor: str = ""                # the failing tensor, or ""
    region: str = ""                # where it fails (oracle.region_locator), or ""
    kernel: str | None = None       # a shared kernel the failure is pinned on (Judge.shared)
    traceback: str = ""             # an exception's, for a result blamed on one (harness.blame)
    seconds: dict | None = None     # time per stage (start, compile, inputs, run, judge)
    checks: list | None = None      # each judged tensor (oracle.Check as a dict)
    hazards: tuple | None = None    # the code scan's findings (ScanFinding)
    code: str | None = None         # digest of the generated code
    features: tuple | None = None   # its code features (harness.cuda_features), sorted: what the corpus keeps programs for
    fatal: bool = False             # the worker must exit (a poisoned CUDA context); on the pipe only
    gpu: str | None = None          # the GPU it ran on, when the pool spreads over several
    # A HANG's cause as the code scan predicts it: the checks (oracle.DEADLOCKS) among its findings. Its message
    # names them too (oracle.hang_message), so that hangs of different causes have different signatures.
    predicted: tuple | None = None
    extra: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))  # keys of other versions
    keys: tuple[str, ...] = field(default=_FIRST, compare=False, repr=False)  # present keys, in written order

    def __post_init__(self):
        if not isinstance(self.verdict, Verdict):
            object.__setattr__(self, "verdict", Verdict(self.verdict))

    @classmethod
    def of(cls, case, verdict, stage, message="", **extra) -> Result:
        """A case's outcome (a Case, and the keyword fields present, in that order)."""
        return cls(case.id, case, verdict, stage, message).replace(**extra)

    def replace(self, **changes) -> Result:
        """A copy with `changes`; a key not yet present is added after the others (as dict assignment does)."""
        known = _FIELDS & changes.keys()
        others = {k: v for k, v in changes.items() if k not in _FIELDS}
        keys = self.keys + tuple(k for k in changes if k not in self.keys)
        values = {k: changes[k] for k in known}
        if others:
            values["extra"] = MappingProxyType({**self.extra, **others})
        return _copy(self, keys=keys, **values)

    def without(self, *names) -> Result:
        """A copy without the keys `names` (back to their defaults)."""
        defaults = {f.name: f.default for f in fields(self) if f.name in names and f.name in _FIELDS}
        extra = {k: v for k, v in self.extra.items() if k not in names}
        return _copy(self, keys=tuple(k for k in self.keys if k not in names), extra=MappingProxyType(extra), **defaults)

    @property
    def failed(self) -> bool:
        """The compiler's failure, to be recorded (Verdict.failed)."""
        return self.verdict.failed

    def describe(self) -> str:
        """One line: verdict, where, and every tensor's error against its tolerance."""
        where = " ".join(x for x in (self.stage, self.tensor, self.region) if x)
        checks = "; ".join(f"{c['tensor']} error {c['error']:.4g} {'<=' if c['ok'] else '>'} tolerance {c['tolerance']:.4g}"
                           for c in self.checks or [])
        message = self.message if self.verdict != "PASS" else ""
        return " | ".join(x for x in (f"{self.verdict} ({where})" if where else self.verdict, checks, message) if x)

    def is_new(self, known) -> bool:
        """A failure whose signature is not among `known` (the recorded reproducers' signatures): a new bug."""
        return self.failed and self.signature not in known

    @property
    def signature(self) -> tuple:
        """(family, variant, verdict, stage, tensor, region, normalized message). A generated program's
        construct fingerprint (harness.programs.model.fingerprint) stands for its variant, and a twin's knobs
        are in its region: one root cause met through several programs is one signature. A failure pinned on
        a shared kernel (one program, whatever the variant, and whichever family runs it: the dense
        backward's sink gradient serves the varlen backward too) names that kernel instead of the
        family and variant: one bug, one signature."""
        family, scope = ("", Scope(ScopeKind.KERNEL, self.kernel)) if self.kernel else (
            self.case.family, Scope(ScopeKind.VARIANT, self.case.variant))
        if self.case.program:  # a generated program: what it is made of stands for the variant
            scope = Scope(ScopeKind.PROGRAM, programs.fingerprint(self.case.program))
        return family, scope, self.verdict, self.stage, self.tensor, self.region, normalize(self.message)

    def to_dict(self) -> dict:
        """The JSON object of a results.jsonl line (and of the worker's result event, less "event")."""
        return {k: (_WRITE[k](getattr(self, k)) if k in _WRITE else getattr(self, k)) if k in _FIELDS else self.extra[k]
                for k in self.keys}

    @classmethod
    def from_dict(cls, d: Mapping, case: case_mod.Case | None = None) -> Result:
        """A result from its JSON object; to_dict() gives `d` back, key order included. `case`: the Case of a
        reproducer's `observed`, which holds none (it is then the first key). Keys `observed` lacks (case_id,
        ...) take their defaults and are not written back. CaseError for a case that is none, ValueError for
        another field that cannot be read."""
        if "verdict" not in d:
            raise ValueError("a result needs a verdict")
        known = {k: (_READ[k](v) if k in _READ and v is not None else v) for k, v in d.items() if k in _FIELDS}
        if case is not None:
            known["case"] = case
        elif "case" not in d:
            raise case_mod.CaseError("a result needs a case")
        extra = {k: v for k, v in d.items() if k not in _FIELDS}
        keys = tuple(d) if "case" in d else ("case", *d)
        return cls(**{"case_id": "", **known}, extra=MappingProxyType(extra), keys=keys)


_FIELDS = frozenset(f.name for f in fields(Result)) - {"extra", "keys"}
# How a field is written (to_dict) and read (from_dict), where JSON does not hold it as it is.
_WRITE = {"case": case_mod.to_dict, "verdict": lambda v: v.value,
          "hazards": lambda found: None if found is None else [f.to_json() for f in found],
          "predicted": lambda checks: None if checks is None else list(checks),
          "features": lambda names: None if names is None else sorted(names)}
_READ = {"case": case_mod.from_dict, "hazards": lambda found: tuple(ScanFinding.from_json(f) for f in found),
         "predicted": lambda checks: tuple(map(ScanCheck, checks)), "features": tuple}


def _copy(r: Result, **values) -> Result:
    return Result(**{**{f.name: getattr(r, f.name) for f in fields(r)}, **values})


# A number in either notation: a kernel that writes garbage errs by 2 in one run and by 2.366e+38 in the next.
_NOISE = [(re.compile(r"0x[0-9a-fA-F]+"), "0x?"), (re.compile(r"(/[\w.+-]+)+"), "<path>"),
          (re.compile(r"\d+(\.\d+)?([eE][-+]?\d+)?"), "N"), (re.compile(r"\s+"), " ")]


def unscoped(signature) -> tuple:
    """A Result's signature without a generated program's statement kinds: what stays while the minimizer drops
    statements (the recorded signature then names the kinds that remain)."""
    signature = tuple(signature)
    program = isinstance(signature[1], Scope) and signature[1].kind is ScopeKind.PROGRAM
    return signature[:1] + ("program",) + signature[2:] if program else signature


def alike(signature, known: dict):
    """The recorded reproducer (`known`: signature -> path) of a generated program's failure whose signature
    differs from `signature` only in the statement kinds (`unscoped`): as the minimizer counts failures, the same
    one met through other statements, most likely one bug. None if `signature` is recorded itself, or none is."""
    target = unscoped(signature)
    if signature in known or target == tuple(signature):
        return None
    return next((path for s, path in known.items() if unscoped(s) == target), None)


# Said of an invalid program's compile error when the program without its invalid statements fails too: the failure
# is the valid part's, and its signature the one that part's failure has (so a recorded class is still known).
VALID_PART_FAILS = " (the program without its invalid statements fails too)"


def normalize(message: str) -> str:
    """A message with addresses, paths and numbers blanked, so equal failures compare equal."""
    message = (message or "").replace(VALID_PART_FAILS, "")
    for pattern, repl in _NOISE:
        message = pattern.sub(repl, message or "")
    return message.strip()[:200]
