"""The tolerance rule, judging, and mismatch localization.

Rule (FlashAttention's tests): for each output t with upcast reference `ref` and
same-precision baseline `base`,
    PASS  iff  max|t - ref| <= k * max|base - ref| + atol
with k = 2 for forward outputs, 3 for gradients, and atol = 2 * max|r + 0.3 - 0.3 - r|,
r = ref rounded to the input dtype, and at least one ulp of the dtype at max|ref|. A family
may raise atol to k times a rounding spread for a tensor with few values, where one baseline run
samples its rounding too thinly to bound another run's (the backward's per-head dSinks:
bwd_family.floors). Where the reference is -inf (LSE of a row that sees no key) the output must
be -inf too.

Who is to blame for an exception is harness.blame's; the result format and its signature,
harness.result's.

torch and the references are imported by the functions that judge, which run in the workers: the
processes that only hand out cases and keep results (harness run, pytest) start their workers
without first spending seconds importing torch.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

from harness.result import FAILURES as FAILURES  # re-exported: oracle.FAILURES, oracle.VERDICTS
from harness.result import VERDICTS as VERDICTS
from harness.result import Result, ScanCheck

if TYPE_CHECKING:
    import torch

K_FORWARD = 2
K_GRADIENT = 3
K = {"forward": K_FORWARD, "gradient": K_GRADIENT}
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
    return max(fa, _ulp(ref.abs().max().item(), dtype))


def _ulp(top: float, dtype: torch.dtype) -> float:
    """One ulp of `dtype` at magnitude `top` (0 at 0)."""
    import torch

    return torch.finfo(dtype).eps * 2.0 ** torch.floor(torch.log2(torch.tensor(top))).item() if top > 0 else 0.0


def measure(out, ref, base, dtype):
    """The numbers the rule needs, as one float64 tensor where the tensors are (read from the device once for all of
    a case's tensors: with many processes on one GPU every read waits for the others' kernels): over the finite
    reference entries max|base - ref| and atol_floor's two terms; max|t - ref| over the entries compared by value
    (an entry left out counts 0, which no |x| is below); whether any entry is bad whatever the tolerance (a
    non-finite output where the reference is finite, or a non-finite reference entry not matched exactly); and
    whether the baseline differs from the reference anywhere."""
    import torch

    out, ref, base = out.double(), ref.double(), base.double()
    if not ref.numel():
        return ref.new_zeros(7)
    finite, r, zero = torch.isfinite(ref), ref.to(dtype), ref.new_zeros(())
    return torch.stack([torch.where(finite, (base - ref).abs(), zero).amax(),
                        torch.where(finite, (r + 0.3 - 0.3 - r).abs(), zero).amax(),
                        torch.where(finite, ref.abs(), zero).amax(),
                        torch.where(finite & torch.isfinite(out), (out - ref).abs(), zero).amax(),
                        (finite & ~torch.isfinite(out)).any().double(), (~finite & (out != ref)).any().double(),
                        (base != ref).any().double()])


def check(name, out, ref, base, dtype, k, locate, floor=0.0, exact_arithmetic=False, measured=None) -> Check:
    """Judge one tensor. All three are canonical; `locate(index) -> region` names a place. `exact_arithmetic`
    (harness.kernels.Judge.exact): where the baseline equals the reference, the tolerance is 0. `measured`:
    measure()'s numbers, as a list, when the caller read them already."""
    import torch

    base_err, fa, top, err, nonfinite, unequal, base_unequal = measured or measure(out, ref, base, dtype).tolist()
    floor_ = max(2 * fa, _ulp(top, dtype)) if ref.numel() else 0.0  # atol_floor(ref[finite], dtype)
    atol = 0.0 if exact_arithmetic and not base_unequal else max(floor_, floor)
    tol = k * base_err + atol
    # err > tol exactly when some entry compared by value is off by more than tol (err is their largest).
    if not (nonfinite or unequal or err > tol):
        return Check(name, True, "PASS", err, tol, base_err, atol)
    out, ref = out.double(), ref.double()
    finite = torch.isfinite(ref)
    diff = (out - ref).abs()
    bad_nonfinite = finite & ~torch.isfinite(out)
    if nonfinite:
        verdict, bad = "NONFINITE", bad_nonfinite
    else:
        verdict, bad = "MISMATCH", (~finite & (out != ref)) | (finite & torch.isfinite(out) & (diff > tol))
    score = torch.where(bad, torch.nan_to_num(diff, nan=float("inf"), posinf=float("inf")), torch.zeros_like(diff))
    worst = tuple(int(i) for i in torch.unravel_index(score.argmax(), score.shape))
    head_axis = 1 if bad.dim() > 1 else 0  # [b, h, ...] tensors, or [h] (dSinks)
    bad_heads = sorted(set(torch.nonzero(bad)[:, head_axis].tolist()))
    where = {"index": list(worst), "bad_fraction": round(bad.float().mean().item(), 6),
             "bad_heads": bad_heads[:16], "heads": out.shape[head_axis]}
    return Check(name, False, verdict, err, tol, base_err, atol, locate(name, worst), where)


