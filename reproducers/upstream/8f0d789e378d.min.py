"""A tile-level T.atomic_add(X[b, 0:32, h, :], acc) of a 32-row GEMM fragment into X, whose dimension 1 has extent 1
and whose layout is annotated (T.annotate_layout, dimensions 1 and 2 swapped). Rows 1-31 of the tile fall outside X
and must be dropped; only row 0 may be added to X[b, 0, h, :]. With the annotation and extent 1 the generated atomic
adds have no bounds guard and no row index, so every row lands on row 0. Without the annotation, or at extent 2, the
guard is there. (Compiled with TL_DISABLE_TMA_LOWER, so the atomic add is lowered element by element.)

    python repro.py                  # on an sm_90 GPU: REPRODUCED (exit 1) while X[b, 0, h, :] is wrong; else 0
    python repro.py --control NAME   # the same program with one change (the names: CONTROLS below)
"""
import argparse
import sys

import tilelang
import tilelang.language as T
import torch

CONTROLS = {
    "no-annotation": "without the T.annotate_layout of X",
    "cuda": "compile only: is the generated AtomicAdd guarded (extent 1, annotated)?",
    "cuda-no-annotation": "compile only: the same, without the T.annotate_layout of X",
    "cuda-extent-2": "compile only: the same, X's dimension 1 of extent 2",
}
ROWS, DIM, HEADS, BATCH = 32, 128, 4, 2


def build(extent, annotate):
    @T.prim_func
    def program(A: T.Tensor((ROWS, 64), "float16"), B: T.Tensor((DIM, 64), "float16"),
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

    return program


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--control", choices=sorted(CONTROLS))
    control = parser.parse_args().control
    tilelang.set_log_level("WARNING")
    extent = 2 if control == "cuda-extent-2" else 1
    annotate = control not in ("no-annotation", "cuda-no-annotation")
    configs = {tilelang.PassConfigKey.TL_DISABLE_TMA_LOWER: True}
    if control and control.startswith("cuda"):
        sm90 = tilelang.tvm.target.Target({"kind": "cuda", "arch": "sm_90a"})
        lines = tilelang.compile(build(extent, annotate), target=sm90, pass_configs=configs).get_kernel_source()
        lines = lines.splitlines()
        adds = [i for i, line in enumerate(lines) if "AtomicAdd" in line]
        for i in adds[:1]:
            print("\n".join(f"{j + 1:4d}: {lines[j].rstrip()}" for j in range(max(0, i - 2), i + 1)))
        guarded = bool(adds) and all(" if (" in lines[i - 1] for i in adds)
        print(f"extent {extent}, layout annotated {annotate}: every AtomicAdd guarded: {guarded}")
        print("NOT REPRODUCED" if guarded else "REPRODUCED")
        sys.exit(0 if guarded else 1)
    if not torch.cuda.is_available():
        print("no GPU here: this check runs the kernel (sm_90); --control cuda is the compile-only check")
        sys.exit(125)
    a = torch.randint(-2, 3, (ROWS, 64), device="cuda").half()
    b = torch.randint(-2, 3, (DIM, 64), device="cuda").half()
    x = torch.zeros(BATCH, 1, HEADS, DIM, device="cuda")
    tilelang.compile(build(1, annotate), pass_configs=configs)(a, b, x)
    want = (a.float() @ b.float().T)[0]  # row 0 of the tile only; small integers: exact
    error = (x - want).abs().max().item()
    print(f"layout annotated {annotate}: max |X[b, 0, h, :] - row 0 of A B^T| = {error}")
    print("REPRODUCED" if error else "NOT REPRODUCED")
    sys.exit(1 if error else 0)


if __name__ == "__main__":
    main()
