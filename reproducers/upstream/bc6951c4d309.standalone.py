"""bc6951c4d309 without the harness: bwd (dq_shared), TileLang 0.1.15 (sm_90a, compile-only; also
0.1.14, 0.1.12 and 0.1.10): a kernel of 256 threads that clears its fp32 shared dQ tile (T.clear)
before a pipelined loop fails layout inference: warp specialization adds a 128-thread producer, the
clear outside the loop is then planned over all 384 threads, and 32x64 (or 64x64) elements do not
split evenly over 384: 'InternalError: Layout ... -> (6, 384) has errors: Index mapping does not
form a bijective transform'. The same kernel compiles with 128 threads (256 in all), and with 256
threads when warp specialization is off; a 384-thread block with warp specialization off fails the
same way, so the partitioner cannot plan a loop whose extent is no multiple of the thread count, and
warp specialization walks a valid 256-thread program into it. Found by the first GPU run of the
variant (H100, 0.1.15): all 48 of its 108 cases at 256-thread tiles failed so, the 60 at 128-thread
tiles passed. Minimized compile-only on the CPU to 1x1, heads 1/1, non-causal (tile 32x128, 1 stage,
256 threads). 0.1.10 fails on the same statement with another message (the clear's own text); the
head-dim-128 face is 157ba1f2e171. A standalone TileLang program (no harness) is linked..

Recorded on TileLang 0.1.15 (none (compile-only: numerics need a GPU)): COMPILE_ERROR InternalError:
Layout Layout((32, 64, 1) -> (6, 384), transform: (_i, _j, _k) -> (_i // 12 * 2 + _j % 2, _i % 12 *
32 + _j // 2)) has errors: ("The iterations do not traverse full iter space", "Index mapping does
not form a bijective transform.")

    python THIS_FILE [--timeout SECONDS]

Exit 1: the recorded failure is here; 0: it is not; 125: cannot test here (a numerical failure needs
a GPU). The TileLang programs are the harness's (harness/kernels, embedded below with their imports
rewritten), built with the case's static values and its knobs as pass configs; inputs, the float64
reference and the tolerance (max|t - ref| <= k * max|base - ref| + atol) as the harness computes them.
"""
import argparse
import importlib
import math
import os
import sys
import tempfile
import threading
from pathlib import Path

import torch

ID = 'bc6951c4d309'
TITLE = ('bwd (dq_shared), TileLang 0.1.15 (sm_90a, compile-only; also 0.1.14, 0.1.12 and 0.1.10): a kernel of 256 '
 'threads that clears its fp32 shared dQ tile (T.clear) before a pipelined loop fails layout inference: warp '
 'specialization adds a 128-thread producer, the clear outside the loop is then planned over all 384 '
 "threads, and 32x64 (or 64x64) elements do not split evenly over 384: 'InternalError: Layout ... -> (6, "
 "384) has errors: Index mapping does not form a bijective transform'. The same kernel compiles with 128 "
 'threads (256 in all), and with 256 threads when warp specialization is off; a 384-thread block with warp '
 'specialization off fails the same way, so the partitioner cannot plan a loop whose extent is no multiple '
 'of the thread count, and warp specialization walks a valid 256-thread program into it. Found by the first '
 'GPU run of the variant (H100, 0.1.15): all 48 of its 108 cases at 256-thread tiles failed so, the 60 at '
 '128-thread tiles passed. Minimized compile-only on the CPU to 1x1, heads 1/1, non-causal (tile 32x128, 1 '
 "stage, 256 threads). 0.1.10 fails on the same statement with another message (the clear's own text); the "
 'head-dim-128 face is 157ba1f2e171. A standalone TileLang program (no harness) is linked.')
RUN = 'backward'
PACKAGE = 'repro_bc6951c4d309'
CASE = {'family': 'bwd',
 'variant': 'dq_shared',
 'batch': 1,
 'heads': 1,
 'kv_heads': 1,
 'seqlen_q': 1,
 'seqlen_k': 1,
 'head_dim': 64,
 'head_dim_v': 64,
 'dtype': 'float16',
 'causal': False,
 'window': [-1, -1],
 'sinks': False,
 'layout': 'bhsd',
 'block_m': 32,
 'block_n': 128,
 'num_stages': 1,
 'threads': 256,
 'knobs': [],
 'seed': 0,
 'seqlens': [],
 'mask': 'none',
 'mask_broadcast': 'bh',
 'bias': False,
 'bounds': [-1, -1],
 'tensors': [['dQ', 'gradient'], ['dK', 'gradient'], ['dV', 'gradient']]}
RECORDED = {'verdict': 'COMPILE_ERROR',
 'stage': 'compile',
 'tensor': '',
 'message': 'InternalError: Layout Layout((32, 64, 1) -> (6, 384), transform: (_i, _j, _k) -> (_i // 12 * 2 '
            '+ _j % 2, _i % 12 * 32 + _j // 2)) has errors: ("The iterations do not traverse full iter '
            'space", "Index mapping does not form a bijective transform.")'}
RECORDED_ON = {'tilelang': '0.1.15', 'gpu': 'none (compile-only: numerics need a GPU)'}
BUILDS = [{'kernel': 'main',
  'module': 'bwd',
  'function': 'main_kernel',
  'args': {'heads': 1,
           'kv_heads': 1,
           'head_dim': 64,
           'head_dim_v': 64,
           'dtype': 'float16',
           'left': -1,
           'right': -1,
           'sinks': False,
           'lay': 'bhsd',
           'block_m': 32,
           'block_n': 128,
           'num_stages': 1,
           'threads': 256,
           'variant': 'dq_shared'},
  'knobs': []},
 {'kernel': 'fwd',
  'module': 'fwd',
  'function': 'program',
  'args': {'heads': 1,
           'kv_heads': 1,
           'head_dim': 64,
           'head_dim_v': 64,
           'dtype': 'float16',
           'left': -1,
           'right': -1,
           'sinks': False,
           'layout_name': 'bhsd',
           'block_m': 64,
           'block_n': 64,
           'num_stages': 1,
           'threads': 128,
           'variant': 'default'},
  'knobs': []},
 {'kernel': 'preprocess',
  'module': 'bwd',
  'function': 'preprocess',
  'args': {'heads': 1, 'head_dim_v': 64, 'dtype': 'float16', 'lay': 'bhsd'},
  'knobs': []},
 {'kernel': 'postprocess',
  'module': 'bwd',
  'function': 'postprocess',
  'args': {'heads': 1, 'head_dim': 64, 'dtype': 'float16', 'lay': 'bhsd', 'annotate': False},
  'knobs': []}]
GOOD, BAD, SKIP = 0, 1, 125
DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16}
K = {"forward": 2, "gradient": 3}  # the tolerance's k: forward outputs, gradients
_HOLD = []  # the temporary package, kept while the process lives: TileLang reads a prim_func's source from it


# ----------------------------------------------------------------------------- the program
def load_modules() -> dict:
    """The embedded modules, written into a temporary directory as package PACKAGE and imported
    (TileLang parses @T.prim_func source with `inspect`, so it must come from files)."""
    tmp = tempfile.TemporaryDirectory(prefix=f"{PACKAGE}-")
    _HOLD.append(tmp)
    package = Path(tmp.name) / PACKAGE
    package.mkdir()
    (package / "__init__.py").write_text("")
    for name, text in MODULES.items():
        (package / f"{name}.py").write_text(text)
    sys.path.insert(0, tmp.name)
    return {name: importlib.import_module(f"{PACKAGE}.{name}") for name in MODULES}


def programs(mods) -> list:
    """(kernel, prim_func) per compile, in the harness's order: the builder calls its build made."""
    return [(b["kernel"], getattr(mods[b["module"]], b["function"])(**b["args"])) for b in BUILDS]


def build(mods, target) -> dict:
    """{kernel: compiled}, compiled as the harness compiles (compat.compile: knobs as pass configs,
    an arch as a TVM Target); an exception carries the failing kernel's name as `kernel`."""
    compiled = {}
    for b in BUILDS:
        func = getattr(mods[b["module"]], b["function"])(**b["args"])
        compiled[b["kernel"]] = mods["compat"].compile(func, target, tuple(b["knobs"]), kernel=b["kernel"])
    return compiled


def target() -> str:
    """The local GPU, else Hopper's arch (compiling needs no GPU)."""
    return "auto" if torch.cuda.is_available() else "sm_90a"


# ----------------------------------------------------------------------------- inputs and reference
def canonical(x):
    """A tensor in the case's layout -> [batch, heads, seq, dim] (a view)."""
    return x.transpose(1, 2) if CASE["layout"] == "bshd" else x


