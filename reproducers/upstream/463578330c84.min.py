"""A 1-D fragment r holds a T.reduce_sum of A along dim 1 and is read (a row broadcast); then a T.reduce_sum of B along
dim 0 overwrites r, and that result is never read. TileLang fails to compile it: layout inference finds no layout.

    python repro.py                  # prints REPRODUCED and exits 1 while the bug is present; else exits 0
    python repro.py --control NAME   # the same program with one change (the names: CONTROLS below)
"""

import argparse
import sys

import tilelang
import tilelang.language as T
import torch

BUG = 'no available layout found'
CONTROLS = {
    'store-last': "the last reduce's result stored to Z",
    'another-fragment': 'the last reduce into a second fragment r2 in place of r',
    'dim-1': 'the last reduce along dim 1 in place of dim 0',
}
CONFIGS = {}


n = T.symbolic("n")


def build(control):
    @T.prim_func
    def program(X: T.Tensor((n, 32), "float32"), Y: T.Tensor((n, 32), "float32"), Z: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, 32), threads=64) as bx:
            A = T.alloc_fragment((32, 32), "float32")
            r = T.alloc_fragment((32,), "float32")
            r2 = T.alloc_fragment((32,), "float32")
            B = T.alloc_fragment((32, 32), "float32")
            T.copy(X[bx * 32, 0], A)
            T.reduce_sum(A, r, dim=1)  # r: one value per row
            for i, j in T.Parallel(32, 32):
                B[i, j] = A[i, j] - r[i]  # r read, broadcast along rows
            last = r2 if control == "another-fragment" else r
            T.reduce_sum(B, last, dim=1 if control == "dim-1" else 0, clear=True)  # never read
            if control == "store-last":
                for i in T.Parallel(32):
                    if bx * 32 + i < n:
                        Z[bx * 32 + i] = r[i]
            T.copy(B, Y[bx * 32, 0])

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
