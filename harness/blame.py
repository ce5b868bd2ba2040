"""Who is to blame for an exception raised while running a case.

Decided in one place, `classify`: COMPILE_ERROR only when TileLang, TVM or nvcc rejected the
program, CRASH only for a device fault (a dead worker is the pool's CRASH), UNSUPPORTED for a
program that cannot be built or a resource the device lacks, anything else HARNESS_ERROR: our own
bug, reported but never recorded as a compiler bug.
"""
from __future__ import annotations

import re
import sys
import traceback
from pathlib import Path

from harness.result import Result, Verdict

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
    if type(e).__name__ in ("Unbuildable", "OutOfRange"):
        # harness.kernels.Unbuildable, program_family.OutOfRange: the program (not buildable, or its meaning past what
        # float64 judges: a changed attention chain that lost its running max), not the compiler
        return "UNSUPPORTED", _first_line(e)
    if type(e).__name__ == "Rejected":  # harness.kernels.program_family.Rejected: a generated program did not parse
        # TileLang's frontend refusing a well-formed program is "rejects valid"; Python refusing our text is ours.
        return ("REJECTED" if from_compiler(e.__cause__) else "HARNESS_ERROR"), _first_line(e)
    if _OUT_OF_SHARED_MEMORY.search(str(e)):  # a tile the device cannot hold: a resource limit, not a bug
        return "UNSUPPORTED", _first_line(e)
    if stage == "compile" and from_compiler(e):
        message = _nvcc_error(e) or _last_line(e)
        # A tile the register file cannot hold is a resource limit (Offer.misfit missed it), not a bug.
        return ("UNSUPPORTED" if _OUT_OF_REGISTERS.search(message) else "COMPILE_ERROR"), message
    return "HARNESS_ERROR", _last_line(e)


def failed(case, stage, e, fam=None, **extra) -> Result:
    """The result of a case whose `stage` raised `e`. A device fault poisons the CUDA context
    (`fatal`: the worker must not run another case)."""
    verdict, message = classify(e, stage)
    kernel = next((x.kernel for x in _chain(e) if hasattr(x, "kernel")), None)
    kernel = fam.judge.shared(kernel) if fam is not None else None
    if verdict == "CRASH":
        extra["fatal"] = True
    if kernel and Verdict(verdict).failed:
        extra["kernel"] = kernel
    return Result.of(case, verdict, stage, message, traceback=_tb(e), **extra)


def _first_line(e) -> str:
    lines = [l for l in str(e).strip().splitlines() if l.strip()]
    return f"{type(e).__name__}: {lines[0] if lines else ''}"[:500]


# Source context TVM prints under an error ("  --> file.py:14:1", "  14 |   code", "     |   ^"): says nothing alone.
_GUTTER = re.compile(r"^\s*(\d*\s*\||-->)")


def _last_line(e) -> str:
    """The last line that says something: TVM's messages end with the source they point at, and what TVM
    indents under its error (the layouts it compared, the loop it lowered) is detail, not the error."""
    lines = [l for l in str(e).strip().splitlines() if l.strip() and not l[0].isspace() and not _GUTTER.match(l)]
    return f"{type(e).__name__}: {lines[-1] if lines else ''}"[:500]


# TileLang's launcher when a kernel asks more dynamic shared memory than the GPU grants (measured,
# an outside kernel's tile at head_dim 128 on an H100: 239,616 bytes).
_OUT_OF_SHARED_MEMORY = re.compile(r"Failed to set the allowed dynamic shared memory size")
_OUT_OF_REGISTERS = re.compile(r"ptxas: .*Insufficient registers")
_NVCC_SAYS = re.compile(r"\.cu\((\d+)\): error: (.+)|ptxas (?:fatal|error)\s*: (.+)"
                        r"|([\w.-]+\.(?:h|hpp|cuh))\((\d+)\): error: (.+)")
# Where a template's static_assert fired: 'instantiation of class "tl::InclusiveScan2D<Reducer, threads, ...'.
_INSTANTIATED = re.compile(r'instantiation of (?:class )?"(?:[\w:<>, ]+ )?([\w:]+)<')


def _nvcc_error(e) -> str:
    """nvcc's (or ptxas's) first error, from the exception or from what the compile printed
    (harness.worker.build): TileLang 0.1.6.post2 raises only the source (`}`), 0.1.15 ends with
    the command line, neither of which says what went wrong."""
    text = getattr(e, "compiler_output", "") + "\n" + str(e)
    m = _NVCC_SAYS.search(text)
    if not m:
        return ""
    if m[4]:  # in one of TileLang's headers (a static_assert the generated code's arguments failed): say which
        within = _INSTANTIATED.search(text, m.end())
        said = f"{m[4]} line {m[5]}: {m[6].strip()}" + (f" in {within[1]}" if within else "")
    else:
        said = f"line {m[1]}: {m[2].strip()}" if m[1] else f"ptxas: {m[3].strip()}"
    return f"{type(e).__name__}: nvcc rejected the generated CUDA: {said}"[:500]


def _tb(e) -> str:
    return "".join(traceback.format_exception(type(e), e, e.__traceback__))[-4000:]

