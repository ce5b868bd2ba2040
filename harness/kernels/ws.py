"""Warp-specialized attention forward with explicit mbarriers (sm_90): what fwd.py leaves to
TileLang's pipeliner is written out by hand here.

The block's last warpgroup is the producer: it loads each K/V tile with TMA into one of
`num_stages` shared slots. The warpgroups before it are consumers: they compute on a slot and
hand it back. Two mbarriers per slot: `full[s]` completes when the slot's K and V landed (one
elected producer thread arrives after posting the byte count), `empty[s]` when every consumer
thread is done reading it. Every slot starts empty: the consumers arrive on each `empty[s]`
once before the loop (priming), so the producer's n-th use of slot s waits for phase n of
`empty[s]` and the consumer's n-th use waits for phase n of `full[s]`: parity (it // stages) & 1
on both sides. Both roles run the same trip count, which may be 0 (a query block that sees no
key), so neither waits for the other past the loop.

`backward` is the dQ/dK/dV main kernel in the same style: one block per key block, its producer
streams the (Q, dO) tiles of the query blocks that see those keys through the ring.

Epilogue variants of the forward (the O and LSE stores, consumers only):
  smem          O through a row-major shared tile, stored by the threads; LSE as a tile copy
  smem_swizzle  O through a swizzled shared tile, stored by the threads; LSE element-wise
  direct        O and LSE element-wise from registers
  tma           O through a swizzled shared tile and one TMA store; LSE as a tile copy
"""
import tilelang.language as T
from tilelang.layout import make_linear_layout, make_swizzled_layout

from harness import compat, layout
from harness.kernels import blocks, bwd, masking

PRODUCER_THREADS = 128
VARIANTS = ("smem", "smem_swizzle", "direct", "tma")
BWD_VARIANTS = ("atomic", "split")  # as bwd.py's: dK/dV atomic per KV head, or per query head


