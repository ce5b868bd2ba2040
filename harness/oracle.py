"""The tolerance rule, verdicts, mismatch localization and failure signatures.

Rule (FlashAttention's tests): for each output t with upcast reference `ref` and
same-precision baseline `base`,
    PASS  iff  max|t - ref| <= k * max|base - ref| + atol
with k = 2 for forward outputs, 3 for gradients, and atol = 2 * max|r + 0.3 - 0.3 - r|,
r = ref rounded to the input dtype, and at least one ulp of the dtype at max|ref|. A family
may raise atol for a tensor with few values, where one baseline run samples its rounding too
thinly to bound another run's (the backward's per-head dSinks: bwd_family.floors).
Where the reference is -inf (LSE of a row that sees no key) the output must be -inf too.
"""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass

import torch

VERDICTS = ("PASS", "COMPILED", "MISMATCH", "NONFINITE", "COMPILE_ERROR", "UNSUPPORTED",
            "CRASH", "HANG", "HARNESS_ERROR")
FAILURES = ("MISMATCH", "NONFINITE", "COMPILE_ERROR", "CRASH", "HANG")
K_FORWARD = 2
K_GRADIENT = 3
# Which sequence axis (dim 2 of the canonical [b, h, s, ...] tensor) a tensor's rows follow.
ROW_AXIS = {"O": "q", "LSE": "q", "dQ": "q", "dK": "k", "dV": "k"}


@dataclass
class Check:
    tensor: str
    ok: bool
    verdict: str          # PASS, MISMATCH or NONFINITE
    error: float          # max |t - ref| over finite reference entries
    tolerance: float      # k * base_error + atol
    base_error: float
    atol: float
    region: str = ""      # where the worst element lies (failures only)
    where: dict = None    # worst index, bad fraction, bad heads


def atol_floor(ref: torch.Tensor, dtype: torch.dtype) -> float:
    """FlashAttention's 2 * max|r + 0.3 - 0.3 - r|, and at least one ulp of the dtype at the
    reference's largest magnitude. Over many values the first term is about two ulps; for a
    lone value it can be 0 (a per-head dSinks), yet one rounding of an input costs an ulp."""
    if not ref.numel():
        return 0.0
    r = ref.to(dtype)
    fa = 2 * (r + 0.3 - 0.3 - r).abs().max().item()
    top = ref.abs().max().item()
    ulp = torch.finfo(dtype).eps * 2.0 ** torch.floor(torch.log2(torch.tensor(top))).item() if top > 0 else 0.0
    return max(fa, ulp)


def check(name, out, ref, base, dtype, k, locate, floor=0.0) -> Check:
    """Judge one tensor. All three are canonical; `locate(index) -> region` names a place."""
    out, ref, base = out.double(), ref.double(), base.double()
    finite = torch.isfinite(ref)
    base_err = (base - ref)[finite].abs().max().item() if finite.any() else 0.0
    atol = max(atol_floor(ref[finite], dtype), floor)
    tol = k * base_err + atol
    diff = (out - ref).abs()
    # Non-finite reference entries (-inf LSE of empty rows) must be matched exactly.
    exact = ~finite
    bad_exact = exact & (out != ref)
    bad_nonfinite = finite & ~torch.isfinite(out)
    bad_value = finite & torch.isfinite(out) & (diff > tol)
    err = diff[finite & torch.isfinite(out)].max().item() if (finite & torch.isfinite(out)).any() else 0.0
    if bad_nonfinite.any():
        verdict, bad = "NONFINITE", bad_nonfinite
    elif bad_exact.any() or bad_value.any():
        verdict, bad = "MISMATCH", bad_exact | bad_value
    else:
        return Check(name, True, "PASS", err, tol, base_err, atol)
    score = torch.where(bad, torch.nan_to_num(diff, nan=float("inf"), posinf=float("inf")), torch.zeros_like(diff))
    worst = tuple(int(i) for i in torch.unravel_index(score.argmax(), score.shape))
    head_axis = 1 if bad.dim() > 1 else 0  # [b, h, ...] tensors, or [h] (dSinks)
    bad_heads = sorted(set(torch.nonzero(bad)[:, head_axis].tolist()))
    where = {"index": list(worst), "bad_fraction": round(bad.float().mean().item(), 6),
             "bad_heads": bad_heads[:16], "heads": out.shape[head_axis]}
    return Check(name, False, verdict, err, tol, base_err, atol, locate(name, worst), where)


def first_failure(checks: list[Check]) -> Check | None:
    return next((c for c in checks if not c.ok), None)


def region_locator(case, seen_rows_q: torch.Tensor, seen_rows_k: torch.Tensor):
    """locate(name, index) for canonical indices: empty rows, tail tiles, or interior.

    seen_rows_q[i]: query i sees some key; seen_rows_k[j]: key j is seen by some query.
    """
    def locate(name, index):
        if len(index) < 3:  # a per-head tensor (dSinks) has no sequence rows
            return "per_head"
        axis = ROW_AXIS.get(name, "q")
        row = index[2]
        length, block, seen = ((case.seqlen_q, case.block_m, seen_rows_q) if axis == "q"
                               else (case.seqlen_k, case.block_n, seen_rows_k))
        if not bool(seen[row]):
            return "empty_rows" if axis == "q" else "unseen_keys"
        if length % block and row >= length // block * block:
            return f"tail_{axis}_tile"
        return "interior"
    return locate


_NOISE = [(re.compile(r"0x[0-9a-fA-F]+"), "0x?"), (re.compile(r"(/[\w.+-]+)+"), "<path>"),
          (re.compile(r"\d+(\.\d+)?"), "N"), (re.compile(r"\s+"), " ")]


def normalize(message: str) -> str:
    """A message with addresses, paths and numbers blanked, so equal failures compare equal."""
    for pattern, repl in _NOISE:
        message = pattern.sub(repl, message or "")
    return message.strip()[:200]


def signature(result: dict) -> tuple:
    """(family, variant, verdict, stage, tensor, region, normalized message)."""
    case = result["case"]
    return (case["family"], case["variant"], result["verdict"], result.get("stage", ""),
            result.get("tensor", ""), result.get("region", ""), normalize(result.get("message", "")))


def as_dict(c: Check) -> dict:
    return asdict(c)
