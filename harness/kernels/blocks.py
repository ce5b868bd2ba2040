"""The attention math the kernel programs share: trace-time helpers and T.macro blocks.

A family exists to vary loads, stores and loop structure; the math between them (the online
softmax step, the forward's sink/normalize/LSE epilogue, the backward's S/dP/P/dS chain and its
GEMMs, the GQA head mapping, the fragments both directions allocate) is written once here, so a
fix or a seeded bug lands in every kernel that uses it.

Helpers returning an expression are plain Python (called while TileLang traces a prim_func, as
masking.py's). Helpers that emit statements are T.macro: inlined where they are called, so the
program is the one written inline. T.macro is TVMScript's (`from tvm.script.parser.tir import *`)
in 0.1.6.post2 and TileLang's own eager macro in 0.1.15. In 0.1.15 a macro argument that is a
TIR variable is renamed to the parameter's name and any other expression is bound to a new
variable, so a macro here takes buffers, regions and Python values, and variables only under
the names every caller already gives them (not the query head: with one query head per KV head
`by` is the variable `kvh` names, hence `sink_mass` is added in each kernel's own loop).
"""
import math

import tilelang.language as T

from harness import layout
from harness.kernels import masking

LOG2E = 1.4426950408889634
ACCUM = "float32"
NEG_INF = -T.infinity(ACCUM)
FULL_ROW = T.GemmWarpPolicy.FullRow


def forward_scale(head_dim):
    """1/sqrt(d) in log2 units: the forward's scores go through exp2."""
    return LOG2E / math.sqrt(head_dim)


def backward_scales(head_dim):
    """(sm_scale, scale): dS's softmax scale 1/sqrt(d), and P's exp2 scale sm_scale * log2(e)."""
    sm_scale = 1.0 / math.sqrt(head_dim)
    return sm_scale, sm_scale * LOG2E


def operand_shapes(lay, batch, seq_q, seq_k, heads, kv_heads, head_dim, head_dim_v):
    """The shapes of Q, O (or dO), K and V in layout `lay`: K and V have the KV heads."""
    return (layout.shape(lay, batch, seq_q, heads, head_dim), layout.shape(lay, batch, seq_q, heads, head_dim_v),
            layout.shape(lay, batch, seq_k, kv_heads, head_dim), layout.shape(lay, batch, seq_k, kv_heads, head_dim_v))


def kv_head(by, heads, kv_heads):
    """The KV head that query head `by` reads: GQA groups consecutive query heads."""
    return by // (heads // kv_heads)


def softmax_forms(forms):
    """(mask_init, fresh_max, merged) of a case's forms ((block, form) pairs): the flags of window_scores and
    softmax_step, whose blocks (scores_mask, row_max, rescale) each kernel calling them can vary."""
    form = dict(forms)
    return form.get("scores_mask") == "init", form.get("row_max") == "fresh", form.get("rescale") == "merged"


def key_loop(lo, hi, num_stages, serial=False):
    """The loop over key (or query) blocks: T.Pipelined, or T.serial (form kv_loop=serial)."""
    return T.serial(lo, hi) if serial else T.Pipelined(lo, hi, num_stages=num_stages)


# ----------------------------------------------------------------------------- forward
def softmax_fragments(block_m, block_n, head_dim_v, dtype, lse=True):
    """The forward's per-block state: scores, their cast for the PV GEMM, the O accumulator, the
    running max (and the previous one), the rescale factor, a block's row sums, the running
    denominator and, with `lse`, the rows' LSE."""
    return (T.alloc_fragment([block_m, block_n], ACCUM), T.alloc_fragment([block_m, block_n], dtype),
            T.alloc_fragment([block_m, head_dim_v], ACCUM), *(T.alloc_fragment([block_m], ACCUM) for _ in range(5 + lse)))


@T.macro
def softmax_init(acc_o, denom, row_max):
    """Nothing accumulated, no key seen (max = -inf)."""
    T.fill(acc_o, 0)
    T.fill(denom, 0)
    T.fill(row_max, NEG_INF)


def _log2_units(x, scale):
    """x in log2 units: scores still to be scaled by `scale`, or (scale None) already scaled."""
    return x if scale is None else x * scale


