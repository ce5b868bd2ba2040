"""S = A W^T is computed before a T.Pipelined loop with A in registers (a fragment, the T.gemm's A operand). Each trip
of the loop takes the atomic min of S into M, loads a tile of B and accumulates C += A B_k^T. Warp specialization
moves the atomic into the producer branch and clones what it needs there: A and S become 'local' buffers, and the
gemm on the clone fails. The program is valid; TileLang fails to compile it.

    python repro.py                  # prints REPRODUCED and exits 1 while the bug is present; else exits 0
    python repro.py --control NAME   # the same program with one change (the names: CONTROLS below)
"""
import argparse
import sys

import tilelang
import tilelang.language as T
import torch

BUG = 'Unsupported gemm combination for wgmma, A: local'
CONTROLS = {
    'no-warp-specialization': 'pass config TL_DISABLE_WARP_SPECIALIZED=True',
    'atomic-after': 'the T.atomic_min loop after the T.Pipelined loop instead of in it',
    'store': 'a plain store of S into C in the loop instead of the T.atomic_min',
    'atomic-add': 'T.atomic_add instead of T.atomic_min',
}
CONFIGS = {'no-warp-specialization': {tilelang.PassConfigKey.TL_DISABLE_WARP_SPECIALIZED: True}}
n = T.symbolic("n")

def build(control):
    @T.prim_func
    def program(A: T.Tensor((128, 32), "float16"), W: T.Tensor((32, 32), "float16"), B: T.Tensor((n, 32), "float16"),
                M: T.Tensor((1,), "float32"), C: T.Tensor((128, 32), "float32")):
        with T.Kernel(1, threads=128):
            a = T.alloc_fragment((128, 32), "float16")
            w_s = T.alloc_shared((32, 32), "float16")
            s = T.alloc_fragment((128, 32), "float32")
            b_s = T.alloc_shared((32, 32), "float16")
            c = T.alloc_fragment((128, 32), "float32")
            T.copy(A, a)
            T.copy(W, w_s)
            T.gemm(a, w_s, s, transpose_B=True, clear_accum=True)
            T.clear(c)
            for k in T.Pipelined(T.ceildiv(n, 32), num_stages=1):
                if control == "store":
                    for i, j in T.Parallel(128, 32):
                        C[i, j] = s[i, j]
                elif control != "atomic-after":
                    for i, j in T.Parallel(128, 32):
                        (T.atomic_add if control == "atomic-add" else T.atomic_min)(M[0], s[i, j])
                T.copy(B[k * 32, 0], b_s)
                T.gemm(a, b_s, c, transpose_B=True)
            if control == "atomic-after":
                for i, j in T.Parallel(128, 32):
                    (T.atomic_add if control == "atomic-add" else T.atomic_min)(M[0], s[i, j])
            T.copy(c, C)

    return program

parser = argparse.ArgumentParser()
parser.add_argument("--control", choices=sorted(CONTROLS))
control = parser.parse_args().control
tilelang.set_log_level("WARNING")
try:
    tilelang.compile(build(control), pass_configs=CONFIGS.get(control, {}),
                     target="auto" if torch.cuda.is_available() else tilelang.tvm.target.Target({"kind": "cuda", "arch": "sm_90a"}))
except Exception as e:
    error = f"{type(e).__name__}: {str(e).strip().splitlines()[-1]}"
    print(("REPRODUCED: " if BUG in error else "another error: ") + error)
    sys.exit(1 if BUG in error else 0)
print("compiles")
