"""Kernel families: one `Family` object per family, and the registry that names them.

A family module (e.g. fwd_family.py) exports `FAMILY`; its TileLang programs live beside it
(fwd.py) and are imported only when it builds. A family declares what it takes (its variants,
tiles, head dims, layouts, the optional Case features of `harness.case.OPTIONAL`, its lengths
strategy by name) and nothing above this module branches on which family it is: adding one is
its modules and one line in `_REGISTRY` (docs/adding-a-family.md).

A family is checked when it is registered, as Hypothesis checks a strategy: `register` refuses a malformed
name or "module:attribute", and `family()` refuses, on first loading it, a family that declares a lengths
strategy, a feature or a value list the harness has not got. Each is a FamilyError, one line naming the family
and the field. Families registered at run time (a test double, a user's adapter) are an argument wherever
they cross a process: harness.pool starts its workers with them.
"""
from __future__ import annotations

import dataclasses
import hashlib
import importlib
import importlib.util
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from harness.case import DRAWN_KNOBS, DTYPES, FEATURES, OFF, OPTIONAL, STATIC, Case, CaseError, form_names

# name -> "module:attribute" of its Family object.
_REGISTRY = {
    "fwd": "harness.kernels.fwd_family:FAMILY",
    "bwd": "harness.kernels.bwd_family:FAMILY",
    "varlen_fwd": "harness.kernels.varlen_family:FAMILY",
    "varlen_bwd": "harness.kernels.varlen_bwd_family:FAMILY",
    "ws": "harness.kernels.ws_family:FAMILY",
    "ws_bwd": "harness.kernels.ws_bwd_family:FAMILY",
    "masked_fwd": "harness.kernels.masked_family:FAMILY",
    "masked_bwd": "harness.kernels.masked_bwd_family:FAMILY",
    "softcap_fwd": "harness.kernels.softcap_family:FAMILY",
    "program": "harness.kernels.program_family:FAMILY",
}
# Kernels nobody here wrote (harness.outside): TileLang's own examples, loaded from the source tree
# a command names (`harness run --examples PATH`, use_examples). "<name>@outside" is the same kernel
# drawn just outside the contract it states (Offer.rules).
OUTSIDE = {
    "tl_mha_fwd_bhsd": "harness.outside.flash_attention:MHA_FWD_BHSD",
    "tl_mha_fwd_bshd": "harness.outside.flash_attention:MHA_FWD_BSHD",
    "tl_gqa_fwd_bshd": "harness.outside.flash_attention:GQA_FWD_BSHD",
    "tl_mha_bwd_bhsd": "harness.outside.flash_attention:MHA_BWD_BHSD",
    "tl_mha_bwd_bshd": "harness.outside.flash_attention:MHA_BWD_BSHD",
    "tl_gqa_bwd": "harness.outside.flash_attention:GQA_BWD",
    "tl_gqa_bwd_tma_reduce": "harness.outside.flash_attention:GQA_BWD_TMA_REDUCE",
    "tl_gqa_bwd_tma_reduce_varlen": "harness.outside.flash_attention:GQA_BWD_TMA_REDUCE_VARLEN",
    "tl_mha_fwd_varlen": "harness.outside.flash_attention:MHA_FWD_VARLEN",
    "tl_gqa_fwd_varlen": "harness.outside.flash_attention:GQA_FWD_VARLEN",
    "tl_mha_sink_fwd_bhsd": "harness.outside.attention_sink:MHA_SINK_FWD_BHSD",
    "tl_mha_sink_bwd_bhsd": "harness.outside.attention_sink:MHA_SINK_BWD_BHSD",
    "tl_gqa_sink_bwd_bhsd": "harness.outside.attention_sink:GQA_SINK_BWD_BHSD",
    "tl_gqa_sink_fwd_varlen": "harness.outside.attention_sink:GQA_SINK_FWD_VARLEN",
    "tl_gqa_sink_bwd_varlen": "harness.outside.attention_sink:GQA_SINK_BWD_VARLEN",
    "tl_gqa_decode": "harness.outside.flash_decoding:GQA_DECODE",
    "tl_sm100_mha_fwd_bshd": "harness.outside.sm100:MHA_FWD_BSHD",
    "tl_sm100_gqa_fwd_bshd": "harness.outside.sm100:GQA_FWD_BSHD",
    "tl_sm100_mha_bwd_bshd": "harness.outside.sm100:MHA_BWD_BSHD",
    "tl_sm100_gqa_bwd_bshd": "harness.outside.sm100:GQA_BWD_BSHD",
}
OUTSIDE_MODE = "@outside"
# The strategies a family may name for its dynamic fields (Offer.lengths); harness.strategies.LENGTHS draws each.
LENGTHS = ("dense", "masked", "packed", "packed_equal", "ring_k", "ring_q", "decode", "same", "program")

