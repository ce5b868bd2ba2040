"""Varlen (packed) FlashAttention-2 forward: MHA/GQA, causal/sliding window per sequence, sinks.

Q [total_q, heads, d], K/V [total_k, kv_heads, d], sequences packed one after another with
cu_seqlens_q/k [batch + 1] (int32) giving each one's start. Totals and batch are symbolic; the
grid covers ceil(total_q / block_m) query blocks per (head, sequence), so no max length is baked
in: one compiled kernel serves every batch composition, and blocks past a sequence's end write
nothing. Masking is FlashAttention's bottom-right alignment within each sequence
(harness/kernels/masking.py). Loads and stores are element-wise and guarded by the sequence's
length: a tile copy would read (harmlessly) or write (harmfully) the next sequence's rows.
"""
import tilelang.language as T

from harness import compat
from harness.kernels import blocks, masking


def forward(heads, kv_heads, head_dim, head_dim_v, dtype, left, right, sinks,
            block_m, block_n, num_stages, threads, forms=()):
    mask_init, fresh_max, merged = blocks.softmax_forms(forms)
    # The offsets' length, not batch: 0.1.6.post2 binds a symbolic size only from a bare dimension
    # ("variables [batch] are used, but are not passed in as API arguments" for [batch + 1]).
    offsets = T.symbolic("batch_plus_one")
    total_q = T.symbolic("total_q")
    total_k = T.symbolic("total_k")
    scale = blocks.forward_scale(head_dim)
    accum = blocks.ACCUM

    @T.prim_func
    def main(
        Q: compat.Tensor([total_q, heads, head_dim], dtype),
        K: compat.Tensor([total_k, kv_heads, head_dim], dtype),
        V: compat.Tensor([total_k, kv_heads, head_dim_v], dtype),
        CuQ: compat.Tensor([offsets], "int32"),
        CuK: compat.Tensor([offsets], "int32"),
        Sinks: compat.Tensor([heads], accum),
        Out: compat.Tensor([total_q, heads, head_dim_v], dtype),
        Lse: compat.Tensor([heads, total_q], accum),
    ):
        with T.Kernel(T.ceildiv(total_q, block_m), heads, offsets - 1, threads=threads) as (bx, by, bz):
            q_s = T.alloc_shared([block_m, head_dim], dtype)
            k_s = T.alloc_shared([block_n, head_dim], dtype)
            v_s = T.alloc_shared([block_n, head_dim_v], dtype)
            acc_s, p_cast, acc_o, row_max, row_max_prev, row_scale, row_sum, denom = blocks.softmax_fragments(
                block_m, block_n, head_dim_v, dtype, lse=False)

            q_start = CuQ[bz]
            k_start = CuK[bz]
            seq_q = CuQ[bz + 1] - q_start
            seq_k = CuK[bz + 1] - k_start
            kvh = blocks.kv_head(by, heads, kv_heads)
            shift = seq_k - seq_q
            q0 = bx * block_m
            for i, d in T.Parallel(block_m, head_dim):
                q_s[i, d] = T.if_then_else(q0 + i < seq_q, Q[q_start + q0 + i, by, d], 0)
            blocks.softmax_init(acc_o, denom, row_max)

            lo = masking.first_key_block(q0, shift, left, block_n)
            hi = masking.end_key_block(q0, shift, right, block_m, block_n, seq_k)
            for kb in T.Pipelined(lo, T.max(lo, hi), num_stages=num_stages):
                k0 = kb * block_n
                for j, d in T.Parallel(block_n, head_dim):
                    k_s[j, d] = T.if_then_else(k0 + j < seq_k, K[k_start + k0 + j, kvh, d], 0)
                for j, d in T.Parallel(block_n, head_dim_v):
                    v_s[j, d] = T.if_then_else(k0 + j < seq_k, V[k_start + k0 + j, kvh, d], 0)
                blocks.window_scores(q_s, k_s, acc_s, q0, k0, shift, seq_k, left, right, block_m, block_n,
                                     mask_init=mask_init)
                blocks.softmax_step(acc_s, p_cast, acc_o, row_max, row_max_prev, row_scale, row_sum, denom, block_m,
                                    block_n, head_dim_v, scale, fresh_max=fresh_max, merged=merged)
                T.gemm(p_cast, v_s, acc_o, policy=T.GemmWarpPolicy.FullRow)

            if sinks:
                for i in T.Parallel(block_m):
                    denom[i] += blocks.sink_mass(Sinks[by], row_max[i], scale)
            for i, d in T.Parallel(block_m, head_dim_v):
                if q0 + i < seq_q:
                    Out[q_start + q0 + i, by, d] = blocks.normalized(acc_o[i, d], denom[i])
            for i in T.Parallel(block_m):
                if q0 + i < seq_q:
                    Lse[by, q_start + q0 + i] = blocks.lse(denom[i], row_max[i], scale)

    return main


