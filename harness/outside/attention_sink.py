"""Adapters for TileLang's examples/attention_sink: attention with a learned sink logit per query head
(added to the softmax's denominator, as in our reference), always causal in the BHSD examples, with an
optional sliding window of `window_size` keys (query q sees keys q - window_size < k <= q: our window
(window_size - 1, -1)). Their sinks and outputs are in the input dtype; their LSE is log2-based.
"""
from __future__ import annotations

import torch

from harness import reference
from harness.kernels import Judge, Offer, Rule, bwd_family, launch, varlen_bwd_family, varlen_family
from harness.outside import (
    LN2,
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
    tile,
)
from harness.outside.flash_attention import BACKWARD, FORWARD, NAN, _shape

F32 = torch.float32


def _dtype(case):
    return reference.DTYPES[case.dtype]


def window_size(case):
    """The example's window_size for our case's window (None: unbounded)."""
    return case.window[0] + 1 if case.window[0] >= 0 else None


def with_sinks(make):
    """make_inputs with sink logits rounded to the input dtype, which is what the example takes."""
    def make_inputs(case, device):
        inputs = make(case, device)
        inputs["sinks"] = inputs["sinks"].to(_dtype(case)).float()
        return inputs
    return make_inputs


def _rules(block_of=lambda c: c.block_n, causal=True):
    rules = [Rule("has sinks (its Sinks input is always read)", ("sinks",), lambda c: c.sinks, asserted=True),
             Rule("a window to the left only (window_size)", ("window",), lambda c: c.window[1] == -1, asserted=True),
             Rule("window_size a multiple of block_N (its assert)", ("window", "block_n"),
                  lambda c: window_size(c) is None or window_size(c) % block_of(c) == 0, asserted=True)]
    if causal:
        rules.append(Rule("always causal (it has no is_causal)", ("causal",), lambda c: c.causal, asserted=True))
    return (one_head_dim(), *rules)


def peer(lengths: dict, shape: dict) -> tuple[dict, ...]:
    """Its tests: main() (causal, sinks), and main(window_size=128)."""
    full = {**lengths, **shape, "sinks": True, "causal": True}
    return full, {**full, "window": (127, -1)}


# --- forward, BHSD: O = kernel(Q, K, V, Sinks) ------------------------------------------------------

def _forward_run(kernels, case, inputs) -> dict:
    q = inputs["q"]
    out = buffers(q.device, O=(_shape(case, case.seqlen_q, case.heads, case.head_dim_v), _dtype(case), NAN))
    launch("fwd", kernels["fwd"], q, inputs["k"], inputs["v"], out["O"], inputs["sinks"].to(_dtype(case)))
    return out


MHA_SINK_FWD_BHSD = family(
    "tl_mha_sink_fwd_bhsd", "attention_sink/example_mha_sink_fwd_bhsd.py",
    lambda c: {"fwd": ExampleProgram("flashattn", lambda c: (c.batch, c.heads, c.seqlen_q, c.seqlen_k, c.head_dim),
                              lambda c: {"window_size": window_size(c), **tile(c), "dtype": c.dtype})},
    _forward_run, with_sinks(reference.make_inputs),
    Offer(variants=("default",), head_dims=(64, 128),
          tiles=((128, 128, 2, 256), (64, 64, 1, 128), (128, 128, 0, 128)),  # its main()'s, defaults, autotune space
          layouts=("bhsd",), gqa=False,
          rules=(*_rules(), Rule("seq_kv >= seq_q (its assert)", ("seqlen_q", "seqlen_k"),
                                 lambda c: c.seqlen_k >= c.seqlen_q, asserted=True)),
          peer=peer(dense(1, 256), heads(1, 1, 128))),
    Judge(tensors=lambda c: FORWARD, reference=reference.forward, canonical=canonical))


# --- backward, BHSD: fwd (O, LSE) -> preprocess -> bwd -> postprocess (dQ) -> dsink ---------------------

