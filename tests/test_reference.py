"""The reference against a plain softmax written independently, and its edge semantics."""
import math

import torch
from naive import visible_keys

from harness import layout, reference
from harness.case import Case


def naive(q, k, v, sinks, left, right, softcap=None):
    """Loop-by-loop attention in float64 for [b, h, s, d] tensors; `softcap`: scores capped by tanh."""
    b, h, sq, _ = q.shape
    hk, sk = k.shape[1], k.shape[2]
    o = torch.zeros(b, h, sq, v.shape[-1], dtype=torch.float64)
    lse = torch.full((b, h, sq), float("-inf"), dtype=torch.float64)
    for bi in range(b):
        for hi in range(h):
            kh = hi // (h // hk)
            for i in range(sq):
                keys = visible_keys(i, sq, sk, left, right)
                logits = [float(q[bi, hi, i] @ k[bi, kh, j]) / math.sqrt(q.shape[-1]) for j in keys]
                if softcap is not None:
                    logits = [softcap * math.tanh(x / softcap) for x in logits]
                extra = [float(sinks[hi])] if sinks is not None else []
                if not logits and not extra:
                    continue
                m = max(logits + extra)
                z = sum(math.exp(x - m) for x in logits + extra)
                lse[bi, hi, i] = math.log(z) + m
                for j, x in zip(keys, logits):
                    o[bi, hi, i] += math.exp(x - m) / z * v[bi, kh, j].double()
    return o, lse


def check_against_naive(case, forward=reference.forward, softcap=None):
    inputs = reference.make_inputs(case, "cpu")
    got = forward(case, inputs, torch.float64)
    q, k, v = (layout.to_canonical(inputs[n], case.layout).double() for n in "qkv")
    o, lse = naive(q, k, v, inputs["sinks"] if case.sinks else None, *case.bounds, softcap=softcap)
    torch.testing.assert_close(got["O"], o, rtol=1e-9, atol=1e-9)
    torch.testing.assert_close(got["LSE"], lse, rtol=1e-9, atol=1e-9)
    return got


def test_gqa_causal_bshd_matches_naive():
    check_against_naive(Case(batch=2, heads=4, kv_heads=2, seqlen_q=5, seqlen_k=9, head_dim=32,
                             head_dim_v=32, causal=True, layout="bshd"))


def test_window_and_sinks_match_naive():
    check_against_naive(Case(heads=2, kv_heads=1, seqlen_q=7, seqlen_k=6, head_dim=32, head_dim_v=32,
                             window=(1, 2), sinks=True, seed=3))


def test_softcap_family_reference_matches_naive_with_capped_logits():
    from harness.kernels import softcap_family

    case = Case(family="softcap_fwd", heads=4, kv_heads=2, seqlen_q=6, seqlen_k=11, head_dim=32, head_dim_v=32,
                window=(3, 1), sinks=True, layout="bshd", seed=5)
    check_against_naive(case, softcap_family.FAMILY.judge.reference, softcap=softcap_family.SOFTCAP)
    # The cap bites at the drawn inputs' scale: plain attention is far from it.
    inputs = reference.make_inputs(case, "cpu")
    plain, capped = reference.forward(case, inputs, torch.float64), softcap_family.forward(case, inputs, torch.float64)
    assert (plain["LSE"] - capped["LSE"]).abs().max() > 0.05


def test_rows_that_see_no_key_give_zero_output_and_minus_inf_lse():
    # seqlen_q > seqlen_k with causal: the first seqlen_q - seqlen_k queries see nothing.
    case = Case(seqlen_q=6, seqlen_k=2, head_dim=32, head_dim_v=32, causal=True)
    got = check_against_naive(case)
    assert torch.equal(got["O"][:, :, :4], torch.zeros_like(got["O"][:, :, :4]))
    assert torch.isneginf(got["LSE"][:, :, :4]).all() and torch.isfinite(got["LSE"][:, :, 4:]).all()


def test_empty_rows_with_sinks_have_the_sink_as_lse():
    case = Case(heads=2, seqlen_q=4, seqlen_k=2, head_dim=32, head_dim_v=32, causal=True, sinks=True)
    inputs = reference.make_inputs(case, "cpu")
    got = reference.forward(case, inputs, torch.float64)
    torch.testing.assert_close(got["LSE"][0, :, 0], inputs["sinks"].double())


def test_autograd_through_empty_rows_has_no_nan():
    case = Case(seqlen_q=6, seqlen_k=2, head_dim=32, head_dim_v=32, causal=True, sinks=True)
    inputs = {n: t.double().requires_grad_() for n, t in reference.make_inputs(case, "cpu").items()}
    out = reference.forward(case, inputs, torch.float64)
    (out["O"].sum() + out["LSE"][torch.isfinite(out["LSE"])].sum()).backward()
    for n in ("q", "k", "v", "sinks"):
        assert torch.isfinite(inputs[n].grad).all(), n


def test_inputs_are_determined_by_the_seed():
    a = reference.make_inputs(Case(seed=5, sinks=True), "cpu")
    b = reference.make_inputs(Case(seed=5, sinks=True), "cpu")
    c = reference.make_inputs(Case(seed=6, sinks=True), "cpu")
    assert all(torch.equal(a[n], b[n]) for n in a)
    assert not torch.equal(a["q"], c["q"])
