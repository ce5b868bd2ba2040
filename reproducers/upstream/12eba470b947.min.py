# 12eba470b947: a fragment read after a warp-specialized T.Pipelined loop is read at the wrong rows
"""A is loaded into a fragment and row-summed before a T.Pipelined(1, num_stages=1) loop whose body only loads a
shared tile W_s (never read); after the loop Y = A - rowsum(A). The loop is warp-specialized (256 threads: a
producer warpgroup and a consumer one). The code before the loop runs on all 256 threads with A laid out over
them (thread t holds elements 8t .. 8t + 7), the code after it in the consumer branch only, storing thread t's
values at Y + 8t - 1024: rows 16-31's results land in rows 0-15, and rows 16-31 are never written. At
num_stages=0 (no warp specialization) Y is right. Recorded on TileLang 0.1.15, NVIDIA H100 80GB HBM3, minimized
by the harness from a generated program (G5 wrong by 43); this file on an H100 (0.1.15): "num_stages=0: Y right",
"num_stages=1: rows [0, 1, ..., 31]", REPRODUCED (exit 1). In 0.1.10's CUDA
the consumers are threads 0-127 and store rows 0-15 only: rows 16-31 are never written there either.

    python THIS_FILE   # REPRODUCED (exit 1) or NOT REPRODUCED (exit 0); without a GPU, it reads the CUDA
"""
import sys

import tilelang
import tilelang.language as T
import torch


def make(stages):
    @T.prim_func
    def program(X: T.Tensor((32, 64), "bfloat16"), W: T.Tensor((32, 16), "float16"), Y: T.Tensor((32, 64), "float32")):
        with T.Kernel(1, threads=128):
            A = T.alloc_fragment((32, 64), "float32")
            s = T.alloc_fragment((32,), "float32")
            B = T.alloc_fragment((32, 64), "float32")
            W_s = T.alloc_shared((32, 16), "float16")
            T.copy(X, A)
            T.reduce_sum(A, s, dim=1)
            for k in T.Pipelined(1, num_stages=stages):
                T.copy(W[k * 32, 0], W_s)  # loaded, never read; without it the loop is not warp-specialized
            for i, j in T.Parallel(32, 64):
                B[i, j] = A[i, j] - s[i]
            T.copy(B, Y)
    return program


def wrong_rows(stages) -> str:
    """On a GPU: the rows of Y unlike A - rowsum(A) (integer inputs: exact). Without one: where the generated CUDA
    stores Y, against where it loads X."""
    if not torch.cuda.is_available():
        sm90 = tilelang.tvm.target.Target({"kind": "cuda", "arch": "sm_90a"})
        lines = tilelang.compile(make(stages), target=sm90).get_kernel_source().splitlines()
        split = [i for i, line in enumerate(lines) if "threadIdx.x) < 128)" in line or "(128 <= ((int)threadIdx.x))" in line]
        load = next(i for i, line in enumerate(lines) if "(X + " in line)
        store = next(i for i, line in enumerate(lines) if "(Y + " in line)
        if split and load < split[0] < store:  # 128 threads store what 256 loaded: half of Y at most, maybe elsewhere
            return f"X loaded by all 256 threads, Y stored on one side (128 threads) of `{lines[split[0]].strip()}`: {lines[store].strip()}"
        return ""
    kernel = tilelang.compile(make(stages))
    x = torch.randint(-2, 3, (32, 64), device="cuda").to(torch.bfloat16)
    w = torch.zeros(32, 16, device="cuda", dtype=torch.float16)
    y = torch.full((32, 64), float("nan"), device="cuda")
    kernel(x, w, y)
    torch.cuda.synchronize()
    want = x.float() - x.float().sum(dim=1, keepdim=True)
    rows = (y != want).any(dim=1).nonzero().flatten().tolist()
    return f"rows {rows}" if rows else ""


if __name__ == "__main__":
    right = "Y right" if torch.cuda.is_available() else "Y stored by the threads that loaded X"
    control = wrong_rows(0)
    print("num_stages=0:", control or right)
    bad = wrong_rows(1)
    print("num_stages=1:", bad or right)
    print("REPRODUCED" if bad and not control else "NOT REPRODUCED")
    sys.exit(1 if bad and not control else 0)