def backward_run(gqa: bool):
    """The GQA example accumulates dK/dV over a group with fp32 atomics (zeros first) and gives
    per-row dSinks in the input dtype; the MHA one writes dK/dV once in the input dtype, dSinks in fp32."""
    def run(kernels, case, inputs) -> dict:
        q, k, v, do = (inputs[n] for n in ("q", "k", "v", "do"))
        dtype, sinks = _dtype(case), inputs["sinks"].to(_dtype(case))
        rows = (case.batch, case.heads, case.seqlen_q)
        kv, fill = (F32, 0.0) if gqa else (dtype, NAN)
        b = buffers(q.device, O=(_shape(case, case.seqlen_q, case.heads, case.head_dim_v), dtype, NAN),
                    LSE=(rows, F32, NAN), Delta=(rows, F32, NAN), dQ_acc=(q.shape, F32, 0.0), dQ=(q.shape, dtype, NAN),
                    dK=(k.shape, kv, fill), dV=(v.shape, kv, fill), dSinks_rows=(rows, dtype if gqa else F32, NAN))
        launch("fwd", kernels["fwd"], q, k, v, b["O"], b["LSE"], sinks)
        launch("preprocess", kernels["preprocess"], b["O"], do, b["Delta"])
        launch("bwd", kernels["bwd"], q, k, v, do, b["LSE"], b["Delta"], b["dQ_acc"], b["dK"], b["dV"])
        launch("postprocess", kernels["postprocess"], b["dQ_acc"], b["dQ"])
        launch("dsink", kernels["dsink"], sinks, b["Delta"], b["LSE"], b["dSinks_rows"])
        return {"O": b["O"], "LSE": b["LSE"] * LN2, "dQ": b["dQ"], "dK": b["dK"], "dV": b["dV"],
                "dSinks": b["dSinks_rows"].float().sum(dim=(0, 2))}
    return run


def _backward_reference(case, inputs, dtype) -> dict:
    return {**reference.forward(case, inputs, dtype), **bwd_family.reference(case, inputs, dtype)}


