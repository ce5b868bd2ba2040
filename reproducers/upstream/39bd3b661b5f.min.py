# 39bd3b661b5f: a shared tile the pipeline versions, loaded and read again after the loop, fails an internal check
"""B_s is loaded in every trip of a T.Pipelined(4, num_stages=3) loop that feeds it to T.gemm; after the loop it is
loaded once more and copied out. The pipeline gives B_s versions, and the load after the loop is a versioned
buffer access outside any stage: 'Check failed: (version_index.defined()) is false: Versioned buffer load escaped
pipeline stage context'. Without the use after the loop, or at num_stages 1 or 0, it compiles; with or without
a swizzled layout on A_s alike. Recorded on TileLang 0.1.15 (compile-only, sm_90a); found by a generated program.

    python THIS_FILE   # REPRODUCED (exit 1) or NOT REPRODUCED (exit 0)
"""
import sys

import tilelang
import tilelang.language as T
import torch


def make(use_after=True, stages=3):
    @T.prim_func
    def program(A: T.Tensor((128, 64), "bfloat16"), B: T.Tensor((512, 64), "bfloat16"), C: T.Tensor((128, 128), "float32"),
                D: T.Tensor((128, 64), "bfloat16")):
        with T.Kernel(1, threads=128):
            A_s = T.alloc_shared((128, 64), "bfloat16")
            B_s = T.alloc_shared((128, 64), "bfloat16")
            acc = T.alloc_fragment((128, 128), "float32")
            T.copy(A, A_s)
            T.clear(acc)
            for k in T.Pipelined(4, num_stages=stages):
                T.copy(B[k * 128, 0], B_s)
                T.gemm(A_s, B_s, acc, transpose_B=True)
            if use_after:  # B_s used again after the loop
                T.copy(B[0, 0], B_s)
                T.copy(B_s, D)
            T.copy(acc, C)
    return program


if __name__ == "__main__":
    target = "auto" if torch.cuda.is_available() else tilelang.tvm.target.Target({"kind": "cuda", "arch": "sm_90a"})
    for label, kw in (("no use after the loop", {"use_after": False}), ("num_stages=1", {"stages": 1})):
        tilelang.compile(make(**kw), target=target)
        print(f"control, {label}: compiles")
    said = "Versioned buffer load escaped pipeline stage context"
    try:
        tilelang.compile(make(), target=target)
    except Exception as e:
        print("REPRODUCED:" if said in str(e) else "NOT REPRODUCED, another error:", type(e).__name__, said)
        sys.exit(1 if said in str(e) else 0)
    print("NOT REPRODUCED: it compiles")
