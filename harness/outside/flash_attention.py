"""Adapters for TileLang's examples/flash_attention: dense forward (BHSD, BSHD, GQA), backward
(MHA BHSD/BSHD, GQA with atomic or split dK/dV, GQA with TMA-reduce atomics) and varlen forward.

Each example fixes float16, its softmax scale 1/sqrt(dim) and a causal mask aligned bottom-right
(they take one length, or seq_kv >= seq_q), as our reference does. Their backward LSE is log2-based.
"""
from __future__ import annotations

import torch

from harness import layout, reference
from harness.kernels import Judge, Offer, Rule, bwd_family, launch, varlen_bwd_family, varlen_family
from harness.outside import (
    LN2,
    Before,
    ExampleProgram,
    buffers,
    canonical,
    dense,
    family,
    heads,
    one_head_dim,
    padded,
    rows_of_8,
    same_lengths,
    source,
    tile,
    v_at_most_128,
)

F16, F32 = torch.float16, torch.float32  # the examples here are written for float16
NAN = float("nan")
FORWARD = (("O", "forward"),)
BACKWARD = (("O", "forward"), ("LSE", "forward"), ("dQ", "gradient"), ("dK", "gradient"), ("dV", "gradient"))


def _shape(case, seq, heads, dim):
    return layout.shape(case.layout, case.batch, seq, heads, dim)


# --- dense forward: O = kernel(Q, K, V) -------------------------------------------------------------

def forward_run(kernels, case, inputs) -> dict:
    q = inputs["q"]
    out = buffers(q.device, O=(_shape(case, case.seqlen_q, case.heads, case.head_dim_v), _dtype(case), NAN))
    launch("fwd", kernels["fwd"], q, inputs["k"], inputs["v"], out["O"])
    return out


def _forward(name, module, args, layouts, gqa, tiles, rules=(), lengths="dense", peer=()):
    return family(name, module, lambda c: {"fwd": ExampleProgram("flashattn", args, tile)}, forward_run, reference.make_inputs,
                  Offer(variants=("default",), head_dims=(64, 128), tiles=tiles, layouts=layouts, takes=("causal",),
                        dtypes=("float16",), gqa=gqa, lengths=lengths, rules=(one_head_dim(), *rules), peer=peer),
                  Judge(tensors=lambda c: FORWARD, reference=reference.forward, canonical=canonical))


# peer: the shapes of its test_example_*.py call (main()'s defaults where it passes none).
MHA_FWD_BHSD = _forward(
    "tl_mha_fwd_bhsd", "flash_attention/example_mha_fwd_bhsd.py",
    lambda c: (c.batch, c.heads, c.seqlen_q, c.seqlen_k, c.head_dim, c.causal), ("bhsd",), False,
    tiles=((64, 64, 1, 128), (128, 128, 2, 256)),  # its main()'s, and its autotune space
    rules=(Rule("seq_kv >= seq_q (its assert)", ("seqlen_q", "seqlen_k"), lambda c: c.seqlen_k >= c.seqlen_q,
                asserted=True),), peer=({**dense(1, 256), **heads(1, 1, 64)},))
MHA_FWD_BSHD = _forward(
    "tl_mha_fwd_bshd", "flash_attention/example_mha_fwd_bshd.py",
    lambda c: (c.batch, c.heads, c.seqlen_q, c.head_dim, c.causal), ("bshd",), False,
    tiles=((64, 64, 1, 128), (128, 128, 1, 128)), rules=(same_lengths(),), lengths="same",
    peer=({**dense(1, 256), **heads(32, 32, 128)},))
