# 19be18df3f5c: T.clear (T.fill with 0) of a 16x32 float16 shared buffer in a 96-thread kernel aborts in layout
# inference ("The iterations do not traverse full iter space"); at 128 threads, or with the buffer filled by
# T.copy instead, it compiles
# Reduced by harness reduce: python THIS_FILE prints REPRODUCED (exit 1) while the bug is here.
import sys

import tilelang
import tilelang.language as T


@T.prim_func
def program():
    with T.Kernel(T.ceildiv(T.symbolic("n"), 16), threads=96):
        T.clear(T.alloc_shared((16, 32), "float16"))


try:
    tilelang.compile(program, target=tilelang.tvm.target.Target({"kind": "cuda", "arch": "sm_90a"}))
except Exception as e:
    said = ')) has errors: ("The iterations do not traverse full iter space", "Index mapping does not form a bijective transform.")'
    print("REPRODUCED:" if said in str(e) else "NOT REPRODUCED, another error:", type(e).__name__, said)
    sys.exit(1 if said in str(e) else 0)
