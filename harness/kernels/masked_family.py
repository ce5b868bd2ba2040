"""The masked forward family: a dense uint8 mask and an additive bias (TileLang itself: masked.py).

A case's `mask` names a pattern (harness.case.MASKS) from which make_inputs draws the mask with
the case's seed; `mask_broadcast` gives its shape over (batch, heads), shared by the bias;
`bias` adds a random bias. Variants: `pad` (the host pads K and V to a multiple of 8 keys and the
mask and bias rows to a 16-byte pitch, mask 0 there) and `ragged` (the kernel takes any key
length). Before any kernel runs, `check_inputs` rejects a mask or bias of the wrong dtype, shape
or strides. The reference is the dense one with the mask
as `seen` and the bias added to the scaled scores: a row with no true element gives O = 0 and
LSE = -inf.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from harness import bands, layout
from harness import reference as ref
from harness.kernels import Family, Judge, Offer, Runner, fwd_family, launch

VARIANTS = ("pad", "ragged")
KEY_PAD = 8      # `pad`: keys padded to a multiple of this
ALIGN = layout.ROW_ALIGN
BIAS_STD = 2.0   # bias on the scale of the scaled scores, large enough to reorder them


class MaskError(ValueError):
    """A mask or bias the kernels cannot take; the message is one line."""


def per_axis(case) -> tuple[bool, bool]:
    """Whether the mask has its own plane per batch and per head (else it broadcasts)."""
    return case.mask_broadcast[0] == "b", case.mask_broadcast[1] == "h"


def mask_dims(case) -> tuple[int, int]:
    per_batch, per_head = per_axis(case)
    return case.batch if per_batch else 1, case.heads if per_head else 1


def tile_smem(block_m, block_n) -> int:
    """Shared memory of one mask tile (uint8) and one bias tile (16-bit)."""
    return 3 * block_m * block_n


def misfit(block_m, block_n, num_stages, threads, head_dim, head_dim_v, variant=None) -> str | None:
    return fwd_family.misfit(block_m, block_n, num_stages, threads, head_dim, head_dim_v, variant,
                           extra_smem=tile_smem(block_m, block_n))


def compile_block_or(case, target, block_m, block_n):
    from harness import compat
    from harness.kernels import masked

    return compat.compile(masked.block_or(*per_axis(case), case.heads, case.variant, block_m, block_n),
                          target, case.knobs, kernel="block_or")


def build(case, target: str) -> tuple:
    """(block activity, forward) compiled kernels, the activity for this case's tile."""
    from harness import compat
    from harness.kernels import masked

    main = masked.forward(case.heads, case.kv_heads, case.head_dim, case.head_dim_v, case.dtype, *per_axis(case),
                          case.bias, case.layout, *case.tile, case.variant)
    main = compat.compile(main, target, case.knobs, kernel="masked_fwd")
    return compile_block_or(case, target, case.block_m, case.block_n), main


# ----------------------------------------------------------------------------- inputs
def mask_seed(seed: int) -> int:
    """The seed of the mask and bias, derived from the case's (q, k, v use the seed itself)."""
    return (seed * 0x2545F491 + 0x3C6EF372) % (2**63)


