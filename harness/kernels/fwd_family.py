"""The forward family: its offer and its build/run glue (TileLang itself lives in fwd.py)."""
from __future__ import annotations

import torch

from harness import bands, layout, reference
from harness.case import FORMS
from harness.kernels import Family, Judge, Offer, Rule, Runner, launch, written

SMEM_LIMIT = 160 * 1024
ACC_PER_THREAD_LIMIT = 128  # fp32 accumulator registers for O per thread
REGISTER_FILE = 65536       # 32-bit registers per SM, shared by the block's threads (255 at most each)
# Addresses, indices and row statistics beside the accumulators. With 384 threads (170 each),
# 192x64 tiles at head_dim_v 256 (128 + 32) fail in ptxas ("Insufficient registers"); 128x128
# at 256 threads (128 + 64 of 255) compiles.
REGISTER_MARGIN = 32


def misfit(block_m, block_n, num_stages, threads, head_dim, head_dim_v, variant=None, extra_smem=0) -> str | None:
    """Why the tile config runs out of shared memory or registers, or None if it fits. `extra_smem`: bytes a
    variant of this kernel adds (the masked family's mask and bias tiles); no forward variant changes the budget."""
    stages = max(num_stages, 1)
    smem = 2 * (block_m * head_dim + stages * block_n * (head_dim + head_dim_v) + block_m * head_dim_v) + extra_smem
    if smem > SMEM_LIMIT:
        return f"shared memory {smem} B exceeds {SMEM_LIMIT} B"
    acc_o, acc_s = block_m * head_dim_v // threads, block_m * block_n // threads
    if acc_o > ACC_PER_THREAD_LIMIT:
        return f"O accumulator needs {acc_o} registers per thread"
    budget = min(255, REGISTER_FILE // threads)
    if acc_o + acc_s > budget - REGISTER_MARGIN:
        return f"O and S accumulators need {acc_o + acc_s} registers per thread; {threads} threads get {budget} each"
    return None


def p_staged_fits(case) -> bool:
    """Form p_operand=shared adds a [block_m, block_n] tile of P to shared memory."""
    extra = 2 * case.block_m * case.block_n if case.form("p_operand") == "shared" else 0
    return misfit(*case.tile, case.head_dim, case.head_dim_v, extra_smem=extra) is None


def build(case, target: str):
    from harness import compat
    from harness.kernels import fwd

    left, right = case.bounds
    func = written(case, lambda: fwd.program(case.heads, case.kv_heads, case.head_dim, case.head_dim_v, case.dtype,
                                             left, right, case.sinks, case.layout, *case.tile, case.variant, case.forms))
    return compat.compile(func, target, case.knobs, kernel="fwd")


def tensors(case) -> tuple:
    return (("O", "forward"), ("LSE", "forward"))


def canonical(case, outputs) -> dict:
    return {"O": layout.to_canonical(outputs["O"], case.layout), "LSE": outputs["LSE"]}


def outputs(case, q) -> tuple:
    """O (in the case's layout) and LSE filled with NaN: an element the kernel never writes shows
    up as NONFINITE."""
    shape = layout.shape(case.layout, case.batch, case.seqlen_q, case.heads, case.head_dim_v)
    out = bands.full("O", shape, float("nan"), q.dtype, q.device)
    lse = bands.full("LSE", (case.batch, case.heads, case.seqlen_q), float("nan"), torch.float32, q.device)
    return out, lse


def run_named(name: str):
    """run(kernel, case, inputs) for a forward kernel named `name` taking (Q, K, V, Sinks, O, LSE)."""
    def run(kernel, case, inputs) -> dict:
        out, lse = outputs(case, inputs["q"])
        launch(name, kernel, inputs["q"], inputs["k"], inputs["v"], inputs["sinks"], out, lse)
        return {"O": out, "LSE": lse}
    return run


run = run_named("fwd")


FAMILY = Family(
    "fwd",
    Offer(
        variants=("default", "direct"),
        head_dims=(32, 64, 96, 128, 256),
        # (block_m, block_n, num_stages, threads): up to four warpgroups along M (512 threads), three
        # (384, not a power of two), and key tiles of 32 to 192 rows.
        tiles=((64, 64, 1, 128), (64, 64, 2, 128), (64, 128, 2, 128), (128, 64, 2, 256), (128, 128, 1, 256),
               (256, 64, 1, 512), (192, 64, 1, 384), (128, 32, 2, 256), (64, 96, 2, 128), (128, 192, 1, 256),
               (64, 32, 1, 128)),
        misfit=misfit,
        forms=tuple(FORMS),
        rules=(Rule("P staged through shared memory must fit beside the Q, K, V and O tiles",
                    ("forms", "block_m", "block_n", "num_stages", "threads", "head_dim", "head_dim_v"), p_staged_fits),),
    ),
    Runner(build=build, run=run, make_inputs=reference.make_inputs),
    Judge(
        tensors=tensors,
        reference=reference.forward,   # canonical O [b,h,sq,dv] and LSE [b,h,sq]
        canonical=canonical,
        # A failure pinned on its one kernel is scoped by that kernel, as its recorded signatures are.
        shared_kernels=frozenset({"fwd"}),
        producers={"O": "fwd", "LSE": "fwd"},
    ),
)
