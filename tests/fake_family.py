"""A kernel family that misbehaves on purpose, to test the worker pool's isolation.

seqlen_q selects the behaviour: 1 passes, 2 hangs while compiling, 3 kills its process while
compiling, 4 hangs while running, 5 dies while running, 6 raises a CUDA fault while running.
"""
import os
import time

import torch

from harness import kernels, oracle

TENSORS = (("O", oracle.K_FORWARD),)


def tensors(case):
    return TENSORS


def floors(case, inputs):
    return {}


def contiguous(case):
    return {}


def unsupported(case):
    return None


def static_key(case):
    return ("fake", case.seqlen_q)


class Kernel:
    def get_kernel_source(self):
        return ""


def build(case, target):
    if case.seqlen_q == 2:
        time.sleep(3600)
    if case.seqlen_q == 3:
        os._exit(3)
    return Kernel()


def make_inputs(case, device):
    return {"q": torch.ones(1, 1, 1, 1)}


def reference(case, inputs, dtype):
    if case.seqlen_q == 7:  # a sticky fault the launch's synchronize missed: the next torch call sees it
        raise RuntimeError("CUDA error: misaligned address\n"
                           "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.")
    return {"O": torch.ones(1, 1, 1, 1, dtype=dtype)}


def canonical(case, outputs):
    return outputs


def _faulting_kernel():
    # What torch raises after an asynchronous fault: the cause first, advice after.
    raise RuntimeError("CUDA error: an illegal memory access was encountered\n"
                       "CUDA kernel errors might be asynchronously reported at some other API call\n"
                       "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.")


def run(kernel, case, inputs):
    if case.seqlen_q == 4:
        time.sleep(3600)
    if case.seqlen_q == 5:
        os._exit(5)
    if case.seqlen_q == 6:
        kernels.launch("fake_kernel", _faulting_kernel)
    return {"O": torch.ones(1, 1, 1, 1)}
