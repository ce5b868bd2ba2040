# be71d6527dc3: a shared tile written by a T.Parallel loop and read by T.gemm in the same iteration of a
# warp-specialized T.Pipelined loop gives wrong results with num_stages=2; with num_stages=0 it is right.
import sys

import tilelang
import tilelang.language as T
import torch

n = T.symbolic("n")


def make(stages):
    @T.prim_func
    def program(X: T.Tensor((n, 32), "bfloat16"), O: T.Tensor((n, 32), "float32")):
        with T.Kernel(T.ceildiv(n, 64), threads=128) as bx:
            Q = T.alloc_shared((64, 32), "bfloat16")
            K = T.alloc_shared((64, 32), "bfloat16")
            V = T.alloc_shared((64, 32), "bfloat16")
            S = T.alloc_fragment((64, 64), "float32")
            P = T.alloc_shared((64, 64), "bfloat16")
            acc = T.alloc_fragment((64, 32), "float32")
            T.copy(X[bx * 64, 0], Q)
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(n, 64), num_stages=stages):
                T.copy(X[k * 64, 0], K)
                for i, j in T.Parallel(64, 32):  # the same tile as K, by a guarded element loop
                    V[i, j] = T.if_then_else(k * 64 + i < n, X[k * 64 + i, j], T.cast(0, "bfloat16"))
                T.gemm(Q, K, S, transpose_B=True, clear_accum=True)
                T.copy(S, P)
                T.gemm(P, V, acc)
            T.copy(acc, O[bx * 64, 0])

    return program


N = 130
x = torch.randint(-2, 3, (N, 32), generator=torch.Generator().manual_seed(0)).to(torch.bfloat16)
xs = torch.zeros(192, 32, dtype=torch.float64)
xs[:N] = x.double()  # rows past n read as 0
want = torch.zeros(192, 32, dtype=torch.float64)
for b in range(3):  # small integers: every sum below is exact in float32 and in bfloat16's P
    for k in range(3):
        p = (xs[b * 64 : b * 64 + 64] @ xs[k * 64 : k * 64 + 64].T).to(torch.bfloat16).double()
        want[b * 64 : b * 64 + 64] += p @ xs[k * 64 : k * 64 + 64]
errors = {}
for stages in (2, 0):
    o = torch.zeros(N, 32, device="cuda")
    tilelang.compile(make(stages))(x.cuda(), o)
    errors[f"num_stages={stages}"] = (o.cpu().double() - want[:N]).abs().max().item()
print("max |O - expected|:", errors)
bad = errors["num_stages=2"] > 0 and errors["num_stages=0"] == 0
print("REPRODUCED" if bad else "NOT REPRODUCED")
sys.exit(1 if bad else 0)
