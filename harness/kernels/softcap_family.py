"""Soft-capped forward (Gemma 2, Grok): the fwd kernel with every score capped by tanh before the
softmax, `SOFTCAP * tanh(s / SOFTCAP)` of s = q.k / sqrt(d). A family of the fwd kind: the forward's
program with `softcap` set (harness.kernels.blocks.softcap_scores), everything else the fwd family's.

The cap is small on purpose: the drawn inputs are standard normal, so scores rarely leave [-5, 5],
and a cap of 50 (Gemma's) would leave tanh nearly linear there, hiding a kernel that drops it.
"""
from __future__ import annotations

import dataclasses

import torch

from harness import layout, reference
from harness.kernels import Family, Runner, fwd_family, written

SOFTCAP = 5.0


def build(case, target: str):
    from harness import compat
    from harness.kernels import fwd

    left, right = case.bounds
    func = written(case, lambda: fwd.program(case.heads, case.kv_heads, case.head_dim, case.head_dim_v, case.dtype, left,
                                             right, case.sinks, case.layout, *case.tile, case.variant, case.forms,
                                             softcap=SOFTCAP))
    return compat.compile(func, target, case.knobs, kernel="softcap_fwd")


def forward(case, inputs, dtype) -> dict:
    """{"O", "LSE"} of attention over capped scores, in `dtype`. The capped scores enter as the bias
    over scores scaled by 0 (exact zeros), so nothing is rounded twice; sink logits are not capped."""
    q, k, v = (layout.to_canonical(inputs[n], case.layout).to(dtype) for n in ("q", "k", "v"))
    left, right = case.bounds
    seen = reference.visible(case.seqlen_q, case.seqlen_k, left, right, device=q.device)
    scores = torch.matmul(q, reference.repeat_kv(k, q.shape[1]).transpose(-1, -2)) * case.head_dim ** -0.5
    capped = SOFTCAP * torch.tanh(scores / SOFTCAP)
    sinks = inputs["sinks"] if case.sinks else None
    o, lse = reference.attention(q, k, v, sinks, seen, 0.0, bias=capped)
    return {"O": o, "LSE": lse}


FAMILY = Family(
    "softcap_fwd",
    fwd_family.FAMILY.offer,
    Runner(build=build, run=fwd_family.run_named("softcap_fwd"), make_inputs=reference.make_inputs),
    dataclasses.replace(fwd_family.FAMILY.judge, reference=forward, shared_kernels=frozenset(), producers={}),
)
