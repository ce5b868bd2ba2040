"""Adapters for TileLang's examples/flash_attention_sm100 (Blackwell: tcgen05 GEMMs, tensor memory),
compile-only here: they build for sm_100a alone (`harness run --arch sm_100a`), and no Blackwell GPU
runs them. bfloat16, BSHD, one sequence length; the forward in its "ss" / "ts" forms and its
warp-specialized one, the backward pipelined (128 threads) or split across warps (256).
"""
from __future__ import annotations

from harness import reference
from harness.kernels import Judge, Offer, bwd_family
from harness.outside import ExampleProgram, canonical, family, one_head_dim, rows_of_8, same_lengths
from harness.outside.flash_attention import BACKWARD, FORWARD, _backward_reference, backward_run, forward_run

ARCH = "sm_100a"


def _forward(name, module, gqa):
    def programs(c):
        groups = {"groups": c.heads // c.kv_heads} if gqa else {}
        args = (c.batch, c.heads, c.seqlen_q, c.head_dim, c.causal)
        tiles = {"block_M": c.block_m, "block_N": c.block_n}
        if c.variant == "wasp":
            return {"fwd": ExampleProgram("flashattn_wasp", lambda c: args,
                                   lambda c: {**groups, **tiles, "threads": c.threads, "num_stages": c.num_stages})}
        return {"fwd": ExampleProgram("flashattn", lambda c: args, lambda c: {**groups, **tiles, "variant": c.variant})}
    return family(name, module, programs, forward_run, reference.make_inputs,
                  Offer(variants=("ss", "ts", "wasp"), head_dims=(64, 128), tiles=((128, 128, 2, 256),),
                        layouts=("bshd",), takes=("causal",), dtypes=("bfloat16",), gqa=gqa, lengths="same",
                        rules=(one_head_dim(), same_lengths())),
                  Judge(tensors=lambda c: FORWARD, reference=reference.forward, canonical=canonical), arch=ARCH)


def _backward(name, module, gqa):
    def programs(c):
        groups = {"groups": c.heads // c.kv_heads} if gqa else {}
        shape = (c.batch, c.heads, c.seqlen_q, c.head_dim)
        threads = 128 if c.variant == "pipeline" else 256
        return {"fwd": ExampleProgram("flashattn_fwd", lambda c: (*shape, c.causal, c.block_m, c.block_n), lambda c: groups),
                "preprocess": ExampleProgram("flashattn_bwd_preprocess", lambda c: shape),
                "bwd": ExampleProgram("flashattn_bwd", lambda c: (*shape, c.causal, c.block_m, c.block_n),
                               lambda c: {**groups, "threads": threads, "num_stages": 2}),
                "postprocess": ExampleProgram("flashattn_bwd_postprocess", lambda c: shape)}
    return family(name, module, programs, backward_run(kv=lambda c: "atomic" if gqa else "once"),
                  bwd_family.make_inputs,
                  Offer(variants=("pipeline", "warp"), head_dims=(64, 128), tiles=((64, 64, 2, 128), (64, 32, 2, 128)),
                        layouts=("bshd",), takes=("causal",), dtypes=("bfloat16",), gqa=gqa, lengths="same",
                        rules=(one_head_dim(), same_lengths(), rows_of_8())),
                  Judge(tensors=lambda c: BACKWARD, reference=_backward_reference, canonical=canonical), arch=ARCH)


MHA_FWD_BSHD = _forward("tl_sm100_mha_fwd_bshd", "flash_attention_sm100/mha_fwd_bshd.py", False)
GQA_FWD_BSHD = _forward("tl_sm100_gqa_fwd_bshd", "flash_attention_sm100/gqa_fwd_bshd.py", True)
MHA_BWD_BSHD = _backward("tl_sm100_mha_bwd_bshd", "flash_attention_sm100/mha_bwd_bshd.py", False)
GQA_BWD_BSHD = _backward("tl_sm100_gqa_bwd_bshd", "flash_attention_sm100/gqa_bwd_bshd.py", True)