def in_layout(x):
    """[batch, heads, seq, dim] -> a contiguous tensor in the case's layout."""
    return (x.transpose(1, 2) if CASE["layout"] == "bshd" else x).contiguous()


def shape(seq, heads, dim) -> list:
    b = CASE["batch"]
    return [b, seq, heads, dim] if CASE["layout"] == "bshd" else [b, heads, seq, dim]


def make_inputs(device) -> dict:
    """q, k, v, sinks (and dO for a backward) from the case's seed: the harness's generator calls."""
    c, dtype = CASE, DTYPES[CASE["dtype"]]
    g = torch.Generator(device="cpu").manual_seed(c["seed"])

    def tensor(s, h, d):
        return in_layout(torch.randn(c["batch"], h, s, d, generator=g)).to(device=device, dtype=dtype)

    inputs = {"q": tensor(c["seqlen_q"], c["heads"], c["head_dim"]),
              "k": tensor(c["seqlen_k"], c["kv_heads"], c["head_dim"]),
              "v": tensor(c["seqlen_k"], c["kv_heads"], c["head_dim_v"]),
              "sinks": (torch.randn(c["heads"], generator=g) * 2 if c["sinks"]
                        else torch.zeros(c["heads"])).to(device=device, dtype=torch.float32)}
    if RUN == "backward":
        g = torch.Generator(device="cpu").manual_seed((c["seed"] * 0x9E3779B1 + 0x7F4A7C15) % (2**63))
        do = torch.randn(c["batch"], c["heads"], c["seqlen_q"], c["head_dim_v"], generator=g)
        inputs["do"] = in_layout(do).to(device=device, dtype=dtype)
    return inputs


def visible(device):
    """[seq_q, seq_k] bool: query i sees key j (bottom-right aligned window; -1 is unbounded)."""
    left, right = CASE["bounds"]
    i = torch.arange(CASE["seqlen_q"], device=device)[:, None]
    j = torch.arange(CASE["seqlen_k"], device=device)[None, :]
    shift = CASE["seqlen_k"] - CASE["seqlen_q"]
    seen = torch.ones(CASE["seqlen_q"], CASE["seqlen_k"], dtype=torch.bool, device=device)
    if left >= 0:
        seen &= j >= i + shift - left
    if right >= 0:
        seen &= j <= i + shift + right
    return seen


