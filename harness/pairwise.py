"""Pairwise coverage of a family's static features: factors, a covering array, and the table of
the pairs a run covered.

A bug that needs two features at once (one variant with one GQA shape) hides from random draws
of a few dozen kernels; a covering array puts every pair of factor values into some kernel.
Factors are what a compiled kernel depends on, coarsened to the values that change its code:
the variant, the GQA shape and the tile, plus each feature's covering-array values as
harness.case.FEATURES declares them (causal, window, sinks, layout, dtype, knobs, forms, ...).
"""
from __future__ import annotations

import itertools
import random

import pandas as pd

from harness import kernels
from harness.case import FEATURES, Case
from harness.worker import control

# GQA shapes -> (kv_heads, heads per KV head): a query head and its KV head differ only under gqa/mqa.
GQA = {"mha": (2, 1), "gqa": (2, 3), "mqa": (1, 4), "one": (1, 1)}


def _features(offer) -> list:
    """The features (harness.case.FEATURES) the family offers that have covering-array values."""
    return [f for f in FEATURES if (not f.optional or f.name in offer.takes) and f.levels(offer)]


def factors(family: str) -> dict[str, tuple]:
    offer = kernels.family(family).offer
    shapes = ("one",) if not offer.multihead else ("mha", "gqa", "mqa") if offer.gqa else ("mha",)
    return {"variant": offer.variants, "gqa": shapes, "tile": offer.tiles,
            **{name: values for f in _features(offer) for name, values in f.levels(offer).items()}}


def levels(case: Case) -> dict:
    """The factor values of a case (any case, drawn or built here)."""
    offer = kernels.family(case.family).offer
    gqa = "one" if not offer.multihead else "mha" if case.kv_heads == case.heads else "mqa" if case.kv_heads == 1 else "gqa"
    return {"variant": case.variant, "gqa": gqa, "tile": case.tile,
            **{name: value for f in _features(offer) for name, value in f.of(case, offer).items()}}


def _pairs(row: dict) -> set:
    return {((a, row[a]), (b, row[b])) for a, b in itertools.combinations(sorted(row), 2)}


def _case(family: str, row: dict) -> Case | None:
    """A case (placeholder lengths) with `row`'s factor values, or None if the family cannot build it."""
    offer = kernels.family(family).offer
    kv_heads, group = GQA[row["gqa"]]
    features = {k: v for f in _features(offer) for k, v in f.fields(row).items()}
    block_m, block_n, num_stages, threads = row["tile"]
    for head_dim in offer.head_dims[::-1]:  # the largest head dim the tile can hold
        c = Case(family=family, variant=row["variant"], heads=kv_heads * group, kv_heads=kv_heads,
                 head_dim=head_dim, head_dim_v=head_dim, block_m=block_m, block_n=block_n, num_stages=num_stages,
                 threads=threads, **features)
        if offer.unsupported(c, static_only=True) is None:
            return c
    return None


def covering(family: str, seed: int, tries: int = 40) -> list[Case]:
    """Static cases (placeholder lengths) covering every buildable pair of factor values at least
    once: greedy, each row the best of `tries` random candidates (AETG's construction), seeded.
    A row whose forms or twin check compares with a control kernel (harness.worker.control) is
    followed by that control as a row of its own: a run compiles the control anyway, so its
    cases and pairs come at no compile of their own."""
    fam = kernels.family(family)
    rng = random.Random(seed)
    space = factors(family)
    names = sorted(space)
    uncovered = set()
    for a, b in itertools.combinations(names, 2):
        uncovered |= {((a, x), (b, y)) for x in space[a] for y in space[b]}
    rows, stale = [], 0
    while uncovered and stale < 3:
        best, gain = None, 0
        pool = sorted(uncovered, key=repr)
        for _ in range(tries):
            # Start from an uncovered pair, fill the other factors at random.
            (a, x), (b, y) = rng.choice(pool)
            row = {n: rng.choice(space[n]) for n in names} | {a: x, b: y}
            c = _case(family, row)
            if c is None:
                continue
            new = len(_pairs(levels(c)) & uncovered)
            if new > gain:
                best, gain = c, new
        if best is None:
            stale += 1
            continue
        stale = 0
        for row in (best, control(fam, best)):
            if row is not None and row not in rows:
                rows.append(row)
                uncovered -= _pairs(levels(row))
    return rows


def coverage(cases: list[Case]) -> pd.DataFrame:
    """Per family and pair of factors: value pairs the cases covered, out of all value pairs."""
    out = []
    for family in sorted({c.family for c in cases}):
        space = factors(family)
        seen = set().union(*(_pairs(levels(c)) for c in cases if c.family == family))
        for a, b in itertools.combinations(sorted(space), 2):
            total = len(space[a]) * len(space[b])
            hit = sum(((a, x), (b, y)) in seen for x in space[a] for y in space[b])
            out.append({"family": family, "factors": f"{a} x {b}", "covered": hit, "pairs": total})
    return pd.DataFrame(out)


def summary(cases: list[Case]) -> pd.DataFrame:
    """Per family: value pairs covered out of all, and the pairs of factors not fully covered."""
    table = coverage(cases)
    if table.empty:
        return table
    rows = []
    for family, part in table.groupby("family"):
        gaps = part[part.covered < part.pairs]
        rows.append({"family": family, "cases": sum(c.family == family for c in cases),
                     "value pairs covered": f"{part.covered.sum()} / {part.pairs.sum()}",
                     "factor pairs with gaps": ", ".join(f"{f} ({c}/{p})" for f, c, p in
                                                         gaps[["factors", "covered", "pairs"]].itertuples(index=False))
                     or "none"})
    return pd.DataFrame(rows)
