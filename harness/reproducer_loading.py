"""Reading a reproducer file, strictly: every malformed file raises RecordError naming the field (one line).

A file is untrusted input (harness.untrusted): its case must be valid, of a registered family and of a variant that
family declares, and every typed fact holds the fields its type declares, of their types, and no others.
"""
from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

from harness import case as case_mod
from harness import kernels, oracle, untrusted
from harness.environment import NO_GPU
from harness.reproducer_model import (
    FOLDER_OF_KIND,
    ID,
    MATRIX,
    SCHEMA,
    Control,
    Culprit,
    File,
    Issue,
    Links,
    RecordedBisect,
    RecordError,
    Release,
    Reproducer,
    Search,
    Sibling,
    Triage,
    Upstream,
    Variant,
)
from harness.result import ScanCheck

_NUMBER = (int, float)
_TOP = {"schema": int, "id": str, "title": str, "description": (str, None), "kind": str, "case": dict,
        "expected": str, "observed": dict, "environment": dict, "links": dict, "releases": (dict, None),
        "triage": (dict, None), "upstream": (dict, None), "minimized_from": (dict, None), "witness": (list, None)}
_OBSERVED = {"verdict": str, "stage": str, "tensor": str, "region": str, "message": str, "kernel": (str, None),
             "traceback": str, "signature": list, "checks": list, "flaky": (dict, None), "predicted": (list, None)}
_FLAKY = {"runs": int, "reproduced": int, "deterministic": bool}
_CHECK = {"tensor": str, "ok": bool, "verdict": str, "error": _NUMBER, "tolerance": _NUMBER}  # extra keys allowed


_ISSUE = {"repo": str, "number": int, "kind": (str, None), "state": (str, None), "note": (str, None), "release": (str, None)}
_FACTS = {Issue: _ISSUE, Sibling: {"id": str, "note": (str, None)},
          RecordedBisect: {"kind": str, "good": str, "bad": str, "first_bad": str, "last_good": str,
                           "fixes": (bool, None), "note": (str, None)},
          Search: {"query": str, "result": str}, File: {"path": str, "kind": str, "note": (str, None)},
          Release: {"result": str, "note": (str, None), "predicted": (bool, None)},
          Culprit: {"pass": str, "file": (str, None), "function": (str, None), "note": (str, None)},
          Control: {"change": str, "result": str, "ok": bool, "knob": (str, None), "source": (str, None)},
          Variant: {"name": str, "change": str, "gpu": (bool, None), "workaround": (bool, None)},
          Upstream: {"title": (str, None), "expected": (str, None), "observed": (str, None), "fix": (str, None),
                     "cause": (str, None), "workaround": (str, None), "provenance": (str, None), "gpu": (bool, None),
                     "controls": (list, None), "withdrawn": (str, None), "hold": (str, None),
                     "review": (list, None)}}
# links: field -> the type of its items (str: as written)
_LINKS = {"tracker_issue": Issue, "related": Issue, "same_root_cause_as": Sibling, "bisected_by": RecordedBisect,
          "fixed_by": Issue, "introduced_by": Issue, "searches": Search, "files": File, "notes": str}
_CHOICES = {(Issue, "kind"): ("issue", "pull"), (Issue, "state"): ("open", "closed", "merged"),
            (RecordedBisect, "kind"): ("release", "commit"), (File, "kind"): ("standalone", "cuda", "study"),
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
    if not ID.fullmatch(d["id"]):
        raise RecordError(f"field 'id' must be 1 to 64 letters, digits, '_' or '-', got {d['id'][:80]!r}")
    if d["kind"] not in FOLDER_OF_KIND:
        raise RecordError(f"field 'kind' must be one of {', '.join(FOLDER_OF_KIND)}, got {d['kind'][:60]!r}")
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
    guessed = next((v for v, r in releases.items() if r.predicted), None)
    if guessed and not (d.get("witness") or obs.get("predicted")):
        raise RecordError(f"field 'releases.{guessed}.predicted': a row predicted by the code scan needs a 'witness'")
    upstream = _upstream(d["upstream"]) if d.get("upstream") is not None else None
    original = _case(d["minimized_from"], "minimized_from") if d.get("minimized_from") is not None else None
    return Reproducer(d["id"], d["title"], _case(d["case"], "case"), d["expected"], obs, _environment(d["environment"]),
                      links, original, releases, _triage(d.get("triage")), upstream, d["kind"], d.get("description") or "",
                      _witness(d.get("witness") or [], obs["verdict"]))


def _witness(names: list, verdict: str) -> tuple:
    """Code-scan checks, each once; not for a compile error, which replays as itself without a GPU."""
    unknown = next((n for n in names if n not in set(ScanCheck)), None)
    if unknown is not None:
        raise RecordError(f"field 'witness' must list code-scan checks ({', '.join(ScanCheck)}), got {str(unknown)[:60]!r}")
    if names and verdict == "COMPILE_ERROR":
        raise RecordError("field 'witness' is for a failure only a GPU shows; a COMPILE_ERROR replays without one as it is")
    if len(set(names)) != len(names):
        raise RecordError("field 'witness' lists a check twice")
    return tuple(names)


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
