"""Adapter for TileLang's examples/flash_decoding/example_gqa_decode.py: one query token per sequence
against a key cache, GQA (its `groups` is the number of KV heads), a uint8 key mask (all ones here),
split over the keys (`num_split` partial results combined by a second kernel) or not.

Its split variant keeps the partial LSEs and outputs in T.alloc_global scratch the kernel allocates
itself: those buffers are out of the guard bands' reach (only Q, K, V, mask and Output are guarded).
"""
from __future__ import annotations

import torch

from harness import layout, reference
from harness.kernels import Judge, Offer, Rule, launch
from harness.outside import Before, ExampleProgram, buffers, dense, family, heads, one_head_dim

SPLITS = {"no_split": 1, "split": 8}  # its heuristic config: 8 splits on every GPU but sm_89


def _run(kernels, case, inputs) -> dict:
    q = inputs["q"].reshape(case.batch, case.heads, case.head_dim)  # [B, 1, H, D] -> [B, H, D]
    mask = torch.ones(case.batch, case.seqlen_k, case.kv_heads, dtype=torch.uint8, device=q.device)
    out = buffers(q.device, O=((case.batch, case.heads, case.head_dim_v), q.dtype, float("nan")),
                  mask=(mask.shape, torch.uint8, 1))
    launch("decode", kernels["decode"], q, inputs["k"], inputs["v"], out["mask"], out["O"])
    return {"O": out["O"]}


def _canonical(case, out):
    return {"O": layout.to_canonical(out["O"].unsqueeze(1), "bshd")}


def _split_fits(c):
    per_split, splits = divmod(c.seqlen_k, SPLITS[c.variant])
    return splits == 0 and (per_split % c.block_n == 0 or per_split < c.block_n)


GQA_DECODE = family(
    "tl_gqa_decode", "flash_decoding/example_gqa_decode.py",
    lambda c: {"decode": ExampleProgram("flashattn", lambda c: (c.batch, c.heads, c.kv_heads, c.seqlen_k, c.head_dim),
                                 lambda c: {"block_N": c.block_n, "block_H": c.block_m,
                                            "num_split": SPLITS[c.variant], "num_stages": c.num_stages,
                                            "threads": c.threads})},
    _run, reference.make_inputs,
    Offer(variants=tuple(SPLITS), head_dims=(64, 128),
          tiles=((64, 128, 2, 128), (64, 64, 1, 128)),  # (block_H, block_N, num_stages, threads): its configs
          layouts=("bshd",), takes=(), dtypes=("float16",), lengths="decode",
          rules=(one_head_dim(),
                 Rule("one query token (a decode step)", ("seqlen_q",), lambda c: c.seqlen_q == 1, asserted=True),
                 Rule("split: seqlen_kv divides into num_split parts of whole block_N tiles (its split tiles are "
                      "unmasked)", ("variant", "seqlen_k", "block_n"), _split_fits)),
          peer=({**dense(1, 1, 8192), **heads(32, 8, 128), "variant": "split"},)),  # main(): 8 splits on an H100
    Judge(tensors=lambda c: (("O", "forward"),), reference=reference.forward, canonical=_canonical),
    before=(Before("0.1.9", unfit="its kernel takes glse and Output_partial as arguments; the adapter passes "
                                  "Q, K, V, mask and Output only"),))
