"""Attention with a dense boolean mask (uint8) and an additive bias: block activity, forward, backward.

Scores are S = Q K^T / sqrt(d) + Bias where Mask != 0, -inf elsewhere; a row with no true element
gives O = 0, LSE = -inf and no gradient. Mask and Bias are [mask_batch, mask_heads, seq_q, seq_k]
with mask_batch in (batch, 1) and mask_heads in (heads, 1) (broadcast); dBias is accumulated in
fp32 with atomic adds, so the broadcast dimensions are summed in the kernel.

Variants (how keys not divisible by 8 are handled, fixed at compile time):
  pad     the host pads K and V to a multiple of 8 keys (mask 0 there) and stores every mask and
          bias row with a pitch of 16 bytes: Mask as [.., seq_q, chunks, 16], Bias as
          [.., seq_q, chunks, 8], so a full tile is copied 16 bytes at a time.
  ragged  any seq_k; a row may start anywhere, so full tiles are copied element by element.
In both, a tile that crosses seq_q or seq_k (chosen per tile; uniform within a block) takes the
guarded element-wise path that clears what lies out of range (mask 0: the key is not seen).

Block skipping: `block_or` writes Active[mb, mh, query block, key block] = 1 where the mask tile
holds a true element; the forward and backward skip the other tiles entirely.

The loops over tiles are serial (T.serial, not T.Pipelined; num_stages is ignored): in the
warp-specialized pipeline TileLang 0.1.15 generates for T.Pipelined here, the producer waits only
for the consumer's release of K's stage, which comes right after the QK^T GEMM, before the masking
reads mask_s and bias_s; the next tile's mask could then overwrite the one being read
(codegen.ordering.reads_after_release flags it). Seen in the generated code only, not yet on a GPU.
"""
import tilelang.language as T

from harness import compat, layout
from harness.kernels import blocks
from harness.layout import ROW_ALIGN as ALIGN

LOG2E, ACCUM = blocks.LOG2E, blocks.ACCUM
MASK = "uint8"
VARIANTS = ("pad", "ragged")
BYTES = {"uint8": 1, "float16": 2, "bfloat16": 2}


def vec(variant, dtype):
    """Elements a mask or bias row's start is a multiple of: 16 bytes' worth in `pad`."""
    return ALIGN // BYTES[dtype] if variant == "pad" else 1


def mask_shape(vec, mask_batch, mask_heads, seq_q, seq_k, chunks):
    if vec == 1:
        return [mask_batch, mask_heads, seq_q, seq_k]
    return [mask_batch, mask_heads, seq_q, chunks, vec]


