"""A T.Pipelined(T.ceildiv(n, 128), num_stages=3) loop (a symbolic trip count) copies a bfloat16 tile into a float16
shared buffer and feeds it to T.gemm. With default pass configs TileLang fails in CUDA code generation.

    python repro.py                  # prints REPRODUCED and exits 1 while the bug is present; else exits 0
    python repro.py --control NAME   # the same program with one change (the names: CONTROLS below)
"""

import argparse
import sys

import tilelang
import tilelang.language as T
import torch

BUG = 'Downcast from tirx.Sub to ir.IntImm failed'
CONTROLS = {
    'float16-source': 'the global tile B float16 (no conversion in the copy)',
    'one-stage': 'num_stages=1',
    'constant-trips': 'T.Pipelined(4, num_stages=3): a constant trip count',
    'no-warp-specialization': 'pass config TL_DISABLE_WARP_SPECIALIZED=True',
    'explicit-unroll': 'pass config tl.UnrollLoop={"explicit_unroll": True} (the default before TileLang 0.1.14)',
}
CONFIGS = {'no-warp-specialization': {tilelang.PassConfigKey.TL_DISABLE_WARP_SPECIALIZED: True},
           'explicit-unroll': {"tl.UnrollLoop": {"explicit_unroll": True}}}


n = T.symbolic("n")


def build(control):
    src = "float16" if control == "float16-source" else "bfloat16"
    stages = 1 if control == "one-stage" else 3

    @T.prim_func
    def program(A: T.Tensor((n, 64), "float16"), B: T.Tensor((n, 32), src), C: T.Tensor((n, 32), "float32")):
        with T.Kernel(T.ceildiv(n, 128), threads=256) as bx:
            A_s = T.alloc_shared((128, 64), "float16")
            acc = T.alloc_fragment((128, 32), "float32")
            B_s = T.alloc_shared((64, 32), "float16")
            T.copy(A[bx * 128, 0], A_s)
            T.clear(acc)
            trips = 4 if control == "constant-trips" else T.ceildiv(n, 128)
            for k in T.Pipelined(trips, num_stages=stages):
                T.copy(B[k * 64, 0], B_s)  # bfloat16 -> float16
                T.gemm(A_s, B_s, acc, clear_accum=True)
            T.copy(acc, C[bx * 128, 0])

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
