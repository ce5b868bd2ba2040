"""The backward family's offer and its build/run glue (TileLang itself lives in bwd.py).

run() is the backward's pipeline: the backward's preprocess (Delta), main kernel, dQ postprocess
and, with sinks, the sink gradient, reading O and LSE as a correct forward stores them
(`stored_forward`): the forward kernels are the forward families' to judge.
"""
from __future__ import annotations

import torch

from harness import bands, layout
from harness import reference as ref
from harness.kernels import Family, Judge, Offer, Runner, launch

SMEM_LIMIT = 160 * 1024
ACC_PER_THREAD_LIMIT = 176  # fp32 accumulators per thread: S^T, dP^T, dK, dV, dQ
DQ_ROW_PAD = 8  # the dQ accumulator's rows are padded to the fragment layout's 8-row tiles


def misfit(block_m, block_n, num_stages, threads, head_dim, head_dim_v, variant=None, extra_smem=0) -> str | None:
    """Why a backward tile config runs out of shared memory or registers, or None if it fits (`extra_smem`: bytes a
    variant of the kernel adds, e.g. the masked family's mask and bias tiles). `dq_shared` swaps
    the loops: key blocks stream through the stages, and P and the fp32 dQ tile live in shared memory."""
    warpgroups = max(threads // 128, 1)
    if block_n < 64 * warpgroups:
        # sm_90 wgmma gives each warpgroup 64 rows: with fewer key rows S^T is split by columns
        # while P/dS as register A operands are replicated, and layout inference rejects the
        # element-wise loop between them ("Layout infer conflict between s_t and ds_cast").
        # dq_shared has key rows as the dK/dV GEMMs' rows.
        return f"block_n {block_n} < 64 rows per warpgroup ({threads} threads)"
    swapped = variant == "dq_shared"
    stages = max(num_stages, 1)
    resident, streamed = (block_m, block_n) if swapped else (block_n, block_m)
    smem = (2 * (resident * (head_dim + head_dim_v)             # K, V (Q, dO when swapped)
                 + stages * streamed * (head_dim + head_dim_v)  # Q, dO per stage (K, V when swapped)
                 + block_n * block_m * (2 if swapped else 1))   # dS (and P) for the GEMMs
            + 4 * 2 * (1 if swapped else stages) * block_m      # LSE, Delta
            + (4 * block_m * head_dim if swapped else 0)        # the fp32 dQ tile
            + extra_smem)
    if smem > SMEM_LIMIT:
        return f"shared memory {smem} B exceeds {SMEM_LIMIT} B"
    acc = (2 * block_n * block_m + block_n * (head_dim + head_dim_v) + block_m * head_dim) // threads
    if acc > ACC_PER_THREAD_LIMIT:
        return f"fp32 accumulators need {acc} registers per thread (limit {ACC_PER_THREAD_LIMIT})"
    return None


def build(case, target: str) -> tuple:
    """(prep, main, post) compiled kernels, plus the sink-gradient kernel with sinks.

    A plain tuple so that compat.kernel_sources() sees every generated kernel.
    """
    from harness.kernels import bwd

    left, right = case.bounds
    main = bwd.main_kernel(case.heads, case.kv_heads, case.head_dim, case.head_dim_v, case.dtype,
                           left, right, case.sinks, case.layout, *case.tile, case.variant)
    return pipeline(case, target, main, case.layout, annotate=case.variant in bwd.FRAGMENT_DQ)


def pipeline(case, target, main, lay, annotate) -> tuple:
    """Compiled (preprocess, main, postprocess[, sink_grad]), each pinned by name on its compile
    errors. The prim_func `main` compiles first: it is what a backward case varies."""
    from harness import compat
    from harness.kernels import bwd

    main = compat.compile(main, target, case.knobs, kernel="main")
    kernels = (
        compat.compile(bwd.preprocess(case.heads, case.head_dim_v, case.dtype, lay), target, case.knobs,
                       kernel="preprocess"),
        main,
        compat.compile(bwd.postprocess(case.heads, case.head_dim, case.dtype, lay, annotate), target, case.knobs,
                       kernel="postprocess"),
    )
    if case.sinks:
        kernels += (compat.compile(bwd.sink_grad(case.heads), target, case.knobs, kernel="sink_grad"),)
    return kernels


# In the order they are judged. dSinks is all zeros on both sides when case.sinks is off;
# `tensors(case)` leaves it out then.
TENSORS = (("dQ", "gradient"), ("dK", "gradient"), ("dV", "gradient"), ("dSinks", "gradient"))


def contiguous(case) -> dict:
    """Atomic destinations whose consecutive loop elements are not consecutive addresses ->
    how many are: the fragment-matched dQ keeps none adjacent (bwd.dq_layout), and every row's
    dSinks term targets the same cell (bwd.sink_grad), so their atomics must stay scalar."""
    from harness.kernels import bwd

    found = {"dSinks": 1}
    if case.variant in bwd.FRAGMENT_DQ:
        found["dQ"] = 1
    return found


def tensors(case) -> tuple:
    return TENSORS if case.sinks else TENSORS[:3]


def floors(case, inputs) -> dict:
    """dSinks is a few numbers (one per head), each a sum over rows of p_sink * Delta, and one
    baseline run samples its rounding too thinly when a head has few rows: a correct kernel's
    dSinks over 3 rows erred by 0.00139 where the baseline erred by 0.00017
    (tests/test_bwd_reference.py). A kernel rounds P (for the PV product) and O to the input
    dtype; were each rounding an independent error of u (unit roundoff) relative, Delta_i =
    sum_j P_ij (V_j . dO_i) would scatter by
        s_i = u * sqrt(sum_j (P_ij V_j . dO_i)^2 + sum_d (O_id dO_id)^2)
    and dSinks by sigma = sqrt(sum_i (p_sink_i s_i)^2): the spread returned (the oracle's floor is k * sigma).
    """
    if not case.sinks:
        return {}
    q, k, v, do = (layout.to_canonical(inputs[n], case.layout) for n in ("q", "k", "v", "do"))
    seen = ref.visible(case.seqlen_q, case.seqlen_k, *case.bounds, device=q.device)
    return {"dSinks": sink_spread(case, q, k, v, do, inputs["sinks"], seen).sqrt().max().item()}


def sink_spread(case, q, k, v, do, sinks, seen):
    """sigma^2 per head (see floors) over the rows of canonical q, k, v, dO: sums over
    sequences add up (the varlen backward calls it once per sequence)."""
    f64 = torch.float64
    q, k, v, do, sinks = (x.to(f64) for x in (q, k, v, do, sinks))
    p, lse = ref.softmax(q, k, sinks, seen, case.head_dim ** -0.5)
    v = ref.repeat_kv(v, case.heads)
    o = p @ v
    spread = ((p * (do @ v.transpose(-1, -2))).pow(2).sum(-1) + (o * do).pow(2).sum(-1)).sqrt()
    u = torch.finfo(ref.DTYPES[case.dtype]).eps / 2
    return (torch.exp(sinks[None, :, None] - lse) * spread * u).pow(2).sum(dim=(0, 2))


def reference(case, inputs, dtype) -> dict:
    """Canonical gradients of sum(O * dO), in `dtype`: dQ/dK/dV by autograd, dSinks in closed form.

    dQ [b,h,sq,d], dK [b,hk,sk,d], dV [b,hk,sk,dv], dSinks [h] (zeros without sinks).
    """
    def leaf(name):
        return layout.to_canonical(inputs[name], case.layout).to(dtype).detach().requires_grad_()

    q, k, v = leaf("q"), leaf("k"), leaf("v")
    do = layout.to_canonical(inputs["do"], case.layout).to(dtype)
    left, right = case.bounds
    seen = ref.visible(case.seqlen_q, case.seqlen_k, left, right, device=q.device)
    sinks = inputs["sinks"].to(dtype) if case.sinks else None
    o, _ = ref.attention(q, k, v, sinks, seen, case.head_dim ** -0.5)
    grads = torch.autograd.grad((o * do).sum(), (q, k, v))
    out = {"dQ": grads[0], "dK": grads[1], "dV": grads[2]}
    out["dSinks"] = sink_grad(case, inputs, dtype) if case.sinks else \
        torch.zeros(case.heads, dtype=dtype, device=q.device)
    return out


def sink_grad(case, inputs, dtype, forward=ref.forward):
    """dSinks[h] = -sum over batch and rows of exp(sink[h] - LSE) * Delta, Delta = rowsum(O * dO).

    A backward gets O as the forward stored it, in the input dtype, and computes Delta from it
    in float32 (FlashAttention's data flow, and ours), with LSE kept in float32. So O here is the
    forward computed in `dtype` (P and O rounded as a same-precision forward rounds them) and the
    rest is float32: that rounding dominates dSinks' error when Delta is small against |O| |dO|,
    and autograd in `dtype`, going through P instead, never sees it. In float64 this is
    autograd's value exactly (tests/test_bwd_reference.py). `forward(case, inputs, dtype)` gives
    canonical {"O", "LSE"}: the dense reference, or the varlen one.
    """
    acc = torch.promote_types(dtype, torch.float32)
    o = forward(case, inputs, dtype)["O"].to(acc)
    lse = forward(case, inputs, acc)["LSE"]
    do = layout.to_canonical(inputs["do"], case.layout).to(acc)
    sinks = inputs["sinks"].to(acc)
    return -(torch.exp(sinks[None, :, None] - lse) * (o * do).sum(-1)).sum(dim=(0, 2))


def canonical(case, outputs) -> dict:
    out = {n: layout.to_canonical(outputs[n], case.layout) for n in ("dQ", "dK", "dV")}
    out["dSinks"] = outputs["dSinks"]
    return out


def do_seed(seed: int) -> int:
    """The seed of dO, derived from the case's seed (the other inputs use the seed itself)."""
    return (seed * 0x9E3779B1 + 0x7F4A7C15) % (2**63)


def make_inputs(case, device) -> dict:
    """harness.reference.make_inputs plus dO [kernel layout, dtype], all determined by case.seed."""
    inputs = ref.make_inputs(case, device)
    g = torch.Generator(device="cpu").manual_seed(do_seed(case.seed))
    do = torch.randn(case.batch, case.heads, case.seqlen_q, case.head_dim_v, generator=g)
    inputs["do"] = layout.from_canonical(do, case.layout).to(device=device, dtype=ref.DTYPES[case.dtype])
    return inputs


def _shape(case, seq, heads, dim):
    return layout.shape(case.layout, case.batch, seq, heads, dim)


def _group_sum(x, case):
    """[.., heads, ..] per query head -> [.., kv_heads, ..] summed over each group (fp32)."""
    g = case.heads // case.kv_heads
    axis = layout.head_axis(case.layout)
    shape = list(x.shape)
    x = x.float().reshape(shape[:axis] + [case.kv_heads, g] + shape[axis + 1:])
    return x.sum(dim=axis + 1)


def stored_forward(case, inputs, forward=ref.forward, lay=None) -> tuple:
    """O [`lay`, default the case's layout; input dtype] and LSE [float32] for the backward's kernels,
    in guarded buffers: what a correct forward stores, the float64 reference rounded once.

    Not a forward kernel's output: the forward families judge those, on the same shapes, and a
    backward case then compiles and tests the backward's own kernels only. (A forward compiled per
    backward kernel was 10 to 18 s of each backward's 26 to 41 s of compile on an H100 host, and
    never served a case of its own: findings/2026-11-27-controls-as-covering-rows.md.)
    `forward(case, inputs, dtype)` gives canonical {"O", "LSE"}: the family's forward reference."""
    out = forward(case, inputs, torch.float64)
    o = layout.from_canonical(out["O"], lay or case.layout).to(inputs["q"].dtype)
    return bands.adopt("O", o), bands.adopt("LSE", out["LSE"].to(torch.float32))


def run(kernels, case, inputs) -> dict:
    q, k, v, sinks, do = (inputs[n] for n in ("q", "k", "v", "sinks", "do"))
    dev, dtype = q.device, q.dtype
    nan = float("nan")
    prep_k, main_k, post_k, *sink_k = kernels
    o, lse = stored_forward(case, inputs)

    delta = bands.full("Delta", (case.batch, case.heads, case.seqlen_q), nan, torch.float32, dev)
    launch("preprocess", prep_k, o, do, delta)

    pad = -(-case.seqlen_q // DQ_ROW_PAD) * DQ_ROW_PAD
    dq_acc = bands.zeros("dQ_acc", _shape(case, pad, case.heads, case.head_dim), torch.float32, dev)
    if case.variant == "split":
        # NaN sentinels: every key row of every head must be written.
        dk_buf = bands.full("dK_heads", _shape(case, case.seqlen_k, case.heads, case.head_dim), nan, dtype, dev)
        dv_buf = bands.full("dV_heads", _shape(case, case.seqlen_k, case.heads, case.head_dim_v), nan, dtype, dev)
    else:
        dk_buf = bands.zeros("dK_acc", _shape(case, case.seqlen_k, case.kv_heads, case.head_dim), torch.float32, dev)
        dv_buf = bands.zeros("dV_acc", _shape(case, case.seqlen_k, case.kv_heads, case.head_dim_v), torch.float32, dev)
    rows = (lse, delta)
    if case.variant == "dq_shared":  # LSE and Delta padded as dQ's rows (tile-copy loads: bwd.dq_shared_kernel)
        rows = tuple(torch.nn.functional.pad(x, (0, pad - case.seqlen_q)) for x in rows)
    launch("main", main_k, q, k, v, do, *rows, dq_acc, dk_buf, dv_buf)

    dq = bands.full("dQ", _shape(case, case.seqlen_q, case.heads, case.head_dim), nan, dtype, dev)
    launch("postprocess", post_k, dq_acc, dq)
    if case.variant == "split":
        dk, dv = _group_sum(dk_buf, case).to(dtype), _group_sum(dv_buf, case).to(dtype)
    else:
        dk, dv = dk_buf.to(dtype), dv_buf.to(dtype)

    dsinks = bands.zeros("dSinks", case.heads, torch.float32, dev)  # accumulated by atomics
    if case.sinks:
        launch("sink_grad", sink_k[0], lse, delta, sinks, dsinks)
    return {"dQ": dq, "dK": dk, "dV": dv, "dSinks": dsinks}


FAMILY = Family(
    "bwd",
    Offer(
        variants=("atomic", "split", "atomic_nolayout", "atomic_tile", "dq_shared"),
        head_dims=(64, 128),
        # (block_m = query rows, block_n = key rows, num_stages, threads); 16 query rows: reductions over
        # the smallest fragments. 512 threads over 256 keys fails ptxas's register allocation (64 per
        # thread) and 384 threads split no 64-row GEMM evenly: neither is offered.
        tiles=((64, 64, 1, 128), (64, 64, 2, 128), (32, 64, 2, 128), (32, 128, 1, 256), (32, 128, 2, 256),
               (64, 128, 2, 256), (16, 64, 1, 128)),
        misfit=misfit,
    ),
    Runner(build=build, run=run, make_inputs=make_inputs),
    Judge(
        tensors=tensors,
        reference=reference,
        canonical=canonical,
        floors=floors,
        # The Delta and dSinks kernels are the same program for every variant.
        shared_kernels=frozenset({"preprocess", "sink_grad"}),
        producers={"dSinks": "sink_grad"},
        contiguous=contiguous,
    ),
)
