"""The tolerance rule, verdicts, mismatch localization and failure signatures.

Rule (FlashAttention's tests): for each output t with upcast reference `ref` and
same-precision baseline `base`,
    PASS  iff  max|t - ref| <= k * max|base - ref| + atol
with k = 2 for forward outputs, 3 for gradients, and atol = 2 * max|r + 0.3 - 0.3 - r|,
r = ref rounded to the input dtype, and at least one ulp of the dtype at max|ref|. A family
may raise atol to k times a rounding spread for a tensor with few values, where one baseline run
samples its rounding too thinly to bound another run's (the backward's per-head dSinks:
bwd_family.floors). Where the reference is -inf (LSE of a row that sees no key) the output must
be -inf too.

Who is to blame for an exception is decided in one place, `classify`: COMPILE_ERROR only when
TileLang, TVM or nvcc rejected the program, CRASH only for a device fault (a dead worker is the
pool's CRASH), anything else HARNESS_ERROR: our own bug, reported but never recorded as a
compiler bug.

torch and the references are imported by the functions that judge, which run in the workers: the
processes that only hand out cases and keep results (harness run, pytest) start their workers
without first spending seconds importing torch.
"""
from __future__ import annotations

import re
import sys
import traceback
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from harness import case as case_mod

if TYPE_CHECKING:
    import torch

VERDICTS = ("PASS", "COMPILED", "MISMATCH", "NONFINITE", "OOB_WRITE", "OOB_READ", "COMPILE_ERROR", "UNSUPPORTED",
            "CRASH", "HANG", "HARNESS_ERROR")
# The compiler's, recordable.
FAILURES = ("MISMATCH", "NONFINITE", "OOB_WRITE", "OOB_READ", "COMPILE_ERROR", "CRASH", "HANG")
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
    import torch

    if not ref.numel():
        return 0.0
    r = ref.to(dtype)
    fa = 2 * (r + 0.3 - 0.3 - r).abs().max().item()
    top = ref.abs().max().item()
    ulp = torch.finfo(dtype).eps * 2.0 ** torch.floor(torch.log2(torch.tensor(top))).item() if top > 0 else 0.0
    return max(fa, ulp)


def check(name, out, ref, base, dtype, k, locate, floor=0.0) -> Check:
    """Judge one tensor. All three are canonical; `locate(index) -> region` names a place."""
    import torch

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


# Code-scan checks whose finding explains a hang; a HANG's message names them, so hangs with
# different causes get different signatures.
DEADLOCKS = ("mbarrier_protocol", "named_barrier_counts", "register_budget")


_PREDICTS = "; the code scan predicts it: "


def checks_of(hazards) -> set[str]:
    """The check names of hazard lines ("check: message")."""
    return {h.split(":", 1)[0] for h in hazards}


def hang_message(limit: float, stage: str, hazards=()) -> str:
    named = sorted(checks_of(hazards) & set(DEADLOCKS))
    return f"no answer within {limit:g} s ({stage})" + (_PREDICTS + ", ".join(named) if named else "")


def shows(result: dict, checks) -> bool:
    """The result's code scan found one of `checks` (a recorded hang's cause)."""
    return bool(set(checks) & checks_of(result.get("hazards", [])))


def as_predicted(result: dict, checks, limit: float) -> dict:
    """A compile-only result whose scan shows one of `checks`, as the HANG a GPU run would give:
    the same message, so the same signature (minimizing compile-only)."""
    if result["verdict"] == "COMPILED" and shows(result, checks):
        return {**result, "verdict": "HANG", "stage": "run", "message": hang_message(limit, "run", result["hazards"])}
    return result


def predicted_by(message: str) -> list[str]:
    """The code-scan checks a HANG's message names (hang_message), else []."""
    return message.split(_PREDICTS, 1)[1].split(", ") if _PREDICTS in message else []


