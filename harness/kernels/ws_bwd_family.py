"""The warp-specialized backward family: bwd_family's pipeline (Delta, dQ postprocess, dSinks, and
O and LSE as a correct forward stores them) around the main kernel of ws.py, judged on every
gradient like `bwd`."""
from __future__ import annotations

import dataclasses

from harness.kernels import Family, bwd_family, ws_family


def misfit(block_m, block_n, num_stages, threads, head_dim, head_dim_v, variant=None) -> str | None:
    """bwd_family's rule (its per-stage Q and dO are the ring's slots) for the consumer threads."""
    return bwd_family.misfit(block_m, block_n, num_stages, threads - ws_family.PRODUCER_THREADS, head_dim, head_dim_v,
                           variant)


def build(case, target: str) -> tuple:
    from harness.kernels import ws

    left, right = case.bounds
    main = ws.backward(case.heads, case.kv_heads, case.head_dim, case.head_dim_v, case.dtype, left, right,
                       case.layout, *case.tile, case.variant)
    return bwd_family.pipeline(case, target, main, case.layout, annotate=True)


FAMILY = Family(
    "ws_bwd",
    dataclasses.replace(
        bwd_family.FAMILY.offer,
        variants=("atomic", "split"),
        # (block_m query rows per ring slot, block_n key rows, num_stages, threads = consumers + producer)
        tiles=((64, 64, 2, 256), (64, 64, 1, 256), (32, 64, 3, 256), (32, 64, 4, 256), (64, 128, 2, 384),
               (32, 128, 4, 384)),
        misfit=misfit,
        lengths="ring_q",
    ),
    dataclasses.replace(bwd_family.FAMILY.runner, build=build, needs=ws_family.NEEDS),
    # Its ring's barriers are what it exists to test: an mbarrier_protocol finding fails the case.
    dataclasses.replace(bwd_family.FAMILY.judge, clean=("mbarrier_protocol",)),
)
