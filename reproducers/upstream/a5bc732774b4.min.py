"""S1, a 64 x 64 shared tile, is an operand of T.gemm and the source of T.cummax. Nothing is annotated. TileLang fails
to compile it: the gemm operand gets a swizzled layout and the scan requires the plain one.

    python repro.py                  # prints REPRODUCED and exits 1 while the bug is present; else exits 0
    python repro.py --control NAME   # the same program with one change (the names: CONTROLS below)
"""

import argparse
import sys

import tilelang
import tilelang.language as T
import torch

BUG = 'requires linear layout for shared buffer S1'
CONTROLS = {
    'no-gemm': 'without the T.gemm',
    'scan-a-copy': 'the scan reads T.copy(S1, L) in place of S1',
    'cumsum': 'T.cumsum in place of T.cummax',
}
CONFIGS = {}


def build(control):
    @T.prim_func
    def program(A: T.Tensor((64, 64), "float16"), B: T.Tensor((64, 64), "float16"), C: T.Tensor((64, 64), "float32"),
                D: T.Tensor((64, 64), "float16")):
        with T.Kernel(1, threads=128):
            S1 = T.alloc_shared((64, 64), "float16")
            S2 = T.alloc_shared((64, 64), "float16")
            L = T.alloc_shared((64, 64), "float16")
            R = T.alloc_shared((64, 64), "float16")
            C_f = T.alloc_fragment((64, 64), "float32")
            T.copy(A, S1)
            T.copy(B, S2)
            if control != "no-gemm":
                T.gemm(S1, S2, C_f, transpose_B=True, clear_accum=True)
                T.copy(C_f, C)
            if control == "scan-a-copy":
                T.copy(S1, L)
                T.cummax(L, R, dim=1)
            elif control == "cumsum":
                T.cumsum(S1, R, dim=1)
            else:
                T.cummax(S1, R, dim=1)
            T.copy(R, D)

    return program


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--control", choices=sorted(CONTROLS))
    control = parser.parse_args().control
    tilelang.set_log_level("WARNING")
    target = "auto" if torch.cuda.is_available() else tilelang.tvm.target.Target({"kind": "cuda", "arch": "sm_90a"})
    try:
        tilelang.compile(build(control), target=target, pass_configs=CONFIGS.get(control, {}))
    except Exception as e:
        error = f"{type(e).__name__}: {str(e).strip().splitlines()[-1]}"
        print(("REPRODUCED: " if BUG in error else "another error: ") + error)
        sys.exit(1 if BUG in error else 0)
    print("compiles")


if __name__ == "__main__":
    main()
