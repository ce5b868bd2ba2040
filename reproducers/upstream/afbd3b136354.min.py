"""T.copy of a 16 x 16 float16 shared tile into a global buffer at column offset 2 (4 bytes into a row): the copy is
lowered to a TMA store whose box starts at a column that is not 16-byte aligned, and the launch fails with an illegal
instruction. B[bx * 16 + i, 2 + j] must equal A[bx * 16 + i, j]. (load-column-4: the same on the load side.)

    python repro.py                  # on an sm_90 GPU: REPRODUCED (exit 1) while it crashes or B is wrong; else 0
    python repro.py --control NAME   # the same program with one change (the names: CONTROLS below)
"""
import argparse
import sys

import tilelang
import tilelang.language as T
import torch

CONTROLS = {"column-0": "the store at column offset 0", "no-tma": "pass config TL_DISABLE_TMA_LOWER=True",
            "load-column-4": "the other side: a T.copy from A at column offset 4 into S in a T.Pipelined loop, "
                             "stored at column 0",
            "cuda": "compile only: the TMA calls generated for the store at column 2 and the load at column 4"}
CONFIGS = {"no-tma": {tilelang.PassConfigKey.TL_DISABLE_TMA_LOWER: True}}
n = T.symbolic("n")


def build(col):
    @T.prim_func
    def program(A: T.Tensor((n, 16), "float16"), B: T.Tensor((n, 24), "float16")):
        with T.Kernel(T.ceildiv(n, 16), threads=128) as bx:
            S = T.alloc_shared((16, 16), "float16")
            T.copy(A[bx * 16, 0], S)
            T.copy(S, B[bx * 16, col])

    return program


def build_load():
    @T.prim_func
    def program(A: T.Tensor((n, 24), "float16"), B: T.Tensor((n, 16), "float16")):
        with T.Kernel(T.ceildiv(n, 16), threads=128) as bx:
            S = T.alloc_shared((16, 16), "float16")
            for _ in T.Pipelined(1, num_stages=1):
                T.copy(A[bx * 16, 4], S)
            T.copy(S, B[bx * 16, 0])

    return program


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--control", choices=sorted(CONTROLS))
    control = parser.parse_args().control
    tilelang.set_log_level("WARNING")
    if control == "cuda":
        sm90 = tilelang.tvm.target.Target({"kind": "cuda", "arch": "sm_90a"})
        for name, func in (("store at column 2", build(2)), ("load at column 4", build_load())):
            calls = [line.strip() for line in tilelang.compile(func, target=sm90).get_kernel_source().splitlines()
                     if "tl::tma_load(" in line or "tl::tma_store(" in line]
            print(f"{name}: " + "; ".join(calls))
        sys.exit(0)
    if not torch.cuda.is_available():
        print("no GPU here: this check runs the kernel (sm_90)")
        sys.exit(125)
    load = control == "load-column-4"
    col = 4 if load else 0 if control == "column-0" else 2
    a = torch.randint(-2, 3, (33, 24 if load else 16), device="cuda").half()
    b = torch.zeros(33, 16 if load else 24, device="cuda", dtype=torch.float16)
    try:
        kernel = tilelang.compile(build_load() if load else build(col), pass_configs=CONFIGS.get(control, {}))
        kernel(a, b)
        torch.cuda.synchronize()
    except Exception as e:
        print(f"REPRODUCED: {type(e).__name__}: {str(e).strip().splitlines()[0]}")
        sys.exit(1)
    right = bool((b == a[:, 4:20]).all()) if load else bool((b[:, col:col + 16] == a).all())
    print(f"column offset {col} ({'load' if load else 'store'}): ran, B {'right' if right else 'wrong'}")
    print("NOT REPRODUCED" if right else "REPRODUCED")
    sys.exit(0 if right else 1)


if __name__ == "__main__":
    main()