_EXTRA: dict[str, str] = {}  # families registered at run time (register): name -> "module:attr"


class FamilyError(ValueError):
    """A family that cannot be registered, or declares what the harness cannot draw: one line naming the
    family and the field."""


def _registry() -> dict:
    """_REGISTRY, the outside kernels, and the families registered in this process (register)."""
    return {**_REGISTRY, **OUTSIDE, **_EXTRA}


_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_WHERE = re.compile(r"^[^:=,]+:[A-Za-z_][A-Za-z0-9_]*$")  # a dotted module or a FILE.py, then an attribute


def register(name: str, where: str) -> None:
    """Register family `name`, the Family object at "module:attribute" `where` (a module by dotted name, or a
    FILE.py: harness.outside's adapters), for this process; harness.pool passes what is registered to its
    workers. Imports nothing: family() checks the object when it first loads it. FamilyError for a malformed
    name or `where`, or for a name the project's own families hold."""
    _check_spec(name, where)
    _EXTRA[name] = where


def spec(text: str) -> tuple[str, str]:
    """(name, where) of an extra family written "name=module:attribute" (harness --register, the worker's
    --family), checked as register checks it; FamilyError naming what is wrong."""
    name, sep, where = text.partition("=")
    if not sep:
        raise FamilyError(f"extra family {text!r}: expected name=module:attribute")
    _check_spec(name, where)
    return name, where


def _check_spec(name: str, where: str) -> None:
    if not _NAME.match(name or ""):
        raise FamilyError(f"family {name!r}: name must be letters, digits and '_', not starting with a digit")
    if not _WHERE.match(where or ""):
        raise FamilyError(f"family {name!r}: where={where!r} is not module:attribute")
    if name in _REGISTRY or name in OUTSIDE:
        raise FamilyError(f"family {name!r}: name is one of the harness's own families")


def registered() -> dict:
    """The families registered at run time: name -> "module:attr" (what a worker must register too)."""
    return dict(_EXTRA)


# The TileLang source tree the outside kernels load from (harness.outside.source), for this process: a command's
# --examples, by default the one EXAMPLES_ENV names; harness.pool passes it to its workers as it passes the families.
EXAMPLES_ENV = "HARNESS_EXAMPLES"
_examples: Path | None = None


def use_examples(tree: Path | None) -> None:
    """Outside kernels load from the examples tree `tree` (a source tree or its examples/), in this process and
    in the workers of the pools it starts (their --examples)."""
    global _examples
    _examples = tree


def examples() -> Path | None:
    """The examples tree use_examples set, or None."""
    return _examples


def _nothing(case, *args) -> dict:
    return {}


@dataclass(frozen=True)
class Rule:
    """One clause of the contract a kernel states: its asserts and signature (`asserted`: a case that
    breaks it cannot be built or run), or its docstring, comments and own test shapes (stated only:
    the kernel may still take such a case, and a failure there is the kernel's documented limit)."""
    says: str                      # the clause in words, as a reason
    reads: tuple[str, ...]         # the Case fields it reads: a rule of static fields only is checked per kernel
    holds: Callable[[Case], bool]
    asserted: bool = False


