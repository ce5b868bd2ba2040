"""The backward family's reference gradients against an independent loop formula and finite differences."""
import math

import pytest
import torch
from naive import visible_keys

from harness import layout, oracle, reference
from harness.case import Case
from harness.kernels import bwd_family

F64 = torch.float64


def naive_grads(q, k, v, do, sinks, left, right):
    """FlashAttention's backward written element by element, float64, [b, h, s, d] tensors.

    dS_ij = P_ij (dO_i . V_j - Delta_i) with Delta_i = dO_i . O_i; the sink is a logit with no
    value row, so its gradient is -sum_i P_sink,i Delta_i.
    """
    b, h, sq, d = q.shape
    hk, sk = k.shape[1], k.shape[2]
    scale = 1 / math.sqrt(d)
    dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
    dsinks = torch.zeros(h, dtype=F64)
    for bi in range(b):
        for hi in range(h):
            kh = hi // (h // hk)
            for i in range(sq):
                keys = visible_keys(i, sq, sk, left, right)
                logits = {j: float(q[bi, hi, i] @ k[bi, kh, j]) * scale for j in keys}
                extra = [float(sinks[hi])] if sinks is not None else []
                if not logits and not extra:
                    continue  # a row that sees nothing: O = 0, no gradient
                z = sum(math.exp(x) for x in list(logits.values()) + extra)
                p = {j: math.exp(x) / z for j, x in logits.items()}
                o = sum((p[j] * v[bi, kh, j] for j in keys), torch.zeros(v.shape[-1], dtype=F64))
                delta = float(do[bi, hi, i] @ o)
                for j in keys:
                    ds = p[j] * (float(do[bi, hi, i] @ v[bi, kh, j]) - delta)
                    dq[bi, hi, i] += scale * ds * k[bi, kh, j]
                    dk[bi, kh, j] += scale * ds * q[bi, hi, i]
                    dv[bi, kh, j] += p[j] * do[bi, hi, i]
                if sinks is not None:
                    dsinks[hi] -= math.exp(float(sinks[hi])) / z * delta
    return dq, dk, dv, dsinks


def canonical_inputs(case):
    inputs = bwd_family.make_inputs(case, "cpu")
    q, k, v, do = (layout.to_canonical(inputs[n], case.layout).double() for n in ("q", "k", "v", "do"))
    return inputs, q, k, v, do