@T.macro
def window_scores(q_s, k_s, acc_s, q0, k0, shift, seq_k, left, right, block_m, block_n, mask_init=False):
    """S = Q K^T of one (query block, key block) pair, -inf where the query does not see the key.
    `mask_init` (form scores_mask=init): the GEMM accumulates onto the mask (0 or -inf) instead."""
    if mask_init:
        for i, j in T.Parallel(block_m, block_n):
            acc_s[i, j] = masking.visible(0, NEG_INF, q0 + i, k0 + j, shift, seq_k, left, right)
        T.gemm(q_s, k_s, acc_s, transpose_B=True, policy=FULL_ROW)
    else:
        T.clear(acc_s)
        T.gemm(q_s, k_s, acc_s, transpose_B=True, policy=FULL_ROW)
        for i, j in T.Parallel(block_m, block_n):
            acc_s[i, j] = masking.visible(acc_s[i, j], NEG_INF, q0 + i, k0 + j, shift, seq_k, left, right)


def _rescale(prev_i, max_i, scale):
    """The factor taking a row's state from the previous max to the new one; a row that has seen no
    key yet keeps max = -inf, and its (zero) state is scaled by 0."""
    return T.if_then_else(prev_i == NEG_INF, 0, T.exp2(_log2_units(prev_i - max_i, scale)))


@T.macro
def softmax_step(acc_s, p_cast, acc_o, row_max, row_max_prev, row_scale, row_sum, denom, block_m, block_n,
                 head_dim_v, scale, fresh_max=False, merged=False):
    """One key block of the online softmax on masked scores acc_s (-inf where not seen): the new
    running max, P = exp2 of the scores against it in acc_s (and cast into p_cast for the PV GEMM),
    the denominator and O rescaled to the new max. `scale` takes the scores to log2 units (None:
    they are already). Forms: `fresh_max` (row_max=fresh) reduces the block alone, then takes the
    max with the previous; `merged` (rescale=merged) computes the factor in the denominator's loop."""
    T.copy(row_max, row_max_prev)
    if fresh_max:
        T.reduce_max(acc_s, row_max, dim=1, clear=True)
        for i in T.Parallel(block_m):
            row_max[i] = T.max(row_max[i], row_max_prev[i])
    else:
        T.reduce_max(acc_s, row_max, dim=1, clear=False)
    if not merged:
        for i in T.Parallel(block_m):
            row_scale[i] = _rescale(row_max_prev[i], row_max[i], scale)
    for i, j in T.Parallel(block_m, block_n):
        acc_s[i, j] = T.if_then_else(row_max[i] == NEG_INF, 0, T.exp2(_log2_units(acc_s[i, j] - row_max[i], scale)))
    T.reduce_sum(acc_s, row_sum, dim=1)
    for i in T.Parallel(block_m):
        if merged:
            row_scale[i] = _rescale(row_max_prev[i], row_max[i], scale)
        denom[i] = denom[i] * row_scale[i] + row_sum[i]
    for i, j in T.Parallel(block_m, head_dim_v):
        acc_o[i, j] *= row_scale[i]
    T.copy(acc_s, p_cast)


@T.macro
def softcap_scores(acc_s, block_m, block_n, softcap, sm_scale):
    """Soft-capped scores in log2 units, in place: cap * tanh(s * sm_scale / cap) (Gemma 2, Grok), the
    masked ones left at -inf (tanh would take them to -cap, a key the row must not see)."""
    for i, j in T.Parallel(block_m, block_n):
        acc_s[i, j] = T.if_then_else(acc_s[i, j] == NEG_INF, NEG_INF,
                                     T.tanh(acc_s[i, j] * (sm_scale / softcap)) * (softcap * LOG2E))


def sink_mass(sink, max_i, scale):
    """exp of the sink logit (one more, already scaled logit with no value row) against the row's
    running max."""
    return T.if_then_else(max_i == NEG_INF, T.exp2(sink * LOG2E), T.exp2(sink * LOG2E - _log2_units(max_i, scale)))


def normalized(o_ij, denom_i):
    """O divided by the softmax denominator; 0 for a row that saw nothing."""
    return T.if_then_else(denom_i == 0, 0, o_ij / denom_i)


def lse(denom_i, max_i, scale):
    """The row's log-sum-exp in natural log from the denominator and the running max."""
    return T.if_then_else(max_i == NEG_INF, T.log2(denom_i), T.log2(denom_i) + _log2_units(max_i, scale)) / LOG2E


@T.macro
def normalize(acc_o, denom, block_m, head_dim_v):
    """acc_o divided by the denominator, in place."""
    for i, j in T.Parallel(block_m, head_dim_v):
        acc_o[i, j] = normalized(acc_o[i, j], denom[i])