@dataclass(frozen=True)
class Offer:
    """What a family offers to draw: the static fields its kernels take, the optional features it expresses, the
    strategy of its dynamic fields, and the contract it states."""
    variants: tuple[str, ...]
    head_dims: tuple[int, ...]
    tiles: tuple[tuple[int, int, int, int], ...]     # (block_m, block_n, num_stages, threads); first = default
    # misfit(*tile, head_dim, head_dim_v, variant): why a tile config runs out of shared memory or registers, or None.
    misfit: Callable[..., str | None] = lambda *tile_dims_and_variant: None
    layouts: tuple[str, ...] = ("bhsd", "bshd")        # "thd": packed sequences (case.seqlens)
    dtypes: tuple[str, ...] = DTYPES
    gqa: bool = True                                   # takes kv_heads < heads; else heads == kv_heads
    multihead: bool = True                             # takes several heads; else heads == kv_heads == 1
    # The optional features (harness.case.OPTIONAL) its kernels express, in the order they are
    # drawn; a case with any other switched on is not this family's. Masking families express
    # causal masks and windows as mask data: ("mask", "mask_broadcast", "bias").
    takes: tuple[str, ...] = ("causal", "window", "sinks")
    # The strategy that draws its dynamic fields, by name (harness.strategies.LENGTHS): "dense";
    # "masked" (key lengths around row alignment, mask patterns); "packed" (varlen seqlens);
    # "ring_k" / "ring_q" (lengths around the trip counts where a ring of num_stages buffers of
    # key / query blocks turns).
    lengths: str = "dense"
    # The blocks (harness.case.FORMS) its program writes in each of their forms; other blocks only in the default.
    forms: tuple[str, ...] = ()
    # The compile knobs (harness.case.KNOBS) a campaign draws for it.
    knobs: tuple[str, ...] = DRAWN_KNOBS
    rules: tuple[Rule, ...] = ()                       # the contract the kernel states, beyond the above
    outside: bool = False                              # draw just outside the stated rules, inside the asserted
    # The shapes its own test suite runs (Case fields over its defaults): `harness run --peer`, the
    # baseline the drawn cases are compared with.
    peer: tuple[dict, ...] = ()

    def unsupported(self, case: Case, static_only: bool = False) -> str | None:
        """A one-line reason the family cannot express `case`, or None; `static_only`: judging a
        kernel (its static fields) whatever lengths it will run."""
        if case.dtype not in self.dtypes:
            return f"{case.family} takes dtype {' or '.join(self.dtypes)}, not {case.dtype}"
        if not self.gqa and case.kv_heads != case.heads:
            return f"{case.family} takes no GQA: kv_heads must equal heads"
        if not self.multihead and case.heads != 1:
            return f"{case.family} takes one head"
        if case.variant not in self.variants:
            return f"{case.family} has no variant {case.variant!r}; offered: {self.variants}"
        if case.layout not in self.layouts:
            return f"{case.family} has no layout {case.layout!r}; offered: {self.layouts}"
        for name in ("head_dim", "head_dim_v"):
            if getattr(case, name) not in self.head_dims:
                return f"{name} {getattr(case, name)} not in {self.head_dims}"
        on = [name for name in OPTIONAL if name not in self.takes and getattr(case, name) != OFF[name]]
        if on:
            return f"{case.family} does not take {', '.join(on)}; it takes: {', '.join(self.takes) or 'none'}"
        foreign = form_names(pair for pair in case.forms if pair[0] not in self.forms)
        if foreign:
            return f"{case.family} writes {', '.join(foreign)} in the default form only; its blocks with forms: " \
                   f"{', '.join(self.forms) or 'none'}"
        if case.tile not in self.tiles:
            return f"tile config {case.tile} not offered; offered: {self.tiles}"
        return self.misfit(*case.tile, case.head_dim, case.head_dim_v, case.variant) or self.breaks(case, static_only)

    def breaks(self, case: Case, static_only: bool = False) -> str | None:
        """The first rule of its contract `case` breaks, or None. Outside mode: the first asserted rule
        it breaks, or, when it breaks no stated rule either, that it lies inside the stated contract."""
        rules = [r for r in self.rules if not static_only or set(r.reads) <= set(STATIC)]
        broken = [r for r in rules if not r.holds(case)]
        if not self.outside:
            return next((f"{case.family}: {r.says}" for r in broken), None)
        asserted = next((r for r in broken if r.asserted), None)
        if asserted is not None:
            return f"{case.family}: {asserted.says}"
        if static_only or any(not r.asserted for r in broken):
            return None
        return f"{case.family}: inside the stated contract ({'; '.join(r.says for r in self.rules if not r.asserted)})"


