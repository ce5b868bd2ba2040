"""Hypothesis strategies that build valid Cases for every kernel family, biased toward where kernels break.

Static fields (what a compiled kernel depends on) and dynamic fields (lengths, batch, seed)
are drawn separately, so a campaign can run several lengths through one compiled kernel.
"""
from __future__ import annotations

import os
from pathlib import Path

from hypothesis import assume
from hypothesis import strategies as st

from harness import kernels, pairwise
from harness.case import FEATURES, MASKS, Case
from harness.programs.builder import LENGTH_BLOCKS

PRIMES = (2, 3, 5, 7, 11, 13, 31, 61, 67, 127, 131, 251, 257, 509)
# Masked families' key lengths: rows of a uint8 mask start 16-byte aligned only when seq_k % 16 == 0,
# rows of a 16-bit bias when seq_k % 8 == 0; below 8, one padded chunk.
MASKED_KEYS = (1, 3, 7, 8, 9, 15, 16, 17, 24, 40, 72, 100, 136, 257)


def lengths(block: int) -> st.SearchStrategy[int]:
    """Sequence lengths around tile edges, primes, and values not divisible by 8."""
    edges = sorted({1, block - 1, block, block + 1, 2 * block - 1, 2 * block + 1, 3 * block + 7})
    return st.one_of(
        st.sampled_from(edges),
        st.sampled_from(PRIMES),
        st.integers(1, 4 * block).filter(lambda n: n % 8 != 0),
        st.integers(1, 700),
    )


@st.composite
def dynamic(draw, block_m: int, block_n: int) -> dict:
    """The fields one compiled kernel serves without recompiling."""
    seqlen_q = draw(lengths(block_m))
    how = draw(st.sampled_from(("equal", "free", "free", "shorter_q", "shorter_k")))
    if how == "equal":
        seqlen_k = seqlen_q
    else:
        seqlen_k = draw(lengths(block_n))
        if how == "shorter_q" and seqlen_k < seqlen_q or how == "shorter_k" and seqlen_k > seqlen_q:
            seqlen_q, seqlen_k = seqlen_k, seqlen_q
    return {"batch": draw(st.integers(1, 3)), "seqlen_q": seqlen_q, "seqlen_k": seqlen_k,
            "seed": draw(st.integers(0, 2**31 - 1))}


