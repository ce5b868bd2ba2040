"""The masked families' references against loop-by-loop attention, their mask patterns, and the
input checks that run before any kernel (CPU only)."""
import math

import pytest
import torch

from harness import kernels, layout
from harness.case import MASKS, Case
from harness.kernels import masked_bwd_family, masked_family
from harness.kernels.masked_family import MaskError


def case(**kw):
    base = dict(family="masked_bwd", variant="ragged", batch=2, heads=4, kv_heads=2, seqlen_q=9, seqlen_k=13,
                head_dim=64, head_dim_v=64, mask="random", mask_broadcast="bh", bias=True, seed=3)
    return Case(**{**base, **kw}).validate()


def naive(c, inputs):
    """O, LSE, dQ, dK, dV, dBias in float64, one query row and one key at a time."""
    q, k, v, do = (layout.to_canonical(inputs[n], c.layout).double() for n in ("q", "k", "v", "do"))
    mask = inputs["mask"].bool()
    bias = inputs["bias"].double() if c.bias else torch.zeros(mask.shape, dtype=torch.float64)
    scale = 1 / math.sqrt(c.head_dim)
    group = c.heads // c.kv_heads
    o = torch.zeros(c.batch, c.heads, c.seqlen_q, c.head_dim_v, dtype=torch.float64)
    lse = torch.full((c.batch, c.heads, c.seqlen_q), -math.inf, dtype=torch.float64)
    dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
    dbias = torch.zeros_like(bias)
    for b in range(c.batch):
        for h in range(c.heads):
            mb, mh = (b if mask.shape[0] > 1 else 0), (h if mask.shape[1] > 1 else 0)
            kh = h // group
            for i in range(c.seqlen_q):
                keys = [j for j in range(c.seqlen_k) if mask[mb, mh, i, j]]
                if not keys:
                    continue
                s = {j: float(q[b, h, i] @ k[b, kh, j]) * scale + float(bias[mb, mh, i, j]) for j in keys}
                top = max(s.values())
                total = sum(math.exp(x - top) for x in s.values())
                lse[b, h, i] = top + math.log(total)
                p = {j: math.exp(s[j] - lse[b, h, i]) for j in keys}
                o[b, h, i] = sum(p[j] * v[b, kh, j] for j in keys)
                dp = {j: float(do[b, h, i] @ v[b, kh, j]) for j in keys}
                delta = sum(p[j] * dp[j] for j in keys)
                for j in keys:
                    ds = p[j] * (dp[j] - delta)
                    dbias[mb, mh, i, j] += ds
                    dq[b, h, i] += ds * scale * k[b, kh, j]
                    dk[b, kh, j] += ds * scale * q[b, h, i]
                    dv[b, kh, j] += p[j] * do[b, h, i]
    return {"O": o, "LSE": lse, "dQ": dq, "dK": dk, "dV": dv, "dBias": dbias}


@pytest.mark.parametrize("broadcast", ["bh", "b1", "1h", "11"])
@pytest.mark.parametrize("mask", ["random", "empty_rows", "single"])
def test_reference_matches_the_loops(broadcast, mask):
    c = case(mask=mask, mask_broadcast=broadcast, layout="bshd")
    inputs = masked_bwd_family.make_inputs(c, "cpu")
    want = naive(c, inputs)
    fwd = masked_family.reference(c.replace(family="masked_fwd"), inputs, torch.float64)
    grads = masked_bwd_family.reference(c, inputs, torch.float64)
    for name, got in {**fwd, **grads}.items():
        assert got.shape == want[name].shape, name
        assert torch.equal(torch.isinf(got), torch.isinf(want[name])), name
        finite = torch.isfinite(want[name])
        torch.testing.assert_close(got[finite], want[name][finite], rtol=1e-9, atol=1e-9, msg=name)
    assert grads["dBias"].shape == inputs["bias"].shape  # summed over the broadcast dimensions


def test_rows_with_no_true_element_give_zero_output_and_gradients():
    c = case(mask="empty_rows", bias=True)
    inputs = masked_bwd_family.make_inputs(c, "cpu")
    empty = ~inputs["mask"].bool().any(-1)  # [b, h, sq]
    assert empty[..., -1].all()
    fwd = masked_family.reference(c.replace(family="masked_fwd"), inputs, torch.float64)
    grads = masked_bwd_family.reference(c, inputs, torch.float64)
    assert (fwd["O"][empty] == 0).all() and torch.isneginf(fwd["LSE"][empty]).all()
    assert (grads["dQ"][empty] == 0).all() and (grads["dBias"][empty] == 0).all()
    assert all(torch.isfinite(g).all() for g in grads.values())


def test_without_a_bias_there_is_no_dbias():
    c = case(bias=False)
    inputs = masked_bwd_family.make_inputs(c, "cpu")
    assert "bias" not in inputs
    assert set(masked_bwd_family.reference(c, inputs, torch.float64)) == {"dQ", "dK", "dV"}
    assert [n for n, _ in masked_bwd_family.tensors(c)] == ["dQ", "dK", "dV"]