def pattern(case, planes: int, g) -> torch.Tensor:
    """[planes, seq_q, seq_k] bool drawn from case.mask and generator g."""
    sq, sk = case.seqlen_q, case.seqlen_k
    i = torch.arange(sq)[:, None]
    j = torch.arange(sk)[None, :]
    shift = sk - sq

    def rand(density):
        return torch.rand(planes, sq, sk, generator=g) < density

    if case.mask == "none":
        return torch.ones(planes, sq, sk, dtype=torch.bool)
    if case.mask == "random":
        density = (0.05, 0.3, 0.7, 0.95)[int(torch.randint(4, (1,), generator=g))]
        return rand(density)
    if case.mask == "empty_rows":  # some rows all false, always the last one (a tail tile's)
        empty = torch.rand(planes, sq, 1, generator=g) < 0.3
        empty[:, -1] = True
        return rand(0.5) & ~empty
    if case.mask == "empty_blocks":  # whole block_m x block_n tiles all false
        blocks = torch.rand(planes, -(-sq // case.block_m), -(-sk // case.block_n), generator=g) < 0.5
        tiles = blocks.repeat_interleave(case.block_m, 1)[:, :sq].repeat_interleave(case.block_n, 2)[:, :, :sk]
        return rand(0.7) & ~tiles
    if case.mask == "causal":  # bottom-right aligned, as FlashAttention's
        return (j <= i + shift).expand(planes, sq, sk).clone()
    if case.mask == "band":
        width = int(torch.randint(0, 9, (1,), generator=g))
        return ((j - i - shift).abs() <= width).expand(planes, sq, sk).clone()
    if case.mask == "single":  # one true element per plane
        out = torch.zeros(planes, sq * sk, dtype=torch.bool)
        out[torch.arange(planes), torch.randint(sq * sk, (planes,), generator=g)] = True
        return out.view(planes, sq, sk)
    raise ValueError(f"no mask pattern {case.mask!r}")


def make_inputs(case, device) -> dict:
    """q, k, v (kernel layout), mask [mb, mh, seq_q, seq_k] uint8 and, with case.bias, bias of the
    same shape in the input dtype: all determined by case.seed."""
    inputs = ref.make_inputs(case, device)
    g = torch.Generator(device="cpu").manual_seed(mask_seed(case.seed))
    mb, mh = mask_dims(case)
    mask = pattern(case, mb * mh, g).view(mb, mh, case.seqlen_q, case.seqlen_k)
    inputs["mask"] = mask.to(device=device, dtype=torch.uint8)
    if case.bias:
        bias = torch.randn(mb, mh, case.seqlen_q, case.seqlen_k, generator=g) * BIAS_STD
        inputs["bias"] = bias.to(device=device, dtype=ref.DTYPES[case.dtype])
    return inputs


def check_inputs(case, inputs) -> None:
    """Raise MaskError unless the mask (and bias) are what the compiled kernel reads: uint8 /
    the input dtype, [batch or 1, heads or 1, seq_q, seq_k] as case.mask_broadcast says,
    contiguous, and starting 16-byte aligned (the vector loads assume both)."""
    mb, mh = mask_dims(case)
    want = (mb, mh, case.seqlen_q, case.seqlen_k)
    for name, dtype in (("mask", torch.uint8), ("bias", ref.DTYPES[case.dtype])):
        t = inputs.get(name)
        if t is None:
            if name == "mask" or case.bias:
                raise MaskError(f"no {name} given")
            continue
        if t.dtype != dtype:
            raise MaskError(f"{name} must be {dtype}, got {t.dtype}")
        if tuple(t.shape) != want:
            raise MaskError(f"{name} of shape {list(t.shape)} does not broadcast as {case.mask_broadcast!r} to "
                            f"[batch or 1, heads or 1, seq_q, seq_k] = {list(want)}")
        if not t.is_contiguous():
            raise MaskError(f"{name} strides {list(t.stride())} are not contiguous: the kernel reads rows of "
                            f"seq_k elements back to back")
        if t.data_ptr() % ALIGN:
            raise MaskError(f"{name} starts at an address not aligned to {ALIGN} bytes")


def _pad_keys(x, lay, extra):
    """Keys (the sequence axis of a kernel-layout K or V) padded with `extra` zero rows."""
    return layout.from_canonical(F.pad(layout.to_canonical(x, lay), (0, 0, 0, extra)), lay)


def _pitched(x, keys):
    """A mask or bias [.., seq_q, seq_k] with rows padded (zeros) to a multiple of 16 bytes and
    viewed as [.., seq_q, chunks, 16 bytes' worth]: what the `pad` kernels read."""
    run = ALIGN // x.element_size()
    x = F.pad(x, (0, -keys % run))
    return x.view(*x.shape[:3], -1, run)


def prepare(case, inputs) -> dict:
    """What the kernels read: k, v, mask, bias (zeros without a bias: never read) and the key
    length they see, `seq_k`. The `pad` variant pads K and V to a multiple of 8 keys and the
    mask and bias rows to a pitch of 16 bytes (mask 0 in the padding)."""
    check_inputs(case, inputs)
    k, v, mask = inputs["k"], inputs["v"], inputs["mask"]
    bias = inputs["bias"] if case.bias else torch.zeros(mask.shape, dtype=k.dtype, device=k.device)
    if case.variant == "ragged":
        return {"k": k, "v": v, "mask": mask, "bias": bias, "seq_k": case.seqlen_k}
    extra = -case.seqlen_k % KEY_PAD
    k, v = _pad_keys(k, case.layout, extra), _pad_keys(v, case.layout, extra)
    return {"k": k, "v": v, "mask": _pitched(mask, case.seqlen_k), "bias": _pitched(bias, case.seqlen_k),
            "seq_k": case.seqlen_k + extra}


def activity(kernel, case, prepared, block_m, block_n) -> torch.Tensor:
    """Active [mb, mh, query blocks, key blocks] (int32) from the block_or kernel."""
    mb, mh = mask_dims(case)
    active = bands.zeros("active", (mb, mh, -(-case.seqlen_q // block_m), -(-prepared["seq_k"] // block_n)),
                         torch.int32, prepared["mask"].device)
    launch("block_or", kernel, prepared["mask"], active)
    return active


def run(kernels, case, inputs) -> dict:
    or_k, main_k = kernels
    q = inputs["q"]
    p = prepare(case, inputs)
    active = activity(or_k, case, p, case.block_m, case.block_n)
    out, lse = fwd_family.outputs(case, q)
    launch("masked_fwd", main_k, q, p["k"], p["v"], p["mask"], p["bias"], active, out, lse)
    return {"O": out, "LSE": lse}


# ----------------------------------------------------------------------------- reference
def attention(case, inputs, dtype, q, k, v, bias=None):
    """O and LSE of canonical q, k, v (differentiable) with the case's mask and `bias`."""
    seen = inputs["mask"].bool()
    return ref.attention(q, k, v, None, seen, case.head_dim ** -0.5, bias)


def reference(case, inputs, dtype) -> dict:
    """Canonical O [b, h, sq, dv] and LSE [b, h, sq] in `dtype`."""
    q, k, v = (layout.to_canonical(inputs[n], case.layout).to(dtype) for n in ("q", "k", "v"))
    bias = inputs["bias"].to(dtype) if case.bias else None
    o, lse = attention(case, inputs, dtype, q, k, v, bias)
    return {"O": o, "LSE": lse}


def locate(case, inputs):
    """locate(name, canonical index) -> region: `empty_rows` (a query row whose mask is all
    false), `unseen_keys` (a key no query of its group sees), `masked_out` (a dBias element
    whose mask is false), `ragged_keys` (the last seq_k % 8 keys: what padding or the ragged
    path handles), `tail_q_tile` / `tail_k_tile` (a partial last tile), `interior`."""
    mask = inputs["mask"].bool().cpu()
    group = case.heads // case.kv_heads
    ragged = case.seqlen_k - case.seqlen_k % KEY_PAD

    def plane(b, h):  # the mask plane (broadcast) of batch b, query heads h (a slice)
        return mask[b if mask.shape[0] > 1 else 0, h if mask.shape[1] > 1 else slice(None)]

    def tail(n, length, block):
        return length % block and n >= length // block * block

    def where(name, index):
        if name in ("dK", "dV"):
            b, h, j = index[:3]
            if not plane(b, slice(h * group, (h + 1) * group))[..., j].any():
                return "unseen_keys"
        elif name == "dBias":
            b, h, i, j = index
            if not mask[b, h, i, j]:
                return "masked_out"
        else:
            b, h, i = index[:3]
            if not plane(b, h)[..., i, :].any():
                return "empty_rows"
        if name in ("dK", "dV", "dBias") and j >= ragged:
            return "ragged_keys"
        if name not in ("dK", "dV") and tail(i, case.seqlen_q, case.block_m):
            return "tail_q_tile"
        if name in ("dK", "dV", "dBias") and tail(j, case.seqlen_k, case.block_n):
            return "tail_k_tile"
        return "interior"
    return where


FAMILY = Family(
    "masked_fwd",
    Offer(
        variants=VARIANTS,
        head_dims=(64, 128),
        # (block_m, block_n, num_stages, threads): block_n a multiple of 16 (the pad variant's runs);
        # one stage, as the tile loops are serial (masked.py says why).
        tiles=((64, 64, 1, 128), (128, 64, 1, 256), (64, 128, 1, 128), (128, 128, 1, 256)),
        misfit=misfit,
        takes=("mask", "mask_broadcast", "bias"),
        lengths="masked",
    ),
    Runner(build=build, run=run, make_inputs=make_inputs),
    Judge(tensors=fwd_family.tensors, reference=reference, canonical=fwd_family.canonical, locate=locate,
          aligned=frozenset({"Mask", "Bias"})),
)