def repeat_kv(x):
    return x.repeat_interleave(CASE["heads"] // x.shape[1], dim=1)


def softmax(q, k, sinks, seen):
    """P (the sink's share left out) and LSE; a row that sees no key: P = 0, LSE = -inf (or the sink)."""
    s = torch.matmul(q, repeat_kv(k).transpose(-1, -2)) * CASE["head_dim"] ** -0.5
    s = s.masked_fill(~seen, float("-inf"))
    m = s.amax(dim=-1, keepdim=True)
    if sinks is not None:
        m = torch.maximum(m, sinks.to(s.dtype)[None, :, None, None])
    m = torch.where(torch.isinf(m), torch.zeros_like(m), m).detach()
    e = torch.exp(s - m)
    denom = e.sum(dim=-1, keepdim=True)
    if sinks is not None:
        denom = denom + torch.exp(sinks.to(s.dtype)[None, :, None, None] - m)
    p = e / torch.where(denom == 0, torch.ones_like(denom), denom)
    return p, (torch.log(denom) + m).squeeze(-1)


def forward(inputs, dtype) -> dict:
    """Canonical O and LSE computed in `dtype` (float64: the reference; the input dtype: the baseline)."""
    q, k, v = (canonical(inputs[n]).to(dtype) for n in ("q", "k", "v"))
    o, lse = attention(q, k, v, inputs["sinks"] if CASE["sinks"] else None)
    return {"O": o, "LSE": lse}


def attention(q, k, v, sinks):
    """O and LSE of canonical q [b,h,sq,d], k/v [b,hk,sk,d] (GQA by repetition)."""
    p, lse = softmax(q, k, sinks, visible(q.device))
    return torch.matmul(p.to(v.dtype), repeat_kv(v)), lse


def gradients(inputs, dtype) -> dict:
    """Canonical dQ, dK, dV of sum(O * dO) by autograd in `dtype`; dSinks in closed form."""
    q, k, v = (canonical(inputs[n]).to(dtype).detach().requires_grad_() for n in ("q", "k", "v"))
    o, _ = attention(q, k, v, inputs["sinks"].to(dtype) if CASE["sinks"] else None)
    do = canonical(inputs["do"]).to(dtype)
    dq, dk, dv = torch.autograd.grad((o * do).sum(), (q, k, v))
    return {"dQ": dq, "dK": dk, "dV": dv, "dSinks": sink_grad(inputs, dtype)}


def sink_grad(inputs, dtype):
    """dSinks[h] = -sum exp(sink - LSE) * rowsum(O * dO), with O as a forward in `dtype` stores it
    and the rest in float32 at least (the kernels' data flow)."""
    acc = torch.promote_types(dtype, torch.float32)
    o = forward(inputs, dtype)["O"].to(acc)
    lse = forward(inputs, acc)["LSE"]
    do = canonical(inputs["do"]).to(acc)
    return -(torch.exp(inputs["sinks"].to(acc)[None, :, None] - lse) * (o * do).sum(-1)).sum(dim=(0, 2))


def floors(inputs) -> dict:
    """dSinks' rounding spread (a few values per head: one baseline run samples it too thinly)."""
    if RUN != "backward" or not CASE["sinks"]:
        return {}
    f64 = torch.float64
    q, k, v, do = (canonical(inputs[n]).to(f64) for n in ("q", "k", "v", "do"))
    sinks = inputs["sinks"].to(f64)
    p, lse = softmax(q, k, sinks, visible(q.device))
    v = repeat_kv(v)
    o = p @ v
    spread = ((p * (do @ v.transpose(-1, -2))).pow(2).sum(-1) + (o * do).pow(2).sum(-1)).sqrt()
    u = torch.finfo(DTYPES[CASE["dtype"]]).eps / 2
    return {"dSinks": (torch.exp(sinks[None, :, None] - lse) * spread * u).pow(2).sum(dim=(0, 2)).sqrt().max().item()}


# ----------------------------------------------------------------------------- the tolerance rule
def atol_floor(ref, dtype) -> float:
    """2 * max|r + 0.3 - 0.3 - r| (r: ref rounded to dtype), and at least one ulp at max|ref|."""
    if not ref.numel():
        return 0.0
    r = ref.to(dtype)
    fa = 2 * (r + 0.3 - 0.3 - r).abs().max().item()
    top = ref.abs().max().item()
    ulp = torch.finfo(dtype).eps * 2.0 ** math.floor(math.log2(top)) if top > 0 else 0.0
    return max(fa, ulp)


def check(out, ref, base, dtype, k, floor=0.0) -> tuple:
    """(verdict, error, tolerance): PASS iff max|out - ref| <= k * max|base - ref| + atol, and
    non-finite reference entries (-inf LSE) matched exactly."""
    out, ref, base = out.double(), ref.double(), base.double()
    finite = torch.isfinite(ref)
    base_err = (base - ref)[finite].abs().max().item() if finite.any() else 0.0
    tol = k * base_err + max(atol_floor(ref[finite], dtype), floor)
    diff = (out - ref).abs()
    both = finite & torch.isfinite(out)
    err = diff[both].max().item() if both.any() else 0.0
    if (finite & ~torch.isfinite(out)).any():
        return "NONFINITE", err, tol
    if (~finite & (out != ref)).any() or (both & (diff > tol)).any():
        return "MISMATCH", err, tol
    return "PASS", err, tol


# ----------------------------------------------------------------------------- guard bands
BAND = 4096  # elements before and after every buffer the run allocates (harness.bands: the same pattern)
# A signalling NaN per dtype: any store, and any atomic add (0.0 included: it quiets the NaN), changes its bits.
PATTERN = {torch.float16: (torch.int16, 0x7DA5), torch.bfloat16: (torch.int16, 0x7FA5),
           torch.float32: (torch.int32, 0x7FA5A5A5)}
_GUARDED = []  # (name, raw buffer, elements) of every guarded buffer


def alloc(name, shape_, fill, dtype, device):
    """`shape_` filled with `fill`, a view into a larger buffer whose bands before and after hold PATTERN
    (offset by whole 8 KiB at least, so its alignment is a plain allocation's)."""
    numel = math.prod(shape_)
    raw = torch.empty(numel + 2 * BAND, dtype=dtype, device=device)
    bits, word = PATTERN[dtype]
    raw.view(bits).fill_(word)
    view = raw[BAND:BAND + numel].view(shape_)
    view.fill_(fill)
    _GUARDED.append((name, raw, numel))
    return view


def bands_changed() -> list:
    """One line per band a kernel wrote: OOB_WRITE, the buffer, the side, how many elements, the first."""
    found = []
    for name, raw, numel in _GUARDED:
        bits, word = PATTERN[raw.dtype]
        flat = raw.view(bits)
        for side, band, first in (("before", flat[:BAND], lambda i: i - BAND), ("after", flat[BAND + numel:], int)):
            changed = (band != torch.tensor(word, dtype=bits).to(band.device).view(bits)).nonzero().flatten()
            if len(changed):
                found.append(f"OOB_WRITE {name}: {len(changed)} elements written {side} the "
                             f"{'start' if side == 'before' else 'end'} (first at {first(int(changed[0])):+d})")
    return found


# ----------------------------------------------------------------------------- running
def launch(kernel, *args):
    kernel(*args)
    if torch.cuda.is_available():
        torch.cuda.synchronize()  # a fault shows at the kernel that caused it


def run_forward(compiled, inputs) -> dict:
    """The one forward kernel: (Q, K, V, Sinks, O, LSE), outputs NaN-filled (unwritten shows as NONFINITE)."""
    (kernel,) = compiled.values()
    return forward_kernel(kernel, inputs)


def forward_kernel(kernel, inputs) -> dict:
    c, q = CASE, inputs["q"]
    out = alloc("O", shape(c["seqlen_q"], c["heads"], c["head_dim_v"]), float("nan"), q.dtype, q.device)
    lse = alloc("LSE", [c["batch"], c["heads"], c["seqlen_q"]], float("nan"), torch.float32, q.device)
    launch(kernel, inputs["q"], inputs["k"], inputs["v"], inputs["sinks"], out, lse)
    return {"O": canonical(out), "LSE": lse}


def group_sum(x):
    """Per-query-head [.., heads, ..] -> per-KV-head sums (fp32)."""
    g = CASE["heads"] // CASE["kv_heads"]
    axis = 2 if CASE["layout"] == "bshd" else 1
    s = list(x.shape)
    return x.float().reshape(s[:axis] + [CASE["kv_heads"], g] + s[axis + 1:]).sum(dim=axis + 1)


def run_backward(compiled, inputs) -> dict:
    """The harness's backward pipeline: forward (O, LSE), preprocess (Delta), main, postprocess (dQ),
    and with sinks the sink gradient."""
    c, nan = CASE, float("nan")
    q, k, v, sinks, do = (inputs[n] for n in ("q", "k", "v", "sinks", "do"))
    dev, dtype, f32 = q.device, q.dtype, torch.float32
    fwd = forward_kernel(compiled["fwd"], inputs)
    o, lse = in_layout(fwd["O"]), fwd["LSE"]
    delta = alloc("Delta", [c["batch"], c["heads"], c["seqlen_q"]], nan, f32, dev)
    launch(compiled["preprocess"], o, do, delta)
    pad = -(-c["seqlen_q"] // 8) * 8  # dQ's accumulator rows padded to 8-row fragment tiles
    dq_acc = alloc("dQ_acc", shape(pad, c["heads"], c["head_dim"]), 0.0, f32, dev)
    if c["variant"] == "split":
        dk_buf = alloc("dK_heads", shape(c["seqlen_k"], c["heads"], c["head_dim"]), nan, dtype, dev)
        dv_buf = alloc("dV_heads", shape(c["seqlen_k"], c["heads"], c["head_dim_v"]), nan, dtype, dev)
    else:
        dk_buf = alloc("dK_acc", shape(c["seqlen_k"], c["kv_heads"], c["head_dim"]), 0.0, f32, dev)
        dv_buf = alloc("dV_acc", shape(c["seqlen_k"], c["kv_heads"], c["head_dim_v"]), 0.0, f32, dev)
    rows = (lse, delta)
    if c["variant"] == "dq_shared":  # LSE and Delta padded as dQ's rows
        rows = tuple(torch.nn.functional.pad(x, (0, pad - c["seqlen_q"])) for x in rows)
    launch(compiled["main"], q, k, v, do, *rows, dq_acc, dk_buf, dv_buf)
    dq = alloc("dQ", shape(c["seqlen_q"], c["heads"], c["head_dim"]), nan, dtype, dev)
    launch(compiled["postprocess"], dq_acc, dq)
    if c["variant"] == "split":
        dk, dv = group_sum(dk_buf).to(dtype), group_sum(dv_buf).to(dtype)
    else:
        dk, dv = dk_buf.to(dtype), dv_buf.to(dtype)
    dsinks = alloc("dSinks", [c["heads"]], 0.0, f32, dev)
    if c["sinks"]:
        launch(compiled["sink_grad"], lse, delta, sinks, dsinks)
    return {"dQ": canonical(dq), "dK": canonical(dk), "dV": canonical(dv), "dSinks": dsinks}


def judge(outputs, inputs) -> bool:
    """One line per tensor, in the harness's order; True when every one passes."""
    dtype = DTYPES[CASE["dtype"]]
    expect = forward if RUN == "forward" else gradients
    ref, base, spread = expect(inputs, torch.float64), expect(inputs, dtype), floors(inputs)
    ok = True
    for name, kind in CASE["tensors"]:
        verdict, err, tol = check(outputs[name], ref[name], base[name], dtype, K[kind], K[kind] * spread.get(name, 0.0))
        print(f"{name:7} {verdict:9} max error {err:.4g} {'<=' if verdict == 'PASS' else '>'} tolerance {tol:.4g}")
        ok = ok and verdict == "PASS"
    return ok


def first_line(e) -> str:
    lines = [line.strip() for line in str(e).splitlines() if line.strip()]
    said = f"{type(e).__name__}: {lines[0] if lines else ''}"
    return said + (f" ... {lines[-1]}" if len(lines) > 1 else "")


def watchdog(seconds):
    """A kernel that never returns is the recorded HANG: exit 1 from another thread."""
    def fire():
        print(f"HANG: no answer within {seconds:g} s", flush=True)
        os._exit(BAD)
    timer = threading.Timer(seconds, fire)
    timer.daemon = True
    timer.start()
    return timer


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=f"{ID}: {TITLE}")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds for inputs, run and judge (a hang is the bug)")
    args = p.parse_args(argv)
    recorded = RECORDED["verdict"]
    print(f"{ID}: recorded {recorded} {RECORDED['tensor']} on TileLang {RECORDED_ON['tilelang']} "
          f"({RECORDED_ON['gpu']}): {RECORDED['message']}")
    where = target()
    if recorded != "COMPILE_ERROR" and where != "auto":
        print("CANNOT TEST: no GPU here (a numerical failure needs one)")
        return SKIP
    mods = load_modules()
    print(f"TileLang {mods['compat'].VERSION}, target {where}")
    try:
        compiled = build(mods, where)
    except Exception as e:
        print(f"COMPILE_ERROR in kernel {getattr(e, 'kernel', '?')}: {first_line(e)}")
        print("REPRODUCED" if recorded == "COMPILE_ERROR" else f"FAILS (differently: recorded {recorded})")
        return BAD
    if recorded == "COMPILE_ERROR":
        print(f"compiled {', '.join(compiled)}: NOT REPRODUCED")
        return GOOD
    timer = watchdog(args.timeout)
    inputs = make_inputs("cuda" if torch.cuda.is_available() else "cpu")
    try:
        outputs = (run_forward if RUN == "forward" else run_backward)(compiled, inputs)
    except Exception as e:
        print(f"CRASH: {first_line(e)}")
        return BAD
    outside = bands_changed()  # judged before any value, as the harness does
    for line in outside:
        print(line)
    ok = judge(outputs, inputs) and not outside
    timer.cancel()
    print("NOT REPRODUCED" if ok else f"REPRODUCED (recorded {recorded} {RECORDED['tensor']})")
    return GOOD if ok else BAD


MODULES = {
    'blocks': r'''"""The attention math the kernel programs share: trace-time helpers and T.macro blocks.

A family exists to vary loads, stores and loop structure; the math between them (the online
softmax step, the forward's sink/normalize/LSE epilogue, the backward's S/dP/P/dS chain and its
GEMMs, the GQA head mapping, the fragments both directions allocate) is written once here, so a
fix or a seeded bug lands in every kernel that uses it.

Helpers returning an expression are plain Python (called while TileLang traces a prim_func, as
masking.py's). Helpers that emit statements are T.macro: inlined where they are called, so the
program is the one written inline. T.macro is TVMScript's (`from tvm.script.parser.tir import *`)
in 0.1.6.post2 and TileLang's own eager macro in 0.1.15. In 0.1.15 a macro argument that is a
TIR variable is renamed to the parameter's name and any other expression is bound to a new
variable, so a macro here takes buffers, regions and Python values, and variables only under
the names every caller already gives them (not the query head: with one query head per KV head
`by` is the variable `kvh` names, hence `sink_mass` is added in each kernel's own loop).
"""
import math

import tilelang.language as T

from repro_bc6951c4d309 import layout
from repro_bc6951c4d309 import masking

LOG2E = 1.4426950408889634
ACCUM = "float32"
NEG_INF = -T.infinity(ACCUM)
FULL_ROW = T.GemmWarpPolicy.FullRow


def forward_scale(head_dim):
    """1/sqrt(d) in log2 units: the forward's scores go through exp2."""
    return LOG2E / math.sqrt(head_dim)


def backward_scales(head_dim):
    """(sm_scale, scale): dS's softmax scale 1/sqrt(d), and P's exp2 scale sm_scale * log2(e)."""
    sm_scale = 1.0 / math.sqrt(head_dim)
    return sm_scale, sm_scale * LOG2E


def operand_shapes(lay, batch, seq_q, seq_k, heads, kv_heads, head_dim, head_dim_v):
    """The shapes of Q, O (or dO), K and V in layout `lay`: K and V have the KV heads."""
    return (layout.shape(lay, batch, seq_q, heads, head_dim), layout.shape(lay, batch, seq_q, heads, head_dim_v),
            layout.shape(lay, batch, seq_k, kv_heads, head_dim), layout.shape(lay, batch, seq_k, kv_heads, head_dim_v))


def kv_head(by, heads, kv_heads):
    """The KV head that query head `by` reads: GQA groups consecutive query heads."""
    return by // (heads // kv_heads)


# ----------------------------------------------------------------------------- forward
def softmax_fragments(block_m, block_n, head_dim_v, dtype, lse=True):
    """The forward's per-block state: scores, their cast for the PV GEMM, the O accumulator, the
    running max (and the previous one), the rescale factor, a block's row sums, the running
    denominator and, with `lse`, the rows' LSE."""
    return (T.alloc_fragment([block_m, block_n], ACCUM), T.alloc_fragment([block_m, block_n], dtype),
            T.alloc_fragment([block_m, head_dim_v], ACCUM), *(T.alloc_fragment([block_m], ACCUM) for _ in range(5 + lse)))


@T.macro
def softmax_init(acc_o, denom, row_max):
    """Nothing accumulated, no key seen (max = -inf)."""
    T.fill(acc_o, 0)
    T.fill(denom, 0)
    T.fill(row_max, NEG_INF)


def _log2_units(x, scale):
    """x in log2 units: scores still to be scaled by `scale`, or (scale None) already scaled."""
    return x if scale is None else x * scale


@T.macro
def window_scores(q_s, k_s, acc_s, q0, k0, shift, seq_k, left, right, block_m, block_n):
    """S = Q K^T of one (query block, key block) pair, -inf where the query does not see the key."""
    T.clear(acc_s)
    T.gemm(q_s, k_s, acc_s, transpose_B=True, policy=FULL_ROW)
    for i, j in T.Parallel(block_m, block_n):
        acc_s[i, j] = masking.visible(acc_s[i, j], NEG_INF, q0 + i, k0 + j, shift, seq_k, left, right)


@T.macro
def softmax_step(acc_s, p_cast, acc_o, row_max, row_max_prev, row_scale, row_sum, denom, block_m, block_n,
                 head_dim_v, scale):
    """One key block of the online softmax on masked scores acc_s (-inf where not seen): the new
    running max, P = exp2 of the scores against it in acc_s (and cast into p_cast for the PV GEMM),
    the denominator and O rescaled to the new max. `scale` takes the scores to log2 units (None:
    they are already)."""
    T.copy(row_max, row_max_prev)
    T.reduce_max(acc_s, row_max, dim=1, clear=False)
    for i in T.Parallel(block_m):
        # A row that has seen no key yet keeps max = -inf; scale its (zero) state by 0.
        row_scale[i] = T.if_then_else(row_max_prev[i] == NEG_INF, 0,
                                      T.exp2(_log2_units(row_max_prev[i] - row_max[i], scale)))
    for i, j in T.Parallel(block_m, block_n):
        acc_s[i, j] = T.if_then_else(row_max[i] == NEG_INF, 0, T.exp2(_log2_units(acc_s[i, j] - row_max[i], scale)))
    T.reduce_sum(acc_s, row_sum, dim=1)
    for i in T.Parallel(block_m):
        denom[i] = denom[i] * row_scale[i] + row_sum[i]
    for i, j in T.Parallel(block_m, head_dim_v):
        acc_o[i, j] *= row_scale[i]
    T.copy(acc_s, p_cast)


def sink_mass(sink, max_i, scale):
    """exp of the sink logit (one more, already scaled logit with no value row) against the row's
    running max."""
    return T.if_then_else(max_i == NEG_INF, T.exp2(sink * LOG2E), T.exp2(sink * LOG2E - max_i * scale))


def normalized(o_ij, denom_i):
    """O divided by the softmax denominator; 0 for a row that saw nothing."""
    return T.if_then_else(denom_i == 0, 0, o_ij / denom_i)


def lse(denom_i, max_i, scale):
    """The row's log-sum-exp in natural log from the denominator and the running max."""
    return T.if_then_else(max_i == NEG_INF, T.log2(denom_i), T.log2(denom_i) + max_i * scale) / LOG2E


@T.macro
def normalize(acc_o, denom, block_m, head_dim_v):
    """acc_o divided by the denominator, in place."""
    for i, j in T.Parallel(block_m, head_dim_v):
        acc_o[i, j] = normalized(acc_o[i, j], denom[i])


@T.macro
def forward_epilogue(acc_o, denom, row_max, lse_f, block_m, head_dim_v, scale):
    """After the last key block (and the sink's mass, if any, added to denom): O normalized in
    acc_o and the rows' LSE in lse_f."""
    normalize(acc_o, denom, block_m, head_dim_v)
    for i in T.Parallel(block_m):
        lse_f[i] = lse(denom[i], row_max[i], scale)


# ----------------------------------------------------------------------------- backward
def backward_fragments(block_m, block_n, head_dim, head_dim_v, dtype):
    """The key-major backward's per-block state: dS^T in shared memory (the dQ GEMM's operand),
    S^T (then P^T), dP^T = V dO^T, P^T and dS^T cast for the GEMMs, and the dK, dV, dQ
    accumulators."""
    return (T.alloc_shared([block_n, block_m], dtype),
            T.alloc_fragment([block_n, block_m], ACCUM), T.alloc_fragment([block_n, block_m], ACCUM),
            T.alloc_fragment([block_n, block_m], dtype), T.alloc_fragment([block_n, block_m], dtype),
            T.alloc_fragment([block_n, head_dim], ACCUM), T.alloc_fragment([block_n, head_dim_v], ACCUM),
            T.alloc_fragment([block_m, head_dim], ACCUM))


def probability(score, lse, qi, kj, shift, seq_q, seq_k, left, right, scale):
    """P of query qi and key kj recomputed from the raw score and the forward's LSE (natural
    log; `scale` is 1/sqrt(d) * log2(e)); 0 past seq_q and where qi does not see kj. A row that
    sees no key has LSE = -inf, but then it is masked everywhere."""
    return masking.visible(T.if_then_else(qi < seq_q, T.exp2(score * scale - lse * LOG2E), 0),
                           0, qi, kj, shift, seq_k, left, right)


def dscore(p, dp, delta, qi, kj, shift, seq_q, seq_k, left, right, sm_scale):
    """dS = P * (dP - Delta) * sm_scale, masked as `probability`."""
    return masking.visible(T.if_then_else(qi < seq_q, p * (dp - delta) * sm_scale, 0),
                           0, qi, kj, shift, seq_k, left, right)


@T.macro
def scores_t(k_s, q_s, v_s, do_s, s_t, dp_t):
    """S^T = K Q^T and dP^T = V dO^T of one (key block, query block) pair."""
    T.clear(s_t)
    T.gemm(k_s, q_s, s_t, transpose_B=True, policy=FULL_ROW)
    T.clear(dp_t)
    T.gemm(v_s, do_s, dp_t, transpose_B=True, policy=FULL_ROW)


@T.macro
def window_p_ds_t(s_t, dp_t, ds_cast, lse_s, delta_s, q0, k0, shift, seq_q, seq_k, left, right, block_m, block_n,
                  scale, sm_scale):
    """P^T (in s_t) and dS^T (in ds_cast) under the window mask, from LSE and Delta in shared memory."""
    for j, i in T.Parallel(block_n, block_m):
        s_t[j, i] = probability(s_t[j, i], lse_s[i], q0 + i, k0 + j, shift, seq_q, seq_k, left, right, scale)
        ds_cast[j, i] = dscore(s_t[j, i], dp_t[j, i], delta_s[i], q0 + i, k0 + j, shift, seq_q, seq_k,
                               left, right, sm_scale)


@T.macro
def dkdv_gemms(s_t, p_cast, ds_cast, q_s, do_s, dk_f, dv_f):
    """dV += P^T dO and dK += dS^T Q (the softmax scale is in dS)."""
    T.copy(s_t, p_cast)
    T.gemm(p_cast, do_s, dv_f, policy=FULL_ROW)
    T.gemm(ds_cast, q_s, dk_f, policy=FULL_ROW)


@T.macro
def dq_gemm(ds_cast, ds_s, k_s, dq_f):
    """This key block's share of dQ = dS K, through shared memory."""
    T.copy(ds_cast, ds_s)
    T.clear(dq_f)
    T.gemm(ds_s, k_s, dq_f, transpose_A=True, policy=FULL_ROW)


@T.macro
def store_dkdv(dk_f, dv_f, dk_rows, dv_rows, split):
    """A key block's dK and dV: copied (per query head, `split`) or added (per KV head, fp32)."""
    if split:
        T.copy(dk_f, dk_rows)
        T.copy(dv_f, dv_rows)
    else:
        T.atomic_add(dk_rows, dk_f)
        T.atomic_add(dv_rows, dv_f)
''',
    'bwd': r'''"""FlashAttention-2 style backward: preprocess (Delta), main kernel, dQ postprocess, sink gradient.

Same static parameters and masking semantics as fwd.py (bottom-right alignment,
shift = seqlen_k - seqlen_q, query i sees key j iff i + shift - left <= j <= i + shift + right,
a bound of -1 is unbounded); sequence lengths and batch are symbolic.

Variants of the main kernel:
  atomic           dQ accumulated in fp32 with element-wise T.atomic_add into a global buffer whose
                   layout is annotated to follow the MMA accumulator fragment (see `dq_layout`);
                   dK/dV accumulated across the heads of a GQA group with atomic adds into fp32.
  atomic_nolayout  the same program without the dQ layout annotation (plain row-major dQ).
  split            dQ as in `atomic`; dK/dV written per query head (no atomics), summed afterwards.
  atomic_tile      as `atomic`, with dQ added by one tile-level T.atomic_add that TileLang plans.
  dq_shared        the loops swapped (see `dq_shared_kernel`): a block owns a query block, adds
                   each key block's dQ into an fp32 shared tile with T.atomic_add and writes dQ
                   once with a plain copy; dK/dV added into fp32 global buffers with atomics;
                   LSE and Delta loaded by tile copies (the other variants load them element-wise).

The fp32 dQ accumulator has its own symbolic length `seq_q_acc` (the run glue passes seqlen_q
rounded up to a multiple of 8) because the fragment layout tiles rows by 8.
"""
import tilelang.language as T

from repro_bc6951c4d309 import compat, layout
from repro_bc6951c4d309 import blocks, masking

ACCUM = blocks.ACCUM
PREP_BLOCK = 32    # query rows per preprocess / postprocess block
SINK_THREADS = 128  # sink gradient: threads per block
SINK_ROWS = 512    # ... and query rows per block (4 per thread, so a planner may vectorize)
ROW_TILE = 8       # rows of one MMA accumulator tile (m16n8: two 8x8 tiles per instruction)
VARIANTS = ("atomic", "split", "atomic_nolayout", "atomic_tile", "dq_shared")
FRAGMENT_DQ = ("atomic", "split", "atomic_tile")  # variants whose dQ accumulator follows dq_layout


def dq_layout(buf, lay):
    """Global layout of the fp32 dQ accumulator matching an MMA accumulator fragment.

    The [seq, dim] plane is cut into 8x8 tiles. In an m16n8 accumulator, lane t holds the
    pair (row t // 4, columns 2 * (t % 4) + {0, 1}) of each 8x8 tile, so within a tile the
    element (r, c) goes to position (c % 2) * 32 + 4 * r + c // 2: the 32 lanes of a warp adding
    their first (or second) element touch 32 consecutive floats. The two elements one lane holds
    are 32 floats apart, so a correct vectorized (x2/x4) atomic add is impossible on this layout.
    """
    def tile(row, col):
        return [row // ROW_TILE, col // 8, col % 2, 4 * (row % ROW_TILE) + (col % 8) // 2]

    if lay == "bshd":
        def fn(b, s, h, d):
            r0, c0, e, lane = tile(s, d)
            return [b, r0, h, c0, e, lane]
    else:
        def fn(b, h, s, d):
            r0, c0, e, lane = tile(s, d)
            return [b, h, r0, c0, e, lane]
    return T.Layout(buf.shape, fn)


def preprocess(heads, head_dim_v, dtype, lay):
    """Delta[b, h, i] = sum_d O[b, h, i, d] * dO[b, h, i, d], in fp32."""
    batch = T.symbolic("batch")
    seq_q = T.symbolic("seq_q")
    o_shape = layout.shape(lay, batch, seq_q, heads, head_dim_v)
    blk = PREP_BLOCK

    @T.prim_func
    def prep(
        O: compat.Tensor(o_shape, dtype),
        dO: compat.Tensor(o_shape, dtype),
        Delta: compat.Tensor([batch, heads, seq_q], ACCUM),
    ):
        with T.Kernel(T.ceildiv(seq_q, blk), heads, batch, threads=128) as (bx, by, bz):
            o_f = T.alloc_fragment([blk, head_dim_v], dtype)
            do_f = T.alloc_fragment([blk, head_dim_v], dtype)
            prod = T.alloc_fragment([blk, head_dim_v], ACCUM)
            delta = T.alloc_fragment([blk], ACCUM)
            q0 = bx * blk
            T.copy(layout.rows(O, lay, bz, by, q0, blk), o_f)
            T.copy(layout.rows(dO, lay, bz, by, q0, blk), do_f)
            for i, j in T.Parallel(blk, head_dim_v):
                prod[i, j] = T.Cast(ACCUM, o_f[i, j]) * T.Cast(ACCUM, do_f[i, j])
            T.reduce_sum(prod, delta, dim=1)
            T.copy(delta, Delta[bz, by, q0:q0 + blk])

    return prep


def main_kernel(heads, kv_heads, head_dim, head_dim_v, dtype, left, right, sinks, lay,
                block_m, block_n, num_stages, threads, variant):
    """dQ (fp32, atomic), dK/dV (fp32 atomic per KV head, or per query head in `dtype` for split).

    `sinks` changes nothing here: the forward LSE already holds the sink's mass; it is a
    parameter only so that the static signature matches the forward's.
    """
    if variant not in VARIANTS:
        raise ValueError(f"bwd has no variant {variant!r}")
    if variant == "dq_shared":
        return dq_shared_kernel(heads, kv_heads, head_dim, head_dim_v, dtype, left, right, lay,
                                block_m, block_n, num_stages, threads)
    del sinks
    batch = T.symbolic("batch")
    seq_q = T.symbolic("seq_q")
    seq_k = T.symbolic("seq_k")
    seq_q_acc = T.symbolic("seq_q_acc")
    sm_scale, scale = blocks.backward_scales(head_dim)
    split = variant == "split"
    annotate = variant in FRAGMENT_DQ
    tile_dq = variant == "atomic_tile"
    q_shape, do_shape, k_shape, v_shape = blocks.operand_shapes(lay, batch, seq_q, seq_k, heads, kv_heads, head_dim, head_dim_v)
    dq_shape = layout.shape(lay, batch, seq_q_acc, heads, head_dim)
    grad_heads = heads if split else kv_heads
    grad_dtype = dtype if split else ACCUM
    dk_shape = layout.shape(lay, batch, seq_k, grad_heads, head_dim)
    dv_shape = layout.shape(lay, batch, seq_k, grad_heads, head_dim_v)

    @T.prim_func
    def bwd(
        Q: compat.Tensor(q_shape, dtype),
        K: compat.Tensor(k_shape, dtype),
        V: compat.Tensor(v_shape, dtype),
        dO: compat.Tensor(do_shape, dtype),
        Lse: compat.Tensor([batch, heads, seq_q], ACCUM),
        Delta: compat.Tensor([batch, heads, seq_q], ACCUM),
        dQ: compat.Tensor(dq_shape, ACCUM),
        dK: compat.Tensor(dk_shape, grad_dtype),
        dV: compat.Tensor(dv_shape, grad_dtype),
    ):
        # One block per (key block, query head, batch); it walks the query blocks that can see it.
        with T.Kernel(T.ceildiv(seq_k, block_n), heads, batch, threads=threads) as (bx, by, bz):
            k_s = T.alloc_shared([block_n, head_dim], dtype)
            v_s = T.alloc_shared([block_n, head_dim_v], dtype)
            q_s = T.alloc_shared([block_m, head_dim], dtype)
            do_s = T.alloc_shared([block_m, head_dim_v], dtype)
            lse_s = T.alloc_shared([block_m], ACCUM)
            delta_s = T.alloc_shared([block_m], ACCUM)
            ds_s, s_t, dp_t, p_cast, ds_cast, dk_f, dv_f, dq_f = blocks.backward_fragments(
                block_m, block_n, head_dim, head_dim_v, dtype)

            if annotate:
                T.annotate_layout({dQ: dq_layout(dQ, lay)})

            kvh = blocks.kv_head(by, heads, kv_heads)
            gh = by if split else kvh
            shift = seq_k - seq_q
            k0 = bx * block_n
            T.copy(layout.rows(K, lay, bz, kvh, k0, block_n), k_s)
            T.copy(layout.rows(V, lay, bz, kvh, k0, block_n), v_s)
            T.clear(dk_f)
            T.clear(dv_f)

            # Query blocks holding a row that sees some key of [k0, k0 + block_n): query i sees
            # key j iff j - shift - right <= i <= j - shift + left.
            lo = masking.first_query_block(k0, shift, right, block_m)
            hi = masking.end_query_block(k0, shift, left, block_n, block_m, seq_q)
            for qb in T.Pipelined(lo, T.max(lo, hi), num_stages=num_stages):
                q0 = qb * block_m
                T.copy(layout.rows(Q, lay, bz, by, q0, block_m), q_s)
                T.copy(layout.rows(dO, lay, bz, by, q0, block_m), do_s)
                # Element-wise, not T.copy: a tile copy of these rows becomes a TMA load whose
                # descriptor needs seq_q * 4 bytes to be a multiple of 16, which TileLang cannot
                # check at compile time for a symbolic length and rejects at launch otherwise.
                for i in T.Parallel(block_m):
                    lse_s[i] = T.if_then_else(q0 + i < seq_q, Lse[bz, by, q0 + i], 0)
                    delta_s[i] = T.if_then_else(q0 + i < seq_q, Delta[bz, by, q0 + i], 0)
                blocks.scores_t(k_s, q_s, v_s, do_s, s_t, dp_t)
                blocks.window_p_ds_t(s_t, dp_t, ds_cast, lse_s, delta_s, q0, k0, shift, seq_q, seq_k, left, right, block_m,
                                     block_n, scale, sm_scale)
                blocks.dkdv_gemms(s_t, p_cast, ds_cast, q_s, do_s, dk_f, dv_f)
                blocks.dq_gemm(ds_cast, ds_s, k_s, dq_f)
                if tile_dq:  # one tile-level atomic add: TileLang plans (and may vectorize) it
                    T.atomic_add(layout.rows(dQ, lay, bz, by, q0, block_m), dq_f)
                else:
                    for i, d in T.Parallel(block_m, head_dim):
                        T.atomic_add(layout.at(dQ, lay, bz, by, q0 + i, d), dq_f[i, d])

            blocks.store_dkdv(dk_f, dv_f, layout.rows(dK, lay, bz, gh, k0, block_n),
                              layout.rows(dV, lay, bz, gh, k0, block_n), split)

    return bwd


def dq_shared_kernel(heads, kv_heads, head_dim, head_dim_v, dtype, left, right, lay,
                     block_m, block_n, num_stages, threads):
    """The `dq_shared` main kernel: main_kernel's arguments (dQ row-major, dK/dV fp32 per KV
    head; LSE and Delta padded to seq_q_acc rows and loaded by tile copies), the loops swapped.
    One block per (query block, query head, batch) walks the key blocks its rows see; dQ
    collects in shared memory through T.atomic_add (an atomic into a shared buffer: TileLang
    must not widen it, CUDA has no vector atomics on shared memory) and leaves once, while dK
    and dV, which every query block adds to, go out by global atomics.
    """
    batch = T.symbolic("batch")
    seq_q = T.symbolic("seq_q")
    seq_k = T.symbolic("seq_k")
    seq_q_acc = T.symbolic("seq_q_acc")
    sm_scale, scale = blocks.backward_scales(head_dim)
    q_shape, do_shape, k_shape, v_shape = blocks.operand_shapes(lay, batch, seq_q, seq_k, heads, kv_heads, head_dim, head_dim_v)

    @T.prim_func
    def bwd(
        Q: compat.Tensor(q_shape, dtype),
        K: compat.Tensor(k_shape, dtype),
        V: compat.Tensor(v_shape, dtype),
        dO: compat.Tensor(do_shape, dtype),
        Lse: compat.Tensor([batch, heads, seq_q_acc], ACCUM),
        Delta: compat.Tensor([batch, heads, seq_q_acc], ACCUM),
        dQ: compat.Tensor(layout.shape(lay, batch, seq_q_acc, heads, head_dim), ACCUM),
        dK: compat.Tensor(layout.shape(lay, batch, seq_k, kv_heads, head_dim), ACCUM),
        dV: compat.Tensor(layout.shape(lay, batch, seq_k, kv_heads, head_dim_v), ACCUM),
    ):
        with T.Kernel(T.ceildiv(seq_q, block_m), heads, batch, threads=threads) as (bx, by, bz):
            q_s = T.alloc_shared([block_m, head_dim], dtype)
            do_s = T.alloc_shared([block_m, head_dim_v], dtype)
            k_s = T.alloc_shared([block_n, head_dim], dtype)
            v_s = T.alloc_shared([block_n, head_dim_v], dtype)
            lse_s = T.alloc_shared([block_m], ACCUM)
            delta_s = T.alloc_shared([block_m], ACCUM)
            p_s = T.alloc_shared([block_m, block_n], dtype)
            ds_s = T.alloc_shared([block_m, block_n], dtype)
            dq_s = T.alloc_shared([block_m, head_dim], ACCUM)
            s = T.alloc_fragment([block_m, block_n], ACCUM)     # S, then P
            dp = T.alloc_fragment([block_m, block_n], ACCUM)
            ds_cast = T.alloc_fragment([block_m, block_n], dtype)
            dq_f = T.alloc_fragment([block_m, head_dim], ACCUM)
            dk_f = T.alloc_fragment([block_n, head_dim], ACCUM)
            dv_f = T.alloc_fragment([block_n, head_dim_v], ACCUM)

            kvh = blocks.kv_head(by, heads, kv_heads)
            shift = seq_k - seq_q
            q0 = bx * block_m
            T.copy(layout.rows(Q, lay, bz, by, q0, block_m), q_s)
            T.copy(layout.rows(dO, lay, bz, by, q0, block_m), do_s)
            # Tile copies (TileLang may lower them to 1-D bulk copies): LSE and Delta come padded to
            # seq_q_acc rows, so a row of either is a multiple of 16 bytes, as a TMA descriptor needs.
            T.copy(Lse[bz, by, q0:q0 + block_m], lse_s)
            T.copy(Delta[bz, by, q0:q0 + block_m], delta_s)
            T.clear(dq_s)

            lo = masking.first_key_block(q0, shift, left, block_n)
            hi = masking.end_key_block(q0, shift, right, block_m, block_n, seq_k)
            for kb in T.Pipelined(lo, T.max(lo, hi), num_stages=num_stages):
                k0 = kb * block_n
                T.copy(layout.rows(K, lay, bz, kvh, k0, block_n), k_s)
                T.copy(layout.rows(V, lay, bz, kvh, k0, block_n), v_s)
                T.clear(s)
                T.gemm(q_s, k_s, s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                T.clear(dp)
                T.gemm(do_s, v_s, dp, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                for i, j in T.Parallel(block_m, block_n):
                    s[i, j] = blocks.probability(s[i, j], lse_s[i], q0 + i, k0 + j, shift, seq_q, seq_k, left, right, scale)
                    ds_cast[i, j] = blocks.dscore(s[i, j], dp[i, j], delta_s[i], q0 + i, k0 + j, shift, seq_q, seq_k,
                                                  left, right, sm_scale)
                T.copy(s, p_s)
                T.copy(ds_cast, ds_s)
                T.clear(dv_f)
                T.gemm(p_s, do_s, dv_f, transpose_A=True, policy=T.GemmWarpPolicy.FullRow)
                T.clear(dk_f)
                T.gemm(ds_s, q_s, dk_f, transpose_A=True, policy=T.GemmWarpPolicy.FullRow)
                T.clear(dq_f)
                T.gemm(ds_s, k_s, dq_f, policy=T.GemmWarpPolicy.FullRow)
                T.atomic_add(dq_s, dq_f)
                T.atomic_add(layout.rows(dK, lay, bz, kvh, k0, block_n), dk_f)
                T.atomic_add(layout.rows(dV, lay, bz, kvh, k0, block_n), dv_f)

            T.copy(dq_s, layout.rows(dQ, lay, bz, by, q0, block_m))

    return bwd


def postprocess(heads, head_dim, dtype, lay, annotate):
    """dQ (dtype, the kernel layout) from the fp32 accumulator (fragment layout when `annotate`)."""
    batch = T.symbolic("batch")
    seq_q = T.symbolic("seq_q")
    seq_q_acc = T.symbolic("seq_q_acc")
    blk = PREP_BLOCK

    @T.prim_func
    def post(
        dQacc: compat.Tensor(layout.shape(lay, batch, seq_q_acc, heads, head_dim), ACCUM),
        dQ: compat.Tensor(layout.shape(lay, batch, seq_q, heads, head_dim), dtype),
    ):
        with T.Kernel(T.ceildiv(seq_q, blk), heads, batch, threads=128) as (bx, by, bz):
            if annotate:
                T.annotate_layout({dQacc: dq_layout(dQacc, lay)})
            q0 = bx * blk
            T.copy(layout.rows(dQacc, lay, bz, by, q0, blk), layout.rows(dQ, lay, bz, by, q0, blk))

    return post


def sink_grad(heads):
    """dSinks[h] = -sum over batch and query rows of exp(sink[h] - LSE) * Delta.

    The sink is one more logit with no value row: its probability is exp(sink - LSE) and
    dlogit = p * (dP - Delta) with dP = 0. One block per (head, row block, batch); every row
    adds its term to dSinks[h] with an element-wise atomic add, so all lanes of the loop target
    one address (the destination is invariant: a vectorized AtomicAddxN here is wrong).
    dSinks must be zeroed before the launch.
    """
    batch = T.symbolic("batch")
    seq_q = T.symbolic("seq_q")

    @T.prim_func
    def sink(
        Lse: compat.Tensor([batch, heads, seq_q], ACCUM),
        Delta: compat.Tensor([batch, heads, seq_q], ACCUM),
        Sinks: compat.Tensor([heads], ACCUM),
        dSinks: compat.Tensor([heads], ACCUM),
    ):
        with T.Kernel(heads, T.ceildiv(seq_q, SINK_ROWS), batch, threads=SINK_THREADS) as (bx, by, bz):
            term = T.alloc_fragment([SINK_ROWS], ACCUM)
            for i in T.Parallel(SINK_ROWS):
                qi = by * SINK_ROWS + i
                term[i] = T.if_then_else(qi < seq_q, -T.exp(Sinks[bx] - Lse[bz, bx, qi]) * Delta[bz, bx, qi], 0)
            for i in T.Parallel(SINK_ROWS):
                T.atomic_add(dSinks[bx], term[i])

    return sink
''',
    'compat': r'''"""The one place where TileLang API differences between releases live."""
from contextlib import contextmanager

import tilelang
import tilelang.language as T

VERSION = tilelang.__version__

# T.Tensor is the annotation in current releases; very old ones only had T.Buffer.
Tensor = getattr(T, "Tensor", None) or T.Buffer


# The harness's compile knobs (harness.case.KNOBS) -> the PassConfigKey member that sets each.
KNOBS = {"fast_math": "TL_ENABLE_FAST_MATH", "no_smem_reuse": "TL_DISABLE_SHARED_MEMORY_REUSE",
         "no_tma": "TL_DISABLE_TMA_LOWER", "no_vectorize_256": "TL_DISABLE_VECTORIZE_256",
         "no_warp_specialize": "TL_DISABLE_WARP_SPECIALIZED", "no_wgmma": "TL_DISABLE_WGMMA"}


def _pass_config_key():
    transform = getattr(tilelang, "transform", None)
    return getattr(transform, "PassConfigKey", None)


def missing_knobs(knobs) -> str | None:
    """Why this release cannot set `knobs`, or None."""
    keys = _pass_config_key()
    missing = [KNOBS[k] for k in knobs if keys is None or not hasattr(keys, KNOBS[k])]
    return f"tilelang {VERSION} has no pass config {', '.join(missing)}" if missing else None


def missing_language(names) -> str | None:
    """Why this release cannot build kernels written with T.<name> for each of `names`, or None."""
    missing = [name for name in names if not hasattr(T, name)]
    return f"tilelang {VERSION} has no {', '.join('T.' + n for n in missing)}" if missing else None


def example_program(builder, *args, **kwargs):
    """The prim_func an example's builder (`@tilelang.jit`, under `@autotune` or not) makes for these
    arguments, and the pass configs its decorator sets. Built this way, nothing is tuned or run."""
    impl = getattr(builder, "jit_impl", builder)
    if not hasattr(impl, "get_tir"):  # a plain function that returns its prim_func (a user's file)
        return builder(*args, **kwargs), {}
    return impl.get_tir(*args, **kwargs), dict(impl.pass_configs or {})


def compile(func, target, knobs=(), kernel=None, pass_configs=None):
    """Compile a prim_func. `target` is "auto" (the local GPU) or an arch such as "sm_90a";
    `knobs` switch pass configurations (none: the release's defaults, passed as nothing at all), on
    top of `pass_configs` (an outside kernel's own).
    An exception names `kernel` (its `kernel` attribute), so that a compile error is pinned on
    the kernel that raised it, as a launch error is.

    An explicit arch goes in as a TVM Target object: current releases reject the string form
    ("cuda -arch=sm_90a") and older ones (0.1.8) the dict form.
    """
    configs = {**(pass_configs or {}), **{getattr(_pass_config_key(), KNOBS[k]): True for k in knobs}}
    extra = {"pass_configs": configs} if configs else {}
    try:
        if target == "auto":
            return tilelang.compile(func, target="auto", **extra)
        import tvm
        return tilelang.compile(func, target=tvm.target.Target({"kind": "cuda", "arch": target}), **extra)
    except Exception as e:
        if kernel is not None:
            try:
                e.kernel = kernel
            except AttributeError:  # an exception type without a __dict__: left unpinned
                pass
        raise


def kernel_sources(kernel) -> list[str]:
    """The generated CUDA source of each compiled kernel (a family's build may give a tuple, or a
    dict by kernel name)."""
    if isinstance(kernel, dict):
        return kernel_sources(list(kernel.values()))
    if isinstance(kernel, (tuple, list)):
        return [source for k in kernel for source in kernel_sources(k)]
    return [kernel.get_kernel_source()]


@contextmanager
def observing_passes(before, after):
    """Every TVM PassContext opened inside (TileLang opens its own per compile) also calls
    before(module, pass name) and after(module, pass name) around each pass: TVM's PassInstrument,
    added by wrapping PassContext's constructor, so it works whichever way a release opens it."""
    import tvm

    @tvm.instrument.pass_instrument
    class Observer:
        def run_before_pass(self, mod, info):
            before(mod, info.name)

        def run_after_pass(self, mod, info):
            after(mod, info.name)

    original = tvm.transform.PassContext.__init__

    def observed(self, *args, **kwargs):
        kwargs.update(zip(("opt_level", "required_pass", "disabled_pass", "instruments"), args))
        kwargs["instruments"] = [*(kwargs.get("instruments") or []), Observer()]
        original(self, **kwargs)

    tvm.transform.PassContext.__init__ = observed
    try:
        yield
    finally:
        tvm.transform.PassContext.__init__ = original
''',
    'fwd': r'''"""FlashAttention-2 style forward kernel: MHA/GQA, causal/sliding window, sinks, BHSD/BSHD.

Sequence lengths and batch are symbolic, so one compiled kernel serves every length of a
static configuration (harness.case.static_key). Variants differ in the epilogue only: `default`
stores O through shared memory (a tile copy TileLang may lower to a TMA store) and LSE as a tile
copy; `direct` stores both element-wise from registers, guarded by the sequence length.
Masking: harness/kernels/masking.py; where the sequence and head axes sit: harness/layout.py.
"""
import tilelang.language as T

from repro_bc6951c4d309 import compat, layout
from repro_bc6951c4d309 import blocks, masking

VARIANTS = ("default", "direct")


def program(heads, kv_heads, head_dim, head_dim_v, dtype, left, right, sinks, layout_name,
            block_m, block_n, num_stages, threads, variant="default"):
    if variant not in VARIANTS:
        raise ValueError(f"fwd has no variant {variant!r}")
    direct = variant == "direct"
    batch = T.symbolic("batch")
    seq_q = T.symbolic("seq_q")
    seq_k = T.symbolic("seq_k")
    scale = blocks.forward_scale(head_dim)
    accum = blocks.ACCUM
    lay = layout_name
    q_shape, o_shape, k_shape, v_shape = blocks.operand_shapes(lay, batch, seq_q, seq_k, heads, kv_heads, head_dim,
                                                               head_dim_v)

    @T.prim_func
    def main(
        Q: compat.Tensor(q_shape, dtype),
        K: compat.Tensor(k_shape, dtype),
        V: compat.Tensor(v_shape, dtype),
        Sinks: compat.Tensor([heads], accum),
        Out: compat.Tensor(o_shape, dtype),
        Lse: compat.Tensor([batch, heads, seq_q], accum),
    ):
        with T.Kernel(T.ceildiv(seq_q, block_m), heads, batch, threads=threads) as (bx, by, bz):
            q_s = T.alloc_shared([block_m, head_dim], dtype)
            k_s = T.alloc_shared([block_n, head_dim], dtype)
            v_s = T.alloc_shared([block_n, head_dim_v], dtype)
            o_s = T.alloc_shared([block_m, head_dim_v], dtype)
            acc_s, p_cast, acc_o, row_max, row_max_prev, row_scale, row_sum, denom, lse_f = blocks.softmax_fragments(
                block_m, block_n, head_dim_v, dtype)

            kvh = blocks.kv_head(by, heads, kv_heads)
            shift = seq_k - seq_q
            q0 = bx * block_m
            T.copy(layout.rows(Q, lay, bz, by, q0, block_m), q_s)
            blocks.softmax_init(acc_o, denom, row_max)

            # Only key blocks that some row of this query block may see.
            lo = masking.first_key_block(q0, shift, left, block_n)
            hi = masking.end_key_block(q0, shift, right, block_m, block_n, seq_k)
            for kb in T.Pipelined(lo, T.max(lo, hi), num_stages=num_stages):
                k0 = kb * block_n
                T.copy(layout.rows(K, lay, bz, kvh, k0, block_n), k_s)
                blocks.window_scores(q_s, k_s, acc_s, q0, k0, shift, seq_k, left, right, block_m, block_n)
                blocks.softmax_step(acc_s, p_cast, acc_o, row_max, row_max_prev, row_scale, row_sum, denom, block_m,
                                    block_n, head_dim_v, scale)
                T.copy(layout.rows(V, lay, bz, kvh, k0, block_n), v_s)
                T.gemm(p_cast, v_s, acc_o, policy=T.GemmWarpPolicy.FullRow)

            if sinks:
                for i in T.Parallel(block_m):
                    denom[i] += blocks.sink_mass(Sinks[by], row_max[i], scale)
            blocks.forward_epilogue(acc_o, denom, row_max, lse_f, block_m, head_dim_v, scale)
            if direct:
                for i, j in T.Parallel(block_m, head_dim_v):
                    if q0 + i < seq_q:
                        if lay == "bshd":
                            Out[bz, q0 + i, by, j] = acc_o[i, j]
                        else:
                            Out[bz, by, q0 + i, j] = acc_o[i, j]
                for i in T.Parallel(block_m):
                    if q0 + i < seq_q:
                        Lse[bz, by, q0 + i] = lse_f[i]
            else:
                T.copy(acc_o, o_s)
                T.copy(o_s, layout.rows(Out, lay, bz, by, q0, block_m))
                T.copy(lse_f, Lse[bz, by, q0:q0 + block_m])

    return main
''',
    'layout': r'''"""Where the sequence and head axes sit: written once for kernels and once for host tensors.

A layout names the order of a [batch, heads, seq, dim] tensor's axes in memory: "bhsd" (canonical)
or "bshd"; "thd" packs the sequences of a batch one after another ([total tokens, heads, dim],
varlen), so its batch and row arguments are absolute token offsets and its canonical form is one
batch of all tokens, [1, heads, total, dim]. Kernels call `shape`, `rows` and `at` while TileLang
traces them (plain Python indexing on a buffer, so every release parses it); the host side calls
`to_canonical` / `from_canonical`. A new layout is one more case in each function here.
"""
from __future__ import annotations

# Bytes: the widest vector copy of a mask or bias row, and a padded row's pitch (the masked families).
ROW_ALIGN = 16


def shape(layout, batch, seq, heads, dim) -> list:
    """`seq` is the total token count for "thd" (which has no batch axis)."""
    return {"bshd": [batch, seq, heads, dim], "thd": [seq, heads, dim]}.get(layout, [batch, heads, seq, dim])


def rows(buf, layout, b, h, start, n):
    """The [n, dim] tile of rows start..start+n of head h in batch b (a buffer region)."""
    if layout == "thd":
        return buf[start:start + n, h, :]
    return buf[b, start:start + n, h, :] if layout == "bshd" else buf[b, h, start:start + n, :]


def at(buf, layout, b, h, s, d):
    """One element."""
    if layout == "thd":
        return buf[s, h, d]
    return buf[b, s, h, d] if layout == "bshd" else buf[b, h, s, d]


def head_axis(layout) -> int:
    return 1 if layout in ("bhsd", "thd") else 2


def to_canonical(x, layout):
    """A host tensor in `layout` -> [batch, heads, seq, dim] (a view)."""
    if layout == "thd":
        return x.transpose(0, 1).unsqueeze(0)
    return x.transpose(1, 2) if layout == "bshd" else x


def from_canonical(x, layout):
    """[batch, heads, seq, dim] -> a contiguous host tensor in `layout`."""
    if layout == "thd":
        return x.squeeze(0).transpose(0, 1).contiguous()
    return (x.transpose(1, 2) if layout == "bshd" else x).contiguous()
''',
    'masking': r'''"""Window masking shared by the attention kernels: Python helpers called from @T.prim_func bodies.

Why helpers: in older TileLang releases (0.1.6.post2) an assignment under a Python-level `if`
inside a prim_func is scoped to that `if` and silently lost after it, so a bound written as
`lo = 0; if left >= 0: lo = ...` stays 0. Each helper returns one expression instead.
Semantics (FlashAttention, bottom-right aligned): with shift = seq_k - seq_q, query i sees key j
iff i + shift - left <= j <= i + shift + right; a bound of -1 is unbounded.
"""
import tilelang.language as T


def visible(value, fill, qi, kj, shift, seq_k, left, right):
    """`value` where query qi sees key kj (kj < seq_k and inside the window), else `fill`."""
    value = T.if_then_else(kj < seq_k, value, fill)
    if left >= 0:
        value = T.if_then_else(kj >= qi + shift - left, value, fill)
    if right >= 0:
        value = T.if_then_else(kj <= qi + shift + right, value, fill)
    return value


def first_key_block(q0, shift, left, block_n):
    """The first key block that a row of the query block starting at q0 may see."""
    return T.max(0, T.floordiv(q0 + shift - left, block_n)) if left >= 0 else 0


def end_key_block(q0, shift, right, block_m, block_n, seq_k):
    """One past the last key block that a row of the query block starting at q0 may see."""
    end = T.ceildiv(seq_k, block_n)
    return T.max(0, T.min(end, T.ceildiv(q0 + block_m + shift + right, block_n))) if right >= 0 else end


def first_query_block(k0, shift, right, block_m):
    """The first query block with a row that may see a key of the block starting at k0."""
    return T.max(0, T.floordiv(k0 - shift - right, block_m)) if right >= 0 else 0


def end_query_block(k0, shift, left, block_n, block_m, seq_q):
    """One past the last query block with a row that may see a key of the block starting at k0."""
    end = T.ceildiv(seq_q, block_m)
    return T.max(0, T.min(end, T.ceildiv(k0 + block_n - shift + left, block_m))) if left >= 0 else end
''',
}

if __name__ == "__main__":
    sys.exit(main())