CASES = [
    Case(family="bwd", variant="atomic", heads=2, kv_heads=1, seqlen_q=5, seqlen_k=7, head_dim=4, head_dim_v=3),
    Case(family="bwd", variant="split", heads=4, kv_heads=2, seqlen_q=6, seqlen_k=4, head_dim=3, head_dim_v=5,
         causal=True, sinks=True, layout="bshd", seed=3),
    # seqlen_q > seqlen_k and causal: the first two query rows see no key (empty rows).
    Case(family="bwd", variant="atomic", heads=3, kv_heads=3, seqlen_q=5, seqlen_k=3, head_dim=4, head_dim_v=4,
         causal=True, seed=7),
    Case(family="bwd", variant="split", heads=2, kv_heads=1, seqlen_q=5, seqlen_k=3, head_dim=4, head_dim_v=4,
         causal=True, sinks=True, seed=8),
    Case(family="bwd", variant="atomic_nolayout", batch=2, heads=2, kv_heads=2, seqlen_q=7, seqlen_k=7,
         head_dim=4, head_dim_v=2, window=(1, 2), sinks=True, seed=11),
    # A window that misses every key for some rows: (left, right) = (0, 0) with shift -3.
    Case(family="bwd", variant="atomic", heads=2, kv_heads=1, seqlen_q=6, seqlen_k=3, head_dim=4, head_dim_v=4,
         window=(0, 0), seed=5),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_reference_matches_naive_formula(case):
    case.validate()
    inputs, q, k, v, do = canonical_inputs(case)
    got = bwd_family.reference(case, inputs, F64)
    want = naive_grads(q, k, v, do, inputs["sinks"].double() if case.sinks else None, *case.bounds)
    for name, w in zip(("dQ", "dK", "dV", "dSinks"), want):
        assert torch.isfinite(got[name]).all(), name
        torch.testing.assert_close(got[name], w, rtol=1e-9, atol=1e-9, msg=name)


@pytest.mark.parametrize("case", [CASES[2], CASES[3], CASES[5]], ids=lambda c: c.id)
def test_empty_rows_have_zero_gradient_and_no_nan(case):
    inputs, *_ = canonical_inputs(case)
    left, right = case.bounds
    empty = ~reference.visible(case.seqlen_q, case.seqlen_k, left, right).any(dim=1)
    assert empty.any(), "the case should have rows that see no key"
    for dtype in (F64, torch.float32, reference.DTYPES[case.dtype]):
        got = bwd_family.reference(case, inputs, dtype)
        for name in ("dQ", "dK", "dV", "dSinks"):
            assert torch.isfinite(got[name]).all(), (name, dtype)
        assert (got["dQ"][:, :, empty] == 0).all()


def test_dsinks_closed_form_is_autograds_value():
    """In float64 the closed form equals autograd's gradient of sum(O * dO) for the sink logits."""
    case = Case(family="bwd", variant="atomic", batch=2, heads=4, kv_heads=2, seqlen_q=9, seqlen_k=6,
                head_dim=8, head_dim_v=8, window=(2, 1), sinks=True, seed=21)
    inputs, q, k, v, do = canonical_inputs(case)
    sinks = inputs["sinks"].double().requires_grad_()
    seen = reference.visible(case.seqlen_q, case.seqlen_k, *case.bounds)
    o, _ = reference.attention(q, k, v, sinks, seen, case.head_dim ** -0.5)
    [want] = torch.autograd.grad((o * do).sum(), [sinks])
    got = bwd_family.reference(case, inputs, F64)["dSinks"]
    torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-12)


def test_dsinks_baseline_carries_the_rounding_of_the_stored_o():
    """A correct kernel computes Delta from O stored in fp16. On this case (found on the GPU,
    tilelang 0.1.15: kernel error 0.01425) rounding O alone costs 0.0145, while autograd in fp16
    errs by 0.00165: a baseline without the stored O's rounding failed a correct kernel."""
    case = Case(family="bwd", variant="atomic", batch=2, heads=1, kv_heads=1, seqlen_q=56, seqlen_k=1,
                head_dim=128, head_dim_v=128, window=(64, 129), sinks=True, layout="bshd", seed=2925)
    inputs = bwd_family.make_inputs(case, "cpu")
    exact = bwd_family.reference(case, inputs, F64)["dSinks"]
    base = bwd_family.reference(case, inputs, torch.float16)["dSinks"]
    fwd = reference.forward(case, inputs, F64)
    do = layout.to_canonical(inputs["do"], case.layout).double()
    delta = (fwd["O"].half().double() * do).sum(-1)
    kernel_like = -(torch.exp(inputs["sinks"].double()[None, :, None] - fwd["LSE"]) * delta).sum(dim=(0, 2))
    check = oracle.check("dSinks", kernel_like, exact, base, torch.float16, oracle.K_GRADIENT, lambda n, i: "")
    assert check.error > 0.01 and check.ok, check


@pytest.mark.parametrize("case", [CASES[1], CASES[3], CASES[5]], ids=lambda c: c.id)
def test_reference_matches_finite_differences(case):
    """torch.autograd.gradcheck through the reference's own forward, float64, sinks included."""
    inputs, q, k, v, do = canonical_inputs(case)
    left, right = case.bounds
    seen = reference.visible(case.seqlen_q, case.seqlen_k, left, right)
    sinks = inputs["sinks"].double() if case.sinks else torch.zeros(case.heads, dtype=F64)
    leaves = [t.clone().requires_grad_() for t in (q, k, v, sinks)]

    def loss(q, k, v, s):
        o, _ = reference.attention(q, k, v, s if case.sinks else None, seen, case.head_dim ** -0.5)
        return (o * do).sum()

    assert torch.autograd.gradcheck(loss, leaves, eps=1e-6, atol=1e-6, rtol=1e-5)


