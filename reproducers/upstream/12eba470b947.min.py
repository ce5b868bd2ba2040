"""A fragment A is loaded and row-reduced into s before a T.Pipelined(1, num_stages=1) loop whose body only TMA-loads
a shared tile W_s that nothing reads; after the loop Y = A - rowsum(A). With the loop warp-specialized, the code before
the loop runs on all 256 threads (128 consumers and the 128-thread producer) with A laid out over them, while the code
after it runs in the consumers' branch only, indexed as if they were threads 128-255: Y's rows 0-15 get rows 16-31's
values and rows 16-31 are never written. Inputs are small integers: Y must equal A - rowsum(A) exactly.

    python repro.py                  # on an sm_90 GPU: REPRODUCED (exit 1) while rows of Y are wrong; else exit 0
    python repro.py --control NAME   # the same program with one change (the names: CONTROLS below)
"""
import argparse
import sys

import tilelang
import tilelang.language as T
import torch

CONTROLS = {
    "zero-stages": "num_stages=0 (no warp specialization)",
    "no-load": "without the T.copy into W_s in the loop",
    "cuda": "compile only: print the generated CUDA's loads of X, stores of Y and the branch between them",
}


def build(stages, load=True):
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
                if load:
                    T.copy(W[k * 32, 0], W_s)  # loaded, never read
            for i, j in T.Parallel(32, 64):
                B[i, j] = A[i, j] - s[i]
            T.copy(B, Y)
    return program



def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--control", choices=sorted(CONTROLS))
    control = parser.parse_args().control
    tilelang.set_log_level("WARNING")
    program = build(0 if control == "zero-stages" else 1, load=control != "no-load")
    if control == "cuda":
        sm90 = tilelang.tvm.target.Target({"kind": "cuda", "arch": "sm_90a"})
        for i, line in enumerate(tilelang.compile(program, target=sm90).get_kernel_source().splitlines()):
            if "(X + " in line or "(Y + " in line or "threadIdx.x) < 128)" in line:
                print(f"{i + 1:4d}: {line.rstrip()}")
        sys.exit(0)
    if not torch.cuda.is_available():
        print("no GPU here: this check runs the kernel (sm_90); --control cuda is the compile-only view")
        sys.exit(125)
    kernel = tilelang.compile(program)
    x = torch.randint(-2, 3, (32, 64), device="cuda").to(torch.bfloat16)
    w = torch.zeros(32, 16, device="cuda", dtype=torch.float16)
    y = torch.full((32, 64), float("nan"), device="cuda")
    kernel(x, w, y)
    torch.cuda.synchronize()
    want = x.float() - x.float().sum(dim=1, keepdim=True)
    rows = (y != want).any(dim=1).nonzero().flatten().tolist()
    print(f"rows of Y unlike A - rowsum(A): {rows}")
    print("REPRODUCED" if rows else "NOT REPRODUCED")
    sys.exit(1 if rows else 0)


if __name__ == "__main__":
    main()
