"""A kernel family that misbehaves on purpose, to test the worker pool's isolation and the
family contract. It is registered the way any family of one's own is: kernels.register in tests/conftest.py
(the pools start their workers with it), `harness --register fake=fake_family:FAMILY` for a command.

heads (a static field: each value is its own kernel) selects the behaviour:
1 passes; 2 hangs while compiling; 3 kills its process while compiling; 4 hangs while running;
5 dies while running; 6 raises a CUDA fault while running; 7 faults in the judge; 8 has a Python
bug in its program builder; 9 is rejected by the compiler (a TVM error); 10 has a Python bug
whose message says "illegal"; 11 faults in the kernel "common" that every variant shares;
12 breaks the generated-code scan (its source cannot be read); 15 emits warp-specialized code whose
setmaxnreg asks FAKE_SETMAXNREG registers per consumer thread (default 240: more than an SM has,
and then it hangs while running, unless FAKE_GRANTED is set: a scan that predicts wrongly);
16 writes 3 elements past the end of its output O; 17 reads the element after its input q (so its O
depends on the guard band there); 18 gives a wrong O that changes from run to run (no band read).
"""
import os
import subprocess
import sys
import time

import torch

from harness import bands, kernels


class Kernel:
    def __init__(self, readable=True):
        self.readable = readable

    def get_kernel_source(self):
        if not self.readable:
            raise TypeError("source of a broken fake kernel")
        return self.source

    source = ""


class InternalError(RuntimeError):
    """Stands for TVM's own error type: the compiler rejected the program."""


InternalError.__module__ = "tvm.error"


def build(case, target):
    if case.heads == 2:
        time.sleep(3600)
    if case.heads == 3:
        os._exit(3)
    if case.heads == 8:
        return {}["no such program"]  # our bug, not the compiler's
    if case.heads == 9:
        raise InternalError("Check failed: (continuous % (vector_size * 2) == 0) is false")
    if case.heads == 13:  # TileLang 0.1.6.post2: nvcc prints its error, the exception holds the source
        subprocess.run([sys.executable, "-c", "import sys; print('/tmp/tmpab.cu(63): error: too many arguments "
                        "in function call', file=sys.stderr)"])
        raise InternalError("Compilation Failed! ['nvcc', '/tmp/tmpab.cu']\n#include <cuda.h>\n}")
    kernel = Kernel(readable=case.heads != 12)
    if case.heads == 14:  # code that depends on PYTHONHASHSEED, as TileLang 0.1.12's epilogue barriers did
        kernel.source = "__syncthreads();\n" if hash("epilogue") % 2 else ""
    if case.heads == 15:  # TileLang 0.1.10's fwd at 192x64: 384 consumers at 240 registers hang
        regs = os.environ.get("FAKE_SETMAXNREG", "240")
        kernel.source = (f"__global__ void __launch_bounds__(512, 1) k() {{\n  if (384 <= ((int)threadIdx.x)) {{\n"
                         f"    tl::warpgroup_reg_dealloc<24>();\n  }} else {{\n    tl::warpgroup_reg_alloc<{regs}>();\n"
                         f"  }}\n}}\n")
    return kernel


def make_inputs(case, device):
    return {"q": torch.ones(1, 1, 1, 1)}


def reference(case, inputs, dtype):
    if case.heads == 7:  # a sticky fault the launch's synchronize missed: the next torch call sees it
        raise RuntimeError("CUDA error: misaligned address\n"
                           "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.")
    return {"O": torch.ones(1, 1, 1, 1, dtype=dtype)}


def _faulting_kernel():
    # What torch raises after an asynchronous fault: the cause first, advice after.
    raise RuntimeError("CUDA error: an illegal memory access was encountered\n"
                       "CUDA kernel errors might be asynchronously reported at some other API call\n"
                       "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.")


def run(kernel, case, inputs):
    if case.heads == 4 or (case.heads == 15 and int(os.environ.get("FAKE_SETMAXNREG", "240")) > 160
                           and not os.environ.get("FAKE_GRANTED")):
        time.sleep(3600)  # 15: the consumers wait for registers never granted
    if case.heads == 5:
        os._exit(5)
    if case.heads == 6:
        kernels.launch("fake_kernel", _faulting_kernel)
    if case.heads == 10:
        raise ValueError("illegal value for argument 'q'")
    if case.heads == 11:
        kernels.launch("common", _faulting_kernel)
    out = bands.full("O", (1, 1, 1, 1), 1.0, torch.float32, "cpu")
    if case.heads == 16:
        _beyond(out)[:3] = 7.0
    if case.heads == 17:
        out.fill_(float(_beyond(inputs["q"])[0]))
    if case.heads == 18:
        out.fill_(float(torch.rand(1)) + 2)
    return {"O": out}


def _beyond(t):
    """The elements stored after `t` (its guard band, when it has one)."""
    flat = torch.empty(0, dtype=t.dtype).set_(t.untyped_storage())
    return flat[t.storage_offset() + t.numel():]


FAMILY = kernels.Family(
    "fake",
    kernels.Offer(variants=("default", "other"), head_dims=(64,), tiles=((64, 64, 1, 128),)),
    kernels.Runner(build=build, run=run, make_inputs=make_inputs),
    kernels.Judge(tensors=lambda case: (("O", "forward"),), reference=reference, canonical=lambda case, outputs: outputs,
                  shared_kernels=frozenset({"common"})),
)