def test_make_inputs_is_deterministic_and_do_is_its_own_stream():
    case = Case(family="bwd", variant="split", heads=2, kv_heads=1, seqlen_q=5, seqlen_k=4,
                head_dim=4, head_dim_v=4, seed=9)
    a, b = bwd_family.make_inputs(case, "cpu"), bwd_family.make_inputs(case, "cpu")
    for name in a:
        assert torch.equal(a[name], b[name]), name
    assert a["do"].shape == (1, 2, 5, 4) and a["do"].dtype == torch.float16
    assert not torch.equal(a["do"], bwd_family.make_inputs(case.replace(seed=10), "cpu")["do"])
    # The forward inputs are exactly the forward family's.
    base = reference.make_inputs(case, "cpu")
    for name in base:
        assert torch.equal(a[name], base[name]), name
    # bshd holds the same canonical values.
    c = bwd_family.make_inputs(case.replace(layout="bshd"), "cpu")
    assert torch.equal(layout.to_canonical(c["do"], "bshd"), a["do"])


@pytest.mark.parametrize("lay", ["bhsd", "bshd"])
def test_group_sum_of_split_buffers(lay):
    case = Case(family="bwd", variant="split", batch=2, heads=6, kv_heads=2, seqlen_k=5, layout=lay)
    per_head = torch.randn(2, 6, 5, 3, dtype=F64)  # canonical [b, h, s, d]
    buf = layout.from_canonical(per_head, lay)
    got = layout.to_canonical(bwd_family._group_sum(buf, case), lay)
    want = per_head.view(2, 2, 3, 5, 3).sum(dim=2)
    torch.testing.assert_close(got, want.float())


def test_reference_bshd_equals_bhsd():
    case = CASES[1]
    got = bwd_family.reference(case, bwd_family.make_inputs(case, "cpu"), F64)
    other = case.replace(layout="bhsd")
    want = bwd_family.reference(other, bwd_family.make_inputs(other, "cpu"), F64)
    for name in got:
        torch.testing.assert_close(got[name], want[name], rtol=1e-12, atol=1e-12)


def test_offer_is_consistent():
    fam = bwd_family.FAMILY
    for d in fam.offer.head_dims:
        assert any(fam.offer.misfit(*t, d, d) is None for t in fam.offer.tiles), d
    case = CASES[0].replace(head_dim=64, head_dim_v=64, block_m=64, block_n=64, num_stages=1, threads=128)
    assert fam.offer.unsupported(case) is None
    assert "variant" in fam.offer.unsupported(case.replace(variant="default"))
    assert fam.offer.unsupported(case.replace(head_dim=96)) is not None
    assert "warpgroup" in fam.offer.misfit(64, 64, 1, 256, 64, 64)
    # dq_shared streams K and V through the stages and keeps P and the fp32 dQ tile in shared memory
    wide = case.replace(head_dim=128, head_dim_v=128, block_m=32, block_n=128, num_stages=2, threads=256)
    assert fam.offer.unsupported(wide) is None
    assert "shared memory 180480 B" in fam.offer.unsupported(wide.replace(variant="dq_shared"))
    assert fam.offer.unsupported(wide.replace(variant="dq_shared", num_stages=1)) is None
    assert bwd_family.tensors(case) == bwd_family.TENSORS[:3]
    assert bwd_family.tensors(case.replace(sinks=True)) == bwd_family.TENSORS


def _fa2_dsinks(case, inputs):
    """dSinks as a FlashAttention-2 kernel computes it in fp16: unnormalized P rounded for the
    PV product, O normalized at the end and stored in fp16, Delta and LSE in fp32."""
    q, k, v = (layout.to_canonical(inputs[n], case.layout).float() for n in ("q", "k", "v"))
    do = layout.to_canonical(inputs["do"], case.layout).float()
    sink = inputs["sinks"].float()[None, :, None, None]
    s = (q @ k.transpose(-1, -2)) * case.head_dim ** -0.5
    s = s.masked_fill(~reference.visible(case.seqlen_q, case.seqlen_k, *case.bounds), float("-inf"))
    m = torch.maximum(s.amax(-1, keepdim=True), sink)
    p = torch.exp(s - m)
    denom = p.sum(-1, keepdim=True) + torch.exp(sink - m)
    o = ((p.half().float() @ v) / denom).half().float()
    terms = torch.exp(sink - m - torch.log(denom)).squeeze(-1) * (o * do).sum(-1)
    return -terms.sum(dim=(0, 2)).double(), terms


