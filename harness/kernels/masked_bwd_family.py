"""The masked backward family: dQ, dK, dV and dBias with a uint8 mask and an additive bias.

run() is the backward's pipeline, reading O and LSE as a correct masked forward stores them
(bwd_family.stored_forward): the dense backward's preprocess (Delta), the masked main kernel (masked.backward: dQ
through the fragment-matched atomic layout, dK/dV and dBias in fp32 atomics) and the dense dQ
postprocess. The `pad` variant's dK, dV and dBias come back for the padded keys and are sliced
to seq_k. The reference is autograd through masked_family's: dBias is summed over the broadcast
dimensions as autograd sums a broadcast operand.
"""
from __future__ import annotations

import torch

from harness import bands, layout
from harness import reference as ref
from harness.kernels import Family, Judge, Offer, Runner, bwd_family, launch, masked_family
from harness.kernels.masked_family import VARIANTS, mask_dims, per_axis, tile_smem


def misfit(block_m, block_n, num_stages, threads, head_dim, head_dim_v, variant=None) -> str | None:
    return bwd_family.misfit(block_m, block_n, num_stages, threads, head_dim, head_dim_v, variant,
                           extra_smem=tile_smem(block_m, block_n))


def build(case, target: str) -> tuple:
    """(preprocess, main, postprocess, the activity kernel for this tile)."""
    from harness.kernels import masked

    main = masked.backward(case.heads, case.kv_heads, case.head_dim, case.head_dim_v, case.dtype, *per_axis(case),
                           case.bias, case.layout, *case.tile, case.variant)
    kernels = bwd_family.pipeline(case, target, main, case.layout, annotate=True)
    return kernels + (masked_family.compile_block_or(case, target, case.block_m, case.block_n),)


def make_inputs(case, device) -> dict:
    """The masked forward's inputs plus dO [kernel layout], all determined by case.seed."""
    inputs = masked_family.make_inputs(case, device)
    g = torch.Generator(device="cpu").manual_seed(bwd_family.do_seed(case.seed))
    do = torch.randn(case.batch, case.heads, case.seqlen_q, case.head_dim_v, generator=g)
    inputs["do"] = layout.from_canonical(do, case.layout).to(device=device, dtype=ref.DTYPES[case.dtype])
    return inputs


def reference(case, inputs, dtype) -> dict:
    """Canonical gradients of sum(O * dO) in `dtype`: dQ [b,h,sq,d], dK/dV [b,hk,sk,d] and, with
    a bias, dBias [mb, mh, sq, sk] (summed over the dimensions it broadcasts along)."""
    def leaf(x):
        return x.to(dtype).detach().requires_grad_()

    q, k, v = (leaf(layout.to_canonical(inputs[n], case.layout)) for n in ("q", "k", "v"))
    leaves = [q, k, v]
    bias = None
    if case.bias:
        bias = leaf(inputs["bias"])
        leaves.append(bias)
    do = layout.to_canonical(inputs["do"], case.layout).to(dtype)
    o, _ = masked_family.attention(case, inputs, dtype, q, k, v, bias)
    grads = torch.autograd.grad((o * do).sum(), leaves)
    return dict(zip(("dQ", "dK", "dV", "dBias"), grads))


TENSORS = (("dQ", "gradient"), ("dK", "gradient"), ("dV", "gradient"), ("dBias", "gradient"))


def tensors(case) -> tuple:
    return TENSORS if case.bias else TENSORS[:3]


def canonical(case, outputs) -> dict:
    out = {n: layout.to_canonical(outputs[n], case.layout) for n in ("dQ", "dK", "dV")}
    if case.bias:
        out["dBias"] = outputs["dBias"]
    return out


def _keys(x, lay, n):
    """The first n keys of a kernel-layout dK or dV (the `pad` variant computed more)."""
    return layout.from_canonical(layout.to_canonical(x, lay)[:, :, :n], lay)


def run(kernels, case, inputs) -> dict:
    prep_k, main_k, post_k, or_k = kernels
    q, do = inputs["q"], inputs["do"]
    dev, dtype, nan = q.device, q.dtype, float("nan")
    p = masked_family.prepare(case, inputs)  # checks mask and bias first
    o, lse = bwd_family.stored_forward(case, inputs, masked_family.reference)

    delta = bands.full("Delta", (case.batch, case.heads, case.seqlen_q), nan, torch.float32, dev)
    launch("preprocess", prep_k, o, do, delta)

    active = masked_family.activity(or_k, case, p, case.block_m, case.block_n)
    rows = -(-case.seqlen_q // bwd_family.DQ_ROW_PAD) * bwd_family.DQ_ROW_PAD
    dq_acc = bands.zeros("dQ_acc", layout.shape(case.layout, case.batch, rows, case.heads, case.head_dim),
                         torch.float32, dev)
    dk, dv = (bands.zeros(name, layout.shape(case.layout, case.batch, p["seq_k"], case.kv_heads, dim),
                          torch.float32, dev) for name, dim in (("dK_acc", case.head_dim), ("dV_acc", case.head_dim_v)))
    mb, mh = mask_dims(case)
    dbias = bands.zeros("dBias_acc", (mb, mh, case.seqlen_q, p["seq_k"]), torch.float32, dev)
    launch("main", main_k, q, p["k"], p["v"], do, p["mask"], p["bias"], active, lse, delta, dq_acc, dk, dv, dbias)

    dq = bands.full("dQ", layout.shape(case.layout, case.batch, case.seqlen_q, case.heads, case.head_dim), nan,
                    dtype, dev)
    launch("postprocess", post_k, dq_acc, dq)
    n = case.seqlen_k
    return {"dQ": dq, "dK": _keys(dk, case.layout, n).to(dtype), "dV": _keys(dv, case.layout, n).to(dtype),
            "dBias": dbias[..., :n].to(dtype)}


def contiguous(case) -> dict:
    """The fragment-matched dQ keeps no two consecutive loop elements adjacent (bwd.dq_layout),
    nor does dBias, added along the transposed score tile: their atomics must stay scalar."""
    return {"dQ": 1, "dBias": 1}


FAMILY = Family(
    "masked_bwd",
    Offer(
        variants=VARIANTS,
        head_dims=(64, 128),
        # block_n >= 64 per warpgroup (bwd_family.misfit), a multiple of 16 (the pad variant's runs), one
        # stage (serial tile loops); head dim 128 fits only the last two (fp32 accumulator registers).
        tiles=((64, 64, 1, 128), (64, 128, 1, 256), (32, 64, 1, 128), (32, 128, 1, 256), (16, 64, 1, 128)),
        misfit=misfit,
        takes=("mask", "mask_broadcast", "bias"),
        lengths="masked",
    ),
    Runner(build=build, run=run, make_inputs=make_inputs),
    Judge(tensors=tensors, reference=reference, canonical=canonical, locate=masked_family.locate,
          shared_kernels=frozenset({"preprocess", "postprocess"}), contiguous=contiguous,
          aligned=frozenset({"Mask", "Bias"})),
)