@dataclass(frozen=True)
class Runner:
    """How a family's cases run: build its kernels, make a case's inputs, launch them; and what a build needs.
    `run` and `make_inputs` speak the kernel's layout."""
    build: Callable                                   # build(case, target) -> compiled kernel(s)
    run: Callable                                     # run(kernel, case, inputs) -> {name: output}
    make_inputs: Callable                             # make_inputs(case, device) -> {name: tensor}
    # TileLang language names (T.<name>) its kernels need: a release without one reports UNSUPPORTED.
    needs: tuple[str, ...] = ()
    # lacks(case): what the installed release lacks to build this case's kernel (harness.compat), or None; a
    # generated program names its constructs only in its text. Such a case is not drawn, and UNSUPPORTED if loaded.
    lacks: Callable[[Case], str | None] = lambda case: None
    # Dynamic fields its kernels take as compile-time constants (an example's Python-int lengths):
    # each value is its own kernel (kernel_key).
    compiled: tuple[str, ...] = ()
    arch: str | None = None                            # the only target it compiles for (e.g. sm_100a), if any
    module: str | None = None                          # an outside kernel's file in TileLang's examples/


@dataclass(frozen=True)
class Judge:
    """How a family's outputs and generated code are judged. `tensors(case)` gives (name, kind) in the order they
    are judged, kind "forward" or "gradient" (the oracle's k); `canonical` and `reference` speak
    [batch, heads, seq, dim]."""
    tensors: Callable                                 # tensors(case) -> ((name, kind), ...)
    reference: Callable                               # reference(case, inputs, dtype) -> {name: canonical}
    canonical: Callable                               # canonical(case, outputs) -> {name: canonical}
    # floors(case, inputs) -> {name: rounding spread a single baseline run may miss}; the oracle adds k times it.
    floors: Callable = _nothing
    # locate(case, inputs) -> fn(tensor name, canonical index) -> region; None: the dense rule.
    locate: Callable | None = None
    # exact(case): its inputs and arithmetic make every value exact in any order of summation (small
    # integers, no exp2): a tensor whose same-precision baseline equals the float64 reference must then equal
    # it bit for bit (harness.oracle.check).
    exact: Callable = lambda case: False
    # Its knobs are twins: each must leave every output bit for bit as the kernel without knobs gives it
    # (harness.worker), as forms must leave the default forms' outputs.
    twins: bool = False
    # Kernels whose code no variant changes, and which kernel alone produces a tensor: a failure
    # pinned there is one bug whatever the variant (one signature, one reproducer).
    shared_kernels: frozenset = field(default_factory=frozenset)
    producers: dict = field(default_factory=dict)
    # Generated-code checks (harness.codegen) that must find nothing in its compiles.
    clean: tuple[str, ...] = ()
    # The code checks' inputs. contiguous(case) -> {atomic destination: consecutive loop elements on consecutive
    # addresses}; fragments(case) -> {fragment (register array) name: its elements}
    # (harness.codegen.registers.short_register_arrays, harness.cuda_features); `aligned`: global buffers whose
    # vectorized accesses must be at offsets the kernel proves aligned (harness.codegen.alignment.unaligned_vectors).
    contiguous: Callable = _nothing
    fragments: Callable = _nothing
    aligned: frozenset = field(default_factory=frozenset)

    def shared(self, kernel: str | None) -> str | None:
        """`kernel` if every variant runs that same kernel, else None."""
        return kernel if kernel in self.shared_kernels else None


@dataclass(frozen=True)
class Family:
    """Everything the harness needs from a kernel family: what it offers to draw, how its cases run, and how they
    are judged."""
    name: str
    offer: Offer
    runner: Runner
    judge: Judge


def family(name: str) -> Family:
    """The registered family `name` (CaseError if there is none), checked on first loading (FamilyError)."""
    check(Case(family=name))
    base = name.removesuffix(OUTSIDE_MODE)
    where = _registry()[base]
    fam = load(where)
    if _CHECKED.get(where) is not fam:
        validate(base, where, fam)
        _CHECKED[where] = fam
    return dataclasses.replace(fam, name=name, offer=dataclasses.replace(fam.offer, outside=True)) if name != base else fam


_CHECKED: dict = {}  # "module:attr" -> the Family object found there, once validate() took it


