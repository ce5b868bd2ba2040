"""B_s, a 128 x 128 shared tile, is cleared, then loaded in every trip of a T.Pipelined(4, num_stages=2) loop that
feeds it to T.gemm. The program is valid; TileLang fails to compile it with an internal check in layout inference.

    python repro.py                  # prints REPRODUCED and exits 1 while the bug is present; else exits 0
    python repro.py --control NAME   # the same program with one change (the names: CONTROLS below)
"""

import argparse
import sys

import tilelang
import tilelang.language as T
import torch

BUG = 'InputShape() = (2, 128, 128) shape = (128, 128)'
CONTROLS = {
    'no-clear': 'without the T.clear(B_s) before the loop',
    'one-stage': 'num_stages=1',
    'clear-after': 'the T.clear(B_s) moved after the loop',
    'no-warp-specialization': 'pass config TL_DISABLE_WARP_SPECIALIZED=True',
    'no-tma': 'pass config TL_DISABLE_TMA_LOWER=True',
}
CONFIGS = {'no-warp-specialization': {tilelang.PassConfigKey.TL_DISABLE_WARP_SPECIALIZED: True}, 'no-tma': {tilelang.PassConfigKey.TL_DISABLE_TMA_LOWER: True}}


def build(control):
    stages = 1 if control == "one-stage" else 2

    @T.prim_func
    def program(A: T.Tensor((128, 128), "bfloat16"), B: T.Tensor((512, 128), "bfloat16"),
                C: T.Tensor((128, 128), "float32")):
        with T.Kernel(1, threads=128):
            A_s = T.alloc_shared((128, 128), "bfloat16")
            B_s = T.alloc_shared((128, 128), "bfloat16")
            C_f = T.alloc_fragment((128, 128), "float32")
            T.copy(A, A_s)
            T.clear(C_f)
            if control not in ("no-clear", "clear-after"):
                T.clear(B_s)
            for k in T.Pipelined(4, num_stages=stages):
                T.copy(B[k * 128, 0], B_s)
                T.gemm(A_s, B_s, C_f, transpose_B=True)
            if control == "clear-after":
                T.clear(B_s)
            T.copy(C_f, C)

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
