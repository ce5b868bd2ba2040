# a5bc732774b4: a shared tile that is both a T.gemm operand and a T.cumsum source fails layout inference
"""A_s is an operand of T.gemm and the source of T.cumsum. Layout inference gives the gemm operand a swizzled
layout and the scan asks for the plain row-major one: an internal check fails, 'CumSum requires linear layout
for shared buffer A_s, but got non-linear layout' (scan after the gemm), or a layout conflict whose previous
layout is the linear one (scan first). No layout was annotated. The cumsum alone, the gemm alone, and the
cumsum of a T.copy of A_s all compile. Recorded on TileLang 0.1.15 (compile-only, sm_90a); found by a generated
program (T.cummax of a gemm operand).

    python THIS_FILE   # REPRODUCED (exit 1) or NOT REPRODUCED (exit 0)
"""
import sys

import tilelang
import tilelang.language as T
import torch


def make(gemm=True, scan_source="A_s"):
    @T.prim_func
    def program(A: T.Tensor((64, 64), "float16"), B: T.Tensor((64, 64), "float16"), C: T.Tensor((64, 64), "float32"),
                D: T.Tensor((64, 64), "float16")):
        with T.Kernel(1, threads=128):
            A_s = T.alloc_shared((64, 64), "float16")
            B_s = T.alloc_shared((64, 64), "float16")
            L_s = T.alloc_shared((64, 64), "float16")
            D_s = T.alloc_shared((64, 64), "float16")
            C_f = T.alloc_fragment((64, 64), "float32")
            T.copy(A, A_s)
            T.copy(B, B_s)
            if gemm:
                T.gemm(A_s, B_s, C_f, transpose_B=True, clear_accum=True)
                T.copy(C_f, C)
            if scan_source == "copy":  # the workaround: scan a plain copy of the operand
                T.copy(A_s, L_s)
                T.cumsum(L_s, D_s, dim=1)
            else:
                T.cumsum(A_s, D_s, dim=1)
            T.copy(D_s, D)
    return program


if __name__ == "__main__":
    target = "auto" if torch.cuda.is_available() else tilelang.tvm.target.Target({"kind": "cuda", "arch": "sm_90a"})
    for label, kw in (("the cumsum alone", {"gemm": False}), ("the cumsum of a copy", {"scan_source": "copy"})):
        tilelang.compile(make(**kw), target=target)
        print(f"control, {label}: compiles")
    said = "requires linear layout for shared buffer A_s"
    try:
        tilelang.compile(make(), target=target)
    except Exception as e:
        print("REPRODUCED:" if said in str(e) else "NOT REPRODUCED, another error:", type(e).__name__, said)
        sys.exit(1 if said in str(e) else 0)
    print("NOT REPRODUCED: it compiles")
