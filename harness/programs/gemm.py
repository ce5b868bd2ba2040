"""gemm: C (+)= op(A) @ op(B) with T.gemm; A shared or fragment, B shared, both 16-bit of one dtype; C a float32
fragment. Shapes and thread counts are the ones TileLang partitions over warps (a refused partition is a
documented limit, not a bug, so the rules keep to what it takes)."""
from dataclasses import dataclass, replace

from harness.programs.builder import EXACT, LENGTH_BLOCKS, operand
from harness.programs.model import Statement, fields, local, need


@dataclass(frozen=True, kw_only=True)
class Gemm(Statement):
    op = "gemm"
    a: str
    b: str
    c: str
    ta: bool
    tb: bool
    clear: bool
    policy: str


STATEMENT = Gemm

POLICIES = ("Square", "FullRow", "FullCol")
M_BY_THREADS = {128: (64, 128), 256: (128,)}
N = (32, 64, 128)
K = (16, 32, 64, 128)


def check(s, p, scope):
    fields(s, a=str, b=str, c=str, ta=bool, tb=bool, clear=bool, policy=POLICIES)
    a, b, c = local(p, s.a, 2), local(p, s.b, 2, ("shared",)), local(p, s.c, 2, ("fragment",))
    need(a.dtype == b.dtype != "float32", "A and B are float16 or bfloat16, the same")
    need(c.dtype == "float32", "C accumulates in float32")
    need(not (s.ta and a.scope == "fragment"), "a fragment A is not transposed")
    m, k = a.shape[::-1] if s.ta else a.shape
    k2, n = b.shape[::-1] if s.tb else b.shape
    need(k == k2, f"A's K ({k}) and B's K ({k2}) differ")
    need(c.shape == (m, n), f"C must be [{m}, {n}], got {list(c.shape)}")
    need(scope.threads in M_BY_THREADS and m in M_BY_THREADS[scope.threads] and n in N and k in K,
         f"M in {M_BY_THREADS.get(scope.threads, ())} for {scope.threads} threads, N in {N}, K in {K}")


def reads(s):
    return [s.a, s.b] + ([] if s.clear else [s.c])


def writes(s):
    return [s.c]


def full(s, p):
    return True


def tilelang(s, p, ind):
    args = [s.a, s.b, s.c]
    args += ["transpose_A=True"] * s.ta + ["transpose_B=True"] * s.tb
    args += [f"policy=T.GemmWarpPolicy.{s.policy}"] * (s.policy != "Square") + ["clear_accum=True"] * s.clear
    return [f"{ind}T.gemm({', '.join(args)})"]


def torch(s, p, ind):
    a = f"{s.a}.T" if s.ta else s.a
    b = f"{s.b}.T" if s.tb else s.b
    acc = "" if s.clear else f" + {s.c}"
    return [f'{ind}{s.c}[:] = rnd({a} @ {b}{acc}, "float32")']


# ------------------------------------------------------------------------------------------- drawing
PLACES = {"top": 2, "trip": 2, "guarded": 2}
CHOICES = {"policy": POLICIES}
LAUNCHES = M_BY_THREADS        # the launches (threads: blocks) a program with a gemm is drawn with


def draw(c, b, at):
    if b.threads not in M_BY_THREADS or b.block not in M_BY_THREADS[b.threads]:
        return
    m, n, k = b.block, c.one(N), c.one(K)
    dtype = b.pick(c, "dtype", ("float16", "float16", "bfloat16"))
    a_scope = b.pick(c, "scope", ("shared", "shared", "fragment"))
    ta = a_scope == "shared" and c.flip()
    tb = c.flip()
    a = operand(c, b, a_scope, dtype, (k, m) if ta else (m, k), at)
    bb = operand(c, b, "shared", dtype, (n, k) if tb else (k, n), at)
    cs = b.locals(shape=(m, n), scope="fragment", dtype="float32")
    clear = not cs or c.flip()
    acc = b.new("fragment", "float32", (m, n)) if clear and (not cs or c.flip()) else c.one(cs)
    mag = k * b.mag[a] * b.mag[bb] * (LENGTH_BLOCKS if at == "k" else 1) + (0 if clear else b.mag[acc])
    if mag > EXACT["float32"]:
        return
    b.mag[acc] = mag
    b.emit([Gemm(a=a, b=bb, c=acc, ta=ta, tb=tb, clear=clear, policy=c.one(POLICIES))], [acc])


def shrink(s, where):
    """A gemm that clears first: what it folded into may then be dropped."""
    return [] if s.clear else [(f"statement {where} (gemm) clears first", (replace(s, clear=True),))]


def access(s, p):
    """A and B read whole; C read (unless cleared first) and written whole."""
    from harness.programs.access import whole
    folded = [] if s.clear else [whole(p, s.c, "read")]
    return [whole(p, s.a, "read"), whole(p, s.b, "read"), *folded, whole(p, s.c, "write")]
