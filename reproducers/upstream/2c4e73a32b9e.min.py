# 2c4e73a32b9e: tl.ThreadSync places the only barrier between a shared tile's write and a cross-thread read of it inside a
# loop that may run zero times (its body needs a barrier of its own); at n < 128 it runs none and the read
# after it races the write. Found by a generated program (2c4e73a32b9e): 11.6% of its output wrong at n = 127.
import sys

import tilelang
import tilelang.language as T
import torch

n = T.symbolic("n")


@T.prim_func
def program(X: T.Tensor((n, 64), "float32"), O: T.Tensor((n, 64), "float32")):
    with T.Kernel(T.ceildiv(n, 128), threads=256) as bx:
        A = T.alloc_fragment((128, 32), "float16")
        S = T.alloc_shared((128, 64), "float16")
        W = T.alloc_shared((64, 32), "float16")
        acc = T.alloc_fragment((128, 64), "float32")
        for i, j in T.Parallel(128, 32):
            A[i, j] = T.cast(T.if_then_else(bx * 128 + i < n, X[bx * 128 + i, j], 0.0), "float16")
        T.copy(X[bx * 128, 0], S)  # S: written here, read after the loop by other threads
        T.clear(acc)
        for k in T.Pipelined(n // 128, num_stages=3):  # no trip at all when n < 128
            for i, j in T.Parallel(64, 32):
                W[i, j] = T.cast(T.if_then_else(k * 128 + i < n, X[k * 128 + i, j], 0.0), "float16")
            T.gemm(A, W, acc, transpose_B=True)
        for i, j in T.Parallel(128, 64):
            acc[i, j] += T.cast(S[i, j], "float32")
        T.copy(acc, O[bx * 128, 0])

if torch.cuda.is_available():  # the race itself: O must equal X where the loop runs no trip
    N = 127
    x = torch.randint(-2, 3, (N, 64), device="cuda").float()
    kernel = tilelang.compile(program)
    wrong = 0
    for _ in range(20):
        o = torch.zeros(N, 64, device="cuda")
        kernel(x, o)
        wrong = max(wrong, int((o != x).sum()))
    print(f"elements of O (of {N * 64}) unlike X, worst of 20 launches: {wrong}")
    bug = wrong > 0
else:  # compile-only: is there a barrier between S's write and its read that does not sit inside the loop?
    code = tilelang.compile(program, target=tilelang.tvm.target.Target({"kind": "cuda", "arch": "sm_90a"})).get_kernel_source()
    start = code.index("for (int k = 0;")
    depth, end = 0, code.index("{", start)
    while depth or end == code.index("{", start):  # to the brace that closes the loop's body
        depth += {"{": 1, "}": -1}.get(code[end], 0)
        end += 1
    end -= 1
    outside = code[:start] + code[end + 1:]
    write = outside.index("((half_t*)S)")  # its first mention: the write
    barriers = outside[write:].count("__syncthreads()")
    print(f"__syncthreads() after S's write, outside the loop: {barriers}; inside it: {code[start:end].count('__syncthreads()')}")
    bug = barriers == 0
print("REPRODUCED" if bug else "NOT REPRODUCED")
sys.exit(1 if bug else 0)
