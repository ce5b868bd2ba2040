"""The covering array: every pair of static factor values in some kernel, first in a campaign."""
import itertools

import pytest

from harness import case as case_mod
from harness import kernels, pairwise, report, strategies
from harness.case import Case
from harness.result import Result
from harness.worker import control

REAL = ("fwd", "bwd", "varlen_fwd", "varlen_bwd")


@pytest.mark.parametrize("family", REAL)
def test_covering_rows_cover_every_pair_and_can_be_built(family):
    rows = pairwise.covering(family, seed=3)
    fam = kernels.family(family)
    assert all(fam.offer.unsupported(c) is None for c in rows)
    space = pairwise.factors(family)
    seen = {(a, la[a], b, la[b]) for la in map(pairwise.levels, rows) for a, b in itertools.combinations(space, 2)}
    for a, b in itertools.combinations(space, 2):
        missing = [(x, y) for x in space[a] for y in space[b] if (a, x, b, y) not in seen]
        assert not missing, f"{family}: {a} x {b} never together: {missing[:3]}"
    # Every control a row's check compares with is a row too, the one after it unless drawn before.
    controls = [control(fam, r) for r in rows]
    assert all(c is None or c in rows for c in controls)
    # The rows chosen for their pairs (not a control appended) near the lower bound (the two largest
    # factors' product), and the same rows for the same seed.
    chosen = [r for i, r in enumerate(rows) if i == 0 or controls[i - 1] != r]
    sizes = sorted(len(v) for v in space.values())
    assert len(chosen) <= 1.3 * sizes[-1] * sizes[-2]
    assert [c.id for c in rows] == [c.id for c in pairwise.covering(family, seed=3)]


@pytest.mark.parametrize("window, kind", [
    ((-1, -1), "none"), ((5, -1), "left"), ((-1, 3), "right"), ((4, 0), "up_to_diagonal"), ((4, 9), "band"),
])
def test_window_kinds(window, kind):
    assert pairwise.levels(Case(window=window))["window"] == kind
    assert case_mod.window_kind(case_mod.WINDOW_KINDS[kind]) == kind


def test_every_drawn_feature_has_covering_array_values():
    """One declaration (harness.case.FEATURES): a feature a campaign draws is a factor of the covering
    array too, with every value it can draw at a level (each drawn knob alone, fast_math included)."""
    for name in kernels.FAMILIES:
        offer = kernels.family(name).offer
        for f in case_mod.FEATURES:
            if f.draw is not None and (not f.optional or f.name in offer.takes) and (f.name != "forms" or offer.forms):
                assert f.levels(offer), f"{name}: {f.name} is drawn but has no covering-array values"
    knobs = pairwise.factors("fwd")["knobs"]
    assert {k for ks in knobs for k in ks} == set(case_mod.DRAWN_KNOBS) and ("fast_math",) in knobs
    assert any(c.knobs == ("fast_math",) for c in pairwise.covering("fwd", seed=0))


def test_gqa_shapes():
    assert [pairwise.levels(Case(heads=h, kv_heads=k))["gqa"] for h, k in ((4, 4), (4, 1), (6, 2))] == ["mha", "mqa", "gqa"]


def test_a_campaign_starts_with_the_covering_array():
    rows = pairwise.covering("bwd", seed=5)
    cases = strategies.draw("bwd", 48, seed=5, per_kernel=4, cover=True)
    assert [case_mod.static_key(c) for c in cases[:len(rows)]] == [case_mod.static_key(r) for r in rows]
    table = pairwise.coverage(cases)
    assert (table.covered == table.pairs).all()
    # Without it, 48 cases (12 kernels) leave pairs out, e.g. of variant x gqa.
    random = pairwise.coverage(strategies.draw("bwd", 48, seed=5, per_kernel=4))
    assert (random.covered < random.pairs).any()


def test_the_run_summary_shows_the_pairs_covered():
    cases = strategies.draw("fwd", len(pairwise.covering("fwd", 1)), seed=1, per_kernel=4, cover=True)
    results = [Result.of(c, "PASS", "judge") for c in cases]
    text = report.summary(results)
    assert "## Pairwise coverage" in text
    row = pairwise.summary(cases).iloc[0]
    assert row["factor pairs with gaps"] == "none" and row["value pairs covered"] in text


def test_covering_rows_can_take_several_lengths_each():
    one = strategies.draw("fwd", 30, seed=2, per_kernel=4, cover=True)
    three = strategies.draw("fwd", 30, seed=2, per_kernel=4, cover=True, per_row=3)
    rows = [case_mod.static_key(r) for r in pairwise.covering("fwd", seed=2)]
    assert [case_mod.static_key(c) for c in one] == rows[:30]
    kernels_three = {case_mod.static_key(c) for c in three}
    assert len(three) == 30 and set(rows[:10]) <= kernels_three and len(kernels_three) < 15
    assert len({(c.seqlen_q, c.seqlen_k) for c in three}) > 10  # lengths differ within a row


def test_many_lengths_per_row_are_drawn_in_several_examples():
    # 46 rows x 25 lengths in one Hypothesis example overran its buffer: Unsatisfiable, after minutes.
    cases = strategies.draw("bwd", 1150, seed=0, per_kernel=25, cover=True, per_row=25)
    rows = [case_mod.static_key(r) for r in pairwise.covering("bwd", seed=0)]
    assert len(cases) == 1150 and len(rows) * 25 >= 1150
    assert [case_mod.static_key(c) for c in cases[::25]] == rows[:46]


def test_shards_split_the_cases_by_kernel_and_cover_them_all():
    from harness import campaign
    cases = strategies.draw("bwd", 60, seed=2, per_kernel=4, cover=True)
    shards = [[c for c in cases if campaign.shard_of(c, 3) == i] for i in (1, 2, 3)]
    assert sorted(c.id for part in shards for c in part) == sorted(c.id for c in cases)
    kernels_of = [{case_mod.static_key(c) for c in part} for part in shards]
    assert all(part for part in shards)
    assert not (kernels_of[0] & kernels_of[1] or kernels_of[1] & kernels_of[2] or kernels_of[0] & kernels_of[2])
