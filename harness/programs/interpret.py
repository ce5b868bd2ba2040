"""The reference: a program's meaning in torch (emit.torch_source), run on the CPU, with no TileLang in it."""
from __future__ import annotations

import functools

from harness.programs import emit
from harness.programs.model import INPUT_RANGE, Program


@functools.lru_cache(maxsize=256)
def _expected(p: Program):
    import torch

    namespace = {"torch": torch}
    # The text is generated from a checked program: names are identifiers, numbers typed (model.check).
    exec(compile(emit.HELPERS + "\n" + emit.torch_source(p), "<program reference>", "exec"), namespace)
    return namespace["expected"]


def initial(p: Program, n: int, seed: int) -> dict:
    """Every global buffer's initial contents, on the CPU: integers in [-INPUT_RANGE, INPUT_RANGE] drawn from
    `seed` in declaration order (outputs too, so that an element never written shows)."""
    import torch
    gen = torch.Generator().manual_seed(seed)
    return {b.name: torch.randint(-INPUT_RANGE, INPUT_RANGE + 1, (n if b.rows == "n" else b.rows, b.shape[1]), generator=gen)
            .to(getattr(torch, b.dtype)) for b in p.globals}


def run(p: Program, n: int, initial: dict, dtype=None) -> dict:
    """{written global: its contents after the program}, from every global's initial contents (on any
    device; computed on the CPU), in float64 or, for the baseline, float32."""
    import torch
    dtype = dtype or torch.float64
    inputs = [initial[b.name].detach().cpu() for b in p.globals]
    return _expected(p)(n, *inputs, F=dtype)


def out_of_range(p: Program, n: int, seed: int) -> str:
    """Why `p`'s float64 meaning at length `n` on the inputs of `seed` leaves what the generator promises (every
    written global finite and within its dtype's exactly representable integers), or "". A drawn program keeps to
    it by construction; a mutant (harness.programs.mutate) changes a field or inserts a statement without the
    generator's bounds, so the campaign checks it here before it runs."""
    import torch

    from harness.programs.builder import EXACT
    for name, t in run(p, n, initial(p, n, seed)).items():
        bound = EXACT[p.buffer(name).dtype]
        if not bool(torch.isfinite(t).all()):
            return f"{name} is not finite"
        if float(t.abs().max()) > bound:
            return f"{name} reaches {float(t.abs().max()):.4g}, past {bound}"
    return ""
