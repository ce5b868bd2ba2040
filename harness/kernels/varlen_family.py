"""The varlen forward family: packed sequences with cu_seqlens (TileLang itself lives in varlen.py).

A case's `seqlens` lists each sequence's (q, k) lengths; tensors are packed ("thd" layout) and the
canonical form is one batch of all tokens, [1, heads, total, dim]. The reference runs the dense
reference sequence by sequence, so masking is bottom-right aligned within each sequence.
"""
from __future__ import annotations

import itertools

import torch

from harness import bands, layout, reference
from harness.kernels import Family, Judge, Offer, Runner, fwd_family, launch, written


class PackingError(ValueError):
    """cu_seqlens that do not describe the packed tensors; the message is one line."""


def cu_seqlens(lengths, device) -> torch.Tensor:
    return torch.tensor([0, *itertools.accumulate(lengths)], dtype=torch.int32, device=device)


def check_packed(cu_q, cu_k, total_q, total_k, max_q, max_k) -> None:
    """Raise PackingError unless the offsets describe tensors of total_q / total_k tokens with no
    sequence longer than max_q / max_k: checked before any kernel runs."""
    if cu_q.numel() != cu_k.numel():
        raise PackingError(f"cu_seqlens_q has {cu_q.numel() - 1} sequences but cu_seqlens_k has {cu_k.numel() - 1}")
    for name, cu, total, longest in (("q", cu_q, total_q, max_q), ("k", cu_k, total_k, max_k)):
        cu = cu.tolist()
        if not cu or cu[0] != 0:
            raise PackingError(f"cu_seqlens_{name} must start at 0, got {cu[:1]}")
        steps = [b - a for a, b in zip(cu, cu[1:])]
        if any(s < 0 for s in steps):
            raise PackingError(f"cu_seqlens_{name} must not decrease, got {cu}")
        if cu[-1] != total:
            raise PackingError(f"cu_seqlens_{name} ends at {cu[-1]} but the packed {name} holds {total} tokens")
        if steps and max(steps) > longest:
            raise PackingError(f"max_seqlen_{name} {longest} is smaller than a sequence of length {max(steps)}")


def build(case, target: str):
    from harness import compat
    from harness.kernels import varlen

    left, right = case.bounds
    func = written(case, lambda: varlen.forward(case.heads, case.kv_heads, case.head_dim, case.head_dim_v, case.dtype,
                                                left, right, case.sinks, *case.tile, case.forms))
    return compat.compile(func, target, case.knobs, kernel="varlen_fwd")


def make_inputs(case, device) -> dict:
    """Packed q [total_q, h, d], k/v [total_k, hk, d], offsets and sinks, determined by case.seed."""
    g = torch.Generator(device="cpu").manual_seed(case.seed)
    dtype = reference.DTYPES[case.dtype]

    def packed(total, heads, dim):
        return torch.randn(total, heads, dim, generator=g).to(device=device, dtype=dtype)

    return {
        "q": packed(case.total_q, case.heads, case.head_dim),
        "k": packed(case.total_k, case.kv_heads, case.head_dim),
        "v": packed(case.total_k, case.kv_heads, case.head_dim_v),
        "sinks": (torch.randn(case.heads, generator=g) * 2 if case.sinks
                  else torch.zeros(case.heads)).to(device=device, dtype=torch.float32),
        "cu_q": cu_seqlens([q for q, _ in case.seqlens], device),
        "cu_k": cu_seqlens([k for _, k in case.seqlens], device),
    }


def forward_reference(case, inputs, dtype) -> dict:
    """Canonical O [1, h, total_q, dv] and LSE [1, h, total_q]: the dense reference per sequence."""
    q, k, v = (layout.to_canonical(inputs[n], "thd").to(dtype) for n in ("q", "k", "v"))
    o, lse = attention(case, q, k, v, inputs["sinks"] if case.sinks else None)
    return {"O": o, "LSE": lse}