GQA_FWD_BSHD = _forward(
    "tl_gqa_fwd_bshd", "flash_attention/example_gqa_fwd_bshd.py",
    lambda c: (c.batch, c.heads, c.seqlen_q, c.head_dim, c.causal, c.heads // c.kv_heads), ("bshd",), True,
    tiles=((64, 64, 2, 128), (128, 128, 2, 256), (64, 64, 0, 128)), rules=(same_lengths(),), lengths="same",
    peer=({**dense(1, 1024), **heads(16, 1, 128)},))


# --- dense backward: fwd (O, LSE) -> preprocess (Delta) -> bwd -> postprocess -------------------------

def _backward_reference(case, inputs, dtype) -> dict:
    return {**reference.forward(case, inputs, dtype), **bwd_family.reference(case, inputs, dtype)}


def _dtype(case):
    return reference.DTYPES[case.dtype]


def _grad_buffers(case, device, kv: str) -> dict:
    """dQ accumulated in fp32 (zeros); dK/dV as the example keeps them (`kv`): written once in the
    input dtype ("once", MHA), accumulated over a GQA group in fp32 ("atomic"), or one slot per group
    member summed afterwards ("split")."""
    groups, dt = case.heads // case.kv_heads, _dtype(case)
    dk = _shape(case, case.seqlen_k, case.kv_heads, case.head_dim)
    dv = _shape(case, case.seqlen_k, case.kv_heads, case.head_dim_v)
    kv = {"once": {"dK_acc": (dk, dt, NAN), "dV_acc": (dv, dt, NAN)},
          "atomic": {"dK_acc": (dk, F32, 0.0), "dV_acc": (dv, F32, 0.0)},
          "split": {"dK_acc": ((groups, *dk), dt, NAN), "dV_acc": ((groups, *dv), dt, NAN)}}[kv]
    return buffers(device, dQ_acc=(_shape(case, case.seqlen_q, case.heads, case.head_dim), F32, 0.0), **kv)


def backward_run(post_all: bool = False, kv=lambda case: case.variant, post_atomic_before: str | None = None):
    """run(kernels, case, inputs) for fwd/preprocess/bwd/postprocess examples. `post_all`: its
    postprocess converts dQ, dK and dV together (the TMA-reduce example; its atomic variant
    accumulates in plain fp32 layout and needs none, except in releases before `post_atomic_before`,
    whose atomic accumulators are laid out as the postprocess reads them); else dQ alone.
    `kv(case)`: how it keeps dK/dV."""
    def run(kernels, case, inputs) -> dict:
        q, k, v, do = (inputs[n] for n in ("q", "k", "v", "do"))
        rows, dt = (case.batch, case.heads, case.seqlen_q), _dtype(case)
        b = buffers(q.device, O=(_shape(case, case.seqlen_q, case.heads, case.head_dim_v), dt, NAN),
                    LSE=(rows, F32, NAN), Delta=(rows, F32, NAN),
                    dQ=(_shape(case, case.seqlen_q, case.heads, case.head_dim), dt, NAN))
        launch("fwd", kernels["fwd"], q, k, v, b["O"], b["LSE"])
        launch("preprocess", kernels["preprocess"], b["O"], do, b["Delta"])
        g = _grad_buffers(case, q.device, kv(case))
        launch("bwd", kernels["bwd"], q, k, v, do, b["LSE"], b["Delta"], g["dQ_acc"], g["dK_acc"], g["dV_acc"])
        dk, dv = (g[n].sum(0) if case.variant == "split" else g[n] for n in ("dK_acc", "dV_acc"))
        atomic_laid_out = case.variant == "atomic" and post_atomic_before and source.before(post_atomic_before)
        if post_all and case.variant == "atomic" and not atomic_laid_out:
            dq = g["dQ_acc"]
        elif post_all:
            z = buffers(q.device, dK_zero=(dk.shape, F32, 0.0), dV_zero=(dv.shape, F32, 0.0),
                        dK_out=(dk.shape, dt, NAN), dV_out=(dv.shape, dt, NAN))
            dk_in, dv_in = (g["dK_acc"], g["dV_acc"]) if atomic_laid_out else (z["dK_zero"], z["dV_zero"])
            launch("postprocess", kernels["postprocess"], g["dQ_acc"], dk_in, dv_in, b["dQ"], z["dK_out"], z["dV_out"])
            dq = b["dQ"]
            if atomic_laid_out:
                dk, dv = z["dK_out"], z["dV_out"]
        else:
            launch("postprocess", kernels["postprocess"], g["dQ_acc"], b["dQ"])
            dq = b["dQ"]
        return {"O": b["O"], "LSE": b["LSE"] * LN2, "dQ": dq, "dK": dk, "dV": dv}
    return run


def _mha_backward(name, module, lay):
    def programs(c):
        shape = (c.batch, c.heads, c.seqlen_q, c.head_dim)
        fwd_n = 64 if c.head_dim <= 128 else 32  # the block sizes its autograd Function picks
        return {"fwd": ExampleProgram("flashattn_fwd", lambda c: (*shape, c.causal, 64, fwd_n)),
                "preprocess": ExampleProgram("flashattn_bwd_preprocess", lambda c: shape),
                "bwd": ExampleProgram("flashattn_bwd", lambda c: (*shape, c.causal, c.block_m, c.block_n)),
                "postprocess": ExampleProgram("flashattn_bwd_postprocess", lambda c: shape)}
    # (block_M, block_N) of its main kernel; stages (2) and threads (128) are fixed inside it.
    return family(name, module, programs, backward_run(kv=lambda c: "once"), bwd_family.make_inputs,
                  Offer(variants=("default",), head_dims=(64, 128), tiles=((64, 64, 2, 128), (64, 32, 2, 128)),
                        layouts=(lay,), takes=("causal",), dtypes=("float16",), gqa=False, lengths="same",
                        rules=(one_head_dim(), same_lengths(), rows_of_8()),
                        peer=({**dense(1, 512), **heads(16, 16, 64)},)),
                  Judge(tensors=lambda c: BACKWARD, reference=_backward_reference, canonical=canonical))


MHA_BWD_BHSD = _mha_backward("tl_mha_bwd_bhsd", "flash_attention/example_mha_bwd_bhsd.py", "bhsd")
MHA_BWD_BSHD = _mha_backward("tl_mha_bwd_bshd", "flash_attention/example_mha_bwd_bshd.py", "bshd")


def _gqa_backward(name, module, split_builder, post_all, rules, peer, before=(), post_atomic_before=None):
    def programs(c):
        groups = c.heads // c.kv_heads
        dims = (c.batch, c.heads, c.seqlen_q, c.head_dim, c.head_dim_v)
        main = "flashattn_bwd_atomic_add" if c.variant == "atomic" else split_builder
        post = ((c.batch, c.heads, c.kv_heads, c.seqlen_q, c.head_dim, c.head_dim_v) if post_all
                else (c.batch, c.heads, c.seqlen_q, c.head_dim))
        return {"fwd": ExampleProgram("flashattn_fwd", lambda c: (*dims, c.causal, 128, 64, groups)),
                "preprocess": ExampleProgram("flashattn_bwd_preprocess", lambda c: (c.batch, c.heads, c.seqlen_q, c.head_dim_v)),
                "bwd": ExampleProgram(main, lambda c: (*dims, c.causal, c.block_m, c.block_n),
                               lambda c: {"threads": c.threads, "num_stages": c.num_stages, "groups": groups}),
                "postprocess": ExampleProgram("flashattn_bwd_postprocess", lambda c: post)}
    return family(name, module, programs, backward_run(post_all, post_atomic_before=post_atomic_before),
                  bwd_family.make_inputs,
                  Offer(variants=("atomic", "split"), head_dims=(64, 128, 192),
                        tiles=((128, 32, 2, 256), (64, 32, 2, 128)), misfit=v_at_most_128, layouts=("bshd",),
                        takes=("causal",), dtypes=("float16",), lengths="same", rules=(same_lengths(), *rules), peer=peer),
                  Judge(tensors=lambda c: BACKWARD, reference=_backward_reference, canonical=canonical), before=before)


GQA_BWD = _gqa_backward("tl_gqa_bwd", "flash_attention/example_gqa_bwd.py", "flashattn_bwd_split", False,
                        (rows_of_8(),), ({**dense(1, 256), **heads(32, 2, 192, 128)},))
# Its dQ layout is plain [b, h, l, d]: no row tiling to respect. Its split builder had another name
# before 0.1.7; its atomic variant kept dQ, dK, dV as [b, h, l, d] (postprocessed) before 0.1.7.post2.
GQA_BWD_TMA_REDUCE = _gqa_backward("tl_gqa_bwd_tma_reduce", "flash_attention/example_gqa_bwd_tma_reduce.py",
                                   "flashattn_bwd_split_novarlen", True, (), (),  # no test runs it
                                   (Before("0.1.7", renamed=(("flashattn_bwd_split_novarlen", "flashattn_bwd_split"),)),),
                                   post_atomic_before="0.1.7.post2")


# --- varlen forward: O = kernel(Q, K, V, cu_seqlens_q, cu_seqlens_k, max_seqlen_q) -----------------------

def _varlen_run(kernels, case, inputs) -> dict:
    q = inputs["q"]
    out = buffers(q.device, O=((case.total_q, case.heads, case.head_dim_v), F16, NAN))
    launch("fwd", kernels["fwd"], q, inputs["k"], inputs["v"], inputs["cu_q"], inputs["cu_k"], case.seqlen_q, out["O"])
    return out


def _varlen_reference(case, inputs, dtype):
    return varlen_family.forward_reference(case, inputs, dtype)


def _varlen(name, module, args, gqa, kv_heads):
    return family(name, module, lambda c: {"fwd": ExampleProgram("flashattn", args, tile)}, _varlen_run,
                  varlen_family.make_inputs,
                  Offer(variants=("default",), head_dims=(64, 128), tiles=((64, 64, 1, 128), (128, 128, 2, 256)),
                        layouts=("thd",), takes=("causal",), dtypes=("float16",), gqa=gqa, lengths="packed",
                        rules=(one_head_dim(),
                               Rule("every sequence has a key (its test draws lengths in [seq_len - 20, seq_len])",
                                    ("seqlens",), lambda c: all(k > 0 for _, k in c.seqlens))),
                        peer=tuple({**padded(4, 512, 512), **heads(16, kv_heads, 64), "causal": causal}
                                   for causal in (False, True))),
                  Judge(tensors=lambda c: FORWARD, reference=_varlen_reference, canonical=canonical,
                        locate=varlen_family.locate))


MHA_FWD_VARLEN = _varlen("tl_mha_fwd_varlen", "flash_attention/example_mha_fwd_varlen.py",
                         lambda c: (c.batch, c.total_q, c.total_k, c.heads, c.head_dim, c.causal), False, 16)
GQA_FWD_VARLEN = _varlen("tl_gqa_fwd_varlen", "flash_attention/example_gqa_fwd_varlen.py",
                         lambda c: (c.batch, c.heads // c.kv_heads, c.total_q, c.total_k, c.heads, c.head_dim,
                                    c.causal), True, 1)


# --- varlen backward (TMA-reduce example): fwd (O, LSE) -> preprocess -> bwd -> postprocess ---------------
# Packed [total, heads, dim] tensors; LSE and Delta padded to [batch, heads, max_seqlen_q]. Its bwd grid
# walks key blocks up to max_seqlen_q: the example states that a training step has as many keys as
# queries per sequence.

def varlen_equal() -> Rule:
    return Rule("seqlens_k == seqlens_q per sequence (its comment: a training step's backward)", ("seqlens",),
                lambda c: all(q == k for q, k in c.seqlens))


def _varlen_backward_run(kernels, case, inputs) -> dict:
    q, k, v, do, cu_q, cu_k = (inputs[n] for n in ("q", "k", "v", "do", "cu_q", "cu_k"))
    groups, dt, rows = case.heads // case.kv_heads, _dtype(case), (case.batch, case.heads, case.seqlen_q)
    b = buffers(q.device, O=((case.total_q, case.heads, case.head_dim_v), dt, NAN), LSE=(rows, F32, NAN),
                Delta=(rows, F32, NAN), dQ_acc=(q.shape, F32, 0.0), dQ=(q.shape, dt, NAN))
    launch("fwd", kernels["fwd"], q, k, v, cu_q, cu_k, b["O"], b["LSE"])
    launch("preprocess", kernels["preprocess"], b["O"], do, cu_q, b["Delta"])
    if case.variant == "atomic":  # fp32 dQ/dK/dV in plain layout: the outputs themselves
        g = buffers(q.device, dK=(k.shape, F32, 0.0), dV=(v.shape, F32, 0.0))
        launch("bwd", kernels["bwd"], q, k, v, do, b["LSE"], b["Delta"], cu_q, cu_k, b["dQ_acc"], g["dK"], g["dV"])
        return {"O": b["O"], "dQ": b["dQ_acc"], "dK": g["dK"], "dV": g["dV"]}
    g = buffers(q.device, dK_acc=((groups, *k.shape), dt, NAN), dV_acc=((groups, *v.shape), dt, NAN),
                dK_zero=(k.shape, F32, 0.0), dV_zero=(v.shape, F32, 0.0), dK_out=(k.shape, dt, NAN),
                dV_out=(v.shape, dt, NAN))
    launch("bwd", kernels["bwd"], q, k, v, do, b["LSE"], b["Delta"], cu_q, cu_k, b["dQ_acc"], g["dK_acc"], g["dV_acc"])
    launch("postprocess", kernels["postprocess"], b["dQ_acc"], g["dK_zero"], g["dV_zero"], b["dQ"], g["dK_out"],
           g["dV_out"])
    return {"O": b["O"], "dQ": b["dQ"], "dK": g["dK_acc"].sum(0), "dV": g["dV_acc"].sum(0)}


def _varlen_backward_programs(c):
    groups = c.heads // c.kv_heads
    padded = (c.batch, c.total_q, c.total_k, c.seqlen_q, c.heads, c.seqlen_q, c.head_dim, c.head_dim_v, c.causal)
    main = "flashattn_bwd_atomic_add" if c.variant == "atomic" else "flashattn_bwd_split"
    return {"fwd": ExampleProgram("flashattn_fwd", lambda c: (*padded, 128, 64, groups)),  # its autograd's blocks
            "preprocess": ExampleProgram("flashattn_bwd_preprocess",
                                  lambda c: (c.batch, c.heads, c.total_q, c.seqlen_q, c.seqlen_q, c.head_dim_v)),
            "bwd": ExampleProgram(main, lambda c: (*padded, c.block_m, c.block_n),
                           lambda c: {"threads": c.threads, "num_stages": c.num_stages, "groups": groups}),
            "postprocess": ExampleProgram("flashattn_bwd_postprocess", lambda c: (c.total_q, c.total_k, c.heads, c.kv_heads,
                                                                          c.head_dim, c.head_dim_v))}


VARLEN_BACKWARD = (("O", "forward"), ("dQ", "gradient"), ("dK", "gradient"), ("dV", "gradient"))

GQA_BWD_TMA_REDUCE_VARLEN = family(
    "tl_gqa_bwd_tma_reduce_varlen", "flash_attention/example_gqa_bwd_tma_reduce_varlen.py",
    _varlen_backward_programs, _varlen_backward_run, varlen_bwd_family.make_inputs,
    Offer(variants=("atomic", "split"), head_dims=(64, 128, 192), tiles=((128, 32, 2, 256), (64, 32, 2, 128)),
          misfit=v_at_most_128, layouts=("thd",), takes=("causal",), dtypes=("float16",), lengths="packed_equal",
          rules=(varlen_equal(),), peer=({**padded(1, 256, 256, equal=True), **heads(32, 2, 192, 128)},)),
    Judge(tensors=lambda c: VARLEN_BACKWARD,
          reference=lambda case, inputs, dtype: {**varlen_family.forward_reference(case, inputs, dtype),
                                                 **varlen_bwd_family.reference(case, inputs, dtype)},
          canonical=canonical, locate=varlen_family.locate),
    before=(Before("0.1.7", unfit="its builders take no N_CTX and keep LSE and Delta as [total_q, heads], "
                                  "not the [batch, heads, N_CTX] the adapter passes"),
            Before("0.1.7.post2", unfit="its atomic variant keeps dQ, dK and dV as [heads, total, dim] for its "
                                        "postprocess, which the adapter does not run")))