def failure_message(bad: Check) -> str:
    """The line a failing check is reported by. A MISMATCH within tolerance on every finite entry differs only where
    the reference is not finite (-inf where a row sees no key, or a program's overflow): it says so, so that its
    signature, and a minimizing step, never take it for a mismatch of values (the numbers are blanked there)."""
    at = bad.where["index"]
    if bad.verdict == "MISMATCH" and bad.error <= bad.tolerance:
        return (f"{bad.tensor}: differs where the reference is not finite, at {at} (finite entries: max error "
                f"{bad.error:.4g} <= tolerance {bad.tolerance:.4g})")
    return f"{bad.tensor}: max error {bad.error:.4g} > tolerance {bad.tolerance:.4g} at {at}"


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


# Code-scan checks whose finding explains a hang: a HANG's `predicted` field holds those its findings show, and
# its message names them, so hangs with different causes get different signatures.
DEADLOCKS = (ScanCheck.mbarrier_protocol, ScanCheck.named_barrier_counts, ScanCheck.register_budget)


def predicts(findings) -> tuple[ScanCheck, ...]:
    """The checks among `findings` (result.ScanFinding) that explain a hang (DEADLOCKS), sorted."""
    return tuple(sorted({f.check for f in findings or ()} & set(DEADLOCKS)))


def hang_message(limit: float, stage: str, predicted=()) -> str:
    """A HANG's message: the time limit it missed, and the checks `predicted` names as its cause."""
    return f"no answer within {limit:g} s ({stage})" + ("; the code scan predicts it: " + ", ".join(predicted)
                                                        if predicted else "")


def hang(case, limit: float, stage: str, hazards=None, **found) -> Result:
    """The HANG of a case that gave no answer within `limit` seconds at `stage`, with what the code scan
    found in its kernel (`hazards`, and `found`: its code digest), if it got that far: the checks among
    them that explain a hang are its `predicted` cause."""
    predicted = predicts(hazards)
    scanned = {} if hazards is None else {"hazards": hazards}
    return Result.of(case, "HANG", stage, hang_message(limit, stage, predicted), **scanned, **found,
                     **({"predicted": predicted} if predicted else {}))


def shows(result: Result, checks) -> bool:
    """The result's code scan found one of `checks` (a recorded hang's cause)."""
    return any(f.check in set(checks) for f in result.hazards or ())


def as_predicted(result: Result, checks, limit: float) -> Result:
    """A compile-only result whose scan shows one of `checks`, as the HANG a GPU run would give:
    the same message and cause, so the same signature (minimizing compile-only)."""
    if result.verdict == "COMPILED" and shows(result, checks):
        predicted = predicts(result.hazards)
        return result.replace(verdict="HANG", stage="run", message=hang_message(limit, "run", predicted),
                              predicted=predicted)
    return result


# ----------------------------------------------------------------------------- results
def invalid(case) -> str:
    """Why the case's program is invalid on purpose (harness.programs.overrun), or "" (valid, or no program)."""
    from harness.programs import overrun
    return overrun.reason(case.program) if case.program else ""


