"""FlashAttention-2 style backward: preprocess (Delta), main kernel, dQ postprocess, sink gradient.

Same static parameters and masking semantics as fwd.py (bottom-right alignment,
shift = seqlen_k - seqlen_q, query i sees key j iff i + shift - left <= j <= i + shift + right,
a bound of -1 is unbounded); sequence lengths and batch are symbolic.

Variants of the main kernel:
  atomic           dQ accumulated in fp32 with element-wise T.atomic_add into a global buffer whose
                   layout is annotated to follow the MMA accumulator fragment (see `dq_layout`);
                   dK/dV accumulated across the heads of a GQA group with atomic adds into fp32.
  atomic_nolayout  the same program without the dQ layout annotation (plain row-major dQ).
  split            dQ as in `atomic`; dK/dV written per query head (no atomics), summed afterwards.
  atomic_tile      as `atomic`, with dQ added by one tile-level T.atomic_add that TileLang plans.
  dq_shared        the loops swapped (see `dq_shared_kernel`): a block owns a query block, adds
                   each key block's dQ into an fp32 shared tile with T.atomic_add and writes dQ
                   once with a plain copy; dK/dV added into fp32 global buffers with atomics;
                   LSE and Delta loaded by tile copies (the other variants load them element-wise).

The fp32 dQ accumulator has its own symbolic length `seq_q_acc` (the run glue passes seqlen_q
rounded up to a multiple of 8) because the fragment layout tiles rows by 8.
"""
import tilelang.language as T

from harness import compat, layout
from harness.kernels import blocks, masking

ACCUM = blocks.ACCUM
PREP_BLOCK = 32    # query rows per preprocess / postprocess block
SINK_THREADS = 128  # sink gradient: threads per block
SINK_ROWS = 512    # ... and query rows per block (4 per thread, so a planner may vectorize)
ROW_TILE = 8       # rows of one MMA accumulator tile (m16n8: two 8x8 tiles per instruction)
VARIANTS = ("atomic", "split", "atomic_nolayout", "atomic_tile", "dq_shared")
FRAGMENT_DQ = ("atomic", "split", "atomic_tile")  # variants whose dQ accumulator follows dq_layout


