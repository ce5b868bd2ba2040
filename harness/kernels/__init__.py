"""Kernel families: what each offers (pure data, no TileLang), and build/run entry points.

Every family exposes the same interface through `family(name)`:
  tiles              the tile configurations (block_m, block_n, num_stages, threads) it offers
  unsupported(case)  a one-line reason the kernel cannot express the case, or None
  static_key(case)   what the compiled kernel depends on; lengths and batch are symbolic
  build(case, target) -> compiled kernel        (imports TileLang lazily)
  run(kernel, case, inputs) -> {tensor name: output}
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
