# 752120de86bc's codegen failure with default pass configs, as generated program 498e9b4ce38d shows it (compile-only)
"""498e9b4ce38d: A T.Pipelined(T.ceildiv(n, 128), num_stages=3) loop whose T.copy converts a bfloat16
tile into a float16 shared buffer (no TMA, so no warp specialization) fails in CUDA codegen with
default pass configs: 'Downcast from tirx.Sub to ir.IntImm failed.' (752120de86bc's bug); a float16
source, or num_stages=1, compiles.  Recorded on TileLang 0.1.15 (none (compile-only: numerics need a
GPU)): COMPILE_ERROR TypeError: Downcast from tirx.Sub to ir.IntImm failed.

    python THIS_FILE   # REPRODUCED (exit 1) or NOT REPRODUCED (exit 0)
"""
import sys

import tilelang
import tilelang.language as T
import torch

n = T.symbolic("n")


@T.prim_func
def program(G2: T.Tensor((n, 64), "float16"), G5: T.Tensor((n, 32), "bfloat16"), G6: T.Tensor((n, 32), "float32")):
    with T.Kernel(T.ceildiv(n, 128), threads=256) as bx:
        S1 = T.alloc_shared((128, 64), "float16")
        F3 = T.alloc_fragment((128, 32), "float32")
        S4 = T.alloc_shared((64, 32), "float16")
        T.annotate_layout({S1: tilelang.layout.make_swizzled_layout(S1)})
        T.copy(G2[bx * 128 + 3, 0], S1)
        T.clear(F3)
        for k in T.Pipelined(T.ceildiv(n, 128), num_stages=3):
            T.copy(G5[k * 128 + 3, 0], S4)
            T.gemm(S1, S4, F3, clear_accum=True)
        T.copy(F3, G6[bx * 128 + 0, 0])



if __name__ == "__main__":
    sm90 = tilelang.tvm.target.Target({"kind": "cuda", "arch": "sm_90a"})
    target = "auto" if torch.cuda.is_available() else sm90
    try:
        tilelang.compile(program, target=target, pass_configs={})
    except Exception as e:
        said = 'Downcast from tirx.Sub to ir.IntImm failed.'
        print('REPRODUCED:' if said in str(e) else 'NOT REPRODUCED, another error:', type(e).__name__, said)
        sys.exit(1 if said in str(e) else 0)
    print('NOT REPRODUCED: it compiles')