@T.macro
def forward_epilogue(acc_o, denom, row_max, lse_f, block_m, head_dim_v, scale):
    """After the last key block (and the sink's mass, if any, added to denom): O normalized in
    acc_o and the rows' LSE in lse_f."""
    normalize(acc_o, denom, block_m, head_dim_v)
    for i in T.Parallel(block_m):
        lse_f[i] = lse(denom[i], row_max[i], scale)


# ----------------------------------------------------------------------------- backward
def backward_fragments(block_m, block_n, head_dim, head_dim_v, dtype):
    """The key-major backward's per-block state: dS^T in shared memory (the dQ GEMM's operand),
    S^T (then P^T), dP^T = V dO^T, P^T and dS^T cast for the GEMMs, and the dK, dV, dQ
    accumulators."""
    return (T.alloc_shared([block_n, block_m], dtype),
            T.alloc_fragment([block_n, block_m], ACCUM), T.alloc_fragment([block_n, block_m], ACCUM),
            T.alloc_fragment([block_n, block_m], dtype), T.alloc_fragment([block_n, block_m], dtype),
            T.alloc_fragment([block_n, head_dim], ACCUM), T.alloc_fragment([block_n, head_dim_v], ACCUM),
            T.alloc_fragment([block_m, head_dim], ACCUM))


def probability(score, lse, qi, kj, shift, seq_q, seq_k, left, right, scale):
    """P of query qi and key kj recomputed from the raw score and the forward's LSE (natural
    log; `scale` is 1/sqrt(d) * log2(e)); 0 past seq_q and where qi does not see kj. A row that
    sees no key has LSE = -inf, but then it is masked everywhere."""
    return masking.visible(T.if_then_else(qi < seq_q, T.exp2(score * scale - lse * LOG2E), 0),
                           0, qi, kj, shift, seq_k, left, right)


def dscore(p, dp, delta, qi, kj, shift, seq_q, seq_k, left, right, sm_scale):
    """dS = P * (dP - Delta) * sm_scale, masked as `probability`."""
    return masking.visible(T.if_then_else(qi < seq_q, p * (dp - delta) * sm_scale, 0),
                           0, qi, kj, shift, seq_k, left, right)


@T.macro
def scores_t(k_s, q_s, v_s, do_s, s_t, dp_t):
    """S^T = K Q^T and dP^T = V dO^T of one (key block, query block) pair."""
    T.clear(s_t)
    T.gemm(k_s, q_s, s_t, transpose_B=True, policy=FULL_ROW)
    T.clear(dp_t)
    T.gemm(v_s, do_s, dp_t, transpose_B=True, policy=FULL_ROW)


@T.macro
def window_p_ds_t(s_t, dp_t, ds_cast, lse_s, delta_s, q0, k0, shift, seq_q, seq_k, left, right, block_m, block_n,
                  scale, sm_scale):
    """P^T (in s_t) and dS^T (in ds_cast) under the window mask, from LSE and Delta in shared memory."""
    for j, i in T.Parallel(block_n, block_m):
        s_t[j, i] = probability(s_t[j, i], lse_s[i], q0 + i, k0 + j, shift, seq_q, seq_k, left, right, scale)
        ds_cast[j, i] = dscore(s_t[j, i], dp_t[j, i], delta_s[i], q0 + i, k0 + j, shift, seq_q, seq_k,
                               left, right, sm_scale)


@T.macro
def dkdv_gemms(s_t, p_cast, ds_cast, q_s, do_s, dk_f, dv_f):
    """dV += P^T dO and dK += dS^T Q (the softmax scale is in dS)."""
    T.copy(s_t, p_cast)
    T.gemm(p_cast, do_s, dv_f, policy=FULL_ROW)
    T.gemm(ds_cast, q_s, dk_f, policy=FULL_ROW)


@T.macro
def dq_gemm(ds_cast, ds_s, k_s, dq_f):
    """This key block's share of dQ = dS K, through shared memory."""
    T.copy(ds_cast, ds_s)
    T.clear(dq_f)
    T.gemm(ds_s, k_s, dq_f, transpose_A=True, policy=FULL_ROW)


@T.macro
def store_dkdv(dk_f, dv_f, dk_rows, dv_rows, split):
    """A key block's dK and dV: copied (per query head, `split`) or added (per KV head, fp32)."""
    if split:
        T.copy(dk_f, dk_rows)
        T.copy(dv_f, dv_rows)
    else:
        T.atomic_add(dk_rows, dk_f)
        T.atomic_add(dv_rows, dv_f)
