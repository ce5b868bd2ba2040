"""The varlen backward family: gradients of packed sequences (TileLang itself: varlen.backward).

run() is the backward's pipeline, reading O and LSE as a correct varlen forward stores them
(bwd_family.stored_forward): the dense backward's preprocess (Delta), the varlen main kernel (dQ
through the fragment-matched atomic layout, dK/dV atomic per KV head or split per query head), the
dense postprocess and, with sinks, the sink gradient. The dense kernels see all packed tokens as one
batch of one sequence ("bshd"): Delta, the dQ accumulator and dSinks never depend on where a
sequence starts. The reference runs autograd through the varlen forward reference (dense attention
sequence by sequence).
"""
from __future__ import annotations

import torch

from harness import bands, layout
from harness import reference as ref
from harness.kernels import Family, Judge, Offer, Runner, bwd_family, launch, varlen_family

VARIANTS = ("atomic", "split")


def build(case, target: str) -> tuple:
    """The dense backward's pipeline (bwd_family.pipeline) around the varlen main kernel."""
    from harness.kernels import varlen

    left, right = case.bounds
    main = varlen.backward(case.heads, case.kv_heads, case.head_dim, case.head_dim_v, case.dtype,
                           left, right, *case.tile, case.variant)
    return bwd_family.pipeline(case, target, main, "bshd", annotate=True)


def make_inputs(case, device) -> dict:
    """The varlen forward's inputs plus dO [total_q, heads, dv], all determined by case.seed."""
    inputs = varlen_family.make_inputs(case, device)
    g = torch.Generator(device="cpu").manual_seed(bwd_family.do_seed(case.seed))
    do = torch.randn(case.total_q, case.heads, case.head_dim_v, generator=g)
    inputs["do"] = do.to(device=device, dtype=ref.DTYPES[case.dtype])
    return inputs


def reference(case, inputs, dtype) -> dict:
    """Canonical gradients of sum(O * dO), in `dtype`: dQ [1, h, total_q, d], dK/dV
    [1, hk, total_k, d] by autograd through the per-sequence reference; dSinks in closed form."""
    q, k, v = (layout.to_canonical(inputs[n], "thd").to(dtype).detach().requires_grad_() for n in ("q", "k", "v"))
    do = layout.to_canonical(inputs["do"], "thd").to(dtype)
    sinks = inputs["sinks"].to(dtype) if case.sinks else None
    o, _ = varlen_family.attention(case, q, k, v, sinks)
    # A token no sequence reads (a key of a sequence without queries) has no path to O.
    grads = torch.autograd.grad((o * do).sum(), (q, k, v), allow_unused=True)
    out = {name: torch.zeros_like(x) if g is None else g for name, x, g in zip(("dQ", "dK", "dV"), (q, k, v), grads)}
    out["dSinks"] = (bwd_family.sink_grad(case, inputs, dtype, forward=varlen_family.forward_reference) if case.sinks
                     else torch.zeros(case.heads, dtype=dtype, device=q.device))
    return out


def floors(case, inputs) -> dict:
    """bwd_family.floors' dSinks spread, summed sequence by sequence."""
    if not case.sinks:
        return {}
    q, k, v, do = (layout.to_canonical(inputs[n], "thd") for n in ("q", "k", "v", "do"))
    total = torch.zeros(case.heads, dtype=torch.float64, device=q.device)
    for (sq, sk), q0, k0 in zip(case.seqlens, varlen_family.starts(case, 0), varlen_family.starts(case, 1)):
        if sq == 0 or sk == 0:  # no key: O = 0, Delta = 0, no term
            continue
        seen = ref.visible(sq, sk, *case.bounds, device=q.device)
        rows, keys = slice(q0, q0 + sq), slice(k0, k0 + sk)
        total += bwd_family.sink_spread(case, q[:, :, rows], k[:, :, keys], v[:, :, keys], do[:, :, rows],
                                        inputs["sinks"], seen)
    return {"dSinks": total.sqrt().max().item()}


def canonical(case, outputs) -> dict:
    out = {n: layout.to_canonical(outputs[n], "thd") for n in ("dQ", "dK", "dV")}
    out["dSinks"] = outputs["dSinks"]
    return out


def run(kernels, case, inputs) -> dict:
    q, k, v, sinks, do = (inputs[n] for n in ("q", "k", "v", "sinks", "do"))
    dev, dtype, nan = q.device, q.dtype, float("nan")
    prep_k, main_k, post_k, *sink_k = kernels
    varlen_family.check_packed(inputs["cu_q"], inputs["cu_k"], q.shape[0], k.shape[0], case.seqlen_q, case.seqlen_k)
    o, lse = bwd_family.stored_forward(case, inputs, varlen_family.forward_reference, "thd")

    delta = bands.full("Delta", (1, case.heads, case.total_q), nan, torch.float32, dev)
    launch("preprocess", prep_k, o[None], do[None], delta)

    pad = -(-case.total_q // bwd_family.DQ_ROW_PAD) * bwd_family.DQ_ROW_PAD
    dq_acc = bands.zeros("dQ_acc", (1, pad, case.heads, case.head_dim), torch.float32, dev)
    if case.variant == "split":
        # NaN sentinels: every key token of every head must be written.
        grads = [bands.full(name, (case.total_k, case.heads, dim), nan, dtype, dev)
                 for name, dim in (("dK_heads", case.head_dim), ("dV_heads", case.head_dim_v))]
    else:
        grads = [bands.zeros(name, (case.total_k, case.kv_heads, dim), torch.float32, dev)
                 for name, dim in (("dK_acc", case.head_dim), ("dV_acc", case.head_dim_v))]
    launch("main", main_k, q, k, v, do, inputs["cu_q"], inputs["cu_k"], lse, delta, dq_acc, *grads)

    dq = bands.full("dQ", (1, case.total_q, case.heads, case.head_dim), nan, dtype, dev)
    launch("postprocess", post_k, dq_acc, dq)
    if case.variant == "split":  # query head h serves KV head h // group
        group = case.heads // case.kv_heads
        grads = [g.float().reshape(case.total_k, case.kv_heads, group, -1).sum(dim=2) for g in grads]
    dk, dv = (g.to(dtype) for g in grads)

    dsinks = bands.zeros("dSinks", case.heads, torch.float32, dev)  # accumulated by atomics
    if case.sinks:
        launch("sink_grad", sink_k[0], lse, delta, sinks, dsinks)
    return {"dQ": dq[0], "dK": dk, "dV": dv, "dSinks": dsinks}


def contiguous(case) -> dict:
    """As the dense backward's: the fragment-matched dQ and the one-cell dSinks keep no two
    consecutive loop elements on consecutive addresses."""
    return {"dQ": 1, "dSinks": 1}


FAMILY = Family(
    "varlen_bwd",
    Offer(variants=VARIANTS, head_dims=bwd_family.FAMILY.offer.head_dims, tiles=bwd_family.FAMILY.offer.tiles,
          misfit=bwd_family.misfit, layouts=("thd",), lengths="packed"),
    Runner(build=build, run=run, make_inputs=make_inputs),
    Judge(
        tensors=bwd_family.tensors,
        reference=reference,
        canonical=canonical,
        floors=floors,
        locate=varlen_family.locate,
        shared_kernels=frozenset({"preprocess", "postprocess", "sink_grad"}),
        producers={"dSinks": "sink_grad"},
        contiguous=contiguous,
    ),
)