def signature(result: dict) -> tuple:
    """(family, variant, verdict, stage, tensor, region, normalized message). A failure pinned on
    a shared kernel (one program, whatever the variant, and whichever family runs it: the dense
    backward's sink gradient serves the varlen backward too) names that kernel instead of the
    family and variant: one bug, one signature."""
    case = result["case"]
    kernel = result.get("kernel")
    family, scope = ("", f"kernel:{kernel}") if kernel else (case["family"], case["variant"])
    return (family, scope, result["verdict"], result.get("stage", ""),
            result.get("tensor", ""), result.get("region", ""), normalize(result.get("message", "")))


# ----------------------------------------------------------------------------- results
def result(case, verdict, stage, message="", **extra) -> dict:
    """One case's outcome, as the results file and reproducers store it."""
    r = {"case_id": case.id, "case": case_mod.to_dict(case), "verdict": verdict, "stage": stage,
         "message": message, "tensor": "", "region": ""}
    r.update(extra)
    return r


def out_of_bounds(case, breaches) -> dict | None:
    """OOB_WRITE for guard bands a run changed (harness.bands), judged before any value: the first
    breach names tensor and side (the signature), the message every breach and its count."""
    if not breaches:
        return None
    first = breaches[0]
    return result(case, "OOB_WRITE", "run", "; ".join(b.describe() for b in breaches), tensor=first.tensor,
                  region=f"{first.side} the tensor")


def judge(case, fam, inputs, outputs, seconds=None) -> dict:
    """Every tensor the family produces, against the float64 reference and the same-dtype
    baseline; the result names the first failing tensor and where it fails."""
    import torch

    from harness import reference

    dtype = reference.DTYPES[case.dtype]
    ref = fam.reference(case, inputs, torch.float64)
    base = fam.reference(case, inputs, dtype)
    got = fam.canonical(case, outputs)
    if fam.locate is not None:
        locate = fam.locate(case, inputs)
    else:
        seen = reference.visible(case.seqlen_q, case.seqlen_k, *case.bounds, device=inputs["q"].device)
        locate = region_locator(case, seen.any(dim=1), seen.any(dim=0))
    spreads = fam.floors(case, inputs)
    checks = [check(name, got[name], ref[name], base[name], dtype, K[kind], locate, K[kind] * spreads.get(name, 0.0))
              for name, kind in fam.tensors(case)]
    extra = {"seconds": seconds or {}, "checks": [as_dict(c) for c in checks]}
    bad = first_failure(checks)
    if bad is None:
        return result(case, "PASS", "judge", **extra)
    msg = f"{bad.tensor}: max error {bad.error:.4g} > tolerance {bad.tolerance:.4g} at {bad.where['index']}"
    kernel = fam.shared(fam.producers.get(bad.tensor))
    return result(case, bad.verdict, "judge", msg, tensor=bad.tensor, region=bad.region,
                  **({"kernel": kernel} if kernel else {}), **extra)


# ----------------------------------------------------------------------------- exceptions
# A device fault as torch, TileLang's runtime or the CUDA driver words it (first line of a message).
_DEVICE_FAULT = re.compile(r"CUDA error|CUDA_ERROR_\w+|cudaError\w+|CUDA driver error|device-side assert")
_COMPILER_PACKAGES = ("tilelang", "tvm", "tvm_ffi")
_NATIVE_SOURCES = {".h", ".hpp", ".cc", ".cpp", ".cu", ".cuh", ".pxi", ".pyx"}


def _chain(e):
    while e is not None:
        yield e
        e = e.__cause__ or e.__context__


def is_device_fault(e: BaseException) -> bool:
    for x in _chain(e):
        if type(x).__name__ == "AcceleratorError":  # torch >= 2.8
            return True
        lines = [line for line in str(x).splitlines() if line.strip()]
        if lines and _DEVICE_FAULT.search(lines[0]):
            return True
    return False


def _compiler_roots() -> list[str]:
    roots = []
    for name in _COMPILER_PACKAGES:
        module = sys.modules.get(name)
        if module is not None and getattr(module, "__file__", None):
            roots.append(str(Path(module.__file__).resolve().parent))
    return roots


