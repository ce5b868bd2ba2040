"""The Case: one attention test, the unit that is generated, run, recorded and replayed.

A Case is a frozen dataclass; JSON is its only serialized form. `validate()` names the
first reason a case is impossible; `from_json` rejects unknown keys and wrong types.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass

from harness import kernels

DTYPES = ("float16", "bfloat16")
LAYOUTS = ("bhsd", "bshd")


class CaseError(ValueError):
    """A case that cannot exist, or a JSON text that does not describe one."""


@dataclass(frozen=True)
class Case:
    family: str = "fwd"
    variant: str = "default"
    batch: int = 1
    heads: int = 1
    kv_heads: int = 1
    seqlen_q: int = 1
    seqlen_k: int = 1
    head_dim: int = 64
    head_dim_v: int = 64
    dtype: str = "float16"
    causal: bool = False
    window: tuple = (-1, -1)
    sinks: bool = False
    layout: str = "bhsd"
    block_m: int = 64
    block_n: int = 64
    num_stages: int = 1
    threads: int = 128
    seed: int = 0

    @property
    def bounds(self) -> tuple[int, int]:
        """Effective (left, right) window: causal is (-1, 0) intersected with the window."""
        left, right = self.window
        if self.causal:
            right = 0 if right < 0 else min(right, 0)
        return left, right

    @property
    def id(self) -> str:
        return hashlib.sha1(to_json(self).encode()).hexdigest()[:12]

    def replace(self, **changes) -> "Case":
        return dataclasses.replace(self, **changes)

    def validate(self) -> "Case":
        """Return self, or raise CaseError with a one-line reason."""
        for name in ("batch", "heads", "kv_heads", "seqlen_q", "seqlen_k", "head_dim",
                     "head_dim_v", "block_m", "block_n", "threads"):
            if getattr(self, name) < 1:
                raise CaseError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.family not in kernels.names():
            raise CaseError(f"family must be one of {kernels.names()}, got {self.family!r}")
        if self.dtype not in DTYPES:
            raise CaseError(f"dtype must be one of {DTYPES}, got {self.dtype!r}")
        if self.layout not in LAYOUTS:
            raise CaseError(f"layout must be one of {LAYOUTS}, got {self.layout!r}")
        if self.heads % self.kv_heads:
            raise CaseError(f"heads ({self.heads}) must be a multiple of kv_heads ({self.kv_heads})")
        if len(self.window) != 2 or any(w < -1 for w in self.window):
            raise CaseError(f"window must be (left, right) with each >= -1, got {self.window}")
        if self.num_stages < 0:
            raise CaseError(f"num_stages must be >= 0, got {self.num_stages}")
        return self


_FIELDS = {f.name: f for f in dataclasses.fields(Case)}


def to_dict(case: Case) -> dict:
    d = dataclasses.asdict(case)
    d["window"] = list(case.window)
    return d


def to_json(case: Case) -> str:
    return json.dumps(to_dict(case), sort_keys=True)


def _check_type(name, value):
    default = _FIELDS[name].default
    if name == "window":
        if not (isinstance(value, (list, tuple)) and len(value) == 2
                and all(type(v) is int for v in value)):
            raise CaseError(f"field 'window' must be a pair of integers, got {value!r}")
        return tuple(value)
    if type(value) is not type(default):
        raise CaseError(f"field {name!r} must be {type(default).__name__}, got {type(value).__name__} {value!r}")
    return value


def from_dict(d: dict) -> Case:
    if not isinstance(d, dict):
        raise CaseError(f"a case must be a JSON object, got {type(d).__name__}")
    unknown = sorted(set(d) - set(_FIELDS))
    if unknown:
        raise CaseError(f"unknown case field(s): {', '.join(unknown)}")
    return Case(**{k: _check_type(k, v) for k, v in d.items()}).validate()


def from_json(text: str) -> Case:
    try:
        d = json.loads(text)
    except json.JSONDecodeError as e:
        raise CaseError(f"case is not valid JSON: {e}") from None
    return from_dict(d)