def _backward(name, module, gqa: bool, dsink_block: int, head_dims, shape):
    def programs(c):
        shape = (c.batch, c.heads, c.seqlen_q, c.head_dim)
        groups = {"groups": c.heads // c.kv_heads} if gqa else {}
        common = {"window_size": window_size(c), "dtype": c.dtype}
        return {"fwd": ExampleProgram("flashattn_fwd", lambda c: shape, lambda c: {**groups, **common, **tile(c)}),
                "preprocess": ExampleProgram("flashattn_bwd_preprocess", lambda c: shape, lambda c: {"dtype": c.dtype}),
                "bwd": ExampleProgram("flashattn_bwd", lambda c: shape, lambda c: {**groups, **common}),
                "postprocess": ExampleProgram("flashattn_bwd_postprocess", lambda c: shape, lambda c: {"dtype": c.dtype}),
                "dsink": ExampleProgram("flashattn_bwd_dsink", lambda c: shape[:3],
                                 lambda c: {"block": dsink_block, "dtype": c.dtype})}
    # Its bwd kernel picks its tiles from the GPU's compute capability at build time (block_N 32):
    # it builds on a GPU only ("auto"), and a window must fit both its forward's and its bwd's blocks.
    return family(name, module, programs, backward_run(gqa), with_sinks(bwd_family.make_inputs),
                  Offer(variants=("default",), head_dims=head_dims, tiles=((64, 64, 1, 128),), layouts=("bhsd",),
                        gqa=gqa, lengths="same",
                        rules=(*_rules(lambda c: max(c.block_n, 32)), same_lengths(), rows_of_8()), peer=peer(*shape)),
                  Judge(tensors=lambda c: (*BACKWARD, ("dSinks", "gradient")), reference=_backward_reference,
                        canonical=canonical, floors=bwd_family.floors), arch="auto")


MHA_SINK_BWD_BHSD = _backward("tl_mha_sink_bwd_bhsd", "attention_sink/example_mha_sink_bwd_bhsd.py", False, 128,
                              (64, 128), (dense(1, 512), heads(1, 1, 128)))
# Head dim 64 only (its main()'s D_HEAD): at 128 its bwd asks 239,616 B of shared memory (H100: launch fails).
GQA_SINK_BWD_BHSD = _backward("tl_gqa_sink_bwd_bhsd", "attention_sink/example_gqa_sink_bwd_bhsd.py", True, 256,
                              (64,), (dense(1, 512), heads(8, 4, 64)))


# --- varlen forward: O = kernel(Q, K, V, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, Sinks) -----------------

def _varlen_run(kernels, case, inputs) -> dict:
    q = inputs["q"]
    out = buffers(q.device, O=((case.total_q, case.heads, case.head_dim_v), _dtype(case), NAN))
    launch("fwd", kernels["fwd"], q, inputs["k"], inputs["v"], inputs["cu_q"], inputs["cu_k"], case.seqlen_q,
           inputs["sinks"].to(_dtype(case)), out["O"])
    return out


GQA_SINK_FWD_VARLEN = family(
    "tl_gqa_sink_fwd_varlen", "attention_sink/example_gqa_sink_fwd_varlen.py",
    lambda c: {"fwd": ExampleProgram("flashattn_sink", lambda c: (c.batch, c.heads // c.kv_heads, c.total_q, c.total_k,
                                                          c.heads, c.head_dim, c.causal),
                              lambda c: {"window_size": window_size(c), **tile(c)})},
    _varlen_run, with_sinks(varlen_family.make_inputs),
    Offer(variants=("default",), head_dims=(64, 128), tiles=((128, 128, 2, 256), (64, 64, 1, 128)),
          layouts=("thd",), dtypes=("float16",), lengths="packed", rules=_rules(causal=False),
          peer=({**padded(1, 2048, 2048), **heads(64, 4, 128), "sinks": True, "causal": True},)),
    Judge(tensors=lambda c: FORWARD,
          reference=lambda case, inputs, dtype: varlen_family.forward_reference(case, inputs, dtype),
          canonical=canonical, locate=varlen_family.locate))


# --- varlen backward: fwd (O, LSE) -> preprocess -> bwd -> postprocess (dQ) -> dsink -------------------
# Packed [total, heads, dim]; LSE, Delta and per-row dSinks padded to [batch, heads, max_seqlen_q]. Its
# own test draws the query and key padding independently (seqlens_k != seqlens_q), as "packed" does.

def _varlen_backward_run(kernels, case, inputs) -> dict:
    q, k, v, do, cu_q, cu_k = (inputs[n] for n in ("q", "k", "v", "do", "cu_q", "cu_k"))
    dtype, sinks, rows = _dtype(case), inputs["sinks"].to(_dtype(case)), (case.batch, case.heads, case.seqlen_q)
    b = buffers(q.device, O=((case.total_q, case.heads, case.head_dim_v), dtype, NAN), LSE=(rows, F32, NAN),
                Delta=(rows, F32, NAN), dQ_acc=(q.shape, F32, 0.0), dQ=(q.shape, dtype, NAN),
                dK=(k.shape, F32, 0.0), dV=(v.shape, F32, 0.0), dSinks_rows=(rows, dtype, NAN))
    launch("fwd", kernels["fwd"], q, k, v, cu_q, cu_k, sinks, b["O"], b["LSE"])
    launch("preprocess", kernels["preprocess"], b["O"], do, cu_q, b["Delta"])
    launch("bwd", kernels["bwd"], q, k, v, do, b["LSE"], b["Delta"], cu_q, cu_k, b["dQ_acc"], b["dK"], b["dV"])
    launch("postprocess", kernels["postprocess"], b["dQ_acc"], b["dQ"])
    launch("dsink", kernels["dsink"], sinks, b["Delta"], b["LSE"], cu_q, b["dSinks_rows"])
    return {"O": b["O"], "dQ": b["dQ"], "dK": b["dK"], "dV": b["dV"], "dSinks": b["dSinks_rows"].float().sum(dim=(0, 2))}


def _varlen_backward_programs(c):
    padded = (c.batch, c.heads // c.kv_heads, c.total_q, c.total_k, c.seqlen_q, c.heads, c.seqlen_q, c.head_dim,
              c.causal)
    common = {"window_size": window_size(c), "dtype": c.dtype}
    return {"fwd": ExampleProgram("flashattn_fwd", lambda c: padded, lambda c: {**common, **tile(c)}),
            "preprocess": ExampleProgram("flashattn_bwd_preprocess",
                                  lambda c: (c.batch, c.heads, c.total_q, c.seqlen_q, c.seqlen_q, c.head_dim),
                                  lambda c: {"dtype": c.dtype}),
            "bwd": ExampleProgram("flashattn_bwd", lambda c: padded, lambda c: common),
            "postprocess": ExampleProgram("flashattn_bwd_postprocess", lambda c: (c.total_q, c.heads, c.head_dim),
                                   lambda c: {"dtype": c.dtype}),
            "dsink": ExampleProgram("flashattn_bwd_dsink", lambda c: (c.batch, c.heads, c.seqlen_q, c.seqlen_q),
                             lambda c: {"dtype": c.dtype})}


# Its bwd picks its tiles from the GPU at build time (block_N 32 on sm_90): it builds on a GPU only.
GQA_SINK_BWD_VARLEN = family(
    "tl_gqa_sink_bwd_varlen", "attention_sink/example_gqa_sink_bwd_varlen.py", _varlen_backward_programs,
    _varlen_backward_run, with_sinks(varlen_bwd_family.make_inputs),
    Offer(variants=("default",), head_dims=(64, 128), tiles=((64, 64, 1, 128),), layouts=("thd",), lengths="packed",
          rules=_rules(lambda c: max(c.block_n, 32), causal=False),
          peer=({**padded(1, 2048, 2048), **heads(64, 4, 128), "sinks": True, "causal": True},)),
    Judge(tensors=lambda c: (("O", "forward"), ("dQ", "gradient"), ("dK", "gradient"), ("dV", "gradient"),
                             ("dSinks", "gradient")),
          reference=lambda case, inputs, dtype: {**varlen_family.forward_reference(case, inputs, dtype),
                                                 **varlen_bwd_family.reference(case, inputs, dtype)},
          canonical=canonical, floors=varlen_bwd_family.floors, locate=varlen_family.locate),
    arch="auto")
