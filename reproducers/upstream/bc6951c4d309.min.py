"""A block of 256 threads clears a 32 x 64 float32 shared tile, then runs a pipelined loop of TMA loads. Warp
specialization adds a 128-thread producer, the clear outside the loop is planned over all 384 threads, 2048 elements
do not split evenly over 384, and layout inference fails. The controls show the same failure without warp
specialization whenever a shared fill's element count is not a multiple of the block's threads.

    python repro.py                  # prints REPRODUCED and exits 1 while the bug is present; else exits 0
    python repro.py --control NAME   # the same program with one change (the names: CONTROLS below)
"""

import argparse
import sys

import tilelang
import tilelang.language as T
import torch

BUG = 'The iterations do not traverse full iter space'
CONTROLS = {
    'threads-128': 'threads=128 (256 with the producer; 2048 is a multiple)',
    'no-warp-specialization': 'pass config TL_DISABLE_WARP_SPECIALIZED=True (256 threads)',
    'threads-384-no-warp-specialization': 'threads=384 and TL_DISABLE_WARP_SPECIALIZED=True',
    'clear-96': 'no pipeline: a 16 x 32 float16 shared tile cleared in a 96-thread block (512 elements)',
    'fill-region-256': 'no pipeline: T.fill of a 61 x 27 region (1647 elements) of a shared tile, 256 threads',
}
CONFIGS = {'no-warp-specialization': {tilelang.PassConfigKey.TL_DISABLE_WARP_SPECIALIZED: True}, 'threads-384-no-warp-specialization': {tilelang.PassConfigKey.TL_DISABLE_WARP_SPECIALIZED: True}}


n = T.symbolic("n")


def build(control):
    threads = {"threads-128": 128, "threads-384-no-warp-specialization": 384}.get(control, 256)

    @T.prim_func
    def program(A: T.Tensor((n, 64), "float16"), B: T.Tensor((n, 64), "float32")):
        with T.Kernel(T.ceildiv(n, 32), threads=threads) as bx:
            a_s = T.alloc_shared((32, 64), "float16")
            acc = T.alloc_shared((32, 64), "float32")
            T.clear(acc)
            for _ in T.Pipelined(0, 4, num_stages=1):
                T.copy(A[bx * 32, 0], a_s)
                for i, j in T.Parallel(32, 64):
                    acc[i, j] += a_s[i, j]
            T.copy(acc, B[bx * 32, 0])

    @T.prim_func
    def clear_96(A: T.Tensor((n, 32), "float16")):
        with T.Kernel(T.ceildiv(n, 16), threads=96) as bx:
            S = T.alloc_shared((16, 32), "float16")
            T.clear(S)
            T.copy(S, A[bx * 16, 0])

    @T.prim_func
    def fill_region_256(A: T.Tensor((128, 64), "float16"), B: T.Tensor((128, 64), "float16")):
        with T.Kernel(1, threads=256):
            S = T.alloc_shared((128, 64), "float16")
            T.copy(A, S)
            T.fill(S[42:103, 30:57], -3.0)
            T.copy(S, B)

    return {"clear-96": clear_96, "fill-region-256": fill_region_256}.get(control, program)


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
