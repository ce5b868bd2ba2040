"""Standalone reproducer for 8f0d789e378d (and the cause behind 3264ffa39b5d's split path; TileLang 0.1.15).

A tile-level T.atomic_add of a GEMM fragment into a destination with an annotated layout loses the
row index and the bounds guard of its destination when the sliced dimension has extent 1: every row
of the 32-row tile lands on row 0. Without the layout annotation, or at extent 2, the generated CUDA
keeps the guard `row < extent`. TileLang's own example_gqa_bwd_tma_reduce.py (split path) hits it at
seq_len 1 through its dQ accumulator (make_dq_layout), giving dQ errors of about 1e-3; its TMA-reduce
path fails at seq_len 1 too, with kernel code identical to seq_len 2's (cause not shown here).

    python 3264ffa39b5d.standalone.py     # exit 1 while the bug is present; without a GPU: the code check only
"""
import sys

import tilelang
import tilelang.language as T
import torch
import tvm

ROWS, DIM, HEADS, BATCH = 32, 128, 4, 2


def program(extent, annotate):
    @T.prim_func
    def main(A: T.Tensor((ROWS, 64), "float16"), B: T.Tensor((DIM, 64), "float16"),
             X: T.Tensor((BATCH, extent, HEADS, DIM), "float32")):
        with T.Kernel(HEADS, BATCH, threads=128) as (h, b):
            a = T.alloc_shared((ROWS, 64), "float16")
            bt = T.alloc_shared((DIM, 64), "float16")
            acc = T.alloc_fragment((ROWS, DIM), "float32")
            if annotate:
                T.annotate_layout({X: T.Layout(X.shape, lambda b_, l, h_, d: [b_, h_, l, d])})
            T.copy(A, a)
            T.copy(B, bt)
            T.clear(acc)
            T.gemm(a, bt, acc, transpose_B=True)
            T.atomic_add(X[b, 0:ROWS, h, :], acc)  # rows >= extent must be dropped
    return main


def compiled(extent, annotate):
    target = "auto" if torch.cuda.is_available() else tvm.target.Target({"kind": "cuda", "arch": "sm_90a"})
    return tilelang.compile(program(extent, annotate), target=target, pass_configs={"tl.disable_tma_lower": True})


def guarded(kernel) -> bool:
    lines = kernel.get_kernel_source().splitlines()
    return any(" if (" in line for i, line in enumerate(lines[:-1]) if "AtomicAdd" in lines[i + 1])


bug = False
for extent, annotate in ((1, True), (1, False), (2, True)):
    ok = guarded(compiled(extent, annotate))
    print(f"extent {extent}, layout annotated {annotate}: atomic add guarded: {ok}")
    bug |= not ok
if torch.cuda.is_available():
    a = torch.randn(ROWS, 64, dtype=torch.float16, device="cuda")
    b = torch.randn(DIM, 64, dtype=torch.float16, device="cuda")
    x = torch.zeros(BATCH, 1, HEADS, DIM, device="cuda")
    compiled(1, True)(a, b, x)
    want = (a.float() @ b.float().T)[0]
    err = (x - want).abs().max().item()
    print(f"row 0 max error {err:.3g} (the sum of all {ROWS} rows landed there: {err > 1e-2})")
    bug |= err > 1e-2
sys.exit(1 if bug else 0)
