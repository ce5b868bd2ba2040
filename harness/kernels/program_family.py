"""Generated tile programs (harness.programs) as a family: the program is the Case's `program`, its length `n`
the Case's seqlen_q, its inputs small integers drawn from the seed.

Each program is written to a file and imported (TileLang parses a prim_func from its source), then compiled
with the case's knobs. The knobs are twins (Judge.twins): a program compiled with one must give the
knob-free kernel's outputs bit for bit. A well-formed program whose prim_func TileLang's frontend refuses
is REJECTED ("rejects valid"), apart from COMPILE_ERROR, where a lowering pass failed.
"""
from __future__ import annotations

import hashlib
import importlib.util
import math
import os
import re
import sys
import tempfile

import torch

from harness import bands
from harness.kernels import Family, Judge, Offer, Rule, Runner, launch
from harness.programs import emit, interpret, model

# The pass configurations that must not change what a program computes: they change how it is scheduled
# (warp specialization), how data moves (TMA, 256-bit vectors) and where shared memory lives. Not
# no_safe_memory: it removes the guard of T.copy on a ragged last tile (seen on an H100: 480 elements
# written past the end of a tensor at n = 1), which a program relies on by design.
TWINS = ("no_smem_reuse", "no_tma", "no_vectorize_256", "no_warp_specialize")


class OutOfRange(RuntimeError):
    """A program whose reference overflowed: it judges nothing of the compiler (blame: UNSUPPORTED). A drawn program
    keeps within its bounds by construction except a changed attention chain whose running max was dropped or put
    under a `when`: exp2(S - m) then outgrows any dtype. Rare (5 cases of one program in 4,058), so it is found
    when the case is judged rather than by interpreting every drawn case (which tripled the draw's time)."""


class Rejected(RuntimeError):
    """TileLang's frontend refused a well-formed program (its parser or tracer raised): "rejects valid"."""


def module(p):
    """The program's module (emit.module), written once per process under the temporary directory."""
    text = emit.module(p)
    name = "harness_program_" + hashlib.sha1(text.encode()).hexdigest()[:16]
    if name in sys.modules:
        return sys.modules[name]
    directory = os.path.join(tempfile.gettempdir(), f"harness-programs-{os.getuid()}")
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, name + ".py")
    with tempfile.NamedTemporaryFile("w", dir=directory, suffix=".tmp", delete=False) as f:
        f.write(text)
    os.replace(f.name, path)
    spec = importlib.util.spec_from_file_location(name, path)
    loaded = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(loaded)
    except Exception as e:  # harness.blame decides whose: TileLang's (REJECTED), or ours (the emitter's text)
        first = next((line.strip() for line in str(e).splitlines() if line.strip()), "")
        raise Rejected(f"TileLang's frontend rejects the program: {type(e).__name__}: {first}") from e
    sys.modules[name] = loaded
    return loaded


def build(case, target: str):
    from harness import compat
    return compat.compile(module(case.program).program, target, case.knobs, kernel="program")


def make_inputs(case, device) -> dict:
    return {name: t.to(device) for name, t in interpret.initial(case.program, case.seqlen_q, case.seed).items()}


def run(kernel, case, inputs) -> dict:
    """The kernel over copies of the buffers it writes (guarded), so that `inputs` keeps their initial contents."""
    p = case.program
    outputs = {name: bands.adopt(name, inputs[name]) for name in p.written()}
    launch("program", kernel, *(outputs.get(b.name, inputs[b.name]) for b in p.globals))
    return outputs


def reference(case, inputs, dtype) -> dict:
    """The interpreter (harness.programs.interpret): float64, or float32 (the kernel's arithmetic) for the baseline."""
    device = next(iter(inputs.values())).device
    out = interpret.run(case.program, case.seqlen_q, inputs, torch.float64 if dtype == torch.float64 else torch.float32)
    broken = [name for name, t in out.items() if dtype == torch.float64 and not bool(torch.isfinite(t).all())]
    if broken:  # small integer inputs and bounded statements never overflow float64: the program broke its bounds
        raise OutOfRange(f"the program's float64 meaning is not finite in {', '.join(broken)}: its values outgrew "
                         "the generator's bounds (it judges nothing of the compiler)")
    return {name: t.to(device) for name, t in out.items()}


def exact(p) -> bool:
    """Integer inputs stay exact in float32 in any order of summation unless an exp2 or a division makes
    fractions whose sums need more bits than it has (seen: an attention chain's P @ V, 4.8e-7 apart)."""
    def inexact(e):
        return isinstance(e, list) and (e[0] in ("exp2", "div") or any(inexact(a) for a in e[1:]))
    return not any(s.op == "map" and inexact(s.expr) for s in model.walk(p.body))


def language(p) -> list[str]:
    """The TileLang names (T.<name>) the program's text uses."""
    return sorted(set(re.findall(r"\bT\.(\w+)", emit.tilelang_source(p))))


def lacks(case) -> str | None:
    """The T.<name>s this release lacks that the program uses (0.1.10 has no T.cumsum, say), or None."""
    if not case.program:
        return None
    from harness import compat
    return compat.missing_language(language(case.program))


def tensors(case) -> tuple:
    return tuple((name, "forward") for name in case.program.written())


def fragments(case) -> dict:
    """Each fragment's elements: the code scan weighs its register array against them (harness.codegen)."""
    return {b.name: math.prod(b.shape) for b in case.program.buffers if b.scope == "fragment"}


def locate(case, inputs):
    """Region of an output element: the ragged last block's rows, an interior block's, or a buffer every block shares."""
    p = case.program
    n = case.seqlen_q

    def where(name, index):
        if p.buffer(name).rows != "n":
            return "every_block"
        return "tail_block" if n % p.block and index[0] >= n // p.block * p.block else "interior"
    return where


FAMILY = Family(
    "program",
    Offer(
        variants=("default",),
        head_dims=(64,),
        tiles=((64, 64, 1, 128),),      # unused: a program carries its own block and threads
        layouts=("bhsd",),
        dtypes=("float16",),
        gqa=False,
        multihead=False,
        takes=("program",),
        lengths="program",
        knobs=TWINS,
        rules=(Rule("a program case has a program", ("program",), lambda c: bool(c.program), asserted=True),),
    ),
    Runner(build=build, run=run, make_inputs=make_inputs, lacks=lacks),
    Judge(tensors=tensors, reference=reference, canonical=lambda case, outputs: outputs, locate=locate,
          exact=lambda case: exact(case.program), twins=True, fragments=fragments),
)
