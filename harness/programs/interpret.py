"""The reference: a program's meaning in torch (emit.torch_source), run on the CPU, with no TileLang in it."""
from __future__ import annotations

import functools

from harness.programs import emit
from harness.programs.model import Program, to_json


@functools.lru_cache(maxsize=256)
def _expected(text: str):
    import torch

    from harness.programs.model import from_json
    p = from_json(text)
    namespace = {"torch": torch}
    # The text is generated from a checked program: names are identifiers, numbers typed (model.check).
    exec(compile(emit.HELPERS + "\n" + emit.torch_source(p), "<program reference>", "exec"), namespace)
    return namespace["expected"]


def run(p: Program, n: int, initial: dict, dtype=None) -> dict:
    """{written global: its contents after the program}, from every global's initial contents (on any
    device; computed on the CPU), in float64 or, for the baseline, float32."""
    import torch
    dtype = dtype or torch.float64
    inputs = [initial[b.name].detach().cpu() for b in p.globals]
    return _expected(to_json(p))(n, *inputs, F=dtype)