def dq_layout(buf, lay):
    """Global layout of the fp32 dQ accumulator matching an MMA accumulator fragment.

    The [seq, dim] plane is cut into 8x8 tiles. In an m16n8 accumulator, lane t holds the
    pair (row t // 4, columns 2 * (t % 4) + {0, 1}) of each 8x8 tile, so within a tile the
    element (r, c) goes to position (c % 2) * 32 + 4 * r + c // 2: the 32 lanes of a warp adding
    their first (or second) element touch 32 consecutive floats. The two elements one lane holds
    are 32 floats apart, so a correct vectorized (x2/x4) atomic add is impossible on this layout.
    """
    def tile(row, col):
        return [row // ROW_TILE, col // 8, col % 2, 4 * (row % ROW_TILE) + (col % 8) // 2]

    if lay == "bshd":
        def fn(b, s, h, d):
            r0, c0, e, lane = tile(s, d)
            return [b, r0, h, c0, e, lane]
    else:
        def fn(b, h, s, d):
            r0, c0, e, lane = tile(s, d)
            return [b, h, r0, c0, e, lane]
    return T.Layout(buf.shape, fn)


def preprocess(heads, head_dim_v, dtype, lay):
    """Delta[b, h, i] = sum_d O[b, h, i, d] * dO[b, h, i, d], in fp32."""
    batch = T.symbolic("batch")
    seq_q = T.symbolic("seq_q")
    o_shape = layout.shape(lay, batch, seq_q, heads, head_dim_v)
    blk = PREP_BLOCK

    @T.prim_func
    def prep(
        O: compat.Tensor(o_shape, dtype),
        dO: compat.Tensor(o_shape, dtype),
        Delta: compat.Tensor([batch, heads, seq_q], ACCUM),
    ):
        with T.Kernel(T.ceildiv(seq_q, blk), heads, batch, threads=128) as (bx, by, bz):
            o_f = T.alloc_fragment([blk, head_dim_v], dtype)
            do_f = T.alloc_fragment([blk, head_dim_v], dtype)
            prod = T.alloc_fragment([blk, head_dim_v], ACCUM)
            delta = T.alloc_fragment([blk], ACCUM)
            q0 = bx * blk
            T.copy(layout.rows(O, lay, bz, by, q0, blk), o_f)
            T.copy(layout.rows(dO, lay, bz, by, q0, blk), do_f)
            for i, j in T.Parallel(blk, head_dim_v):
                prod[i, j] = T.Cast(ACCUM, o_f[i, j]) * T.Cast(ACCUM, do_f[i, j])
            T.reduce_sum(prod, delta, dim=1)
            T.copy(delta, Delta[bz, by, q0:q0 + blk])

    return prep


def main_kernel(heads, kv_heads, head_dim, head_dim_v, dtype, left, right, sinks, lay,
                block_m, block_n, num_stages, threads, variant):
    """dQ (fp32, atomic), dK/dV (fp32 atomic per KV head, or per query head in `dtype` for split).

    `sinks` changes nothing here: the forward LSE already holds the sink's mass; it is a
    parameter only so that the static signature matches the forward's.
    """
    if variant not in VARIANTS:
        raise ValueError(f"bwd has no variant {variant!r}")
    if variant == "dq_shared":
        return dq_shared_kernel(heads, kv_heads, head_dim, head_dim_v, dtype, left, right, lay,
                                block_m, block_n, num_stages, threads)
    del sinks
    batch = T.symbolic("batch")
    seq_q = T.symbolic("seq_q")
    seq_k = T.symbolic("seq_k")
    seq_q_acc = T.symbolic("seq_q_acc")
    sm_scale, scale = blocks.backward_scales(head_dim)
    split = variant == "split"
    annotate = variant in FRAGMENT_DQ
    tile_dq = variant == "atomic_tile"
    q_shape, do_shape, k_shape, v_shape = blocks.operand_shapes(lay, batch, seq_q, seq_k, heads, kv_heads, head_dim, head_dim_v)
    dq_shape = layout.shape(lay, batch, seq_q_acc, heads, head_dim)
    grad_heads = heads if split else kv_heads
    grad_dtype = dtype if split else ACCUM
    dk_shape = layout.shape(lay, batch, seq_k, grad_heads, head_dim)
    dv_shape = layout.shape(lay, batch, seq_k, grad_heads, head_dim_v)

    @T.prim_func
    def bwd(
        Q: compat.Tensor(q_shape, dtype),
        K: compat.Tensor(k_shape, dtype),
        V: compat.Tensor(v_shape, dtype),
        dO: compat.Tensor(do_shape, dtype),
        Lse: compat.Tensor([batch, heads, seq_q], ACCUM),
        Delta: compat.Tensor([batch, heads, seq_q], ACCUM),
        dQ: compat.Tensor(dq_shape, ACCUM),
        dK: compat.Tensor(dk_shape, grad_dtype),
        dV: compat.Tensor(dv_shape, grad_dtype),
    ):
        # One block per (key block, query head, batch); it walks the query blocks that can see it.
        with T.Kernel(T.ceildiv(seq_k, block_n), heads, batch, threads=threads) as (bx, by, bz):
            k_s = T.alloc_shared([block_n, head_dim], dtype)
            v_s = T.alloc_shared([block_n, head_dim_v], dtype)
            q_s = T.alloc_shared([block_m, head_dim], dtype)
            do_s = T.alloc_shared([block_m, head_dim_v], dtype)
            lse_s = T.alloc_shared([block_m], ACCUM)
            delta_s = T.alloc_shared([block_m], ACCUM)
            ds_s, s_t, dp_t, p_cast, ds_cast, dk_f, dv_f, dq_f = blocks.backward_fragments(
                block_m, block_n, head_dim, head_dim_v, dtype)

            if annotate:
                T.annotate_layout({dQ: dq_layout(dQ, lay)})

            kvh = blocks.kv_head(by, heads, kv_heads)
            gh = by if split else kvh
            shift = seq_k - seq_q
            k0 = bx * block_n
            T.copy(layout.rows(K, lay, bz, kvh, k0, block_n), k_s)
            T.copy(layout.rows(V, lay, bz, kvh, k0, block_n), v_s)
            T.clear(dk_f)
            T.clear(dv_f)

            # Query blocks holding a row that sees some key of [k0, k0 + block_n): query i sees
            # key j iff j - shift - right <= i <= j - shift + left.
            lo = masking.first_query_block(k0, shift, right, block_m)
            hi = masking.end_query_block(k0, shift, left, block_n, block_m, seq_q)
            for qb in T.Pipelined(lo, T.max(lo, hi), num_stages=num_stages):
                q0 = qb * block_m
                T.copy(layout.rows(Q, lay, bz, by, q0, block_m), q_s)
                T.copy(layout.rows(dO, lay, bz, by, q0, block_m), do_s)
                # Element-wise, not T.copy: a tile copy of these rows becomes a TMA load whose
                # descriptor needs seq_q * 4 bytes to be a multiple of 16, which TileLang cannot
                # check at compile time for a symbolic length and rejects at launch otherwise.
                for i in T.Parallel(block_m):
                    lse_s[i] = T.if_then_else(q0 + i < seq_q, Lse[bz, by, q0 + i], 0)
                    delta_s[i] = T.if_then_else(q0 + i < seq_q, Delta[bz, by, q0 + i], 0)
                blocks.scores_t(k_s, q_s, v_s, do_s, s_t, dp_t)
                blocks.window_p_ds_t(s_t, dp_t, ds_cast, lse_s, delta_s, q0, k0, shift, seq_q, seq_k, left, right, block_m,
                                     block_n, scale, sm_scale)
                blocks.dkdv_gemms(s_t, p_cast, ds_cast, q_s, do_s, dk_f, dv_f)
                blocks.dq_gemm(ds_cast, ds_s, k_s, dq_f)
                if tile_dq:  # one tile-level atomic add: TileLang plans (and may vectorize) it
                    T.atomic_add(layout.rows(dQ, lay, bz, by, q0, block_m), dq_f)
                else:
                    for i, d in T.Parallel(block_m, head_dim):
                        T.atomic_add(layout.at(dQ, lay, bz, by, q0 + i, d), dq_f[i, d])

            blocks.store_dkdv(dk_f, dv_f, layout.rows(dK, lay, bz, gh, k0, block_n),
                              layout.rows(dV, lay, bz, gh, k0, block_n), split)

    return bwd


def dq_shared_kernel(heads, kv_heads, head_dim, head_dim_v, dtype, left, right, lay,
                     block_m, block_n, num_stages, threads):
    """The `dq_shared` main kernel: main_kernel's arguments (dQ row-major, dK/dV fp32 per KV
    head; LSE and Delta padded to seq_q_acc rows and loaded by tile copies), the loops swapped.
    One block per (query block, query head, batch) walks the key blocks its rows see; dQ
    collects in shared memory through T.atomic_add (an atomic into a shared buffer: TileLang
    must not widen it, CUDA has no vector atomics on shared memory) and leaves once, while dK
    and dV, which every query block adds to, go out by global atomics.
    """
    batch = T.symbolic("batch")
    seq_q = T.symbolic("seq_q")
    seq_k = T.symbolic("seq_k")
    seq_q_acc = T.symbolic("seq_q_acc")
    sm_scale, scale = blocks.backward_scales(head_dim)
    q_shape, do_shape, k_shape, v_shape = blocks.operand_shapes(lay, batch, seq_q, seq_k, heads, kv_heads, head_dim, head_dim_v)

    @T.prim_func
    def bwd(
        Q: compat.Tensor(q_shape, dtype),
        K: compat.Tensor(k_shape, dtype),
        V: compat.Tensor(v_shape, dtype),
        dO: compat.Tensor(do_shape, dtype),
        Lse: compat.Tensor([batch, heads, seq_q_acc], ACCUM),
        Delta: compat.Tensor([batch, heads, seq_q_acc], ACCUM),
        dQ: compat.Tensor(layout.shape(lay, batch, seq_q_acc, heads, head_dim), ACCUM),
        dK: compat.Tensor(layout.shape(lay, batch, seq_k, kv_heads, head_dim), ACCUM),
        dV: compat.Tensor(layout.shape(lay, batch, seq_k, kv_heads, head_dim_v), ACCUM),
    ):
        with T.Kernel(T.ceildiv(seq_q, block_m), heads, batch, threads=threads) as (bx, by, bz):
            q_s = T.alloc_shared([block_m, head_dim], dtype)
            do_s = T.alloc_shared([block_m, head_dim_v], dtype)
            k_s = T.alloc_shared([block_n, head_dim], dtype)
            v_s = T.alloc_shared([block_n, head_dim_v], dtype)
            lse_s = T.alloc_shared([block_m], ACCUM)
            delta_s = T.alloc_shared([block_m], ACCUM)
            p_s = T.alloc_shared([block_m, block_n], dtype)
            ds_s = T.alloc_shared([block_m, block_n], dtype)
            dq_s = T.alloc_shared([block_m, head_dim], ACCUM)
            s = T.alloc_fragment([block_m, block_n], ACCUM)     # S, then P
            dp = T.alloc_fragment([block_m, block_n], ACCUM)
            ds_cast = T.alloc_fragment([block_m, block_n], dtype)
            dq_f = T.alloc_fragment([block_m, head_dim], ACCUM)
            dk_f = T.alloc_fragment([block_n, head_dim], ACCUM)
            dv_f = T.alloc_fragment([block_n, head_dim_v], ACCUM)

            kvh = blocks.kv_head(by, heads, kv_heads)
            shift = seq_k - seq_q
            q0 = bx * block_m
            T.copy(layout.rows(Q, lay, bz, by, q0, block_m), q_s)
            T.copy(layout.rows(dO, lay, bz, by, q0, block_m), do_s)
            # Tile copies (TileLang may lower them to 1-D bulk copies): LSE and Delta come padded to
            # seq_q_acc rows, so a row of either is a multiple of 16 bytes, as a TMA descriptor needs.
            T.copy(Lse[bz, by, q0:q0 + block_m], lse_s)
            T.copy(Delta[bz, by, q0:q0 + block_m], delta_s)
            T.clear(dq_s)

            lo = masking.first_key_block(q0, shift, left, block_n)
            hi = masking.end_key_block(q0, shift, right, block_m, block_n, seq_k)
            for kb in T.Pipelined(lo, T.max(lo, hi), num_stages=num_stages):
                k0 = kb * block_n
                T.copy(layout.rows(K, lay, bz, kvh, k0, block_n), k_s)
                T.copy(layout.rows(V, lay, bz, kvh, k0, block_n), v_s)
                T.clear(s)
                T.gemm(q_s, k_s, s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                T.clear(dp)
                T.gemm(do_s, v_s, dp, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                for i, j in T.Parallel(block_m, block_n):
                    s[i, j] = blocks.probability(s[i, j], lse_s[i], q0 + i, k0 + j, shift, seq_q, seq_k, left, right, scale)
                    ds_cast[i, j] = blocks.dscore(s[i, j], dp[i, j], delta_s[i], q0 + i, k0 + j, shift, seq_q, seq_k,
                                                  left, right, sm_scale)
                T.copy(s, p_s)
                T.copy(ds_cast, ds_s)
                T.clear(dv_f)
                T.gemm(p_s, do_s, dv_f, transpose_A=True, policy=T.GemmWarpPolicy.FullRow)
                T.clear(dk_f)
                T.gemm(ds_s, q_s, dk_f, transpose_A=True, policy=T.GemmWarpPolicy.FullRow)
                T.clear(dq_f)
                T.gemm(ds_s, k_s, dq_f, policy=T.GemmWarpPolicy.FullRow)
                T.atomic_add(dq_s, dq_f)
                T.atomic_add(layout.rows(dK, lay, bz, kvh, k0, block_n), dk_f)
                T.atomic_add(layout.rows(dV, lay, bz, kvh, k0, block_n), dv_f)

            T.copy(dq_s, layout.rows(dQ, lay, bz, by, q0, block_m))

    return bwd


def postprocess(heads, head_dim, dtype, lay, annotate):
    """dQ (dtype, the kernel layout) from the fp32 accumulator (fragment layout when `annotate`)."""
    batch = T.symbolic("batch")
    seq_q = T.symbolic("seq_q")
    seq_q_acc = T.symbolic("seq_q_acc")
    blk = PREP_BLOCK

    @T.prim_func
    def post(
        dQacc: compat.Tensor(layout.shape(lay, batch, seq_q_acc, heads, head_dim), ACCUM),
        dQ: compat.Tensor(layout.shape(lay, batch, seq_q, heads, head_dim), dtype),
    ):
        with T.Kernel(T.ceildiv(seq_q, blk), heads, batch, threads=128) as (bx, by, bz):
            if annotate:
                T.annotate_layout({dQacc: dq_layout(dQacc, lay)})
            q0 = bx * blk
            T.copy(layout.rows(dQacc, lay, bz, by, q0, blk), layout.rows(dQ, lay, bz, by, q0, blk))

    return post


def sink_grad(heads):
    """dSinks[h] = -sum over batch and query rows of exp(sink[h] - LSE) * Delta.

    The sink is one more logit with no value row: its probability is exp(sink - LSE) and
    dlogit = p * (dP - Delta) with dP = 0. One block per (head, row block, batch); every row
    adds its term to dSinks[h] with an element-wise atomic add, so all lanes of the loop target
    one address (the destination is invariant: a vectorized AtomicAddxN here is wrong).
    dSinks must be zeroed before the launch.
    """
    batch = T.symbolic("batch")
    seq_q = T.symbolic("seq_q")

    @T.prim_func
    def sink(
        Lse: compat.Tensor([batch, heads, seq_q], ACCUM),
        Delta: compat.Tensor([batch, heads, seq_q], ACCUM),
        Sinks: compat.Tensor([heads], ACCUM),
        dSinks: compat.Tensor([heads], ACCUM),
    ):
        with T.Kernel(heads, T.ceildiv(seq_q, SINK_ROWS), batch, threads=SINK_THREADS) as (bx, by, bz):
            term = T.alloc_fragment([SINK_ROWS], ACCUM)
            for i in T.Parallel(SINK_ROWS):
                qi = by * SINK_ROWS + i
                term[i] = T.if_then_else(qi < seq_q, -T.exp(Sinks[bx] - Lse[bz, bx, qi]) * Delta[bz, bx, qi], 0)
            for i in T.Parallel(SINK_ROWS):
                T.atomic_add(dSinks[bx], term[i])

    return sink
