# 05fb3376a592: T.fill of a shared-memory region whose element count is not a multiple of the block's threads fails layout inference (compile-only)
"""05fb3376a592: a 128 x 64 shared tile S is loaded, a region of it is filled with T.fill, and it is stored back,
in one block of 256 threads. Filling S[42:103, 30:57] (61 x 27 = 1647 elements) stops in tl.LowerTileOp: 'Layout
Layout((61, 27, 1) -> (7, 256), ...) has errors: ("The iterations do not traverse full iter space", "Index
mapping does not form a bijective transform.")'. The fill is planned as a parallel loop over the 256 threads, and
1647 is not a multiple of 256. Regions at the same offset compile when their element count is a multiple of 256
(64 x 32, 32 x 24) and fail the same way when it is not (61 x 32); the whole tile compiles.
No warp specialization is involved: tile-ai/tilelang#2643 is the same failure where warp specialization makes a
block of 384 threads clear a shared tile. Recorded on TileLang 0.1.15 (compile-only, sm_90a).

    python THIS_FILE   # REPRODUCED (exit 1) or NOT REPRODUCED (exit 0); the controls are printed first
"""
import sys

import tilelang
import tilelang.language as T
import torch


def program(rows, cols, threads=256):
    @T.prim_func
    def fill_region(A: T.Tensor((128, 64), "float16"), B: T.Tensor((128, 64), "float16")):
        with T.Kernel(1, threads=threads):
            S = T.alloc_shared((128, 64), "float16")
            T.copy(A, S)
            T.fill(S[42:42 + rows, 30:30 + cols], -3.0)  # rows * cols elements over `threads` threads
            T.copy(S, B)
    return fill_region


def compiles(func) -> str:
    sm90 = tilelang.tvm.target.Target({"kind": "cuda", "arch": "sm_90a"})
    try:
        tilelang.compile(func, target="auto" if torch.cuda.is_available() else sm90)
        return ""
    except Exception as e:
        return str(e)


if __name__ == "__main__":
    for rows, cols in ((64, 32), (32, 24), (61, 32)):  # controls: 2048 and 768 elements (multiples of 256), 1952 (not)
        said = compiles(program(rows, cols))
        print(f"control {rows} x {cols} = {rows * cols} elements ({'a' if rows * cols % 256 == 0 else 'not a'} multiple of 256):",
              "compiles" if not said else said.strip().splitlines()[-1][:120])
    said = compiles(program(61, 27))
    bug = "The iterations do not traverse full iter space"
    if not said:
        print("NOT REPRODUCED: 61 x 27 compiles")
        sys.exit(0)
    print("REPRODUCED:" if bug in said else "NOT REPRODUCED, another error:", said.strip().splitlines()[-1][:300])
    sys.exit(1 if bug in said else 0)
