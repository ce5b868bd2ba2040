"""Kernel families: what each offers (pure data, no TileLang), and build/run entry points.

Every family exposes the same interface through `family(name)`:
  tiles              the tile configurations (block_m, block_n, num_stages, threads) it offers
  unsupported(case)  a one-line reason the kernel cannot express the case, or None
  static_key(case)   what the compiled kernel depends on; lengths and batch are symbolic
  build(case, target) -> compiled kernel        (imports TileLang lazily)
  run(kernel, case, inputs) -> {tensor name: output}
  tensors(case), reference(case, inputs, dtype), canonical(case, outputs): what the oracle judges
  floors(case, inputs) -> {tensor name: absolute error floor beyond the oracle's own}
"""
from __future__ import annotations

import importlib
import os

_MODULES = {"fwd": "harness.kernels.fwd_family", "bwd": "harness.kernels.bwd_family"}
# Test doubles register through the environment ("name=module,...") so worker processes see them.
for _item in filter(None, os.environ.get("HARNESS_EXTRA_FAMILIES", "").split(",")):
    _name, _module = _item.split("=", 1)
    _MODULES[_name] = _module


def family(name: str):
    try:
        return importlib.import_module(_MODULES[name])
    except KeyError:
        raise ValueError(f"unknown kernel family {name!r}; known: {', '.join(_MODULES)}") from None


def names() -> tuple[str, ...]:
    return tuple(_MODULES)


class LaunchError(RuntimeError):
    """A kernel launch failed, or the device faulted while it ran: "<kernel>: <first line>"."""


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
        raise LaunchError(f"{name}: {first.strip()}") from e


def tile(case) -> tuple:
    return case.block_m, case.block_n, case.num_stages, case.threads


def not_offered(case, variants, head_dims, tiles) -> str | None:
    """Why `case` asks for a variant, head dim or tile config its family does not offer, or None."""
    if case.variant not in variants:
        return f"{case.family} has no variant {case.variant!r}; offered: {variants}"
    for name in ("head_dim", "head_dim_v"):
        if getattr(case, name) not in head_dims:
            return f"{name} {getattr(case, name)} not in {head_dims}"
    if tile(case) not in tiles:
        return f"tile config {tile(case)} not offered; offered: {tiles}"
    return None