def validate(name: str, where: str, fam) -> None:
    """FamilyError, naming the family and the field, unless `fam` is a Family whose lengths strategy, optional
    features and the values its features are drawn and covered from are ones the harness has."""
    if not isinstance(fam, Family):
        raise FamilyError(f"family {name!r}: {where} is a {type(fam).__name__}, not a harness.kernels.Family")
    offer = fam.offer
    if offer.lengths not in LENGTHS:
        raise FamilyError(f"family {name!r}: lengths={offer.lengths!r} is not one of {', '.join(LENGTHS)}")
    bad = next((t for t in offer.takes if t not in OPTIONAL), None)
    if bad is not None:
        raise FamilyError(f"family {name!r}: takes={bad!r} is not one of {', '.join(OPTIONAL)}")
    for field_name in ("variants", "head_dims", "tiles"):
        if not getattr(offer, field_name):
            raise FamilyError(f"family {name!r}: {field_name}=() declares none")
    # A static feature it offers (all but the optional ones it does not take) is drawn and covered from its
    # levels (harness.case.Feature.values: dtypes, layouts, ...); one with none could never be drawn. A feature of
    # several factors (forms: one per block the family writes in several forms) may have none.
    for f in FEATURES:
        if (f.name in offer.takes or not f.optional) and f.name in STATIC and f.factors is None and not f.levels(offer):
            raise FamilyError(f"family {name!r}: feature {f.name!r} has no levels (Offer.{_SOURCE.get(f.name, 'takes')} "
                              "declares no value to draw it from)")


_SOURCE = {"dtype": "dtypes", "layout": "layouts", "knobs": "knobs"}  # where a feature's levels come from


def load(where: str):
    """The object "module:attr" names; the module by dotted name, or a user's adapter file by path
    (harness check --adapter FILE.py:ATTR)."""
    module, attr = where.rsplit(":", 1)
    return getattr(_import(module), attr)


def _import(module: str):
    if not module.endswith(".py"):
        return importlib.import_module(module)
    name = "harness_adapter_" + hashlib.sha1(module.encode()).hexdigest()[:10]
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, module)
        if spec is None:
            raise CaseError(f"adapter {module} is not a Python file")
        sys.modules[name] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sys.modules[name])
    return sys.modules[name]


def kernel_fields(case: Case) -> tuple[str, ...]:
    """The fields one compiled kernel serves: the static ones, and the dynamic ones its family compiles in."""
    return STATIC + family(case.family).runner.compiled


def kernel_key(case: Case) -> tuple:
    """What one compiled kernel serves: the values of its kernel_fields."""
    return tuple(getattr(case, name) for name in kernel_fields(case))


def names() -> tuple[str, ...]:
    """The registered families, test doubles included."""
    return tuple(_registry())


FAMILIES = tuple(_REGISTRY)  # the project's own families


def check(case: Case) -> Case:
    """`case`, validated, with a registered family; else CaseError. Imports no family module."""
    registry = _registry()
    base = case.family.removesuffix(OUTSIDE_MODE)
    if base not in registry or base != case.family and base not in OUTSIDE:
        raise CaseError(f"unknown kernel family {case.family!r}; known: {', '.join(registry)}")
    return case.validate()


class Unbuildable(RuntimeError):
    """A program that cannot be written down here, before any compiler pass ran: an outside kernel's
    Python builder failing on this release's API, or needing what this machine lacks. UNSUPPORTED."""


def written(case: Case, write: Callable):
    """write() -> the program's prim_func. A release whose parser rejects the program in the case's
    non-default forms cannot express those forms (0.1.6.post2's TVMScript parser and P staged through
    shared memory, say): Unbuildable, so UNSUPPORTED. In the default forms a rejection stays a
    COMPILE_ERROR: every release must take them."""
    try:
        return write()
    except Exception as e:
        if not case.forms:
            raise
        first = next((line.strip() for line in str(e).splitlines() if line.strip()), type(e).__name__)
        raise Unbuildable(f"this TileLang cannot write the program in forms {', '.join(form_names(case.forms))}: "
                          f"{type(e).__name__}: {first}") from e


class LaunchError(RuntimeError):
    """A kernel launch failed, or the device faulted while it ran: "<kernel>: <first line>"."""

    def __init__(self, kernel: str, message: str):
        super().__init__(f"{kernel}: {message}")
        self.kernel = kernel


def launch(name, kernel, *args):
    """Run one kernel and wait for it, so that an asynchronous CUDA fault is pinned on the
    kernel that caused it rather than on whichever later call happens to see it."""
    import torch
    try:
        kernel(*args)
        if torch.cuda.is_available():
            torch.cuda.synchronize()
    except Exception as e:
        first = next((line for line in str(e).splitlines() if line.strip()), type(e).__name__)
        raise LaunchError(name, first.strip()) from e
