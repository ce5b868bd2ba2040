"""The body of every file `harness export` writes: harness/export.py puts a docstring first, fills in
the values below and appends the embedded modules. Valid Python by itself, so that it is linted;
the harness never imports it. What it computes mirrors harness.reference, bwd_family and
harness.oracle, line for line where it can (tests/test_export.py holds it to them).
"""
# ---- imports
import argparse
import importlib
import math
import os
import sys
import tempfile
import threading
from pathlib import Path

import torch

# ---- values
ID = ""
TITLE = ""
RUN = ""
PACKAGE = "repro"
CASE = {}
RECORDED = {}
RECORDED_ON = {}
BUILDS = []
# ---- code
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
    """The harness's backward pipeline: preprocess (Delta), main, postprocess (dQ), and with sinks the
    sink gradient, reading O and LSE as a correct forward stores them (the float64 reference rounded once)."""
    c, nan = CASE, float("nan")
    q, k, v, sinks, do = (inputs[n] for n in ("q", "k", "v", "sinks", "do"))
    dev, dtype, f32 = q.device, q.dtype, torch.float32
    fwd = forward(inputs, torch.float64)
    o = alloc("O", shape(c["seqlen_q"], c["heads"], c["head_dim_v"]), 0.0, dtype, dev)
    o.copy_(in_layout(fwd["O"]))
    lse = alloc("LSE", [c["batch"], c["heads"], c["seqlen_q"]], 0.0, f32, dev)
    lse.copy_(fwd["LSE"])
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


# ---- modules
MODULES = {}

if __name__ == "__main__":
    sys.exit(main())
