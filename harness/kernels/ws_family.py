"""The warp-specialized forward family: its offer and its build/run glue (TileLang in ws.py).

Same inputs, outputs and reference as the dense forward (fwd_family); what differs is the
kernel: a producer warpgroup, consumer warpgroups and a ring of `num_stages` K/V slots.
"""
from __future__ import annotations

import torch

from harness import layout, reference
from harness.kernels import Family, fwd_family, launch

SMEM_LIMIT = 160 * 1024
ACC_PER_THREAD_LIMIT = 128  # fp32 accumulator registers for O per consumer thread
PRODUCER_THREADS = 128      # ws.PRODUCER_THREADS (ws.py imports TileLang, this module must not)
# The explicit barrier and TMA language ws.py is written in (older releases lack some of it).
NEEDS = ("alloc_barrier", "mbarrier_wait_parity", "barrier_arrive", "tma_copy", "tma_store_wait", "shuffle_elect")


def fits(block_m, block_n, num_stages, threads, head_dim, head_dim_v) -> str | None:
    smem = 2 * (block_m * head_dim + num_stages * block_n * (head_dim + head_dim_v) + block_m * head_dim_v)
    if smem > SMEM_LIMIT:
        return f"shared memory {smem} B exceeds {SMEM_LIMIT} B"
    consumers = threads - PRODUCER_THREADS
    if block_m * head_dim_v // consumers > ACC_PER_THREAD_LIMIT:
        return f"O accumulator needs {block_m * head_dim_v // consumers} registers per consumer thread"
    return None


def build(case, target: str, primed=None):
    from harness import compat
    from harness.kernels import ws

    left, right = case.bounds
    func = ws.program(case.heads, case.kv_heads, case.head_dim, case.head_dim_v, case.dtype,
                      left, right, case.sinks, case.layout, *case.tile, case.variant, primed=primed)
    return compat.compile(func, target, case.knobs, kernel="ws")


def run(kernel, case, inputs) -> dict:
    q = inputs["q"]
    shape = layout.shape(case.layout, case.batch, case.seqlen_q, case.heads, case.head_dim_v)
    # NaN sentinels: an element the kernel never writes shows up as NONFINITE.
    out = torch.full(shape, float("nan"), dtype=q.dtype, device=q.device)
    lse = torch.full((case.batch, case.heads, case.seqlen_q), float("nan"), dtype=torch.float32, device=q.device)
    launch("ws", kernel, q, inputs["k"], inputs["v"], inputs["sinks"], out, lse)
    return {"O": out, "LSE": lse}


FAMILY = Family(
    name="ws",
    variants=("smem", "smem_swizzle", "direct", "tma"),
    head_dims=(64, 128, 256),
    # (block_m, block_n, num_stages, threads): threads = consumer warpgroups (one per 64 query
    # rows) + the producer warpgroup; every ring depth 1 to 4.
    tiles=((64, 64, 2, 256), (64, 64, 1, 256), (64, 128, 3, 256), (128, 64, 4, 384), (128, 128, 2, 384),
           (64, 32, 4, 256), (128, 64, 1, 384)),
    fits=fits,
    build=build,
    run=run,
    make_inputs=reference.make_inputs,
    tensors=fwd_family.tensors,
    reference=reference.forward,
    canonical=fwd_family.canonical,
    producers={"O": "ws", "LSE": "ws"},
    ring="k",
    needs=NEEDS,
)