@st.composite
def pipelined(draw, block_m: int, block_n: int, num_stages: int, ring: str) -> dict:
    """Lengths for a kernel that streams blocks of one side (`ring`: "k" keys, "q" queries)
    through a ring of `num_stages` buffers: trip counts 1, stages - 1, stages, stages + 1
    (exact, or a ragged last block), and the other side longer, shorter or equal; a longer query
    side leaves leading query blocks that see no key under causal masking (trip count 0)."""
    block, other_block = (block_n, block_m) if ring == "k" else (block_m, block_n)
    trips = draw(st.sampled_from(sorted({1, max(num_stages - 1, 1), num_stages, num_stages + 1, 2 * num_stages + 1})))
    ringed = trips * block - draw(st.sampled_from((0, 0, 1, block // 2 + 1, block - 1)))
    how = draw(st.sampled_from(("equal", "longer", "shorter")))
    if how == "equal":
        other = ringed
    elif how == "longer":
        other = ringed + draw(st.sampled_from((1, other_block - 1, other_block, 2 * other_block + 3)))
    else:
        other = draw(st.integers(1, ringed))
    seqlen_q, seqlen_k = (other, ringed) if ring == "k" else (ringed, other)
    return {"batch": draw(st.integers(1, 3)), "seqlen_q": seqlen_q, "seqlen_k": seqlen_k,
            "seed": draw(st.integers(0, 2**31 - 1))}


@st.composite
def masked_dynamic(draw, block_m: int, block_n: int) -> dict:
    """`dynamic` plus the mask pattern, with key lengths around 8- and 16-element row alignment."""
    d = draw(dynamic(block_m, block_n))
    if draw(st.booleans()):
        d["seqlen_k"] = draw(st.sampled_from(MASKED_KEYS))
    d["mask"] = draw(st.sampled_from(MASKS))
    return d


def static_case(family: str) -> st.SearchStrategy[Case]:
    """A case of `family` with every static field drawn (from what the family offers) and
    placeholder lengths, inside its contract's rules on static fields."""
    fam = kernels.family(family)
    return _static_case(family).filter(lambda c: fam.offer.breaks(c, static_only=True) is None
                                       and fam.runner.lacks(c) is None)


@st.composite
def _static_case(draw, family: str) -> Case:
    offer = kernels.family(family).offer
    kv_heads = draw(st.sampled_from((1, 1, 2, 3, 4))) if offer.multihead else 1
    group = draw(st.sampled_from((1, 1, 2, 4, 5, 8)))
    head_dim = draw(st.sampled_from(offer.head_dims))
    head_dim_v = draw(st.one_of(st.just(head_dim), st.sampled_from(offer.head_dims)))
    def variants(tile):
        return [v for v in offer.variants if offer.misfit(*tile, head_dim, head_dim_v, v) is None]

    fitting = [t for t in offer.tiles if variants(t)]
    assume(fitting)  # head dims no tile of it holds
    tile = draw(st.sampled_from(fitting))
    block_m, block_n, num_stages, threads = tile
    # Drawn in this order so that a seed draws the same cases as before features were declared.
    variant = draw(st.sampled_from(variants(tile)))
    # Every drawn feature (harness.case.FEATURES) the family offers, in their declared order.
    features = {f.name: draw(f.draw(st, offer)) for f in FEATURES
                if f.draw is not None and (not f.optional or f.name in offer.takes)}
    group = group if offer.gqa else 1
    return Case(
        family=family, variant=variant, heads=kv_heads * group, kv_heads=kv_heads, head_dim=head_dim,
        head_dim_v=head_dim_v, block_m=block_m, block_n=block_n, num_stages=num_stages, threads=threads, **features,
    )


@st.composite
def same(draw, block_m: int, block_n: int) -> dict:
    """One length for queries and keys (kernels that take a single seq_len)."""
    d = draw(dynamic(block_m, block_n))
    return {**d, "seqlen_k": d["seqlen_q"]}


@st.composite
def decode(draw, block_n: int) -> dict:
    """One query token against a cache of keys around its tile edges (a decode step)."""
    return {"batch": draw(st.integers(1, 3)), "seqlen_q": 1, "seqlen_k": draw(lengths(block_n)),
            "seed": draw(st.integers(0, 2**31 - 1))}


@st.composite
def packed(draw, block_m: int, block_n: int, equal: bool = False) -> dict:
    """Varlen batches: zero- and one-token sequences, q != k both ways per sequence, a sequence
    boundary inside a tile, one long sequence beside short ones, totals not divisible by 8.
    `equal`: every sequence has as many keys as queries (a training step's varlen backward)."""
    short = st.one_of(st.sampled_from((0, 1, 2, 3, 5, 7)), lengths(block_m).filter(lambda n: n < 80))
    hows = ("equal",) if equal else ("equal", "free", "longer_k")
    count = draw(st.integers(1, 6))
    pairs = []
    for _ in range(count):
        q = draw(short)
        how = draw(st.sampled_from(hows))
        k = q if how == "equal" else draw(short) if how == "free" else q + draw(st.integers(1, 2 * block_n))
        pairs.append((q, k))
    if draw(st.booleans()):  # one long sequence among short ones
        long_q = draw(lengths(block_m).filter(lambda n: n > 2 * block_m))
        long_k = long_q if equal else draw(st.sampled_from((long_q, long_q + 37, long_q // 2 + 1)))
        pairs.insert(draw(st.integers(0, len(pairs))), (long_q, long_k))
    if sum(q for q, _ in pairs) == 0:
        pairs[0] = (1, 1 if equal else pairs[0][1])
    if sum(k for _, k in pairs) == 0:
        pairs[-1] = (pairs[-1][0], 1)
    return {"batch": len(pairs), "seqlens": tuple(pairs), "seqlen_q": max(1, max(q for q, _ in pairs)),
            "seqlen_k": max(1, max(k for _, k in pairs)), "seed": draw(st.integers(0, 2**31 - 1))}


@st.composite
def program_lengths(draw, block: int) -> dict:
    """A generated program's length n: around its block's edges (a ragged last block), below
    LENGTH_BLOCKS blocks (the generator bounds its values by that many trips)."""
    top = LENGTH_BLOCKS * block - 1
    edges = sorted({1, block - 1, block, block + 1, 2 * block - 1, 2 * block + 1, top} - {0})
    n = draw(st.one_of(st.sampled_from(edges), st.sampled_from([p for p in PRIMES if p <= top]), st.integers(1, top)))
    return {"batch": 1, "seqlen_q": n, "seqlen_k": n, "seed": draw(st.integers(0, 2**31 - 1))}


def _ring(side: str):
    return lambda c: st.one_of(pipelined(c.block_m, c.block_n, c.num_stages, side), dynamic(c.block_m, c.block_n))


# Offer.lengths -> the strategy of a case's dynamic fields, given its static ones.
LENGTHS = {
    "dense": lambda c: dynamic(c.block_m, c.block_n),
    "masked": lambda c: masked_dynamic(c.block_m, c.block_n),
    "packed": lambda c: packed(c.block_m, c.block_n),
    # q == k per sequence, or (for a kernel drawn outside that contract) any packed batch.
    "packed_equal": lambda c: st.one_of(packed(c.block_m, c.block_n, equal=True), packed(c.block_m, c.block_n)),
    "ring_k": _ring("k"),
    "ring_q": _ring("q"),
    "decode": lambda c: decode(c.block_n),
    "same": lambda c: same(c.block_m, c.block_n),
    "program": lambda c: program_lengths(c.program.block),
}


RETRIES = 50  # draws of lengths until one keeps a family's contract (a filter would fail a whole example)


@st.composite
def _keeping(draw, strategy, ok) -> dict:
    """A draw of `strategy` that `ok` accepts, or after RETRIES the last one drawn (UNSUPPORTED when
    run; `draw` leaves such cases out)."""
    for _ in range(RETRIES):
        d = draw(strategy)
        if ok(d):
            return d
    return d


def _lengths_for(c: Case):
    """The dynamic fields of `c`'s family, inside its contract (Offer.rules: outside it, in outside mode)."""
    offer = kernels.family(c.family).offer
    strategy = LENGTHS[offer.lengths](c)
    return _keeping(strategy, lambda d: offer.breaks(c.replace(**d)) is None) if offer.rules else strategy


@st.composite
def lengths_of(draw, row: Case) -> Case:
    """`row`, its static fields fixed (one compiled kernel), at drawn lengths."""
    return row.replace(**draw(_lengths_for(row))).validate()


@st.composite
def cases(draw, family: str) -> Case:
    c = draw(static_case(family))
    return c.replace(**draw(_lengths_for(c))).validate()


@st.composite
def kernel_batches(draw, family: str, per_kernel: int) -> list[Case]:
    """One static configuration and `per_kernel` length variants of it (one compile, many runs)."""
    c = draw(static_case(family))
    return [c.replace(**draw(_lengths_for(c))).validate() for _ in range(per_kernel)]


@st.composite
def suites(draw, family: str, kernels: int, per_kernel: int = 4) -> list[Case]:
    """What one property-test example runs at once through a pool: up to `kernels` static
    configurations with up to `per_kernel` lengths each (compiled in parallel, each kernel once).
    A failing suite shrinks towards one kernel and one length: the reproducer's case."""
    out = []
    for c in draw(st.lists(static_case(family), min_size=1, max_size=kernels)):
        out += [c.replace(**lengths).validate() for lengths in draw(st.lists(_lengths_for(c), min_size=1, max_size=per_kernel))]
    return out


LENGTHS_PER_EXAMPLE = 200
POOL = 2   # kernels drawn per kernel kept, for steering to pick from: 2 covers every relation in the first 100
           # programs of a 2,000-case draw, as 8 did, in a quarter of the time (the draw runs inside the time box)


def steered(pool: list, holds, n: int, covered: set) -> list:
    """`n` of `pool`'s items: first, in its order, each that holds something (`holds(x)`, a set) that `covered` and
    those before it do not, then the first of the others: a covering goal, as harness.pairwise's covering array
    covers pairs of features. `covered` grows by what the chosen hold."""
    first = []
    for i, x in enumerate(pool):
        if len(first) < n and holds(x) - covered:
            first.append(i)
            covered |= holds(x)
    chosen = set(first)
    return [pool[i] for i in first] + [x for i, x in enumerate(pool) if i not in chosen][:n - len(first)]


def _holds(c: Case) -> set:
    """What case `c` holds of its features' covering goals (Feature.holds), as (feature, name) pairs."""
    return {(f.name, h) for f in FEATURES if f.holds is not None and getattr(c, f.name) != f.off
            for h in f.holds(getattr(c, f.name))}


def draw(family: str, n: int, seed: int, per_kernel: int = 1, cover: bool = False, per_row: int = 1) -> list[Case]:
    """n distinct cases, reproducible from `seed`, in groups of `per_kernel` sharing a kernel.
    With `cover`, the first kernels are a covering array of the family's static features
    (harness.pairwise: every pair of factor values at least once), `per_row` lengths each: one
    (all pairs in the fewest cases), or more where compiles are slow (old releases) and lengths
    nearly free. Then kernels drawn, those holding what a feature's covering goal (Feature.holds: a program's
    hazard relations) names and the kernels before them do not first (`steered`), the rest in the order drawn."""
    out: dict[str, Case] = {}
    offer = kernels.family(family).offer
    if cover:
        rows = pairwise.covering(family, seed)[:-(-n // per_row)]
        # At most LENGTHS_PER_EXAMPLE lengths per Hypothesis example: a thousand in one overran its
        # buffer (Unsatisfiable). Its first example is its simplest (all lengths 1), so the rows
        # take a later one.
        wanted = [_lengths_for(r) for r in rows for _ in range(per_row)]
        drawn = []
        for start in range(0, len(wanted), LENGTHS_PER_EXAMPLE):
            examples = []
            _examples(examples.append, st.tuples(*wanted[start:start + LENGTHS_PER_EXAMPLE]), seed, 3)
            drawn += examples[-1]
        for i, lengths in enumerate(drawn):
            c = rows[i // per_row].replace(**lengths).validate()
            if len(out) < n and offer.breaks(c) is None:
                out.setdefault(c.id, c)

    batches, seen = [], set(out)

    def keep(batch):
        fresh = [c for c in batch if c.id not in seen and offer.breaks(c) is None]
        seen.update(c.id for c in fresh)
        if fresh:
            batches.append(fresh)

    _examples(keep, kernel_batches(family, per_kernel), seed, max(1, -(-n // per_kernel)) * POOL)
    covered = set().union(*map(_holds, out.values()))
    for batch in steered(batches, lambda b: _holds(b[0]), n - len(out), covered):
        for c in batch:
            if len(out) < n:
                out[c.id] = c
    return list(out.values())


def _examples(keep, strategy, seed: int, count: int) -> None:
    """keep(example) for `count` examples of `strategy`, reproducible from `seed`."""
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hypothesis_seed
    from hypothesis.configuration import set_hypothesis_home_dir

    @hypothesis_seed(seed)
    @settings(max_examples=count, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(strategy)
    def collect(example):
        keep(example)

    # Hypothesis keeps a cache of its own under its home (./.hypothesis by default): a draw for a command must not
    # write in the user's working directory, so it goes under the harness's cache (unless the user names one).
    if not os.environ.get("HYPOTHESIS_STORAGE_DIRECTORY"):
        set_hypothesis_home_dir(Path("~/.cache/harness/hypothesis").expanduser())
    try:
        collect()
    finally:
        set_hypothesis_home_dir(None)


def programs(n: int, seed: int, steer: bool = True) -> list:
    """n generated programs (harness.programs.model.Program), reproducible from `seed`, with neither lengths nor a
    compile: of POOL * n drawn, `steered` toward hazard relations as a campaign's are (`steer`), or the first n."""
    from harness.programs import generate, relations

    pool = []
    _examples(pool.append, generate.programs(st), seed, n * POOL if steer else n)
    return steered(pool, lambda p: set(relations.held(p)), n, set()) if steer else pool[:n]


def peer(family: str) -> list[Case]:
    """The cases its own tests run (Offer.peer), at its default variant, layout, dtype and tile."""
    offer = kernels.family(family).offer
    block_m, block_n, num_stages, threads = offer.tiles[0]
    base = Case(family=family, variant=offer.variants[0], layout=offer.layouts[0], dtype=offer.dtypes[0],
                head_dim=offer.head_dims[0], head_dim_v=offer.head_dims[0], block_m=block_m, block_n=block_n,
                num_stages=num_stages, threads=threads)
    return [base.replace(**shape).validate() for shape in offer.peer]
