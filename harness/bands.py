"""Guard bands: memory a kernel must not touch, placed right before and after every buffer it is given.

A kernel that writes past the end of a buffer corrupts whatever the allocator placed next to it, and the
symptom shows in another tensor or nowhere. So every buffer the harness hands a kernel (inputs, outputs,
intermediates) is a view into a larger raw allocation, with a band on each side filled with a sentinel.
After the run, and before any value is judged, `Guard.breaches()` compares each band's bytes with what was
written there: a change is an out-of-bounds write (OOB_WRITE), naming the tensor, the side, how many band
elements changed and the one nearest the tensor's edge.

Out-of-bounds reads (OOB_READ) use the same bands with other contents: a failing case is rerun with bands of
zeros and then of a large finite value (`guarding(pattern="zeros")`, `Guard(pattern="large")`, or
`Guard.refill` on the same buffers, one tensor at a time to learn whose band mattered); outputs that change
with nothing but the band contents prove the kernel read outside a tensor.

Fresh tensors are poisoned: `empty` fills the tensor's own bytes with one fixed signalling NaN, whatever the
bands hold. Otherwise an output element the kernel never writes would hold whatever the band of a freed
tensor left at that address, and would change with the band contents like a read outside a buffer.

Kernel-family code allocates through the module-level `empty`/`zeros`/`full`/`adopt`: inside `guarding()`
they return guarded views, outside it plain tensors, so no guard is threaded through every function.
"""
from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass

import torch

ALIGN = 512  # the CUDA caching allocator's block alignment: a view this far into its buffer is aligned like a plain allocation
MIN_BAND = 16 * 1024  # the measured bug wrote ~2 KB past a 256 KB tensor; a missing tail guard can overrun by part of a tile
MAX_BAND = 1024 * 1024  # bands of a quarter of the tensor cover a whole tile's overrun; the cap bounds the memory spent
SIDES = ("before", "after")
PATTERNS = ("nan", "zeros", "large")
POISON_SALT = 0x1F  # the payload of a fresh tensor's contents (bands use salts 0, 1, 2... per tensor)

# Signalling NaNs with a payload (quiet bit clear). GPU arithmetic never produces them: any float op or atomic
# add on a NaN returns the canonical quiet NaN (0x7FFFFFFF, 0x7FFF), and on the CPU it sets the quiet bit, so
# an add of any value, 0.0 included, changes the bits; a kernel storing exactly this pattern is implausible.
# Compared as values this would not work (NaN != NaN, and an add into a huge finite value can round back to it).
_SIGNALLING_NAN = {torch.float16: 0x7DA5, torch.bfloat16: 0x7FA5, torch.float32: 0x7FA5A5A5,
                   torch.float64: 0x7FF4A5A5A5A5A5A5}
_FILLER = 0xA5  # other dtypes: an unusual byte (never a valid bool); an integer atomic add of 0 is invisible to any pattern


def pattern_bytes(dtype: torch.dtype, pattern: str = "nan", salt: int = 0) -> bytes:
    """One element's bytes, as stored (little-endian), of a band filled with `pattern`.

    `salt` varies the NaN payload per tensor, so a kernel that copies one tensor's band into another's
    (loads and stores both past the end, same dtype) still changes the bytes it lands on.
    """
    size = dtype.itemsize
    if pattern == "zeros":
        return bytes(size)
    if pattern == "large":
        return _large_bytes(dtype)
    if pattern != "nan":
        raise ValueError(f"unknown band pattern {pattern!r}: choose one of {', '.join(PATTERNS)}")
    word = _SIGNALLING_NAN.get(dtype, int.from_bytes(bytes([_FILLER]) * size, "little"))
    return (word ^ (salt & 0x1F)).to_bytes(size, "little")  # the low 5 bits only: the value stays a signalling NaN


def _large_bytes(dtype: torch.dtype) -> bytes:
    """A large finite value: read into a sum or a softmax it changes the output, unlike zeros."""
    if dtype == torch.bool:
        value = True
    elif dtype.is_floating_point or dtype.is_complex:
        value = torch.finfo(dtype).max / 16  # finite, exact (max scaled by a power of two), room for a few adds
    else:
        value = torch.iinfo(dtype).max // 2
    return bytes(torch.tensor([value], dtype=dtype).view(torch.uint8).tolist())


