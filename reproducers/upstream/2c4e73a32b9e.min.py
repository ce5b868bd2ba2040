"""S, a shared tile, is written before a T.Pipelined(n // 128) loop and read by other threads after it. The loop body
needs a barrier of its own, and the only __syncthreads() between S's write and its read is placed inside the loop.
At n = 127 the loop runs no trip, nothing separates the write from the read, and O differs from X (a race).

    python repro.py                  # on an sm_90 GPU: REPRODUCED (exit 1) while O differs from X; else exit 0
    python repro.py --control NAME   # the same program with one change (the names: CONTROLS below)
"""
import argparse
import sys

import tilelang
import tilelang.language as T
import torch

CONTROLS = {
    "cuda": "compile only: count the __syncthreads() between S's write and its read that are outside the loop",
    "sync": "T.sync_threads() after the T.copy into S",
    "sync-cuda": "compile only, with T.sync_threads() after the T.copy into S",
}
n = T.symbolic("n")


def build(sync):
    @T.prim_func
    def program(X: T.Tensor((n, 64), "float32"), O: T.Tensor((n, 64), "float32")):
        with T.Kernel(T.ceildiv(n, 128), threads=256) as bx:
            A = T.alloc_fragment((128, 32), "float16")
            S = T.alloc_shared((128, 64), "float16")
            W = T.alloc_shared((64, 32), "float16")
            acc = T.alloc_fragment((128, 64), "float32")
            for i, j in T.Parallel(128, 32):
                A[i, j] = T.cast(T.if_then_else(bx * 128 + i < n, X[bx * 128 + i, j], 0.0), "float16")
            T.copy(X[bx * 128, 0], S)  # S: written here, read after the loop by other threads
            if sync:
                T.sync_threads()
            T.clear(acc)
            for k in T.Pipelined(n // 128, num_stages=3):  # no trip at all when n < 128
                for i, j in T.Parallel(64, 32):
                    W[i, j] = T.cast(T.if_then_else(k * 128 + i < n, X[k * 128 + i, j], 0.0), "float16")
                T.gemm(A, W, acc, transpose_B=True)
            for i, j in T.Parallel(128, 64):
                acc[i, j] += T.cast(S[i, j], "float32")
            T.copy(acc, O[bx * 128, 0])

    return program


def barriers_outside_the_loop(code):
    """The __syncthreads() after S's first mention (its write) that are not inside the loop's body."""
    start = code.index("for (int k = 0;")
    depth, end = 0, code.index("{", start)
    while depth or end == code.index("{", start):  # to the brace that closes the loop's body
        depth += {"{": 1, "}": -1}.get(code[end], 0)
        end += 1
    outside = code[:start] + code[end:]
    return outside[outside.index("((half_t*)S)"):].count("__syncthreads()"), code[start:end].count("__syncthreads()")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--control", choices=sorted(CONTROLS))
    control = parser.parse_args().control
    tilelang.set_log_level("WARNING")
    program = build(sync=control in ("sync", "sync-cuda"))
    if control in ("cuda", "sync-cuda"):
        sm90 = tilelang.tvm.target.Target({"kind": "cuda", "arch": "sm_90a"})
        outside, inside = barriers_outside_the_loop(tilelang.compile(program, target=sm90).get_kernel_source())
        print(f"__syncthreads() after S's write: outside the loop {outside}, inside it {inside}")
        print("REPRODUCED" if outside == 0 else "NOT REPRODUCED")
        sys.exit(1 if outside == 0 else 0)
    if not torch.cuda.is_available():
        print("no GPU here: this check runs the kernel (sm_90); --control cuda is the compile-only check")
        sys.exit(125)
    N = 127
    x = torch.randint(-2, 3, (N, 64), device="cuda").float()
    kernel = tilelang.compile(program)
    wrong = 0
    for _ in range(20):
        o = torch.zeros(N, 64, device="cuda")
        kernel(x, o)
        wrong = max(wrong, int((o != x).sum()))
    print(f"n = {N}: elements of O (of {N * 64}) unlike X, worst of 20 launches: {wrong}")
    print("REPRODUCED" if wrong else "NOT REPRODUCED")
    sys.exit(1 if wrong else 0)


if __name__ == "__main__":
    main()
