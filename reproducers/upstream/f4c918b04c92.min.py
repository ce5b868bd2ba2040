"""T.Pipelined(1, num_stages=2) over: T.copy of B into Bs, T.gemm(A fragment, Bs, C fragment), T.copy of D into Ds (B's
and D's rows are 40 bytes: cp.async, no TMA). The CUDA runs the gemm twice for the one trip: C = 2 A @ B[0:32, 0:16]^T.

    python repro.py                  # on an sm_90 GPU: REPRODUCED (exit 1) while C is wrong; else exit 0
    python repro.py --control NAME   # the same program with one change (the names: CONTROLS below)
"""
import argparse
import sys

import tilelang
import tilelang.language as T
import torch

CONTROLS = {
    "cuda": "compile only: count the gemm's wgmma call sites in the CUDA (each runs once: no loop over k is left)",
    "stages-1": "num_stages=1", "stages-1-cuda": "compile only, num_stages=1",
    "no-second-copy-cuda": "compile only, without the T.copy into Ds", "trips-2-cuda": "compile only, 2 trips (num_stages=2)",
    "copy-first": "the T.copy into Ds before the T.gemm", "copy-first-cuda": "compile only, the T.copy into Ds first",
    "trips-2-stages-3-cuda": "compile only, 2 trips, num_stages=3",
}

def build(trips, stages, second, copy_first):
    @T.prim_func
    def program(A: T.Tensor((64, 16), "bfloat16"), B: T.Tensor((32 * trips, 20), "bfloat16"),
                D: T.Tensor((32 * trips, 20), "bfloat16"), C: T.Tensor((64, 32), "float32")):
        with T.Kernel(1, threads=128):
            A_f, C_f = T.alloc_fragment((64, 16), "bfloat16"), T.alloc_fragment((64, 32), "float32")
            Bs, Ds = T.alloc_shared((32, 16), "bfloat16"), T.alloc_shared((32, 16), "bfloat16")
            T.copy(A, A_f)
            T.clear(C_f)
            for k in T.Pipelined(trips, num_stages=stages):
                T.copy(B[k * 32, 0], Bs)
                if copy_first:
                    T.copy(D[k * 32, 0], Ds)
                T.gemm(A_f, Bs, C_f, transpose_B=True)
                if second and not copy_first:
                    T.copy(D[k * 32, 0], Ds)
            T.copy(C_f, C)
    return program

(parser := argparse.ArgumentParser()).add_argument("--control", choices=sorted(CONTROLS))
control = parser.parse_args().control or ""
tilelang.set_log_level("WARNING")
trips, stages = (2, 3) if "stages-3" in control else (2, 2) if "trips-2" in control else (1, 1 if "stages-1" in control else 2)
program = build(trips, stages, second="no-second-copy" not in control, copy_first="copy-first" in control)
if control.endswith("cuda"):
    code = tilelang.compile(program, target=tilelang.tvm.target.Target({"kind": "cuda", "arch": "sm_90a"})).get_kernel_source()
    sites = code.count("tl::wgmma_rs<") if "for (int k" not in code else sys.exit("a loop over k is left")  # else each runs once
    print(f"{trips} trip(s), num_stages={stages}: gemm executions (wgmma call sites) {sites}")
    sys.exit(print("REPRODUCED" if sites > trips else "NOT REPRODUCED") or int(sites > trips))
if not torch.cuda.is_available():
    print("no GPU here: this check runs the kernel (sm_90); the controls ending in -cuda compile only")
    sys.exit(125)
a, b, d = (torch.randint(-2, 3, s, device="cuda").bfloat16() for s in ((64, 16), (32 * trips, 20), (32 * trips, 20)))
tilelang.compile(program)(a, b, d, c := torch.zeros(64, 32, device="cuda"))
want = sum(a.float() @ b[k * 32:k * 32 + 32, :16].float().T for k in range(trips))
wrong = int((c != want).sum())
ratio = f"; C / (A @ B^T) where nonzero: {(c / want)[want != 0].unique().tolist()}" if wrong else ""
print(f"{trips} trip(s), num_stages={stages}: elements of C (of {c.numel()}) unlike the sum of A @ B_k^T: {wrong}{ratio}")
sys.exit(print("REPRODUCED" if wrong else "NOT REPRODUCED") or int(wrong > 0))