def attention(case, q, k, v, sinks):
    """O and LSE of packed canonical q [1, h, total_q, d], k/v [1, hk, total_k, d], computed
    sequence by sequence in their dtype (differentiable: the backward's reference)."""
    left, right = case.bounds
    outs, lses = [], []
    for (sq, sk), q0, k0 in zip(case.seqlens, starts(case, 0), starts(case, 1)):
        qi, ki, vi = q[:, :, q0:q0 + sq], k[:, :, k0:k0 + sk], v[:, :, k0:k0 + sk]
        if sk == 0:  # no key at all: O = 0, LSE = the sink logit or -inf
            outs.append(q.new_zeros(1, case.heads, sq, case.head_dim_v))
            empty = sinks.to(q.dtype)[None, :, None] if sinks is not None else float("-inf")
            lses.append(q.new_zeros(1, case.heads, sq) + empty)
            continue
        seen = reference.visible(sq, sk, left, right, device=q.device)
        o, lse = reference.attention(qi, ki, vi, sinks, seen, case.head_dim ** -0.5)
        outs.append(o)
        lses.append(lse)
    return torch.cat(outs, dim=2), torch.cat(lses, dim=2)


def starts(case, axis):
    """Each sequence's first token in the packed q (axis 0) or k/v (axis 1)."""
    return itertools.accumulate((pair[axis] for pair in case.seqlens[:-1]), initial=0)


def canonical(case, outputs) -> dict:
    return {"O": layout.to_canonical(outputs["O"], "thd"), "LSE": outputs["LSE"].unsqueeze(0)}


def run(kernel, case, inputs) -> dict:
    q = inputs["q"]
    check_packed(inputs["cu_q"], inputs["cu_k"], q.shape[0], inputs["k"].shape[0], case.seqlen_q, case.seqlen_k)
    out = bands.full("O", (case.total_q, case.heads, case.head_dim_v), float("nan"), q.dtype, q.device)
    lse = bands.full("LSE", (case.heads, case.total_q), float("nan"), torch.float32, q.device)
    launch("varlen_fwd", kernel, q, inputs["k"], inputs["v"], inputs["cu_q"], inputs["cu_k"], inputs["sinks"], out, lse)
    return {"O": out, "LSE": lse}


def locate(case, inputs):
    """locate(name, canonical index) -> region: the row's sequence decides. `empty_rows` (a query
    that sees no key) or `unseen_keys` (a key no query sees), `sequence_end_tile` (the last,
    partial tile of its sequence, whose rows run into the next sequence's: query tiles of block_m
    rows, key tiles of block_n for dK/dV), `interior`, or `per_head` (dSinks)."""
    left, right = case.bounds

    def where(name, index):
        if len(index) < 3:
            return "per_head"
        axis = 1 if name in ("dK", "dV") else 0
        first = list(starts(case, axis))
        token = index[2]
        seq = max(i for i, s in enumerate(first) if s <= token and case.seqlens[i][axis] > 0)
        sq, sk = case.seqlens[seq]
        row = token - first[seq]
        seen = reference.visible(sq, sk, left, right)
        if not bool((seen[row] if axis == 0 else seen[:, row]).any()):
            return "empty_rows" if axis == 0 else "unseen_keys"
        length, block = (sq, case.block_m) if axis == 0 else (sk, case.block_n)
        if length % block and row >= length // block * block:
            return "sequence_end_tile"
        return "interior"
    return where


FAMILY = Family(
    "varlen_fwd",
    Offer(
        variants=("default",),
        head_dims=fwd_family.FAMILY.offer.head_dims,
        tiles=fwd_family.FAMILY.offer.tiles,
        misfit=fwd_family.misfit,   # the same shared-memory and register budget as the dense forward
        layouts=("thd",),
        lengths="packed",
        forms=("scores_mask", "row_max", "rescale"),  # its softmax (blocks.softmax_forms)
    ),
    Runner(build=build, run=run, make_inputs=make_inputs),
    Judge(
        tensors=fwd_family.tensors,
        reference=forward_reference,
        canonical=canonical,
        locate=locate,
        shared_kernels=frozenset({"varlen_fwd"}),  # scoped by the kernel, as fwd_family's
        producers={"O": "varlen_fwd", "LSE": "varlen_fwd"},
    ),
)