def backward(heads, kv_heads, head_dim, head_dim_v, dtype, left, right,
             block_m, block_n, num_stages, threads, variant):
    """The varlen backward's main kernel: dQ (fp32 atomics through bwd.dq_layout), dK/dV.

    One block per (key block, query head, sequence); it walks the query blocks of its sequence
    that can see its keys. Variants as the dense backward's: `atomic` adds dK/dV into fp32 per KV
    head (across the GQA group), `split` writes them per query head in `dtype` (summed on the
    host). Delta, LSE and the dQ accumulator cover every packed token at once: they are
    [1, heads, total] and [1, total_acc, heads, d] so that the dense backward's preprocess,
    postprocess and sink-gradient kernels serve packed tensors unchanged (batch 1, "bshd").
    Loads and stores are element-wise and guarded by the sequence's lengths (see forward()).
    """
    from harness.kernels import bwd

    offsets = T.symbolic("batch_plus_one")
    total_q = T.symbolic("total_q")
    total_k = T.symbolic("total_k")
    total_acc = T.symbolic("total_q_acc")
    sm_scale, scale = blocks.backward_scales(head_dim)
    accum = blocks.ACCUM
    split = variant == "split"
    grad_heads = heads if split else kv_heads
    grad_dtype = dtype if split else accum

    @T.prim_func
    def main(
        Q: compat.Tensor([total_q, heads, head_dim], dtype),
        K: compat.Tensor([total_k, kv_heads, head_dim], dtype),
        V: compat.Tensor([total_k, kv_heads, head_dim_v], dtype),
        dO: compat.Tensor([total_q, heads, head_dim_v], dtype),
        CuQ: compat.Tensor([offsets], "int32"),
        CuK: compat.Tensor([offsets], "int32"),
        Lse: compat.Tensor([1, heads, total_q], accum),
        Delta: compat.Tensor([1, heads, total_q], accum),
        dQ: compat.Tensor([1, total_acc, heads, head_dim], accum),
        dK: compat.Tensor([total_k, grad_heads, head_dim], grad_dtype),
        dV: compat.Tensor([total_k, grad_heads, head_dim_v], grad_dtype),
    ):
        with T.Kernel(T.ceildiv(total_k, block_n), heads, offsets - 1, threads=threads) as (bx, by, bz):
            k_s = T.alloc_shared([block_n, head_dim], dtype)
            v_s = T.alloc_shared([block_n, head_dim_v], dtype)
            q_s = T.alloc_shared([block_m, head_dim], dtype)
            do_s = T.alloc_shared([block_m, head_dim_v], dtype)
            lse_s = T.alloc_shared([block_m], accum)
            delta_s = T.alloc_shared([block_m], accum)
            ds_s, s_t, dp_t, p_cast, ds_cast, dk_f, dv_f, dq_f = blocks.backward_fragments(
                block_m, block_n, head_dim, head_dim_v, dtype)
            T.annotate_layout({dQ: bwd.dq_layout(dQ, "bshd")})

            q_start = CuQ[bz]
            k_start = CuK[bz]
            seq_q = CuQ[bz + 1] - q_start
            seq_k = CuK[bz + 1] - k_start
            kvh = blocks.kv_head(by, heads, kv_heads)
            gh = by if split else kvh
            shift = seq_k - seq_q
            k0 = bx * block_n
            for j, d in T.Parallel(block_n, head_dim):
                k_s[j, d] = T.if_then_else(k0 + j < seq_k, K[k_start + k0 + j, kvh, d], 0)
            for j, d in T.Parallel(block_n, head_dim_v):
                v_s[j, d] = T.if_then_else(k0 + j < seq_k, V[k_start + k0 + j, kvh, d], 0)
            T.clear(dk_f)
            T.clear(dv_f)

            # A key block past its sequence's end walks no query block.
            lo = masking.first_query_block(k0, shift, right, block_m)
            hi = T.if_then_else(k0 < seq_k, masking.end_query_block(k0, shift, left, block_n, block_m, seq_q), 0)
            for qb in T.Pipelined(lo, T.max(lo, hi), num_stages=num_stages):
                q0 = qb * block_m
                for i, d in T.Parallel(block_m, head_dim):
                    q_s[i, d] = T.if_then_else(q0 + i < seq_q, Q[q_start + q0 + i, by, d], 0)
                for i, d in T.Parallel(block_m, head_dim_v):
                    do_s[i, d] = T.if_then_else(q0 + i < seq_q, dO[q_start + q0 + i, by, d], 0)
                for i in T.Parallel(block_m):
                    lse_s[i] = T.if_then_else(q0 + i < seq_q, Lse[0, by, q_start + q0 + i], 0)
                    delta_s[i] = T.if_then_else(q0 + i < seq_q, Delta[0, by, q_start + q0 + i], 0)
                blocks.scores_t(k_s, q_s, v_s, do_s, s_t, dp_t)
                blocks.window_p_ds_t(s_t, dp_t, ds_cast, lse_s, delta_s, q0, k0, shift, seq_q, seq_k, left, right, block_m,
                                     block_n, scale, sm_scale)
                blocks.dkdv_gemms(s_t, p_cast, ds_cast, q_s, do_s, dk_f, dv_f)
                blocks.dq_gemm(ds_cast, ds_s, k_s, dq_f)
                for i, d in T.Parallel(block_m, head_dim):
                    if q0 + i < seq_q:
                        T.atomic_add(dQ[0, q_start + q0 + i, by, d], dq_f[i, d])

            for j, d in T.Parallel(block_n, head_dim):
                if k0 + j < seq_k:
                    if split:
                        dK[k_start + k0 + j, gh, d] = dk_f[j, d]
                    else:
                        T.atomic_add(dK[k_start + k0 + j, gh, d], dk_f[j, d])
            for j, d in T.Parallel(block_n, head_dim_v):
                if k0 + j < seq_k:
                    if split:
                        dV[k_start + k0 + j, gh, d] = dv_f[j, d]
                    else:
                        T.atomic_add(dV[k_start + k0 + j, gh, d], dv_f[j, d])

    return main
