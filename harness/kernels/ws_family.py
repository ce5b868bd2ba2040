"""The warp-specialized forward family: its offer and its build/run glue (TileLang in ws.py).

Same inputs, outputs and reference as the dense forward (fwd_family); what differs is the
kernel: a producer warpgroup, consumer warpgroups and a ring of `num_stages` K/V slots.
"""
from __future__ import annotations

from harness import reference
from harness.kernels import Family, Judge, Offer, Runner, fwd_family, written

PRODUCER_THREADS = 128      # ws.PRODUCER_THREADS (ws.py imports TileLang, this module must not)
# The explicit barrier and TMA language ws.py is written in (older releases lack some of it).
NEEDS = ("alloc_barrier", "mbarrier_wait_parity", "barrier_arrive", "tma_copy", "tma_store_wait", "shuffle_elect")


def misfit(block_m, block_n, num_stages, threads, head_dim, head_dim_v, variant=None) -> str | None:
    """The dense forward's rule (the same tiles in shared memory, the ring's slots its stages) for the
    consumer threads, which alone hold the O accumulator."""
    return fwd_family.misfit(block_m, block_n, num_stages, threads - PRODUCER_THREADS, head_dim, head_dim_v, variant)


def build(case, target: str, primed=None):
    from harness import compat
    from harness.kernels import ws

    left, right = case.bounds
    func = written(case, lambda: ws.program(case.heads, case.kv_heads, case.head_dim, case.head_dim_v, case.dtype, left,
                                            right, case.sinks, case.layout, *case.tile, case.variant, primed=primed,
                                            forms=case.forms))
    return compat.compile(func, target, case.knobs, kernel="ws")


FAMILY = Family(
    "ws",
    Offer(
        variants=("smem", "smem_swizzle", "direct", "tma"),
        head_dims=(64, 128, 256),
        # (block_m, block_n, num_stages, threads): threads = consumer warpgroups (one per 64 query
        # rows) + the producer warpgroup; every ring depth 1 to 4.
        tiles=((64, 64, 2, 256), (64, 64, 1, 256), (64, 128, 3, 256), (128, 64, 4, 384), (128, 128, 2, 384),
               (64, 32, 4, 256), (128, 64, 1, 384)),
        misfit=misfit,
        lengths="ring_k",
        forms=("scores_mask", "row_max", "rescale"),  # the consumer's softmax (blocks.softmax_forms)
    ),
    Runner(build=build, run=fwd_family.run_named("ws"), make_inputs=reference.make_inputs, needs=NEEDS),
    Judge(
        tensors=fwd_family.tensors,
        reference=reference.forward,
        canonical=fwd_family.canonical,
        producers={"O": "ws", "LSE": "ws"},
        # Its barrier protocol, TMA loads and register split are what it exists to test: any finding fails.
        clean=("atomics_on_locals", "mbarrier_protocol", "named_barrier_counts", "reads_after_release",
               "register_budget", "unaligned_vectors", "unsynced_tma_stores", "unwaited_async_loads",
               "vectorized_atomics"),
    ),
)