def valid_twin(case):
    """The case with its program's invalid statements left out (harness.programs.overrun.without), or None where the
    program is valid, or would not be a program without them."""
    if not invalid(case):
        return None
    from harness.programs import overrun
    kept = overrun.without(case.program)
    return kept and case.replace(program=kept)


def refused(case, result: Result) -> Result:
    """A compile failure of an invalid program is REFUSES_INVALID, the right answer; other results stand."""
    if result.verdict in ("COMPILE_ERROR", "REJECTED") and invalid(case):
        return result.replace(verdict="REFUSES_INVALID", message=f"refused ({invalid(case)}): {result.message}")
    return result


def accepts_invalid(case, why: str, breaches=None, ran: Result | None = None) -> Result:
    """ACCEPTS_INVALID: TileLang compiled an invalid program; what the guard bands counted if it ran (`breaches`),
    or how the run ended (`ran`: a device fault, which keeps its `fatal`), or that it did not run."""
    if ran is not None:
        outcome = f"it ran to {ran.verdict}: {ran.message}"
    elif breaches is None:
        outcome = "compiled only, not run"
    else:
        outcome = "the guard bands: " + ("; ".join(b.describe() for b in breaches) or "nothing written outside a buffer")
    extra = {"fatal": True} if ran is not None and ran.fatal else {}
    return Result.of(case, "ACCEPTS_INVALID", "compile" if breaches is None and ran is None else "run",
                     f"compiled an invalid program ({why}); {outcome}",
                     written_outside=sum(b.count for b in breaches or ()), **extra)


def out_of_bounds(case, breaches) -> Result | None:
    """OOB_WRITE for guard bands a run changed (harness.bands), judged before any value: the first
    breach names tensor and side (the signature), the message every breach and its count."""
    if not breaches:
        return None
    first = breaches[0]
    return Result.of(case, "OOB_WRITE", "run", "; ".join(b.describe() for b in breaches), tensor=first.tensor,
                  region=f"{first.side} the tensor")


def judge(case, fam, inputs, outputs, seconds=None) -> Result:
    """Every tensor the family produces, against the float64 reference and the same-dtype
    baseline; the result names the first failing tensor and where it fails."""
    import torch

    from harness import reference

    dtype = reference.DTYPES[case.dtype]
    ref = fam.judge.reference(case, inputs, torch.float64)
    base = fam.judge.reference(case, inputs, dtype)
    got = fam.judge.canonical(case, outputs)
    located = []  # made when a tensor fails: a case that passes never needs it

    def locate(name, index):
        if not located:
            if fam.judge.locate is not None:
                located.append(fam.judge.locate(case, inputs))
            else:
                seen = reference.visible(case.seqlen_q, case.seqlen_k, *case.bounds, device=inputs["q"].device)
                located.append(region_locator(case, seen.any(dim=1), seen.any(dim=0)))
        return located[0](name, index)

    spreads = fam.judge.floors(case, inputs)
    named = fam.judge.tensors(case)
    numbers = [measure(got[name], ref[name], base[name], dtype) for name, _ in named]
    measured = torch.stack([n.to(numbers[0].device) for n in numbers]).tolist() if numbers else []
    checks = [check(name, got[name], ref[name], base[name], dtype, K[kind], locate, K[kind] * spreads.get(name, 0.0),
                    exact_arithmetic=fam.judge.exact(case), measured=m) for (name, kind), m in zip(named, measured)]
    extra = {"seconds": seconds or {}, "checks": [as_dict(c) for c in checks]}
    bad = first_failure(checks)
    if bad is None:
        return Result.of(case, "PASS", "judge", **extra)
    msg = failure_message(bad)
    kernel = fam.judge.shared(fam.judge.producers.get(bad.tensor))
    return Result.of(case, bad.verdict, "judge", msg, tensor=bad.tensor, region=bad.region,
                  **({"kernel": kernel} if kernel else {}), **extra)


def as_dict(c: Check) -> dict:
    return asdict(c)