@pytest.mark.parametrize("mask", MASKS)
def test_patterns_are_what_they_say_and_follow_the_seed(mask):
    c = case(mask=mask, seqlen_q=70, seqlen_k=150, block_m=32, block_n=64, mask_broadcast="b1")
    m = masked_family.make_inputs(c, "cpu")["mask"].bool()
    assert m.shape == (2, 1, 70, 150)
    assert torch.equal(m, masked_family.make_inputs(c, "cpu")["mask"].bool())
    i, j = torch.arange(70)[:, None], torch.arange(150)[None, :]
    if mask == "none":
        assert m.all()
    elif mask == "causal":
        assert torch.equal(m[0, 0], j <= i + 80)
    elif mask == "single":
        assert (m.sum(dim=(2, 3)) == 1).all()
    elif mask == "empty_rows":
        assert not m[..., -1, :].any() and m.any()
    elif mask == "empty_blocks":
        tiles = m.view(2, 1, 70, 150)[..., :64, :128].reshape(2, 2, 32, 2, 64).any(dim=(2, 4))
        assert not tiles.all()
    elif mask == "band":
        assert m[0, 0, i.squeeze(1), (i + 80).squeeze(1)].all() and not m[0, 0, 0, 0]


def test_pad_variant_pads_keys_to_8_and_mask_and_bias_rows_to_16_bytes_with_the_mask_off():
    c = case(variant="pad", seqlen_k=21)
    inputs = masked_bwd_family.make_inputs(c, "cpu")
    p = masked_family.prepare(c, inputs)
    assert p["seq_k"] == 24 and p["k"].shape == (2, 2, 24, 64) and (p["k"][:, :, 21:] == 0).all()
    assert p["mask"].shape == (2, 4, 9, 2, 16) and p["bias"].shape == (2, 4, 9, 3, 8)
    assert not p["mask"].reshape(2, 4, 9, 32)[..., 21:].any()
    assert torch.equal(p["mask"].reshape(2, 4, 9, 32)[..., :21], inputs["mask"])
    ragged = masked_family.prepare(c.replace(variant="ragged"), inputs)
    assert ragged["seq_k"] == 21 and ragged["mask"] is inputs["mask"]


@pytest.mark.parametrize("change, message", [
    (lambda t: t.bool(), "mask must be torch.uint8, got torch.bool"),
    (lambda t: t[:1], r"mask of shape \[1, 4, 9, 13\] does not broadcast as 'bh'"),
    (lambda t: t.transpose(2, 3).contiguous().transpose(2, 3), "mask strides .* are not contiguous"),
    (lambda t: torch.zeros(t.numel() + 1, dtype=torch.uint8)[1:].view(t.shape), "mask starts at an address not aligned"),
])
def test_bad_masks_are_rejected_before_any_kernel(change, message):
    c = case()
    inputs = masked_bwd_family.make_inputs(c, "cpu")
    masked_family.check_inputs(c, inputs)
    inputs["mask"] = change(inputs["mask"])
    with pytest.raises(MaskError, match=message):
        masked_family.prepare(c, inputs)


def test_bad_biases_are_rejected():
    c = case(mask_broadcast="1h")
    inputs = masked_bwd_family.make_inputs(c, "cpu")
    with pytest.raises(MaskError, match="bias must be torch.float16, got torch.float32"):
        masked_family.check_inputs(c, {**inputs, "bias": inputs["bias"].float()})
    with pytest.raises(MaskError, match=r"bias of shape \[2, 4, 9, 13\] does not broadcast as '1h'"):
        masked_family.check_inputs(c, {**inputs, "bias": inputs["bias"].expand(2, 4, 9, 13).contiguous()})
    with pytest.raises(MaskError, match="no bias given"):
        masked_family.check_inputs(c, {k: v for k, v in inputs.items() if k != "bias"})


def test_masked_families_take_no_window_or_sinks_and_others_no_mask():
    fam = kernels.family("masked_fwd")
    c = case(family="masked_fwd")
    assert fam.offer.unsupported(c) is None
    assert "does not take causal" in fam.offer.unsupported(c.replace(causal=True))
    assert "does not take sinks" in fam.offer.unsupported(c.replace(sinks=True))
    plain = Case(family="fwd")
    assert kernels.family("fwd").offer.unsupported(plain) is None
    assert "does not take bias" in kernels.family("fwd").offer.unsupported(plain.replace(bias=True))
    assert "does not take mask" in kernels.family("bwd").offer.unsupported(plain.replace(family="bwd", variant="atomic",
                                                                                   mask="random"))


def test_failures_are_placed_by_the_mask():
    c = case(mask="empty_rows", seqlen_q=70, seqlen_k=133, block_m=64, block_n=64)
    inputs = masked_bwd_family.make_inputs(c, "cpu")
    where = masked_family.locate(c, inputs)
    mask = inputs["mask"].bool()
    assert where("O", (0, 0, 69)) == "empty_rows"
    b, h, i, j = (int(x) for x in torch.nonzero(mask[:, :, :64, :8])[0])
    assert where("O", (b, h, i)) == "interior" and where("dBias", (b, h, i, j)) == "interior"
    assert where("dBias", (b, h, i, 132)) == ("ragged_keys" if mask[b, h, i, 132] else "masked_out")
    assert where("dBias", (b, h, i, 127)) == ("interior" if mask[b, h, i, 127] else "masked_out")
    assert where("dK", (b, h // 2, 129)) in ("ragged_keys", "unseen_keys")
    tail = next(int(i) for i in range(64, 69) if mask[0, 0, i].any())
    assert where("dQ", (0, 0, tail)) == "tail_q_tile"


def test_tiles_whose_mask_and_bias_tiles_overflow_shared_memory_are_unsupported():
    fam = kernels.family("masked_fwd")
    big = case(family="masked_fwd", head_dim=128, head_dim_v=128, block_m=128, block_n=128, threads=256)
    assert "shared memory" in fam.offer.unsupported(big)
    assert kernels.family("fwd").offer.unsupported(Case(head_dim=128, head_dim_v=128, block_m=128, block_n=128,
                                                  threads=256)) is None  # the same tile without them fits