def program(heads, kv_heads, head_dim, head_dim_v, dtype, left, right, sinks, layout_name,
            block_m, block_n, num_stages, threads, variant="smem", primed=None, forms=()):
    """`threads` counts the consumers and the one producer warpgroup. `primed`: how many slots
    the consumers hand over before the loop (all of them; fewer only in a test double). `forms`:
    the consumer's softmax blocks in other forms (blocks.softmax_forms)."""
    mask_init, fresh_max, merged = blocks.softmax_forms(forms)
    if variant not in VARIANTS:
        raise ValueError(f"ws has no variant {variant!r}")
    stages = num_stages
    primed = stages if primed is None else primed
    consumers = threads - PRODUCER_THREADS
    batch = T.symbolic("batch")
    seq_q = T.symbolic("seq_q")
    seq_k = T.symbolic("seq_k")
    scale = blocks.forward_scale(head_dim)
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
            k_s = T.alloc_shared([stages, block_n, head_dim], dtype)
            v_s = T.alloc_shared([stages, block_n, head_dim_v], dtype)
            o_s = T.alloc_shared([block_m, head_dim_v], dtype)
            acc_s, p_cast, acc_o, row_max, row_max_prev, row_scale, row_sum, denom, lse_f = blocks.softmax_fragments(
                block_m, block_n, head_dim_v, dtype)
            full = T.alloc_barrier([1] * stages)
            empty = T.alloc_barrier([consumers] * stages)
            if variant == "smem":
                T.annotate_layout({o_s: make_linear_layout(o_s)})
            else:
                T.annotate_layout({o_s: make_swizzled_layout(o_s)})

            tx = T.get_thread_binding()
            kvh = blocks.kv_head(by, heads, kv_heads)
            shift = seq_k - seq_q
            q0 = bx * block_m
            lo = masking.first_key_block(q0, shift, left, block_n)
            trips = T.max(masking.end_key_block(q0, shift, right, block_m, block_n, seq_k) - lo, 0)

            if tx >= consumers:
                for it in T.serial(trips):
                    st = it % stages
                    k0 = (lo + it) * block_n
                    T.mbarrier_wait_parity(empty[st], (it // stages) & 1)
                    T.tma_copy(layout.rows(K, lay, bz, kvh, k0, block_n), k_s[st, :, :], barrier=full[st])
                    T.tma_copy(layout.rows(V, lay, bz, kvh, k0, block_n), v_s[st, :, :], barrier=full[st])
                    if T.shuffle_elect(PRODUCER_THREADS):
                        T.barrier_arrive(full[st])
            else:
                for s in T.unroll(primed):
                    T.barrier_arrive(empty[s])
                T.copy(layout.rows(Q, lay, bz, by, q0, block_m), q_s)
                blocks.softmax_init(acc_o, denom, row_max)
                for it in T.serial(trips):
                    st = it % stages
                    k0 = (lo + it) * block_n
                    T.mbarrier_wait_parity(full[st], (it // stages) & 1)
                    blocks.window_scores(q_s, k_s[st, :, :], acc_s, q0, k0, shift, seq_k, left, right, block_m, block_n,
                                         mask_init=mask_init)
                    blocks.softmax_step(acc_s, p_cast, acc_o, row_max, row_max_prev, row_scale, row_sum, denom, block_m,
                                        block_n, head_dim_v, scale, fresh_max=fresh_max, merged=merged)
                    T.gemm(p_cast, v_s[st, :, :], acc_o, policy=T.GemmWarpPolicy.FullRow)
                    T.barrier_arrive(empty[st])

                if sinks:
                    for i in T.Parallel(block_m):
                        denom[i] += blocks.sink_mass(Sinks[by], row_max[i], scale)
                blocks.forward_epilogue(acc_o, denom, row_max, lse_f, block_m, head_dim_v, scale)
                if variant == "direct":
                    for i, j in T.Parallel(block_m, head_dim_v):
                        if q0 + i < seq_q:
                            if lay == "bshd":
                                Out[bz, q0 + i, by, j] = acc_o[i, j]
                            else:
                                Out[bz, by, q0 + i, j] = acc_o[i, j]
                elif variant == "tma":
                    T.copy(acc_o, o_s)
                    T.tma_copy(o_s, layout.rows(Out, lay, bz, by, q0, block_m))
                    T.tma_store_wait()
                else:
                    T.copy(acc_o, o_s)
                    # Not TMA: TileLang would lower this copy to the `tma` variant's store.
                    T.copy(o_s, layout.rows(Out, lay, bz, by, q0, block_m), disable_tma=True)
                if variant in ("direct", "smem_swizzle"):
                    for i in T.Parallel(block_m):
                        if q0 + i < seq_q:
                            Lse[bz, by, q0 + i] = lse_f[i]
                else:
                    T.copy(lse_f, Lse[bz, by, q0:q0 + block_m])

    return main


def backward(heads, kv_heads, head_dim, head_dim_v, dtype, left, right, lay, block_m, block_n, num_stages, threads,
             variant):
    """bwd.main_kernel's signature and results (dQ through the fragment-matched fp32 layout; dK/dV
    atomic per KV head, or per query head for `split`), with the query side streamed by a
    producer warpgroup: same ring protocol as the forward."""
    if variant not in BWD_VARIANTS:
        raise ValueError(f"ws_bwd has no variant {variant!r}")
    stages = num_stages
    consumers = threads - PRODUCER_THREADS
    batch = T.symbolic("batch")
    seq_q = T.symbolic("seq_q")
    seq_k = T.symbolic("seq_k")
    seq_q_acc = T.symbolic("seq_q_acc")
    sm_scale, scale = blocks.backward_scales(head_dim)
    split = variant == "split"
    accum = blocks.ACCUM
    grad_heads, grad_dtype = (heads, dtype) if split else (kv_heads, accum)
    q_shape, do_shape, k_shape, v_shape = blocks.operand_shapes(lay, batch, seq_q, seq_k, heads, kv_heads, head_dim,
                                                                head_dim_v)

    @T.prim_func
    def main(
        Q: compat.Tensor(q_shape, dtype),
        K: compat.Tensor(k_shape, dtype),
        V: compat.Tensor(v_shape, dtype),
        dO: compat.Tensor(do_shape, dtype),
        Lse: compat.Tensor([batch, heads, seq_q], accum),
        Delta: compat.Tensor([batch, heads, seq_q], accum),
        dQ: compat.Tensor(layout.shape(lay, batch, seq_q_acc, heads, head_dim), accum),
        dK: compat.Tensor(layout.shape(lay, batch, seq_k, grad_heads, head_dim), grad_dtype),
        dV: compat.Tensor(layout.shape(lay, batch, seq_k, grad_heads, head_dim_v), grad_dtype),
    ):
        with T.Kernel(T.ceildiv(seq_k, block_n), heads, batch, threads=threads) as (bx, by, bz):
            k_s = T.alloc_shared([block_n, head_dim], dtype)
            v_s = T.alloc_shared([block_n, head_dim_v], dtype)
            q_s = T.alloc_shared([stages, block_m, head_dim], dtype)
            do_s = T.alloc_shared([stages, block_m, head_dim_v], dtype)
            ds_s, s_t, dp_t, p_cast, ds_cast, dk_f, dv_f, dq_f = blocks.backward_fragments(
                block_m, block_n, head_dim, head_dim_v, dtype)
            full = T.alloc_barrier([1] * stages)
            empty = T.alloc_barrier([consumers] * stages)
            T.annotate_layout({dQ: bwd.dq_layout(dQ, lay)})

            tx = T.get_thread_binding()
            kvh = blocks.kv_head(by, heads, kv_heads)
            gh = by if split else kvh
            shift = seq_k - seq_q
            k0 = bx * block_n
            lo = masking.first_query_block(k0, shift, right, block_m)
            trips = T.max(masking.end_query_block(k0, shift, left, block_n, block_m, seq_q) - lo, 0)

            if tx >= consumers:
                for it in T.serial(trips):
                    st = it % stages
                    q0 = (lo + it) * block_m
                    T.mbarrier_wait_parity(empty[st], (it // stages) & 1)
                    T.tma_copy(layout.rows(Q, lay, bz, by, q0, block_m), q_s[st, :, :], barrier=full[st])
                    T.tma_copy(layout.rows(dO, lay, bz, by, q0, block_m), do_s[st, :, :], barrier=full[st])
                    if T.shuffle_elect(PRODUCER_THREADS):
                        T.barrier_arrive(full[st])
            else:
                for s in T.unroll(stages):
                    T.barrier_arrive(empty[s])
                T.copy(layout.rows(K, lay, bz, kvh, k0, block_n), k_s)
                T.copy(layout.rows(V, lay, bz, kvh, k0, block_n), v_s)
                T.clear(dk_f)
                T.clear(dv_f)
                for it in T.serial(trips):
                    st = it % stages
                    q0 = (lo + it) * block_m
                    T.mbarrier_wait_parity(full[st], (it // stages) & 1)
                    blocks.scores_t(k_s, q_s[st, :, :], v_s, do_s[st, :, :], s_t, dp_t)
                    for j, i in T.Parallel(block_n, block_m):
                        # Rows past seq_q read row seq_q - 1 (in bounds) and are zeroed.
                        qi = T.min(q0 + i, seq_q - 1)
                        s_t[j, i] = masking.visible(
                            T.if_then_else(q0 + i < seq_q, T.exp2(s_t[j, i] * scale - Lse[bz, by, qi] * blocks.LOG2E), 0),
                            0, q0 + i, k0 + j, shift, seq_k, left, right)
                        ds_cast[j, i] = masking.visible(
                            T.if_then_else(q0 + i < seq_q, s_t[j, i] * (dp_t[j, i] - Delta[bz, by, qi]) * sm_scale, 0),
                            0, q0 + i, k0 + j, shift, seq_k, left, right)
                    blocks.dkdv_gemms(s_t, p_cast, ds_cast, q_s[st, :, :], do_s[st, :, :], dk_f, dv_f)
                    T.barrier_arrive(empty[st])  # the slot's Q and dO are read for the last time above
                    blocks.dq_gemm(ds_cast, ds_s, k_s, dq_f)
                    for i, d in T.Parallel(block_m, head_dim):
                        T.atomic_add(layout.at(dQ, lay, bz, by, q0 + i, d), dq_f[i, d])
                blocks.store_dkdv(dk_f, dv_f, layout.rows(dK, lay, bz, gh, k0, block_n),
                                  layout.rows(dV, lay, bz, gh, k0, block_n), split)

    return main