def from_compiler(e: BaseException) -> bool:
    """Raised by TileLang, TVM or the nvcc driver they run: the exception's type comes from
    their packages, or the innermost frame of its traceback lies in their code or in native code
    they call (Python shows it as '<unknown>' or as the C++ source it came from, e.g. TVM's
    `include/tvm/ir/cast.h` raising a plain TypeError from CUDA codegen). An error in our program
    builders comes from our own frames, even when TileLang's tracer called them."""
    if type(e).__module__.split(".")[0] in _COMPILER_PACKAGES:
        return True
    frames = traceback.extract_tb(e.__traceback__)
    if not frames:
        return False
    innermost = frames[-1].filename
    if innermost.startswith("<") and innermost != "<string>" or Path(innermost).suffix in _NATIVE_SOURCES:
        return True
    path = str(Path(innermost).resolve())
    return any(path.startswith(root + "/") for root in _compiler_roots())


def classify(e: BaseException, stage: str) -> tuple[str, str]:
    """(verdict, one-line message) for an exception raised at `stage` of running a case."""
    if is_device_fault(e):
        return "CRASH", _first_line(e)  # a CUDA error's cause comes first; torch appends advice
    if type(e).__name__ == "Unbuildable":  # harness.kernels.Unbuildable: the program, not the compiler
        return "UNSUPPORTED", _first_line(e)
    if _OUT_OF_SHARED_MEMORY.search(str(e)):  # a tile the device cannot hold: a resource limit, not a bug
        return "UNSUPPORTED", _first_line(e)
    if stage == "compile" and from_compiler(e):
        message = _nvcc_error(e) or _last_line(e)
        # A tile the register file cannot hold is a resource limit (Family.fits missed it), not a bug.
        return ("UNSUPPORTED" if _OUT_OF_REGISTERS.search(message) else "COMPILE_ERROR"), message
    return "HARNESS_ERROR", _last_line(e)


def failed(case, stage, e, fam=None, **extra) -> dict:
    """The result of a case whose `stage` raised `e`. A device fault poisons the CUDA context
    (`fatal`: the worker must not run another case)."""
    verdict, message = classify(e, stage)
    kernel = next((x.kernel for x in _chain(e) if hasattr(x, "kernel")), None)
    kernel = fam.shared(kernel) if fam is not None else None
    if verdict == "CRASH":
        extra["fatal"] = True
    if kernel and verdict in FAILURES:
        extra["kernel"] = kernel
    return result(case, verdict, stage, message, traceback=_tb(e), **extra)


def _first_line(e) -> str:
    lines = [l for l in str(e).strip().splitlines() if l.strip()]
    return f"{type(e).__name__}: {lines[0] if lines else ''}"[:500]


def _last_line(e) -> str:
    lines = [l for l in str(e).strip().splitlines() if l.strip()]
    return f"{type(e).__name__}: {lines[-1] if lines else ''}"[:500]


# TileLang's launcher when a kernel asks more dynamic shared memory than the GPU grants (measured,
# an outside kernel's tile at head_dim 128 on an H100: 239,616 bytes).
_OUT_OF_SHARED_MEMORY = re.compile(r"Failed to set the allowed dynamic shared memory size")
_OUT_OF_REGISTERS = re.compile(r"ptxas: .*Insufficient registers")
_NVCC_SAYS = re.compile(r"\.cu\((\d+)\): error: (.+)|ptxas (?:fatal|error)\s*: (.+)")


def _nvcc_error(e) -> str:
    """nvcc's (or ptxas's) first error, from the exception or from what the compile printed
    (harness.worker.build): TileLang 0.1.6.post2 raises only the source (`}`), 0.1.15 ends with
    the command line, neither of which says what went wrong."""
    m = _NVCC_SAYS.search(getattr(e, "compiler_output", "") + "\n" + str(e))
    if not m:
        return ""
    said = f"line {m[1]}: {m[2].strip()}" if m[1] else f"ptxas: {m[3].strip()}"
    return f"{type(e).__name__}: nvcc rejected the generated CUDA: {said}"[:500]


def _tb(e) -> str:
    return "".join(traceback.format_exception(type(e), e, e.__traceback__))[-4000:]


def as_dict(c: Check) -> dict:
    return asdict(c)
