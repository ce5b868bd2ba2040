# 40c33f970701: a T.Pipelined loop with a manual schedule versions a shared tile that a scan reads in a later stage, and the scan refuses it (compile-only)
"""40c33f970701: in one block of 256 threads, a loop T.Pipelined(1, order=[0, 1, 2], stage=[0, 0, 1]) clears a
128 x 32 shared tile S and stores it in stage 0, and takes T.cummax(S, R, dim=1) in stage 1. The scan's lowering
stops: 'CumMax currently supports only 1D or 2D buffers, got 3D.' S is 2-D as written; the third dimension is most
likely the version per stage the pipeline gives a tile used across stages. T.cumsum fails the same way. Controls:
the same loop with a T.copy of S in stage 1 in place of the scan compiles, and so does the scan with num_stages=2
and no schedule. Recorded on TileLang 0.1.15 and 0.1.12 (compile-only, sm_90a); 0.1.10 has no T.cummax.

    python THIS_FILE   # REPRODUCED (exit 1) or NOT REPRODUCED (exit 0); the controls are printed first
"""
import sys

import tilelang
import tilelang.language as T
import torch


def program(later, schedule=True):
    """`later(S, R)` is stage 1's statement; without `schedule`, T.Pipelined(1, num_stages=2)."""
    pipelined = dict(order=[0, 1, 2], stage=[0, 0, 1]) if schedule else dict(num_stages=2)

    @T.prim_func
    def scan_in_stage_1(O: T.Tensor((128, 32), "float16"), P: T.Tensor((128, 32), "float16")):
        with T.Kernel(1, threads=256):
            S = T.alloc_shared((128, 32), "float16")
            R = T.alloc_shared((128, 32), "float16")
            for _ in T.Pipelined(1, **pipelined):
                T.clear(S)
                T.copy(S, O)
                later(S, R)  # stage 1
            T.copy(R, P)
    return scan_in_stage_1


def compiles(func) -> str:
    sm90 = tilelang.tvm.target.Target({"kind": "cuda", "arch": "sm_90a"})
    try:
        tilelang.compile(func, target="auto" if torch.cuda.is_available() else sm90)
        return ""
    except Exception as e:
        return str(e).strip().splitlines()[-1]


if __name__ == "__main__":
    for name, func in (("T.copy(S, R) in stage 1", program(lambda S, R: T.copy(S, R))),
                       ("T.cummax with num_stages=2, no schedule", program(lambda S, R: T.cummax(S, R, dim=1), False)),
                       ("T.cumsum in stage 1", program(lambda S, R: T.cumsum(S, R, dim=1)))):
        said = compiles(func)
        print(f"control, {name}:", "compiles" if not said else said[:160])
    said = compiles(program(lambda S, R: T.cummax(S, R, dim=1)))
    bug = "currently supports only 1D or 2D buffers, got 3D"
    print("REPRODUCED:" if bug in said else "NOT REPRODUCED:", said[:200] if said else "it compiles")
    sys.exit(1 if bug in said else 0)