def at(buf, vec, b, h, q, k):
    """Element (q, k) of a mask or bias plane stored in runs of `vec`."""
    return buf[b, h, q, k] if vec == 1 else buf[b, h, q, k // vec, k % vec]


def chunk(buf, vec, b, h, q, k0, c, e):
    """Element e of the c-th run of `vec` elements from key k0 (k0 a multiple of vec): written so
    that the innermost index is the loop variable e, which a vectorizer can widen."""
    return buf[b, h, q, k0 + c * vec + e] if vec == 1 else buf[b, h, q, k0 // vec + c, e]


@T.macro
def load_tile(mask_s, bias_s, Mask, Bias, mvec, bvec, b, h, q0, k0, seq_q, seq_k, block_m, block_n, bias):
    """The mask (and bias) tile at (q0, k0) into shared memory. A full tile goes in runs of `vec`
    (16-byte runs in `pad`, each starting at a multiple of 16 bytes); a ragged one element by
    element, out-of-range cleared (mask 0 = not seen)."""
    if q0 + block_m <= seq_q and k0 + block_n <= seq_k:
        for i, c, e in T.Parallel(block_m, block_n // mvec, mvec):
            mask_s[i, c * mvec + e] = chunk(Mask, mvec, b, h, q0 + i, k0, c, e)
        if bias:
            for i, c, e in T.Parallel(block_m, block_n // bvec, bvec):
                bias_s[i, c * bvec + e] = chunk(Bias, bvec, b, h, q0 + i, k0, c, e)
    else:
        for i, j in T.Parallel(block_m, block_n):
            mask_s[i, j] = T.if_then_else(q0 + i < seq_q and k0 + j < seq_k,
                                          at(Mask, mvec, b, h, q0 + i, k0 + j), 0)
        if bias:
            for i, j in T.Parallel(block_m, block_n):
                bias_s[i, j] = T.if_then_else(q0 + i < seq_q and k0 + j < seq_k,
                                              at(Bias, bvec, b, h, q0 + i, k0 + j), 0)


def _biased(score, bias_value, bias):
    """score (log2 units) plus the bias converted to log2 units, when there is a bias."""
    return score + T.Cast(ACCUM, bias_value) * LOG2E if bias else score


def _dims(mask_per_batch, mask_per_head, batch, heads):
    return batch if mask_per_batch else 1, heads if mask_per_head else 1


def block_or(mask_per_batch, mask_per_head, heads, variant, block_m, block_n):
    """Active[mb, mh, qb, kb] = 1 where tile (qb, kb) of the mask holds a true element in range.
    Active must be zeroed before the launch: every thread that sees a true element writes the
    same 1, so the race between them is benign."""
    batch, seq_q, seq_k = T.symbolic("batch"), T.symbolic("seq_q"), T.symbolic("seq_k")
    mask_chunks, q_blocks, k_blocks = T.symbolic("mask_chunks"), T.symbolic("q_blocks"), T.symbolic("k_blocks")
    mb, mh = _dims(mask_per_batch, mask_per_head, batch, heads)
    mvec = vec(variant, MASK)

    @T.prim_func
    def active(
        Mask: compat.Tensor(mask_shape(mvec, mb, mh, seq_q, seq_k, mask_chunks), MASK),
        Active: compat.Tensor([mb, mh, q_blocks, k_blocks], "int32"),
    ):
        with T.Kernel(k_blocks, q_blocks, mb * mh, threads=128) as (bx, by, bz):
            b, h = bz // mh, bz % mh
            q0, k0 = by * block_m, bx * block_n
            keys = seq_k if mvec == 1 else mask_chunks * mvec  # pad: the padded pitch (mask 0 there)
            for i in T.Parallel(block_m):
                for j in T.serial(block_n):
                    if q0 + i < seq_q and k0 + j < keys:
                        if at(Mask, mvec, b, h, q0 + i, k0 + j) != 0:
                            Active[b, h, by, bx] = 1

    return active


def forward(heads, kv_heads, head_dim, head_dim_v, dtype, mask_per_batch, mask_per_head, bias, lay,
            block_m, block_n, num_stages, threads, variant):
    """O [layout] and LSE [batch, heads, seq_q] (natural log; -inf for a row with no true element)."""
    if variant not in VARIANTS:
        raise ValueError(f"masked has no variant {variant!r}")
    mvec, bvec = vec(variant, MASK), vec(variant, dtype)
    batch, seq_q, seq_k = T.symbolic("batch"), T.symbolic("seq_q"), T.symbolic("seq_k")
    mask_chunks, bias_chunks = T.symbolic("mask_chunks"), T.symbolic("bias_chunks")
    q_blocks, k_blocks = T.symbolic("q_blocks"), T.symbolic("k_blocks")
    mb, mh = _dims(mask_per_batch, mask_per_head, batch, heads)
    scale = blocks.forward_scale(head_dim)
    neg_inf = blocks.NEG_INF
    q_shape, o_shape, k_shape, v_shape = blocks.operand_shapes(lay, batch, seq_q, seq_k, heads, kv_heads, head_dim,
                                                               head_dim_v)
    m_shape = mask_shape(mvec, mb, mh, seq_q, seq_k, mask_chunks)
    b_shape = mask_shape(bvec, mb, mh, seq_q, seq_k, bias_chunks)

    @T.prim_func
    def main(
        Q: compat.Tensor(q_shape, dtype),
        K: compat.Tensor(k_shape, dtype),
        V: compat.Tensor(v_shape, dtype),
        Mask: compat.Tensor(m_shape, MASK),
        Bias: compat.Tensor(b_shape, dtype),
        Active: compat.Tensor([mb, mh, q_blocks, k_blocks], "int32"),
        Out: compat.Tensor(o_shape, dtype),
        Lse: compat.Tensor([batch, heads, seq_q], ACCUM),
    ):
        with T.Kernel(T.ceildiv(seq_q, block_m), heads, batch, threads=threads) as (bx, by, bz):
            q_s = T.alloc_shared([block_m, head_dim], dtype)
            k_s = T.alloc_shared([block_n, head_dim], dtype)
            v_s = T.alloc_shared([block_n, head_dim_v], dtype)
            o_s = T.alloc_shared([block_m, head_dim_v], dtype)
            mask_s = T.alloc_shared([block_m, block_n], MASK)
            bias_s = T.alloc_shared([block_m, block_n], dtype)
            acc_s, p_cast, acc_o, row_max, row_max_prev, row_scale, row_sum, denom, lse_f = blocks.softmax_fragments(
                block_m, block_n, head_dim_v, dtype)

            kvh = blocks.kv_head(by, heads, kv_heads)
            b = bz if mask_per_batch else 0
            h = by if mask_per_head else 0
            q0 = bx * block_m
            # Element-wise, not a TMA tile copy: that copy is waited on where q_s is first read,
            # inside the loop, and a block whose key blocks are all inactive would never wait for it
            # (codegen.ordering.unwaited_async_loads) while o_s, sharing its memory, is written.
            for i, d in T.Parallel(block_m, head_dim):
                q_s[i, d] = T.if_then_else(q0 + i < seq_q, layout.at(Q, lay, bz, by, q0 + i, d), 0)
            blocks.softmax_init(acc_o, denom, row_max)

            for kb in T.serial(T.ceildiv(seq_k, block_n)):
                if Active[b, h, bx, kb] != 0:
                    k0 = kb * block_n
                    load_tile(mask_s, bias_s, Mask, Bias, mvec, bvec, b, h, q0, k0, seq_q, seq_k, block_m, block_n, bias)
                    T.copy(layout.rows(K, lay, bz, kvh, k0, block_n), k_s)
                    T.clear(acc_s)
                    T.gemm(q_s, k_s, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                    # Scores in log2 units: (QK^T / sqrt(d) + bias) * log2(e), -inf where masked.
                    for i, j in T.Parallel(block_m, block_n):
                        acc_s[i, j] = T.if_then_else(
                            mask_s[i, j] != 0,
                            _biased(acc_s[i, j] * scale, bias_s[i, j], bias), neg_inf)
                    blocks.softmax_step(acc_s, p_cast, acc_o, row_max, row_max_prev, row_scale, row_sum, denom, block_m,
                                        block_n, head_dim_v, None)
                    T.copy(layout.rows(V, lay, bz, kvh, k0, block_n), v_s)
                    T.gemm(p_cast, v_s, acc_o, policy=T.GemmWarpPolicy.FullRow)

            blocks.normalize(acc_o, denom, block_m, head_dim_v)
            for i in T.Parallel(block_m):
                lse_f[i] = T.if_then_else(row_max[i] == neg_inf, neg_inf, (T.log2(denom[i]) + row_max[i]) / LOG2E)
            T.copy(acc_o, o_s)
            T.copy(o_s, layout.rows(Out, lay, bz, by, q0, block_m))
            T.copy(lse_f, Lse[bz, by, q0:q0 + block_m])

    return main


def backward(heads, kv_heads, head_dim, head_dim_v, dtype, mask_per_batch, mask_per_head, bias, lay,
             block_m, block_n, num_stages, threads, variant):
    """dQ (fp32 atomics into the fragment-matched accumulator, as bwd.py), dK/dV (fp32 atomics
    per KV head) and dBias (fp32 atomics into [mb, mh, seq_q, seq_k]: broadcast dims summed)."""
    from harness.kernels import bwd

    if variant not in VARIANTS:
        raise ValueError(f"masked has no variant {variant!r}")
    mvec, bvec = vec(variant, MASK), vec(variant, dtype)
    batch, seq_q, seq_k = T.symbolic("batch"), T.symbolic("seq_q"), T.symbolic("seq_k")
    seq_q_acc = T.symbolic("seq_q_acc")
    mask_chunks, bias_chunks = T.symbolic("mask_chunks"), T.symbolic("bias_chunks")
    q_blocks, k_blocks = T.symbolic("q_blocks"), T.symbolic("k_blocks")
    mb, mh = _dims(mask_per_batch, mask_per_head, batch, heads)
    sm_scale, scale = blocks.backward_scales(head_dim)
    q_shape, do_shape, k_shape, v_shape = blocks.operand_shapes(lay, batch, seq_q, seq_k, heads, kv_heads, head_dim,
                                                                head_dim_v)
    dq_shape = layout.shape(lay, batch, seq_q_acc, heads, head_dim)
    m_shape = mask_shape(mvec, mb, mh, seq_q, seq_k, mask_chunks)
    b_shape = mask_shape(bvec, mb, mh, seq_q, seq_k, bias_chunks)

    @T.prim_func
    def main(
        Q: compat.Tensor(q_shape, dtype),
        K: compat.Tensor(k_shape, dtype),
        V: compat.Tensor(v_shape, dtype),
        dO: compat.Tensor(do_shape, dtype),
        Mask: compat.Tensor(m_shape, MASK),
        Bias: compat.Tensor(b_shape, dtype),
        Active: compat.Tensor([mb, mh, q_blocks, k_blocks], "int32"),
        Lse: compat.Tensor([batch, heads, seq_q], ACCUM),
        Delta: compat.Tensor([batch, heads, seq_q], ACCUM),
        dQ: compat.Tensor(dq_shape, ACCUM),
        dK: compat.Tensor(k_shape, ACCUM),
        dV: compat.Tensor(v_shape, ACCUM),
        dBias: compat.Tensor([mb, mh, seq_q, seq_k], ACCUM),
    ):
        # One block per (key block, query head, batch); it walks the active query blocks.
        with T.Kernel(T.ceildiv(seq_k, block_n), heads, batch, threads=threads) as (bx, by, bz):
            k_s = T.alloc_shared([block_n, head_dim], dtype)
            v_s = T.alloc_shared([block_n, head_dim_v], dtype)
            q_s = T.alloc_shared([block_m, head_dim], dtype)
            do_s = T.alloc_shared([block_m, head_dim_v], dtype)
            mask_s = T.alloc_shared([block_m, block_n], MASK)
            bias_s = T.alloc_shared([block_m, block_n], dtype)
            lse_s = T.alloc_shared([block_m], ACCUM)
            delta_s = T.alloc_shared([block_m], ACCUM)
            ds_s, s_t, dp_t, p_cast, ds_cast, dk_f, dv_f, dq_f = blocks.backward_fragments(
                block_m, block_n, head_dim, head_dim_v, dtype)

            T.annotate_layout({dQ: bwd.dq_layout(dQ, lay)})
            kvh = blocks.kv_head(by, heads, kv_heads)
            b = bz if mask_per_batch else 0
            h = by if mask_per_head else 0
            k0 = bx * block_n
            # Element-wise, not TMA tile copies: those are waited on inside the loop, which a key
            # block no query block sees never enters (codegen.ordering.unwaited_async_loads).
            for j, d in T.Parallel(block_n, head_dim):
                k_s[j, d] = T.if_then_else(k0 + j < seq_k, layout.at(K, lay, bz, kvh, k0 + j, d), 0)
            for j, d in T.Parallel(block_n, head_dim_v):
                v_s[j, d] = T.if_then_else(k0 + j < seq_k, layout.at(V, lay, bz, kvh, k0 + j, d), 0)
            T.clear(dk_f)
            T.clear(dv_f)

            for qb in T.serial(T.ceildiv(seq_q, block_m)):
                if Active[b, h, qb, bx] != 0:
                    q0 = qb * block_m
                    load_tile(mask_s, bias_s, Mask, Bias, mvec, bvec, b, h, q0, k0, seq_q, seq_k, block_m, block_n, bias)
                    T.copy(layout.rows(Q, lay, bz, by, q0, block_m), q_s)
                    T.copy(layout.rows(dO, lay, bz, by, q0, block_m), do_s)
                    # Element-wise: a tile copy becomes a TMA load that needs seq_q * 4 % 16 == 0 (bwd.py).
                    for i in T.Parallel(block_m):
                        lse_s[i] = T.if_then_else(q0 + i < seq_q, Lse[bz, by, q0 + i], 0)
                        delta_s[i] = T.if_then_else(q0 + i < seq_q, Delta[bz, by, q0 + i], 0)
                    blocks.scores_t(k_s, q_s, v_s, do_s, s_t, dp_t)
                    for j, i in T.Parallel(block_n, block_m):
                        # Masked (and out-of-range, cleared) elements: P = 0. A row with no true
                        # element has LSE = -inf, but it is masked everywhere.
                        s_t[j, i] = T.if_then_else(
                            mask_s[i, j] != 0,
                            T.exp2(_biased(s_t[j, i] * scale, bias_s[i, j], bias) - lse_s[i] * LOG2E), 0)
                        dp_t[j, i] = s_t[j, i] * (dp_t[j, i] - delta_s[i])  # dS = dBias
                        ds_cast[j, i] = dp_t[j, i] * sm_scale
                    if bias:
                        for j, i in T.Parallel(block_n, block_m):
                            if q0 + i < seq_q and k0 + j < seq_k:
                                T.atomic_add(dBias[b, h, q0 + i, k0 + j], dp_t[j, i])
                    blocks.dkdv_gemms(s_t, p_cast, ds_cast, q_s, do_s, dk_f, dv_f)
                    blocks.dq_gemm(ds_cast, ds_s, k_s, dq_f)
                    for i, d in T.Parallel(block_m, head_dim):
                        T.atomic_add(layout.at(dQ, lay, bz, by, q0 + i, d), dq_f[i, d])

            T.atomic_add(layout.rows(dK, lay, bz, kvh, k0, block_n), dk_f)
            T.atomic_add(layout.rows(dV, lay, bz, kvh, k0, block_n), dv_f)

    return main
