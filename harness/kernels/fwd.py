"""FlashAttention-2 style forward kernel: MHA/GQA, causal/sliding window, sinks, BHSD/BSHD.

Sequence lengths and batch are symbolic, so one compiled kernel serves every length of a
static configuration (harness.case.static_key). Variants differ in the epilogue only: `default`
stores O through shared memory (a tile copy TileLang may lower to a TMA store) and LSE as a tile
copy; `direct` stores both element-wise from registers, guarded by the sequence length.
Masking: harness/kernels/masking.py; where the sequence and head axes sit: harness/layout.py.
"""
import math

import tilelang.language as T

from harness import compat, layout
from harness.kernels import masking

LOG2E = 1.4426950408889634


VARIANTS = ("default", "direct")


def program(heads, kv_heads, head_dim, head_dim_v, dtype, left, right, sinks, layout_name,
            block_m, block_n, num_stages, threads, variant="default"):
    if variant not in VARIANTS:
        raise ValueError(f"fwd has no variant {variant!r}")
    direct = variant == "direct"
    batch = T.symbolic("batch")
    seq_q = T.symbolic("seq_q")
    seq_k = T.symbolic("seq_k")
    group = heads // kv_heads
    scale = LOG2E / math.sqrt(head_dim)
    accum = "float32"
    neg_inf = -T.infinity(accum)
    lay = layout_name
    q_shape = layout.shape(lay, batch, seq_q, heads, head_dim)
    k_shape = layout.shape(lay, batch, seq_k, kv_heads, head_dim)
    v_shape = layout.shape(lay, batch, seq_k, kv_heads, head_dim_v)
    o_shape = layout.shape(lay, batch, seq_q, heads, head_dim_v)

    @T.prim_func
    def main(
        Q: compat.Tensor(q_shape, dtype),
        K: compat.Tensor(k_shape, dtype),
        V: compat.Tensor(v_shape, dtype),
        Sinks: compat.Tensor([heads], accum),
        Out: compat.Tensor(o_shape, dtype),
        Lse: compat.Tensor([batch, heads, seq_q], accum),
    ):
        with T.Kernel(T.ceildiv(seq_q, block_m), heads, batch, threads=threads) as (bx, by, bz):
            q_s = T.alloc_shared([block_m, head_dim], dtype)
            k_s = T.alloc_shared([block_n, head_dim], dtype)
            v_s = T.alloc_shared([block_n, head_dim_v], dtype)
            o_s = T.alloc_shared([block_m, head_dim_v], dtype)
            acc_s = T.alloc_fragment([block_m, block_n], accum)
            p_cast = T.alloc_fragment([block_m, block_n], dtype)
            acc_o = T.alloc_fragment([block_m, head_dim_v], accum)
            row_max = T.alloc_fragment([block_m], accum)
            row_max_prev = T.alloc_fragment([block_m], accum)
            row_scale = T.alloc_fragment([block_m], accum)
            row_sum = T.alloc_fragment([block_m], accum)
            denom = T.alloc_fragment([block_m], accum)
            lse_f = T.alloc_fragment([block_m], accum)

            kvh = by // group
            shift = seq_k - seq_q
            q0 = bx * block_m
            T.copy(layout.rows(Q, lay, bz, by, q0, block_m), q_s)
            T.fill(acc_o, 0)
            T.fill(denom, 0)
            T.fill(row_max, neg_inf)

            # Only key blocks that some row of this query block may see.
            lo = masking.first_key_block(q0, shift, left, block_n)
            hi = masking.end_key_block(q0, shift, right, block_m, block_n, seq_k)
            for kb in T.Pipelined(lo, T.max(lo, hi), num_stages=num_stages):
                k0 = kb * block_n
                T.copy(layout.rows(K, lay, bz, kvh, k0, block_n), k_s)
                T.clear(acc_s)
                T.gemm(q_s, k_s, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                for i, j in T.Parallel(block_m, block_n):
                    acc_s[i, j] = masking.visible(acc_s[i, j], neg_inf, q0 + i, k0 + j, shift, seq_k, left, right)
                T.copy(row_max, row_max_prev)
                T.reduce_max(acc_s, row_max, dim=1, clear=False)
                for i in T.Parallel(block_m):
                    # A row that has seen no key yet keeps max = -inf; scale its (zero) state by 0.
                    row_scale[i] = T.if_then_else(
                        row_max_prev[i] == neg_inf, 0, T.exp2((row_max_prev[i] - row_max[i]) * scale))
                for i, j in T.Parallel(block_m, block_n):
                    acc_s[i, j] = T.if_then_else(
                        row_max[i] == neg_inf, 0, T.exp2((acc_s[i, j] - row_max[i]) * scale))
                T.reduce_sum(acc_s, row_sum, dim=1)
                for i in T.Parallel(block_m):
                    denom[i] = denom[i] * row_scale[i] + row_sum[i]
                for i, j in T.Parallel(block_m, head_dim_v):
                    acc_o[i, j] *= row_scale[i]
                T.copy(acc_s, p_cast)
                T.copy(layout.rows(V, lay, bz, kvh, k0, block_n), v_s)
                T.gemm(p_cast, v_s, acc_o, policy=T.GemmWarpPolicy.FullRow)

            if sinks:
                # The sink is one more logit (already scaled) with no value row.
                for i in T.Parallel(block_m):
                    denom[i] += T.if_then_else(
                        row_max[i] == neg_inf, T.exp2(Sinks[by] * LOG2E),
                        T.exp2(Sinks[by] * LOG2E - row_max[i] * scale))
            for i, j in T.Parallel(block_m, head_dim_v):
                acc_o[i, j] = T.if_then_else(denom[i] == 0, 0, acc_o[i, j] / denom[i])
            for i in T.Parallel(block_m):
                lse_f[i] = T.if_then_else(
                    row_max[i] == neg_inf, T.log2(denom[i]),
                    T.log2(denom[i]) + row_max[i] * scale) / LOG2E
            if direct:
                for i, j in T.Parallel(block_m, head_dim_v):
                    if q0 + i < seq_q:
                        if lay == "bshd":
                            Out[bz, q0 + i, by, j] = acc_o[i, j]
                        else:
                            Out[bz, by, q0 + i, j] = acc_o[i, j]
                for i in T.Parallel(block_m):
                    if q0 + i < seq_q:
                        Lse[bz, by, q0 + i] = lse_f[i]
            else:
                T.copy(acc_o, o_s)
                T.copy(o_s, layout.rows(Out, lay, bz, by, q0, block_m))
                T.copy(lse_f, Lse[bz, by, q0:q0 + block_m])

    return main
