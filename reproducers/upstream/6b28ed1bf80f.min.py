# 6b28ed1bf80f: WS moves a loop's atomic of a gemm result into the producer: wgmma refuses the cloned 'local' A
# Reduced by harness reduce: python THIS_FILE prints REPRODUCED (exit 1) while the bug is here.
import sys

import tilelang
import tilelang.language as T

n = T.symbolic("n")


@T.prim_func
def program(G4: T.Tensor((n, 32), "float16"), G7: T.Tensor((128, 128), "float32")):
    with T.Kernel(n):
        F1 = T.alloc_fragment((128, 32), "float16")
        F5 = T.alloc_fragment((128, 128), "float32")
        S8 = T.alloc_shared((32, 32), "float16")
        T.gemm(F1, T.alloc_shared((128, 32), "float16"), F5, transpose_B=True)
        for k in T.Pipelined(1, num_stages=1):
            for i, j in T.Parallel(128, 128):
                T.atomic_min(G7[0, 0], F5[i, j])
            T.copy(G4[k, 0], S8)
            T.gemm(F1, S8, T.alloc_fragment((128, 32), "float32"))


try:
    tilelang.compile(program, target={"kind": "cuda", "arch": "sm_90a"})
except Exception as e:
    said = "Unsupported gemm combination for wgmma, A: local, B: shared.dyn"
    print("REPRODUCED:" if said in str(e) else "NOT REPRODUCED, another error:", type(e).__name__, said)
    sys.exit(1 if said in str(e) else 0)
