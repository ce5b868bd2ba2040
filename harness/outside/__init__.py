"""Kernels nobody here wrote, as families: TileLang's own examples (and a user's file) under the harness.

An adapter is data: which file of a TileLang source tree holds the programs (harness.outside.source
finds the tree at run time; nothing of it is copied here), which builder makes each kernel and with
which arguments a Case gives it (`ExampleProgram`), the contract the example states (`Rule`s), and one small
`run` that calls the compiled kernels in the example's order on buffers the harness allocates
(through harness.bands: guarded when a guard is active). The judging is ours: the same float64
autograd references and tolerance rule as every family; the example's own `ref_program` is never the
oracle. Examples take lengths and batch as Python ints, so every length is its own compile
(`Runner.compiled`). An adapter is written for the current examples; `Before` records how an older
release's differs: a builder's old name, or why the adapter cannot drive it (UNSUPPORTED there).
"""
from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field

from harness import bands, layout
from harness.case import Case
from harness.kernels import Family, Judge, Offer, Rule, Runner, Unbuildable
from harness.outside import source

COMPILED = ("batch", "seqlen_q", "seqlen_k", "seqlens")
LN2 = math.log(2.0)  # the examples' LSE is log2-based: times ln 2 is ours


@dataclass(frozen=True)
class ExampleProgram:
    """One kernel of an example: its builder's name and the arguments a case gives it."""
    builder: str
    args: Callable[[Case], tuple]
    kwargs: Callable[[Case], dict] = field(default=lambda case: {})


@dataclass(frozen=True)
class Before:
    """The example as releases before `release` ship it: its builders under other names (`renamed`:
    (name now, name then) pairs), or why the adapter cannot drive it (`unfit`, one line: its cases
    are UNSUPPORTED on such a tree)."""
    release: str
    renamed: tuple[tuple[str, str], ...] = ()
    unfit: str | None = None


def released(module: str, before: tuple[Before, ...] = ()) -> dict[str, str]:
    """{builder name now: its name in the examples tree's release}; Unbuildable when that release
    lacks the example or the adapter does not fit it."""
    lacking = source.lacks(module)
    if lacking:
        raise Unbuildable(lacking)
    names = {}
    for b in before:
        release = source.before(b.release)
        if release and b.unfit:
            raise Unbuildable(f"{module} of TileLang {release}: {b.unfit} (changed in {b.release})")
        if release:
            names.update(b.renamed)
    return names


def tile(case: Case) -> dict:
    """The tile parameters every tunable builder takes: passing them all skips the autotuner."""
    return {"block_M": case.block_m, "block_N": case.block_n, "num_stages": case.num_stages, "threads": case.threads}


def builder(module: str, programs: Callable[[Case], dict[str, ExampleProgram]], before: tuple[Before, ...] = ()):
    """build(case, target) for the example file `module`: {kernel name: compiled kernel}."""
    def build(case: Case, target: str) -> dict:
        names = released(module, before)  # before TileLang is imported: an old release's gaps need none
        from harness import compat

        try:
            example = source.load(module)
        except ImportError as e:  # a package the example imports is missing here
            raise Unbuildable(f"{module} does not import here: {e}") from e
        out = {}
        for name, p in programs(case).items():
            try:
                func, configs = compat.example_program(getattr(example, names.get(p.builder, p.builder)),
                                                       *p.args(case), **p.kwargs(case))
            except (TypeError, AttributeError, NameError) as e:
                # The example calls TileLang's language in a way this release does not take (an API
                # of another release): nothing reached the compiler.
                raise Unbuildable(f"{module}: {p.builder} does not build on this TileLang: {e}") from e
            # All buffers are passed in (no out_idx): the harness allocates outputs, NaN-filled and guarded.
            out[name] = compat.compile(func, target, case.knobs, kernel=name, pass_configs=configs)
        return out
    return build


def buffers(device, **shapes) -> dict:
    """{name: tensor} for name=(shape, dtype, fill): NaN shows an element never written; zeros where
    the example accumulates (atomic adds)."""
    return {name: bands.full(name, shape, fill, dtype, device) for name, (shape, dtype, fill) in shapes.items()}


def same_lengths() -> Rule:
    return Rule("takes one sequence length (seq_len): seqlen_q == seqlen_k", ("seqlen_q", "seqlen_k"),
                lambda c: c.seqlen_q == c.seqlen_k, asserted=True)


def one_head_dim() -> Rule:
    return Rule("takes one head dim (dim) for Q, K and V", ("head_dim", "head_dim_v"),
                lambda c: c.head_dim == c.head_dim_v, asserted=True)


def rows_of_8() -> Rule:
    return Rule("seq_len a multiple of 8 (its dQ accumulator's layout, make_dq_layout, tiles rows by 8)",
                ("seqlen_q", "seqlen_k"), lambda c: c.seqlen_q % 8 == 0 and c.seqlen_k % 8 == 0)


def family(name: str, module: str, programs, run, make_inputs, offer: Offer, judge: Judge,
           before: tuple[Before, ...] = (), arch: str | None = None, compiled: tuple[str, ...] = COMPILED) -> Family:
    """An outside kernel as a family: the `programs` of examples/`module` (harness.outside.builder), `run` calling
    them on `make_inputs`'s inputs, what it offers and how it is judged; `before`: how older releases' example
    differs; `arch`: the only target it builds for, if any; `compiled`: the dynamic fields compiled in (by default
    every length is its own compile)."""
    return Family(name, offer, Runner(build=builder(module, programs, before), run=run, make_inputs=make_inputs,
                                      compiled=compiled, arch=arch, module=module), judge)


def canonical(case: Case, out: dict) -> dict:
    """Outputs in the case's layout to canonical; LSE [b, h, s] (natural log) and per-head dSinks as they are."""
    return {n: t if n in ("LSE", "dSinks") else layout.to_canonical(t, case.layout) for n, t in out.items()}


def padded(batch: int, seqlen_q: int, seqlen_k: int, equal: bool = False, seed: int = 0) -> dict:
    """Varlen Case fields as the examples' tests draw them (generate_random_padding_mask, "random":
    each sequence's length in [max(1, n - 20), n]), fixed by `seed`; `equal`: keys as long as queries."""
    rng = random.Random(seed)
    pairs = []
    for _ in range(batch):
        q = rng.randint(max(1, seqlen_q - 20), seqlen_q)
        pairs.append((q, q if equal else rng.randint(max(1, seqlen_k - 20), seqlen_k)))
    return {"batch": batch, "seqlens": tuple(pairs), "layout": "thd", "seqlen_q": max(q for q, _ in pairs),
            "seqlen_k": max(k for _, k in pairs)}


def heads(h: int, kv: int, dim: int, dim_v: int | None = None) -> dict:
    return {"heads": h, "kv_heads": kv, "head_dim": dim, "head_dim_v": dim_v or dim}


def dense(batch: int, seqlen_q: int, seqlen_k: int | None = None) -> dict:
    return {"batch": batch, "seqlen_q": seqlen_q, "seqlen_k": seqlen_k or seqlen_q}


def v_at_most_128(block_m, block_n, stages, threads, dim, dim_v, variant):
    """Its main() pairs a 192-wide Q/K with a 128-wide V; a 192-wide V is not drawn."""
    return "head_dim_v 192: its V is at most 128 wide (main's D_HEAD_V)" if dim_v > 128 else None
