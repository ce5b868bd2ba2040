"""A T.Pipelined(3, num_stages=3) loop copies tile k of X (float32, converted to bfloat16) into the shared tile S and
writes S + 1 to Y through the shared tile R; after the loop, T.copy(S, O) must give the last tile, X[64:96]. The
pipeline keeps 3 versions of S (1024 bytes each), but the read after the loop addresses version 0 (X[0:32]), and R
(2048 bytes) is placed at byte 1024, over versions 1 and 2, so Y is wrong too.

    python repro.py                  # on an sm_90 GPU: REPRODUCED (exit 1) while O or Y is wrong; else exit 0
    python repro.py --control NAME   # the same program with one change (the names: CONTROLS below)
"""
import argparse
import re
import sys

import tilelang
import tilelang.language as T
import torch

CONTROLS = {
    "cuda": "compile only: the element offset of S read after the loop, and the byte offsets of S and R",
    "stages-1": "num_stages=1", "stages-1-cuda": "compile only, num_stages=1",
    "no-read-after-cuda": "compile only, without the T.copy(S, O) after the loop",
}

def build(stages, read_after):
    @T.prim_func
    def program(X: T.Tensor((96, 16), "float32"), Y: T.Tensor((96, 16), "float32"), O: T.Tensor((32, 16), "float32")):
        with T.Kernel(1, threads=128):
            S, R = T.alloc_shared((32, 16), "bfloat16"), T.alloc_shared((32, 16), "float32")
            for k in T.Pipelined(3, num_stages=stages):
                T.copy(X[k * 32, 0], S)
                for i, j in T.Parallel(32, 16):
                    R[i, j] = T.cast(S[i, j], "float32") + 1.0
                T.copy(R, Y[k * 32, 0])
            if read_after:
                T.copy(S, O)
    return program

(parser := argparse.ArgumentParser()).add_argument("--control", choices=sorted(CONTROLS))
control = parser.parse_args().control or ""
tilelang.set_log_level("WARNING")
stages = 1 if control.startswith("stages-1") else 3
program = build(stages, read_after=not control.startswith("no-read-after"))
if control.endswith("cuda"):
    code = tilelang.compile(program, target=tilelang.tvm.target.Target({"kind": "cuda", "arch": "sm_90a"})).get_kernel_source()
    at = {b: int(re.search(rf"void\* {b} = .*buf_dyn_shmem \+ (\d+)\)", code).group(1)) for b in "SR"}
    read = code.split("O_local_cast", 1)[1] if "O_local_cast" in code else ""  # the T.copy(S, O) after the loop
    offset = re.search(r"\(\(bfloat16_t\*\)S\) \+ \(*(?:(\d+) \+ )?", read) if read else None  # element offset
    versions = 3 if stages > 1 else 1  # R overlapping S's versions, or S read at another version than the last:
    wrong = (at["R"] < at["S"] + 1024 * versions and at["S"] < at["R"] + 2048) or (offset is not None and int(offset.group(1) or 0) != 1024 * (versions > 1))
    print(f"num_stages={stages}: S at byte {at['S']} ({versions} x 1024 bytes), R at byte {at['R']} (2048 bytes)" + (
        f"; S read after the loop at element {int(offset.group(1) or 0)} + 4 * threadIdx.x (the last tile's: {1024 * (versions > 1)})"
        if offset else ""))
    sys.exit(print("REPRODUCED" if wrong else "NOT REPRODUCED") or int(wrong))
if not torch.cuda.is_available():
    print("no GPU here: this check runs the kernel (sm_90); the controls ending in -cuda compile only")
    sys.exit(125)
x = torch.randint(-2, 3, (96, 16), device="cuda").float()
tilelang.compile(program)(x, y := torch.zeros_like(x), o := torch.zeros(32, 16, device="cuda"))
wrong_o, wrong_y = int((o != x[64:]).sum()), int((y != x + 1).sum())
print(f"num_stages={stages}: elements of O (of 512) unlike X[64:96]: {wrong_o}; of Y (of 1536) unlike X + 1: {wrong_y}")
sys.exit(print("REPRODUCED" if wrong_o or wrong_y else "NOT REPRODUCED") or int(wrong_o + wrong_y > 0))
