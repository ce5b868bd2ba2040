"""T.copy fills a 16 x 96 fragment F from X, a T.Parallel loop over F's 9 x 16 corner adds 1 there, and T.copy writes
F to O. At 192 threads TileLang takes F's layout from the corner loop alone: F gets one register a thread (144
elements on 144 threads), and both copies are cut down to the corner, so O is never written outside it.

    python repro.py                  # on an sm_90 GPU: REPRODUCED (exit 1) while O is wrong; else exit 0
    python repro.py --control NAME   # the same program with one change (the names: CONTROLS below)
"""
import argparse
import sys

import tilelang
import tilelang.language as T
import torch

CONTROLS = {
    "cuda": "compile only: the size of F's register array (16 x 96 elements on 192 threads need 8 a thread)",
    "threads-128": "128 threads instead of 192",
    "threads-128-cuda": "compile only, at 128 threads (12 elements a thread)",
    "whole": "the loop over all of F, adding 1 where i < 9 and j < 16",
    "whole-cuda": "compile only, with the loop over all of F",
}
N = 16 * 1024

def build(threads, whole):
    @T.prim_func
    def program(X: T.Tensor((N, 96), "float16"), O: T.Tensor((N, 96), "float16")):
        with T.Kernel(N // 16, threads=threads) as bx:
            F = T.alloc_fragment((16, 96), "float16")
            T.copy(X[bx * 16, 0], F)
            if whole:
                for i, j in T.Parallel(16, 96):
                    F[i, j] = F[i, j] + T.if_then_else(i < 9 and j < 16, 1.0, 0.0)
            else:
                for i, j in T.Parallel(9, 16):
                    F[i, j] = F[i, j] + 1.0
            T.copy(F, O[bx * 16, 0])
    return program

def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--control", choices=sorted(CONTROLS))
    control = parser.parse_args().control or ""
    tilelang.set_log_level("WARNING")
    threads = 128 if control.startswith("threads-128") else 192
    program = build(threads, whole=control.startswith("whole"))
    if control.endswith("cuda"):
        code = tilelang.compile(program, target=tilelang.tvm.target.Target({"kind": "cuda", "arch": "sm_90a"}))
        line = next(s.strip() for s in code.get_kernel_source().splitlines() if s.strip().startswith("half_t F["))
        size, need = int(line[len("half_t F["):line.index("]")]), 16 * 96 // threads
        print(f"{threads} threads: F is '{line}', {size} a thread; 16 x 96 elements need {need} a thread")
        print("REPRODUCED" if size < need else "NOT REPRODUCED")
        sys.exit(1 if size < need else 0)
    if not torch.cuda.is_available():
        print("no GPU here: this check runs the kernel (sm_90); the controls ending in -cuda compile only")
        sys.exit(125)
    x = torch.randint(-2, 3, (N, 96), device="cuda").half()
    want = x.clone().view(N // 16, 16, 96)
    want[:, :9, :16] += 1
    o = torch.full_like(x, 7)
    tilelang.compile(program)(x, o)
    wrong = int((o.view(N // 16, 16, 96) != want).sum())
    print(f"{threads} threads: elements of O (of {N * 96}) unlike X plus 1 on the corner: {wrong}")
    print("REPRODUCED" if wrong else "NOT REPRODUCED")
    sys.exit(1 if wrong else 0)

if __name__ == "__main__":
    main()
