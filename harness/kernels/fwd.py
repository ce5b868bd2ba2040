"""FlashAttention-2 style forward kernel: MHA/GQA, causal/sliding window, sinks, BHSD/BSHD.

Sequence lengths and batch are symbolic, so one compiled kernel serves every length of a
static configuration (harness.case.static_key). Variants differ in the epilogue only: `default`
stores O through shared memory (a tile copy TileLang may lower to a TMA store) and LSE as a tile
copy; `direct` stores both element-wise from registers, guarded by the sequence length.
Masking: harness/kernels/masking.py; where the sequence and head axes sit: harness/layout.py.
`forms` (harness.case.FORMS, (block, form) pairs) writes blocks in another equivalent form: every
block of that table has one here or in blocks.py. `softcap` > 0 caps the scores at that value with
tanh (the softcap_fwd family).
"""
import tilelang.language as T

from harness import compat, layout
from harness.kernels import blocks, masking

VARIANTS = ("default", "direct")


def program(heads, kv_heads, head_dim, head_dim_v, dtype, left, right, sinks, layout_name,
            block_m, block_n, num_stages, threads, variant="default", forms=(), softcap=0.0):
    if variant not in VARIANTS:
        raise ValueError(f"fwd has no variant {variant!r}")
    direct = variant == "direct"
    form = dict(forms)
    q_loop, kv_loop, p_shared = form.get("q_load") == "loop", form.get("kv_load") == "loop", form.get("p_operand") == "shared"
    serial = form.get("kv_loop") == "serial"
    mask_init, fresh_max, merged = blocks.softmax_forms(forms)
    batch = T.symbolic("batch")
    seq_q = T.symbolic("seq_q")
    seq_k = T.symbolic("seq_k")
    # Soft-capped scores are taken to log2 units where they are capped: the softmax then scales nothing.
    capped = softcap > 0
    scale = None if capped else blocks.forward_scale(head_dim)
    accum = blocks.ACCUM
    lay = layout_name
    q_shape, o_shape, k_shape, v_shape = blocks.operand_shapes(lay, batch, seq_q, seq_k, heads, kv_heads, head_dim,
                                                               head_dim_v)

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
            if p_shared:
                p_s = T.alloc_shared([block_m, block_n], dtype)
            acc_s, p_cast, acc_o, row_max, row_max_prev, row_scale, row_sum, denom, lse_f = blocks.softmax_fragments(
                block_m, block_n, head_dim_v, dtype)

            kvh = blocks.kv_head(by, heads, kv_heads)
            shift = seq_k - seq_q
            q0 = bx * block_m
            if q_loop:
                for i, d in T.Parallel(block_m, head_dim):
                    q_s[i, d] = T.if_then_else(q0 + i < seq_q, layout.at(Q, lay, bz, by, q0 + i, d), 0)
            else:
                T.copy(layout.rows(Q, lay, bz, by, q0, block_m), q_s)
            blocks.softmax_init(acc_o, denom, row_max)

            # Only key blocks that some row of this query block may see.
            lo = masking.first_key_block(q0, shift, left, block_n)
            hi = masking.end_key_block(q0, shift, right, block_m, block_n, seq_k)
            for kb in blocks.key_loop(lo, T.max(lo, hi), num_stages, serial):
                k0 = kb * block_n
                if kv_loop:
                    for j, d in T.Parallel(block_n, head_dim):
                        k_s[j, d] = T.if_then_else(k0 + j < seq_k, layout.at(K, lay, bz, kvh, k0 + j, d), 0)
                else:
                    T.copy(layout.rows(K, lay, bz, kvh, k0, block_n), k_s)
                blocks.window_scores(q_s, k_s, acc_s, q0, k0, shift, seq_k, left, right, block_m, block_n,
                                     mask_init=mask_init)
                if capped:
                    blocks.softcap_scores(acc_s, block_m, block_n, softcap, head_dim ** -0.5)
                blocks.softmax_step(acc_s, p_cast, acc_o, row_max, row_max_prev, row_scale, row_sum, denom, block_m,
                                    block_n, head_dim_v, scale, fresh_max=fresh_max, merged=merged)
                if kv_loop:
                    for j, d in T.Parallel(block_n, head_dim_v):
                        v_s[j, d] = T.if_then_else(k0 + j < seq_k, layout.at(V, lay, bz, kvh, k0 + j, d), 0)
                else:
                    T.copy(layout.rows(V, lay, bz, kvh, k0, block_n), v_s)
                if p_shared:
                    T.copy(p_cast, p_s)
                    T.gemm(p_s, v_s, acc_o, policy=T.GemmWarpPolicy.FullRow)
                else:
                    T.gemm(p_cast, v_s, acc_o, policy=T.GemmWarpPolicy.FullRow)

            if sinks:
                for i in T.Parallel(block_m):
                    denom[i] += blocks.sink_mass(Sinks[by], row_max[i], scale)
            blocks.forward_epilogue(acc_o, denom, row_max, lse_f, block_m, head_dim_v, scale)
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
