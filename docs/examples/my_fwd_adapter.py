"""A worked example of `harness check`: an adapter for a kernel file of your own.

Your file here is `fwd.py`, a forward attention kernel whose `program(...)` returns a TileLang
prim_func taking (Q, K, V, Sinks, O, LSE) with symbolic lengths (the harness's own forward,
harness/kernels/fwd.py, stands in for yours). The adapter says which builder makes the kernel and
with which arguments a Case gives it, what the kernel offers, and how to call it; the harness draws
cases, compiles, runs and judges them against its float64 reference:

    harness check harness/kernels/fwd.py --adapter docs/examples/my_fwd_adapter.py:FAMILY --cases 20

A builder decorated with @tilelang.jit (and @autotune) works the same way: pass every tile parameter.
"""
import torch

from harness import reference
from harness.kernels import Judge, Offer, launch
from harness.outside import ExampleProgram, buffers, canonical, family


def program_args(case):
    left, right = case.bounds
    return (case.heads, case.kv_heads, case.head_dim, case.head_dim_v, case.dtype, left, right, case.sinks,
            case.layout, *case.tile)


def run(kernels, case, inputs):
    q = inputs["q"]
    o_shape = (case.batch, case.heads, case.seqlen_q, case.head_dim_v) if case.layout == "bhsd" else \
        (case.batch, case.seqlen_q, case.heads, case.head_dim_v)
    out = buffers(q.device, O=(o_shape, q.dtype, float("nan")),
                  LSE=((case.batch, case.heads, case.seqlen_q), torch.float32, float("nan")))
    launch("fwd", kernels["fwd"], q, inputs["k"], inputs["v"], inputs["sinks"], out["O"], out["LSE"])
    return out


FAMILY = family(
    "my_fwd", "fwd.py", lambda case: {"fwd": ExampleProgram("program", program_args)}, run, reference.make_inputs,
    # What it offers to draw.
    Offer(variants=("default",), head_dims=(64, 128), tiles=((64, 64, 1, 128), (128, 64, 2, 256)),
          layouts=("bhsd", "bshd"), takes=("causal", "window", "sinks")),
    # How it is judged: its outputs, named, against the float64 reference.
    Judge(tensors=lambda case: (("O", "forward"), ("LSE", "forward")), reference=reference.forward,
          canonical=canonical),
    # Lengths are symbolic in this kernel: one compile serves them all (the default is per length).
    compiled=())
