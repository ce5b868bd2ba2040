"""T.fill of a column slice X[0:16, 8:16] of a 16 x 64 float32 fragment (64 threads). TileLang fails to compile it: layout
inference cannot normalize the iterators of the slice's layout.

    python repro.py                  # prints REPRODUCED and exits 1 while the bug is present; else exits 0
    python repro.py --control NAME   # the same program with one change (the names: CONTROLS below)
"""

import argparse
import sys

import tilelang
import tilelang.language as T
import torch

BUG = 'Could not normalize iterators'
CONTROLS = {
    'shared': 'X in shared memory (T.alloc_shared) in place of a fragment',
    'whole-rows': 'T.fill(X[8:16, 0:64], -3.0): whole rows at an 8-aligned offset',
}
CONFIGS = {}


n = T.symbolic("n")


def build(control):
    alloc = T.alloc_shared if control == "shared" else T.alloc_fragment

    @T.prim_func
    def program(A: T.Tensor((n, 64), "float32"), O: T.Tensor((n, 64), "float32")):
        with T.Kernel(T.ceildiv(n, 16), threads=64) as bx:
            X = alloc((16, 64), "float32")
            T.copy(A[bx * 16, 0], X)
            if control == "whole-rows":
                T.fill(X[8:16, 0:64], -3.0)
            else:
                T.fill(X[0:16, 8:16], -3.0)
            T.copy(X, O[bx * 16, 0])

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
