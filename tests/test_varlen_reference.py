"""The varlen family's host side: packing, its reference against a plain loop, bad offsets, regions."""
import math

import pytest
import torch
from naive import visible_keys

from harness import case as case_mod
from harness import kernels, strategies
from harness.case import Case, CaseError
from harness.kernels import varlen_family as vf

F64 = torch.float64


def varlen(seqlens, **kw):
    return Case(family="varlen_fwd", layout="thd", batch=len(seqlens), seqlens=tuple(seqlens),
                seqlen_q=max(1, max(q for q, _ in seqlens)), seqlen_k=max(1, max(k for _, k in seqlens)),
                head_dim=32, head_dim_v=32, **kw).validate()


def naive(c, inputs):
    """Sequence by sequence, row by row, float64: O [h, total_q, dv] and LSE [h, total_q]."""
    q, k, v = (inputs[n].double() for n in ("q", "k", "v"))
    o = torch.zeros(c.heads, c.total_q, c.head_dim_v, dtype=F64)
    lse = torch.full((c.heads, c.total_q), float("-inf"), dtype=F64)
    q0 = k0 = 0
    for sq, sk in c.seqlens:
        for h in range(c.heads):
            kh = h // (c.heads // c.kv_heads)
            for i in range(sq):
                keys = visible_keys(i, sq, sk, *c.bounds)
                logits = [float(q[q0 + i, h] @ k[k0 + j, kh]) / math.sqrt(c.head_dim) for j in keys]
                extra = [float(inputs["sinks"][h])] if c.sinks else []
                if not logits and not extra:
                    continue
                z = sum(math.exp(x) for x in logits + extra)
                lse[h, q0 + i] = math.log(z)
                for j, x in zip(keys, logits):
                    o[h, q0 + i] += math.exp(x) / z * v[k0 + j, kh]
        q0, k0 = q0 + sq, k0 + sk
    return o, lse


@pytest.mark.parametrize("c", [
    varlen([(5, 9), (0, 4), (7, 3), (1, 1)], heads=4, kv_heads=2, causal=True),
    varlen([(3, 0), (6, 6), (2, 11)], heads=2, kv_heads=1, window=(1, 2), sinks=True, seed=4),
    varlen([(9, 4), (0, 0), (4, 9)], heads=3, kv_heads=3, sinks=True, causal=True, seed=8),
], ids=lambda c: c.id)
def test_reference_matches_a_loop_per_sequence(c):
    inputs = vf.make_inputs(c, "cpu")
    got = vf.forward_reference(c, inputs, F64)
    o, lse = naive(c, inputs)
    torch.testing.assert_close(got["O"], o.unsqueeze(0), rtol=1e-9, atol=1e-9)
    torch.testing.assert_close(got["LSE"], lse.unsqueeze(0), rtol=1e-9, atol=1e-9)
    assert torch.isfinite(got["O"]).all()


def test_packing_round_trips_through_the_canonical_form():
    c = varlen([(3, 2), (4, 5)], heads=2, kv_heads=1)
    x = torch.randn(c.total_q, 2, 8)
    from harness import layout
    assert layout.to_canonical(x, "thd").shape == (1, 2, 7, 8)
    assert torch.equal(layout.from_canonical(layout.to_canonical(x, "thd"), "thd"), x)


@pytest.mark.parametrize("cu_q, cu_k, totals, maxes, message", [
    ([1, 3, 5], [0, 2, 4], (5, 4), (9, 9), "cu_seqlens_q must start at 0, got [1]"),
    ([0, 3, 2], [0, 2, 4], (2, 4), (9, 9), "cu_seqlens_q must not decrease"),
    ([0, 3, 5], [0, 2, 4], (6, 4), (9, 9), "cu_seqlens_q ends at 5 but the packed q holds 6 tokens"),
    ([0, 3, 5], [0, 2], (5, 2), (9, 9), "cu_seqlens_q has 2 sequences but cu_seqlens_k has 1"),
    ([0, 3, 5], [0, 2, 12], (5, 12), (9, 9), "max_seqlen_k 9 is smaller than a sequence of length 10"),
])
def test_bad_offsets_are_one_line_errors(cu_q, cu_k, totals, maxes, message):
    with pytest.raises(vf.PackingError) as e:
        vf.check_packed(torch.tensor(cu_q), torch.tensor(cu_k), *totals, *maxes)
    assert message in str(e.value) and "\n" not in str(e.value)
    vf.check_packed(torch.tensor([0, 3, 5]), torch.tensor([0, 2, 4]), 5, 4, 3, 2)  # and a good one passes


@pytest.mark.parametrize("changes, message", [
    ({"seqlen_q": 4}, "seqlen_q (the max length, 4) is smaller than a sequence of length 5"),
    ({"batch": 3}, "seqlens holds 2 sequences but batch is 3"),
    ({"seqlens": ((5, 2), (-1, 3))}, "seqlens[1] must be (q, k) with each in"),
    ({"layout": "bhsd"}, "the packed layout 'thd' goes with seqlens"),
])
def test_impossible_packings_are_rejected(changes, message):
    c = varlen([(5, 2), (1, 3)])
    with pytest.raises(CaseError, match=message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
        c.replace(**changes).validate()
    with pytest.raises(CaseError, match="goes with seqlens"):
        Case(layout="thd").validate()


def test_json_round_trip_and_static_key():
    c = varlen([(5, 2), (0, 3)], sinks=True)
    assert case_mod.from_json(case_mod.to_json(c)) == c
    other = varlen([(50, 20), (1, 3), (4, 4)], sinks=True)
    assert case_mod.static_key(c) == case_mod.static_key(other)  # one compile serves every batch composition
    with pytest.raises(CaseError, match="'seqlens' must be a list of"):
        case_mod.from_dict({**case_mod.to_dict(c), "seqlens": [[1, 2, 3]]})


def test_regions_name_the_sequence_edge():
    c = varlen([(70, 70), (3, 0), (64, 64)], causal=True)
    where = vf.locate(c, None)
    assert where("O", (0, 0, 5, 0)) == "interior"
    assert where("O", (0, 0, 66, 0)) == "sequence_end_tile"   # rows 64..69 of a 70-row sequence
    assert where("O", (0, 0, 71, 0)) == "empty_rows"          # the sequence with no keys
    assert where("O", (0, 0, 73 + 63, 0)) == "interior"       # 64 rows: no partial tile


def test_strategies_reach_the_edges():
    cs = strategies.draw("varlen_fwd", 300, seed=2, per_kernel=4)
    fam = kernels.family("varlen_fwd")
    assert all(fam.offer.unsupported(c) is None for c in cs)
    pairs = [p for c in cs for p in c.seqlens]
    assert any(q == 0 for q, _ in pairs) and any(k == 0 for _, k in pairs) and any(p == (1, 1) for p in pairs)
    assert any(q < k for q, k in pairs) and any(q > k for q, k in pairs)
    assert any(c.total_q % 8 for c in cs) and any(c.batch >= 4 for c in cs)
    assert any(max(q for q, _ in c.seqlens) > 2 * c.block_m and min(q for q, _ in c.seqlens) < 8 for c in cs)
    # A sequence boundary inside a tile: a sequence that does not start at a tile multiple.
    assert any(sum(q for q, _ in c.seqlens[:i]) % c.block_m for c in cs for i in range(1, c.batch))