def band_size(nbytes: int) -> int:
    """Bytes of each band around a tensor of `nbytes`: a multiple of ALIGN, so the view keeps the base's alignment."""
    quarter = -(-(nbytes // 4) // ALIGN) * ALIGN
    return min(MAX_BAND, max(MIN_BAND, quarter))


@dataclass(frozen=True)
class Breach:
    """Band elements of one side of one tensor whose bytes changed: an out-of-bounds write.

    `count` is in elements of the tensor's dtype, and a lower bound (a write beyond the band is not seen).
    `first` is the changed element nearest the tensor, counted from its edge: "after", 0 = the element right
    after the last one; "before", 0 = the element right before the first one (index -1 of the tensor).
    """
    tensor: str
    side: str
    count: int
    first: int

    def describe(self) -> str:
        elements = f"{self.count} element{'s' if self.count != 1 else ''}"
        if self.side == "after":
            return f"{self.tensor}: {elements} written after the end (first at +{self.first})"
        return f"{self.tensor}: {elements} written before the start (first at -{self.first + 1})"


@dataclass
class _Guarded:
    """One guarded tensor: its raw buffer, where the tensor sits in it, and the element pattern of its bands."""
    name: str
    dtype: torch.dtype
    salt: int
    backing: torch.Tensor  # uint8: band, tensor bytes, band
    before: int
    nbytes: int
    fill: torch.Tensor | None = None  # uint8, one element's pattern, on the tensor's device

    def band(self, side: str) -> torch.Tensor:
        """The band's bytes, one row per element of the tensor's dtype."""
        raw = self.backing[: self.before] if side == "before" else self.backing[self.before + self.nbytes:]
        return raw.view(-1, self.dtype.itemsize)

    def changed(self, side: str) -> torch.Tensor:
        """Per band element, whether any of its bytes differs from the pattern (bytes: NaN != NaN as values)."""
        return (self.band(side) != self.fill).any(dim=1)

    def refill(self, pattern: str) -> None:
        self.fill = _element(self.backing.device, self.dtype, pattern, self.salt)
        for side in SIDES:
            self.band(side)[:] = self.fill


class Guard:
    """Allocates tensors with guard bands and reports the bands a kernel changed."""

    def __init__(self, pattern: str = "nan") -> None:
        pattern_bytes(torch.uint8, pattern)  # fail at construction on an unknown pattern
        self.pattern = pattern
        self._guarded: list[_Guarded] = []

    @property
    def names(self) -> tuple[str, ...]:
        """The guarded tensors, in allocation order (so a report can say which buffers were guarded)."""
        return tuple(g.name for g in self._guarded)

    def __iter__(self) -> Iterator[str]:
        return iter(self.names)

    def empty(self, name: str, shape: Sequence[int] | int, dtype: torch.dtype,
              device: torch.device | str | None = None) -> torch.Tensor:
        """An uninitialized contiguous tensor, with the strides and alignment of a plain allocation."""
        size = torch.Size([shape] if isinstance(shape, int) else shape)
        nbytes = size.numel() * dtype.itemsize
        band = band_size(nbytes)
        backing = torch.empty(band + nbytes + band, dtype=torch.uint8, device=device)
        view = backing[band: band + nbytes].view(dtype).view(size)
        # Relative to the base, not data_ptr(): a 0-element view has a null data pointer.
        assert view.storage_offset() * dtype.itemsize % ALIGN == 0
        # The salt gives each tensor its own payload (see pattern_bytes).
        guarded = _Guarded(name, dtype, len(self._guarded), backing, band, nbytes)
        guarded.refill(self.pattern)
        view.view(-1).view(torch.uint8).view(-1, dtype.itemsize)[:] = _element(backing.device, dtype, "nan", POISON_SALT)
        self._guarded.append(guarded)
        return view

    def zeros(self, name: str, shape: Sequence[int] | int, dtype: torch.dtype,
              device: torch.device | str | None = None) -> torch.Tensor:
        return self.empty(name, shape, dtype, device).zero_()

    def full(self, name: str, shape: Sequence[int] | int, value: float | int | bool, dtype: torch.dtype,
             device: torch.device | str | None = None) -> torch.Tensor:
        return self.empty(name, shape, dtype, device).fill_(value)

    def adopt(self, name: str, tensor: torch.Tensor) -> torch.Tensor:
        """A guarded contiguous copy of `tensor` (its values and dtype, not its autograd history)."""
        return self.empty(name, tensor.shape, tensor.dtype, tensor.device).copy_(tensor.detach())

    def refill(self, pattern: str, names: Sequence[str] | None = None) -> None:
        """Rewrite the bands (of `names`, default all) with another pattern: the out-of-bounds read rerun."""
        pattern_bytes(torch.uint8, pattern)
        for g in self._guarded:
            if names is None or g.name in names:
                g.refill(pattern)

    def breaches(self) -> list[Breach]:
        """One Breach per (tensor, side) whose band bytes changed since they were filled."""
        checks = [(g, side) for g in self._guarded for side in SIDES]
        hits = _any_each([g.changed(side) for g, side in checks])
        return [_breach(g, side) for (g, side), hit in zip(checks, hits) if hit]


_WORDS = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def _element(device: torch.device, dtype: torch.dtype, pattern: str, salt: int) -> torch.Tensor:
    """pattern_bytes as a uint8 tensor on `device`, filled there rather than copied from the host: each copy from the
    host waits for the device, and a case guards a dozen tensors (with many processes on one GPU, each wait costs
    milliseconds). Made afresh for each tensor, so that a stray write can spoil no other case's pattern."""
    word = int.from_bytes(pattern_bytes(dtype, pattern, salt), "little", signed=dtype.itemsize > 1)
    return torch.full((1,), word, dtype=_WORDS[dtype.itemsize], device=device).view(torch.uint8)


def _any_each(flags: list[torch.Tensor]) -> list[bool]:
    """`flag.any()` for each, with one host sync per device rather than one per band."""
    by_device: dict[torch.device, list[int]] = {}
    for i, f in enumerate(flags):
        by_device.setdefault(f.device, []).append(i)
    hits = [False] * len(flags)
    for indices in by_device.values():
        for i, hit in zip(indices, torch.stack([flags[i].any() for i in indices]).tolist()):
            hits[i] = hit
    return hits


def _breach(g: _Guarded, side: str) -> Breach:
    """Count and locate the changed elements; runs only for a band known to have changed."""
    changed = g.changed(side)
    if side == "before":
        changed = changed.flip(0)  # count outward from the tensor's first element
    where = changed.nonzero()
    return Breach(g.name, side, int(where.numel()), int(where[0, 0]))


_ACTIVE: ContextVar[Guard | None] = ContextVar("harness_bands_guard", default=None)


@contextlib.contextmanager
def guarding(pattern: str = "nan") -> Iterator[Guard]:
    """Make a new Guard the active one for the module-level allocators, for the `with` block."""
    guard = Guard(pattern)
    token = _ACTIVE.set(guard)
    try:
        yield guard
    finally:
        _ACTIVE.reset(token)


def active() -> Guard | None:
    """The Guard of the innermost `guarding()` block, or None outside any."""
    return _ACTIVE.get()


def empty(name: str, shape: Sequence[int] | int, dtype: torch.dtype, device: torch.device | str | None = None) -> torch.Tensor:
    guard = _ACTIVE.get()
    return torch.empty(shape, dtype=dtype, device=device) if guard is None else guard.empty(name, shape, dtype, device)


def zeros(name: str, shape: Sequence[int] | int, dtype: torch.dtype, device: torch.device | str | None = None) -> torch.Tensor:
    guard = _ACTIVE.get()
    return torch.zeros(shape, dtype=dtype, device=device) if guard is None else guard.zeros(name, shape, dtype, device)


def full(name: str, shape: Sequence[int] | int, value: float | int | bool, dtype: torch.dtype,
         device: torch.device | str | None = None) -> torch.Tensor:
    guard = _ACTIVE.get()
    if guard is None:
        return torch.full(torch.Size([shape] if isinstance(shape, int) else shape), value, dtype=dtype, device=device)
    return guard.full(name, shape, value, dtype, device)


def adopt(name: str, tensor: torch.Tensor) -> torch.Tensor:
    """A contiguous copy of `tensor`, guarded inside `guarding()`: a copy either way, so a kernel that writes
    into its input never changes the caller's tensor in one mode and not in the other."""
    guard = _ACTIVE.get()
    return tensor.detach().clone(memory_format=torch.contiguous_format) if guard is None else guard.adopt(name, tensor)
