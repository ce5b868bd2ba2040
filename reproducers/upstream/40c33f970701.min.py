"""A T.Pipelined loop with a manual schedule (order/stage) clears a 128 x 32 shared tile S and stores it in stage 0, and
takes its T.cummax along dim 1 in stage 1. S is 2-D as written; TileLang fails to compile the scan, saying S is 3-D.

    python repro.py                  # prints REPRODUCED and exits 1 while the bug is present; else exits 0
    python repro.py --control NAME   # the same program with one change (the names: CONTROLS below)
"""

import argparse
import sys

import tilelang
import tilelang.language as T
import torch

BUG = 'currently supports only 1D or 2D buffers, got 3D'
CONTROLS = {
    'copy': 'T.copy(S, R) in stage 1 in place of the scan',
    'no-schedule': 'T.Pipelined(1, num_stages=2) without order/stage',
    'cumsum': 'T.cumsum in place of T.cummax',
}
CONFIGS = {}


def build(control):
    pipelined = dict(num_stages=2) if control == "no-schedule" else dict(order=[0, 1, 2], stage=[0, 0, 1])

    @T.prim_func
    def program(O: T.Tensor((128, 32), "float16"), P: T.Tensor((128, 32), "float16")):
        with T.Kernel(1, threads=256):
            S = T.alloc_shared((128, 32), "float16")
            R = T.alloc_shared((128, 32), "float16")
            for _ in T.Pipelined(1, **pipelined):
                T.clear(S)
                T.copy(S, O)
                if control == "copy":
                    T.copy(S, R)
                elif control == "cumsum":
                    T.cumsum(S, R, dim=1)
                else:
                    T.cummax(S, R, dim=1)
            T.copy(R, P)

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
