"""Kernel families: one `Family` object per family, and the registry that names them.

A family module (e.g. fwd_family.py) exports `FAMILY`; its TileLang programs live beside it
(fwd.py) and are imported only when it builds. A family declares what it takes (its variants,
tiles, head dims, layouts, the optional Case features of `harness.case.OPTIONAL`, its lengths
strategy by name) and nothing above this module branches on which family it is: adding one is
its modules and one line in `_REGISTRY` (docs/adding-a-family.md).
"""
from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from dataclasses import dataclass, field

from harness.case import FEATURES, OPTIONAL, Case, CaseError

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
}


def _registry() -> dict:
    """_REGISTRY plus test doubles registered through the environment ("name=module:attr,..."),
    read when asked so that worker processes see them too."""
    extra = (item.split("=", 1) for item in os.environ.get("HARNESS_EXTRA_FAMILIES", "").split(",") if item)
    return {**_REGISTRY, **dict(extra)}


def _nothing(case, *args) -> dict:
    return {}


@dataclass(frozen=True)
class Family:
    """Everything the harness needs from a kernel family.

    Tensors it returns are named; `tensors(case)` gives (name, kind) in the order they are judged,
    kind "forward" or "gradient" (the oracle's k). Shapes: `canonical` and `reference` speak
    [batch, heads, seq, dim]; `run` and `make_inputs` speak the kernel's layout.
    """
    name: str
    variants: tuple[str, ...]
    head_dims: tuple[int, ...]
    tiles: tuple[tuple[int, int, int, int], ...]     # (block_m, block_n, num_stages, threads); first = default
    fits: Callable[..., str | None]                   # fits(*tile, head_dim, head_dim_v, variant): why resources run out
    build: Callable                                   # build(case, target) -> compiled kernel(s)
    run: Callable                                     # run(kernel, case, inputs) -> {name: output}
    make_inputs: Callable                             # make_inputs(case, device) -> {name: tensor}
    tensors: Callable                                 # tensors(case) -> ((name, kind), ...)
    reference: Callable                               # reference(case, inputs, dtype) -> {name: canonical}
    canonical: Callable                               # canonical(case, outputs) -> {name: canonical}
    # floors(case, inputs) -> {name: rounding spread a single baseline run may miss}; the oracle adds k times it.
    floors: Callable = _nothing
    # contiguous(case) -> {atomic destination: consecutive loop elements on consecutive addresses}.
    contiguous: Callable = _nothing
    # Kernels whose code no variant changes, and which kernel alone produces a tensor: a failure
    # pinned there is one bug whatever the variant (one signature, one reproducer).
    shared_kernels: frozenset = field(default_factory=frozenset)
    producers: dict = field(default_factory=dict)
    layouts: tuple[str, ...] = ("bhsd", "bshd")        # "thd": packed sequences (case.seqlens)
    # locate(case, inputs) -> fn(tensor name, canonical index) -> region; None: the dense rule.
    locate: Callable | None = None
    # TileLang language names (T.<name>) its kernels need: a release without one reports UNSUPPORTED.
    needs: tuple[str, ...] = ()
    # The optional features (harness.case.OPTIONAL) its kernels express, in the order they are
    # drawn; a case with any other switched on is not this family's. Masking families express
    # causal masks and windows as mask data: ("mask", "mask_broadcast", "bias").
    takes: tuple[str, ...] = ("causal", "window", "sinks")
    # The strategy that draws its dynamic fields, by name (harness.strategies.LENGTHS): "dense";
    # "masked" (key lengths around row alignment, mask patterns); "packed" (varlen seqlens);
    # "ring_k" / "ring_q" (lengths around the trip counts where a ring of num_stages buffers of
    # key / query blocks turns).
    lengths: str = "dense"
    # Generated-code checks (harness.codegen) that must find nothing in its compiles.
    clean: tuple[str, ...] = ()
    # Global buffers whose vectorized accesses must be at offsets the kernel proves aligned
    # (harness.codegen.unaligned_vectors).
    aligned: frozenset = field(default_factory=frozenset)

    def unsupported(self, case: Case) -> str | None:
        """A one-line reason the family cannot express `case`, or None."""
        if case.variant not in self.variants:
            return f"{case.family} has no variant {case.variant!r}; offered: {self.variants}"
        if case.layout not in self.layouts:
            return f"{case.family} has no layout {case.layout!r}; offered: {self.layouts}"
        for name in ("head_dim", "head_dim_v"):
            if getattr(case, name) not in self.head_dims:
                return f"{name} {getattr(case, name)} not in {self.head_dims}"
        on = [name for name in OPTIONAL if name not in self.takes and getattr(case, name) != FEATURES[name]]
        if on:
            return f"{case.family} does not take {', '.join(on)}; it takes: {', '.join(self.takes) or 'none'}"
        if case.tile not in self.tiles:
            return f"tile config {case.tile} not offered; offered: {self.tiles}"
        return self.fits(*case.tile, case.head_dim, case.head_dim_v, case.variant)

    def shared(self, kernel: str | None) -> str | None:
        """`kernel` if every variant runs that same kernel, else None."""
        return kernel if kernel in self.shared_kernels else None


def family(name: str) -> Family:
    check(Case(family=name))
    module, attr = _registry()[name].split(":")
    return getattr(importlib.import_module(module), attr)


def names() -> tuple[str, ...]:
    """The registered families, test doubles included."""
    return tuple(_registry())


FAMILIES = tuple(_REGISTRY)  # the project's own families


def check(case: Case) -> Case:
    """`case`, validated, with a registered family; else CaseError. Imports no family module."""
    registry = _registry()
    if case.family not in registry:
        raise CaseError(f"unknown kernel family {case.family!r}; known: {', '.join(registry)}")
    return case.validate()


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
