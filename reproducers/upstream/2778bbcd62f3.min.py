# 2778bbcd62f3: a shared tile cleared before a 2-stage T.Pipelined loop that also loads it fails an internal check (compile-only)
"""2778bbcd62f3: B_s, a 128 x 128 shared tile, is cleared, then loaded in every trip of a T.Pipelined(num_stages=2)
loop that feeds it to T.gemm. tl.InjectSoftwarePipeline gives B_s two versions, (2, 128, 128), but leaves the clear
before the loop on a (128, 128) buffer over the same storage, and tl.LayoutInference fails: 'Check failed:
(az->CanProveEqual(input_shape_product * rescale_num, shape_product * rescale_den)) is false: InputShape() =
(2, 128, 128) shape = (128, 128)'. Without the T.clear(B_s), or at num_stages=1 or 0, it compiles. Recorded on
TileLang 0.1.15 (compile-only, sm_90a); 0.1.10 and 0.1.12 fail the same way.

    python THIS_FILE   # REPRODUCED (exit 1) or NOT REPRODUCED (exit 0)
"""
import sys

import tilelang
import tilelang.language as T
import torch


@T.prim_func
def program(A: T.Tensor((128, 128), "bfloat16"), B: T.Tensor((512, 128), "bfloat16"), C: T.Tensor((128, 128), "float32")):
    with T.Kernel(1, threads=128):
        A_s = T.alloc_shared((128, 128), "bfloat16")
        B_s = T.alloc_shared((128, 128), "bfloat16")
        C_f = T.alloc_fragment((128, 128), "float32")
        T.copy(A, A_s)
        T.clear(C_f)
        T.clear(B_s)  # the write before the loop: without it, the program compiles
        for k in T.Pipelined(4, num_stages=2):
            T.copy(B[k * 128, 0], B_s)
            T.gemm(A_s, B_s, C_f, transpose_B=True)
        T.copy(C_f, C)


if __name__ == "__main__":
    sm90 = tilelang.tvm.target.Target({"kind": "cuda", "arch": "sm_90a"})
    try:
        tilelang.compile(program, target="auto" if torch.cuda.is_available() else sm90)
    except Exception as e:
        said = "CanProveEqual(input_shape_product * rescale_num, shape_product * rescale_den)) is false: InputShape() = (2, 128, 128)"
        print("REPRODUCED:" if said in str(e) else "NOT REPRODUCED, another error:", type(e).__name__, str(e).strip().splitlines()[-1])
        sys.exit(1 if said in str(e) else 0)
    print("NOT REPRODUCED: it compiles")
