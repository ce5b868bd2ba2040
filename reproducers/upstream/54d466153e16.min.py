# 54d466153e16: a warp-specialized T.Pipelined loop that runs zero times never waits for the TMA load of q_s
# issued before it; the load lands after the epilogue wrote o_s (which shares q_s's shared memory), and rows
# whose loop is empty get Q's values where they must be 0. With warp specialization off they are 0.
import sys

import tilelang
import tilelang.language as T
import torch

m, n = T.symbolic("m"), T.symbolic("n")


@T.prim_func
def program(Q: T.Tensor((m, 32), "float16"), K: T.Tensor((n, 32), "float16"), O: T.Tensor((m, 32), "float16")):
    with T.Kernel(T.ceildiv(m, 64), threads=128) as bx:
        q_s = T.alloc_shared((64, 32), "float16")
        k_s = T.alloc_shared((64, 32), "float16")
        o_s = T.alloc_shared((64, 32), "float16")
        s = T.alloc_fragment((64, 64), "float32")
        p = T.alloc_fragment((64, 64), "float16")
        acc = T.alloc_fragment((64, 32), "float32")
        T.copy(Q[bx * 64, 0], q_s)
        T.clear(acc)
        # key blocks up to the block's last row, keys aligned to the end of the queries: 0 for most blocks
        for kb in T.Pipelined(T.max(0, T.min(T.ceildiv(n, 64), T.ceildiv(bx * 64 + 64 + n - m, 64))), num_stages=1):
            T.copy(K[kb * 64, 0], k_s)
            T.gemm(q_s, k_s, s, transpose_B=True, clear_accum=True)
            T.copy(s, p)
            T.gemm(p, k_s, acc)
        T.copy(acc, o_s)
        T.copy(o_s, O[bx * 64, 0])


M, N = 8193, 1  # blocks 0-126 run the loop zero times: their 8128 rows of O must be 0
q = torch.randn(M, 32, dtype=torch.float16, device="cuda")
k = torch.randn(N, 32, dtype=torch.float16, device="cuda")
nonzero = {}
for ws in (True, False):
    kernel = tilelang.compile(program, pass_configs={"tl.disable_warp_specialized": not ws})
    o = torch.zeros(M, 32, dtype=torch.float16, device="cuda")
    bad = 0
    for _ in range(20):
        o.fill_(0)
        kernel(q, k, o)
        bad = max(bad, int((o[:8128] != 0).any(dim=1).sum()))
    nonzero[f"warp specialization {'on' if ws else 'off'}"] = bad
print("rows of 8128 that must be 0 but are not (worst of 20 launches):", nonzero)
bug = nonzero["warp specialization on"] > 0 and nonzero["warp specialization off"] == 0
print("REPRODUCED" if bug else "NOT REPRODUCED")
sys.exit(1 if bug else 0)
