"""A T.Parallel loop writes a 2 x 1 corner of a 16 x 16 float32 fragment F; then T.copy fills all of F and T.reduce_max
reads it. TileLang fails to compile it with an internal check in layout inference.

    python repro.py                  # prints REPRODUCED and exits 1 while the bug is present; else exits 0
    python repro.py --control NAME   # the same program with one change (the names: CONTROLS below)
"""

import argparse
import sys

import tilelang
import tilelang.language as T
import torch

BUG = 'CanProveEqual(abs(source->scale), 1)'
CONTROLS = {
    'no-partial': 'without the loop over the corner',
    'whole': 'the loop over all 16 x 16 of F',
}
CONFIGS = {}


n = T.symbolic("n")


def build(control):
    rows, cols = (16, 16) if control == "whole" else (2, 1)

    @T.prim_func
    def program(X: T.Tensor((n, 16), "float16"), Y: T.Tensor((n, 16), "float32")):
        with T.Kernel(T.ceildiv(n, 16), threads=64) as bx:
            F = T.alloc_fragment((16, 16), "float32")
            m = T.alloc_fragment((16,), "float32")
            G = T.alloc_fragment((16, 16), "float32")
            if control != "no-partial":
                for i, j in T.Parallel(rows, cols):
                    F[i, j] = 0.0
            T.copy(X[bx * 16, 0], F)
            T.reduce_max(F, m, dim=1, clear=True)
            for i, j in T.Parallel(16, 16):
                G[i, j] = F[i, j] - m[i]
            T.copy(G, Y[bx * 16, 0])

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