def test_dsinks_floor_covers_a_correct_kernel_on_few_rows_but_not_a_lost_row():
    # Found on the GPU (tilelang 0.1.15): dSinks error 0.001395, baseline error 0.000169.
    case = Case(family="bwd", variant="atomic_tile", batch=3, heads=1, kv_heads=1, seqlen_q=1, seqlen_k=1,
                head_dim=64, head_dim_v=128, window=(3, 3), sinks=True, layout="bshd", seed=285)
    inputs = bwd_family.make_inputs(case, "cpu")
    exact = bwd_family.reference(case, inputs, F64)["dSinks"]
    base = bwd_family.reference(case, inputs, torch.float16)["dSinks"]
    floor = oracle.K_GRADIENT * bwd_family.floors(case, inputs)["dSinks"]
    fa2, terms = _fa2_dsinks(case, inputs)

    def judge(out, floor):
        return oracle.check("dSinks", out, exact, base, torch.float16, oracle.K_GRADIENT, lambda n, i: "", floor)

    assert (fa2 - exact).abs().item() > 3 * (base.double() - exact).abs().item()  # the baseline alone: too thin
    assert judge(fa2, floor).ok
    smallest = terms.abs().min()
    assert not judge(fa2 + smallest.double(), floor).ok  # one row's term lost: still caught



# Where each backward's main kernel takes LSE: after (q, k, v, dO), the packed offsets, or the mask, bias and activity.
LSE_ARG = {"bwd": 4, "varlen_bwd": 6, "masked_bwd": 7}


# All but the first have rows that see no key (-inf LSE, O = 0): causal with more queries than keys, a window
# that misses every key, a sequence without keys.
@pytest.mark.parametrize("case", [
    CASES[1], CASES[2], CASES[5],
    Case(family="varlen_bwd", variant="atomic", layout="thd", batch=3, seqlens=((5, 9), (0, 4), (7, 3)), seqlen_q=7,
         seqlen_k=9, heads=4, kv_heads=2, head_dim=8, head_dim_v=8, causal=True, seed=2),
    Case(family="masked_bwd", variant="ragged", heads=2, kv_heads=1, seqlen_q=6, seqlen_k=5, head_dim=8,
         head_dim_v=8, mask="causal", bias=True, layout="bshd", seed=4),
], ids=lambda c: c.family + "-" + c.id)
def test_the_backward_reads_o_and_lse_as_a_correct_forward_stores_them(case):
    """No forward kernel runs in a backward case: O in the input dtype and LSE in float32 are the float64
    reference rounded once, in the layout the kernels read (-inf LSE where a row sees no key)."""
    from harness import kernels

    fam = kernels.family(case.family)
    seen = {}

    def preprocess(o, do, delta):
        seen["O"] = o.clone()

    def main(*args):
        seen["LSE"] = args[LSE_ARG[case.family]].clone()

    def nothing(*args):
        pass

    stubs = (preprocess, main, nothing) + ((nothing,) if case.sinks or case.family == "masked_bwd" else ())
    inputs = fam.runner.make_inputs(case, "cpu")
    fam.runner.run(stubs, case, inputs)
    forward = {"bwd": reference.forward, "varlen_bwd": kernels.family("varlen_fwd").judge.reference,
               "masked_bwd": kernels.family("masked_fwd").judge.reference}[case.family]
    want = forward(case, inputs, F64)
    o = seen["O"][0] if case.layout == "thd" else seen["O"]  # the dense preprocess sees packed tokens as one batch
    assert o.dtype == inputs["q"].dtype
    assert torch.equal(o, layout.from_canonical(want["O"], case.layout).to(o.dtype))
    assert seen["LSE"].dtype == torch.float32 and torch.equal(seen["LSE"], want["LSE"].float())
