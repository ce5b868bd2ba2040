"""bc6951c4d309 without the harness: `python reproducers/compiler/bc6951c4d309.standalone.py [threads]`.

A block of 256 threads clears a 64x64 fp32 shared tile, then runs a pipelined loop of TMA loads.
Warp specialization adds a 128-thread producer, and the clear (outside the loop) is then planned
over all 384 threads: 4096 elements do not split evenly over 384, and layout inference fails
("Index mapping does not form a bijective transform"). With 128 threads (256 in all) it compiles,
and with warp specialization off (TL_DISABLE_WARP_SPECIALIZED) 256 threads compile too.
Compile-only: no GPU needed (target sm_90a).
"""
import sys

import tilelang
import tilelang.language as T
import tvm

THREADS = int(sys.argv[1]) if len(sys.argv) > 1 else 256
n = T.symbolic("n")


@T.prim_func
def kernel(A: T.Tensor([n, 64], "float16"), B: T.Tensor([n, 64], "float32")):
    with T.Kernel(T.ceildiv(n, 64), threads=THREADS) as bx:
        a_s = T.alloc_shared([64, 64], "float16")
        acc = T.alloc_shared([64, 64], "float32")
        T.clear(acc)
        for _ in T.Pipelined(0, 4, num_stages=1):
            T.copy(A[bx * 64, 0], a_s)
            for i, j in T.Parallel(64, 64):
                acc[i, j] += a_s[i, j]
        T.copy(acc, B[bx * 64, 0])


tilelang.compile(kernel, target=tvm.target.Target({"kind": "cuda", "arch": "sm_90a"}))
print(f"{THREADS} threads: compiled")
