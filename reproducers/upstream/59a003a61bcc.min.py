# 59a003a61bcc: fwd, TileLang 0.1.15: a sliding-window forward (window (64, 17), tile 128x64, 2 stages, 256
# threads) whose mask is nested T.if_then_else selects fails to compile: ThreadSync 'cannot lower a required
# shared-memory sync inside a divergent region with 165 participating threads'
# Reduced by harness reduce: python THIS_FILE prints REPRODUCED (exit 1) while the bug is here.
import sys

import tilelang
import tilelang.language as T

try:
    seq_q = T.symbolic("seq_q")
    seq_k = T.symbolic("seq_k")

    @T.prim_func
    def main(
        K: T.Tensor([T.symbolic("batch"), 2, seq_k, 64], "float16"),
        Out: T.Tensor([T.symbolic("batch"), 2, seq_q, 64], "float16"),
    ):
        with T.Kernel(T.ceildiv(seq_q, 128), 2, T.symbolic("batch"), threads=256) as (bx, by, bz):
            acc_s, _p_cast, acc_o, _row_max, _row_max_prev, _row_scale, _row_sum, _denom, _lse_f = (
                T.alloc_fragment([128, 64], "float32"),
                [128, 64],
                T.alloc_fragment([128, 64], "float32"),
                *([128] for _ in range(6)),
            )
            q0 = bx * 128
            for kb in T.Pipelined(
                64,
                T.max(
                    T.max(0, T.floordiv(q0 + (seq_k - seq_q) - 64, 64)),
                    T.max(0, T.min(T.ceildiv(seq_k, 64), T.ceildiv(q0 + 128 + (seq_k - seq_q) + 17, 64))),
                ),
                num_stages=2,
            ):
                T.copy(K[bz, by, kb * 64 : kb * 64 + 64, :], T.alloc_shared([64, 64], "float16"))
                for i, j in T.Parallel(128, 64):
                    acc_s[i, j] = T.if_then_else(
                        kb * 64 + j <= q0 + i + (seq_k - seq_q) + 17,
                        T.if_then_else(64 + j < seq_k, acc_s[i, j], T.infinity("float32")),
                        T.infinity("float32"),
                    )
            T.copy(acc_o, T.alloc_shared([128, 64], "float16"))
            T.copy(T.alloc_shared([128, 64], "float16"), Out[bz, by, q0 : q0 + 128, :])

    tilelang.compile(main, target={"kind": "cuda", "arch": "sm_90a"})
except Exception as e:
    said = "[ThreadSync] Cannot lower a required shared-memory sync inside a divergent region with"
    print("REPRODUCED:" if said in str(e) else "NOT REPRODUCED, another error:", type(e).__name__, said)
    sys.exit(1 if said in str(e) else 0)
