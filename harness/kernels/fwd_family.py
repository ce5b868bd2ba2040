"""The forward family's offer and its build/run glue (TileLang itself lives in fwd.py)."""
from __future__ import annotations

import torch

from harness import kernels, oracle
from harness.kernels import launch, tile

HEAD_DIMS = (32, 64, 96, 128, 256)
TILES = (  # (block_m, block_n, num_stages, threads)
    (64, 64, 1, 128),
    (64, 64, 2, 128),
    (64, 128, 2, 128),
    (128, 64, 2, 256),
    (128, 128, 1, 256),
)
VARIANTS = ("default",)
SMEM_LIMIT = 160 * 1024
ACC_PER_THREAD_LIMIT = 128  # fp32 accumulator registers for O per thread


def unsupported(case) -> str | None:
    return (kernels.not_offered(case, VARIANTS, HEAD_DIMS, TILES)
            or fits(case.block_m, case.block_n, case.num_stages, case.threads, case.head_dim, case.head_dim_v))


def fits(block_m, block_n, num_stages, threads, head_dim, head_dim_v) -> str | None:
    stages = max(num_stages, 1)
    smem = 2 * (block_m * head_dim + stages * block_n * (head_dim + head_dim_v) + block_m * head_dim_v)
    if smem > SMEM_LIMIT:
        return f"shared memory {smem} B exceeds {SMEM_LIMIT} B"
    if block_m * head_dim_v // threads > ACC_PER_THREAD_LIMIT:
        return f"O accumulator needs {block_m * head_dim_v // threads} registers per thread"
    return None


def static_key(case) -> tuple:
    return ("fwd", case.variant, case.heads, case.kv_heads, case.head_dim, case.head_dim_v,
            case.dtype, case.bounds, case.sinks, case.layout, tile(case))


def build(case, target: str):
    from harness import compat
    from harness.kernels import fwd

    left, right = case.bounds
    func = fwd.program(case.heads, case.kv_heads, case.head_dim, case.head_dim_v, case.dtype,
                       left, right, case.sinks, case.layout, *tile(case))
    return compat.compile(func, target)


# (tensor, k of the tolerance rule) in the order they are judged.
TENSORS = (("O", oracle.K_FORWARD), ("LSE", oracle.K_FORWARD))


def tensors(case) -> tuple:
    return TENSORS


def floors(case, inputs) -> dict:
    return {}


def contiguous(case) -> dict:
    """Atomic destinations whose consecutive loop elements are not consecutive addresses: none."""
    return {}


def reference(case, inputs, dtype) -> dict:
    """Canonical O [b,h,sq,dv] and LSE [b,h,sq] computed in `dtype`."""
    from harness import reference as ref
    return ref.forward(case, inputs, dtype)


def canonical(case, outputs) -> dict:
    from harness import reference as ref
    return {"O": ref.to_canonical(outputs["O"], case.layout), "LSE": outputs["LSE"]}


def make_inputs(case, device) -> dict:
    from harness import reference as ref
    return ref.make_inputs(case, device)


def run(kernel, case, inputs) -> dict:
    q = inputs["q"]
    b = case.batch
    o_shape = ((b, case.seqlen_q, case.heads, case.head_dim_v) if case.layout == "bshd"
               else (b, case.heads, case.seqlen_q, case.head_dim_v))
    # NaN sentinels: an element the kernel never writes shows up as NONFINITE.
    out = torch.full(o_shape, float("nan"), dtype=q.dtype, device=q.device)
    lse = torch.full((b, case.heads, case.seqlen_q), float("nan"), dtype=torch.float32, device=q.device)
    launch("fwd", kernel, q, inputs["k"], inputs["v"], inputs["sinks"], out, lse)
    return {"O": out, "LSE": lse}
