"""The varlen backward's reference against the dense backward's, sequence by sequence, and its regions."""
import pytest
import torch

from harness import layout
from harness.case import Case
from harness.kernels import bwd_family
from harness.kernels import varlen_bwd_family as vb
from harness.kernels import varlen_family as vf

F64 = torch.float64


def varlen(seqlens, **kw):
    return Case(family="varlen_bwd", variant="atomic", layout="thd", batch=len(seqlens), seqlens=tuple(seqlens),
                seqlen_q=max(1, max(q for q, _ in seqlens)), seqlen_k=max(1, max(k for _, k in seqlens)),
                head_dim=64, head_dim_v=64, **kw).validate()


def dense_per_sequence(c, inputs):
    """Each sequence cut out as a dense one-batch bwd case (bhsd), its gradients by bwd_family's
    reference, packed back: dQ, dK, dV canonical [1, h, total, d] and dSinks summed."""
    canon = {n: layout.to_canonical(inputs[n], "thd") for n in ("q", "k", "v", "do")}
    out = {n: torch.zeros_like(canon[x], dtype=F64) for n, x in (("dQ", "q"), ("dK", "k"), ("dV", "v"))}
    dsinks = torch.zeros(c.heads, dtype=F64)
    for (sq, sk), q0, k0 in zip(c.seqlens, vf.starts(c, 0), vf.starts(c, 1)):
        if sq == 0 or sk == 0:
            continue  # no path from any key to any output: all gradients stay zero
        rows, keys = slice(q0, q0 + sq), slice(k0, k0 + sk)
        dense = c.replace(family="bwd", layout="bhsd", batch=1, seqlens=(), seqlen_q=sq, seqlen_k=sk)
        part = {"q": canon["q"][:, :, rows], "k": canon["k"][:, :, keys], "v": canon["v"][:, :, keys],
                "do": canon["do"][:, :, rows], "sinks": inputs["sinks"]}
        grads = bwd_family.reference(dense, part, F64)
        out["dQ"][:, :, rows] = grads["dQ"]
        out["dK"][:, :, keys] = grads["dK"]
        out["dV"][:, :, keys] = grads["dV"]
        dsinks += grads["dSinks"]
    out["dSinks"] = dsinks
    return out


@pytest.mark.parametrize("c", [
    varlen([(5, 9), (0, 4), (7, 3), (1, 1)], heads=4, kv_heads=2, causal=True),
    varlen([(3, 0), (6, 6), (2, 11)], heads=2, kv_heads=1, window=(1, 2), sinks=True, seed=4),
    varlen([(9, 4), (0, 0), (4, 9)], heads=3, kv_heads=3, sinks=True, causal=True, seed=8),
    varlen([(70, 75), (2, 1)], heads=2, kv_heads=1, window=(3, -1), sinks=True, seed=5),
], ids=lambda c: c.id)
def test_gradients_match_the_dense_reference_per_sequence(c):
    inputs = vb.make_inputs(c, "cpu")
    got = vb.reference(c, inputs, F64)
    want = dense_per_sequence(c, inputs)
    for name in ("dQ", "dK", "dV", "dSinks"):
        torch.testing.assert_close(got[name], want[name], rtol=1e-9, atol=1e-9, msg=name)
    assert got["dK"].shape == (1, c.kv_heads, c.total_k, c.head_dim)


def test_sink_floor_adds_up_over_sequences():
    c = varlen([(6, 6), (2, 11)], heads=2, kv_heads=1, sinks=True, seed=4)
    inputs = vb.make_inputs(c, "cpu")
    one = varlen([(6, 6)], heads=2, kv_heads=1, sinks=True, seed=4)
    assert vb.floors(c, inputs)["dSinks"] > vb.floors(one, {**inputs})["dSinks"] > 0
    assert vb.floors(c.replace(sinks=False), inputs) == {}


def test_regions_follow_the_gradient_axis():
    c = varlen([(70, 70), (3, 0), (2, 11)], window=(3, -1))
    where = vf.locate(c, None)
    assert where("dQ", (0, 0, 66, 0)) == "sequence_end_tile"
    assert where("dK", (0, 0, 66, 0)) == "sequence_end_tile"   # key rows 64..69 of 70
    assert where("dK", (0, 0, 5, 0)) == "interior"
    assert where("dK", (0, 0, 70, 0)) == "unseen_keys"         # shift 9, left 3: query 0 sees keys 6 on
    assert where("dV", (0, 0, 80, 0)) == "sequence_end_tile"
    assert where("dQ", (0, 0, 71, 0)) == "empty_rows"          # the sequence with no keys
    assert where("dSinks", (1,)) == "per_head"
