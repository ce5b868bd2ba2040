"""Q's tile is loaded into shared memory (q_s) before a T.Pipelined loop whose trip count is 0 for most blocks. With
warp specialization the load becomes a TMA load whose only wait is inside the loop, in its first trip. When the loop
runs no trip nothing waits for it: the load lands after the epilogue wrote o_s, which shares q_s's shared memory, and
rows of O that must be 0 hold Q's values.

    python repro.py                  # on an sm_90 GPU: REPRODUCED (exit 1) while rows that must be 0 are not; else 0
    python repro.py --control NAME   # the same program with one change (the names: CONTROLS below)
"""
import argparse
import re
import sys

import tilelang
import tilelang.language as T
import torch

CONTROLS = {
    "no-warp-specialization": "pass config TL_DISABLE_WARP_SPECIALIZED=True",
    "no-tma": "pass config TL_DISABLE_TMA_LOWER=True",
    "cuda": "compile only: print the generated CUDA's waits on barriers and the conditions around them",
}
CONFIGS = {"no-warp-specialization": {tilelang.PassConfigKey.TL_DISABLE_WARP_SPECIALIZED: True},
           "no-tma": {tilelang.PassConfigKey.TL_DISABLE_TMA_LOWER: True}}
m, n = T.symbolic("m"), T.symbolic("n")


@T.prim_func
def program(Q: T.Tensor((m, 32), "float16"), K: T.Tensor((n, 32), "float16"), O: T.Tensor((m, 32), "float16")):
    with T.Kernel(T.ceildiv(m, 64), threads=128) as bx:
        q_s = T.alloc_shared((64, 32), "float16")
        k_s = T.alloc_shared((64, 32), "float16")
        o_s = T.alloc_shared((64, 32), "float16")
        s = T.alloc_fragment((64, 64), "float32")
        p = T.alloc_fragment((64, 64), "float16")
        acc = T.alloc_fragment((64, 32), "float32")
        T.copy(Q[bx * 64, 0], q_s)
        T.clear(acc)
        # key blocks up to the block's last row, keys aligned to the end of the queries: 0 for most blocks
        for kb in T.Pipelined(T.max(0, T.min(T.ceildiv(n, 64), T.ceildiv(bx * 64 + 64 + n - m, 64))), num_stages=1):
            T.copy(K[kb * 64, 0], k_s)
            T.gemm(q_s, k_s, s, transpose_B=True, clear_accum=True)
            T.copy(s, p)
            T.gemm(p, k_s, acc)
        T.copy(acc, o_s)
        T.copy(o_s, O[bx * 64, 0])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--control", choices=sorted(CONTROLS))
    control = parser.parse_args().control
    tilelang.set_log_level("WARNING")
    if control == "cuda":
        sm90 = tilelang.tvm.target.Target({"kind": "cuda", "arch": "sm_90a"})
        lines = tilelang.compile(program, target=sm90).get_kernel_source().splitlines()
        for i, line in enumerate(lines):
            if ".wait(" in line or re.search(r"\bif \(", line) or "for (int kb" in line:
                print(f"{i + 1:4d}: {line.rstrip()}")
        sys.exit(0)
    if not torch.cuda.is_available():
        print("no GPU here: this check runs the kernel (sm_90); --control cuda is the compile-only view")
        sys.exit(125)
    M, N = 8193, 1  # blocks 0-126 run the loop zero times: their 8128 rows of O must be 0
    q = torch.randn(M, 32, dtype=torch.float16, device="cuda")
    k = torch.randn(N, 32, dtype=torch.float16, device="cuda")
    kernel = tilelang.compile(program, pass_configs=CONFIGS.get(control, {}))
    o = torch.zeros(M, 32, dtype=torch.float16, device="cuda")
    bad = 0
    for _ in range(20):
        o.fill_(0)
        kernel(q, k, o)
        bad = max(bad, int((o[:8128] != 0).any(dim=1).sum()))
    print(f"rows of O (of 8128) that must be 0 but are not, worst of 20 launches: {bad}")
    print("REPRODUCED" if bad else "NOT REPRODUCED")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
