"""T.copy fills the shared tile S from X; then a T.Parallel loop writes 8 into a region of S, and T.copy writes S to O.
TileLang puts no __syncthreads() between the copy's writes into S and the loop's: thread 0 writes 8 into S[14, 2]
while thread 56 (another warp) may still be writing X's value there, so O can hold X where the program wrote 8.

    python repro.py                  # on an sm_90 GPU: REPRODUCED (exit 1) while O is wrong; else exit 0
    python repro.py --control NAME   # the same program with one change (the names: CONTROLS below)
"""
import argparse
import sys

import tilelang
import tilelang.language as T
import torch

CONTROLS = {
    "cuda": "compile only: count the __syncthreads() between the first write into S and the first write of 8",
    "fill": "T.fill(S, 1) instead of the T.copy into S, and T.fill of the region instead of the loop",
    "fill-cuda": "compile only, with the two T.fill",
    "sync": "T.sync_threads() between the T.copy into S and the loop",
    "sync-cuda": "compile only, with T.sync_threads() between the T.copy into S and the loop",
}
N = 64 * 1024

def build(fill, sync):
    @T.prim_func
    def program(X: T.Tensor((N, 16), "float16"), O: T.Tensor((N, 16), "float16")):
        with T.Kernel(N // 64, threads=128) as bx:
            S = T.alloc_shared((64, 16), "float32")
            if fill:
                T.fill(S, 1.0)
                T.fill(S[14:46, 2:6], 8.0)
            else:
                T.copy(X[bx * 64, 0], S)  # thread t writes S's elements 4t to 4t + 3 and 512 + 4t to 512 + 4t + 3
                if sync:
                    T.sync_threads()
                for i, j in T.Parallel(32, 4):  # thread t writes element t of this region
                    S[14 + i, 2 + j] = 8.0
            T.copy(S, O[bx * 64, 0])
    return program

parser = argparse.ArgumentParser()
parser.add_argument("--control", choices=sorted(CONTROLS))
control = parser.parse_args().control or ""
tilelang.set_log_level("WARNING")
program = build(fill=control.startswith("fill"), sync=control.startswith("sync"))
if control.endswith("cuda"):
    sm90 = tilelang.tvm.target.Target({"kind": "cuda", "arch": "sm_90a"})
    code = tilelang.compile(program, target=sm90).get_kernel_source().split("float S[];", 1)[1]  # after S's declaration
    first = min(i for i in (code.find("(S + ("), code.find("S[(")) if i >= 0)  # the first write into S
    barriers = code[first:code.index("0x1p+3f")].count("__syncthreads()")  # 0x1p+3f: 8.0, the region's value
    print(f"__syncthreads() between the first write into S and the first write of 8: {barriers}\n"
          + ("REPRODUCED" if barriers == 0 else "NOT REPRODUCED"))
    sys.exit(1 if barriers == 0 else 0)
if not torch.cuda.is_available():
    print("no GPU here: this check runs the kernel (sm_90); the controls ending in -cuda compile only")
    sys.exit(125)
x = torch.randint(-2, 3, (N, 16), device="cuda").half()
want = (torch.ones_like(x) if control == "fill" else x.clone()).view(N // 64, 64, 16)
want[:, 14:46, 2:6] = 8
kernel, wrong = tilelang.compile(program), 0
for _ in range(20):
    kernel(x, o := torch.zeros_like(x))
    wrong = max(wrong, int((o.view(N // 64, 64, 16) != want).sum()))
print(f"elements of O (of {N * 16}) unlike the program's result, worst of 20 launches: {wrong}\n"
      + ("REPRODUCED" if wrong else "NOT REPRODUCED"))
sys.exit(1 if wrong else 0)
