"""A warp-specialized T.Pipelined(num_stages=2) loop computes P = Q K^T and acc += P V per key block. V's tile is
written by a guarded T.Parallel loop (the producer's threads write it), K's by a TMA copy. The consumers release the
stage's shared memory after the first T.gemm, before the second T.gemm has read V, so the producer overwrites V too
early: O is wrong. Inputs are small integers, so every sum is exact and O must equal the float64 result exactly.

    python repro.py                  # on an sm_90 GPU: REPRODUCED (exit 1) while O is wrong; else exit 0
    python repro.py --control NAME   # the same program with one change (the names: CONTROLS below)
"""
import argparse
import sys

import tilelang
import tilelang.language as T
import torch

CONTROLS = {
    "zero-stages": "num_stages=0 (no pipelining, no warp specialization)",
    "one-stage": "num_stages=1",
    "no-warp-specialization": "pass config TL_DISABLE_WARP_SPECIALIZED=True",
    "cuda": "compile only: the generated CUDA's loops, barrier waits and arrives, and the accesses to V",
}
CONFIGS = {"no-warp-specialization": {tilelang.PassConfigKey.TL_DISABLE_WARP_SPECIALIZED: True}}
n = T.symbolic("n")


def build(stages):
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


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--control", choices=sorted(CONTROLS))
    control = parser.parse_args().control
    tilelang.set_log_level("WARNING")
    stages = {"zero-stages": 0, "one-stage": 1}.get(control, 2)
    if control == "cuda":
        sm90 = tilelang.tvm.target.Target({"kind": "cuda", "arch": "sm_90a"})
        for i, line in enumerate(tilelang.compile(build(stages), target=sm90).get_kernel_source().splitlines()):
            if any(k in line for k in ("for (int k", "mbarrier[", "mbarrier_cp_async_arrive", "*)V)")):
                print(f"{i + 1:4d}: {line.strip()[:150]}")
        sys.exit(0)
    if not torch.cuda.is_available():
        print("no GPU here: this check runs the kernel (sm_90)")
        sys.exit(125)
    try:
        kernel = tilelang.compile(build(stages), pass_configs=CONFIGS.get(control, {}))
    except Exception as e:
        print(f"does not compile: {type(e).__name__}: {str(e).strip().splitlines()[-1]}")
        sys.exit(125)
    N = 130
    x = torch.randint(-2, 3, (N, 32), generator=torch.Generator().manual_seed(0)).to(torch.bfloat16)
    xs = torch.zeros(192, 32, dtype=torch.float64)
    xs[:N] = x.double()  # rows past n read as 0
    want = torch.zeros(192, 32, dtype=torch.float64)
    for b in range(3):  # small integers: every sum below is exact in float32 and in bfloat16's P
        for k in range(3):
            p = (xs[b * 64 : b * 64 + 64] @ xs[k * 64 : k * 64 + 64].T).to(torch.bfloat16).double()
            want[b * 64 : b * 64 + 64] += p @ xs[k * 64 : k * 64 + 64]
    o = torch.zeros(N, 32, device="cuda")
    kernel(x.cuda(), o)
    error = (o.cpu().double() - want[:N]).abs().max().item()
    print(f"num_stages={stages}: max |O - expected| = {error}")
    print("REPRODUCED" if error > 0 else "NOT REPRODUCED")
    sys.exit(1 if error > 0 else 0)


if __name__ == "__main__":
    main()
