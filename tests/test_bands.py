"""Guard bands: alignment and strides of the views, and every write outside a tensor reported with side and count."""
from __future__ import annotations

import pytest
import torch

from harness import bands

FLOATS = (torch.float16, torch.bfloat16, torch.float32)
DTYPES = (*FLOATS, torch.float64, torch.int32, torch.int64, torch.uint8, torch.bool)


def outside(t: torch.Tensor, start: int, count: int) -> torch.Tensor:
    """`count` elements of t's storage from `start` elements past its end (negative: before its first element)."""
    offset = t.storage_offset() + (t.numel() + start if start >= 0 else start)
    return t.as_strided((count,), (1,), offset)


def some(dtype: torch.dtype) -> int | float | bool:
    return True if dtype == torch.bool else 3


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(3, 5, 7), (1,), (129, 65), (2, 0, 4), 11])
def test_views_keep_the_alignment_and_strides_of_a_plain_allocation(dtype, shape):
    guard = bands.Guard()
    t = guard.empty("T", shape, dtype)
    plain = torch.empty(shape, dtype=dtype)
    assert t.shape == plain.shape and t.stride() == plain.stride() and t.dtype == dtype and t.is_contiguous()
    assert t.storage_offset() * t.element_size() % bands.ALIGN == 0
    base = t.untyped_storage().data_ptr()
    if t.numel():
        assert (t.data_ptr() - base) % bands.ALIGN == 0
    assert t.untyped_storage().nbytes() >= 2 * bands.MIN_BAND + plain.numel() * plain.element_size()
    assert guard.breaches() == []


def test_band_sizes_are_aligned_proportional_and_capped():
    assert bands.band_size(0) == bands.MIN_BAND
    assert bands.band_size(256_000) == 64_000  # a quarter, already a multiple of the alignment
    assert bands.band_size(256_004) == 64_512  # a quarter, rounded up
    assert bands.band_size(1 << 40) == bands.MAX_BAND
    assert all(bands.band_size(n) % bands.ALIGN == 0 for n in (1, 777, 65_537, 3_000_001))


@pytest.mark.parametrize("dtype", DTYPES)
def test_writes_just_after_the_end_are_counted_from_the_edge(dtype):
    guard = bands.Guard()
    t = guard.full("dQ_acc", (4, 33), some(dtype), dtype)
    t.fill_(some(dtype))  # the tensor's own elements are free to change
    outside(t, 0, 37).fill_(some(dtype))
    assert guard.breaches() == [bands.Breach("dQ_acc", "after", 37, 0)]
    assert guard.breaches()[0].describe() == "dQ_acc: 37 elements written after the end (first at +0)"


@pytest.mark.parametrize("dtype", DTYPES)
def test_writes_before_the_start_are_counted_outward(dtype):
    guard = bands.Guard()
    t = guard.zeros("LSE", (8,), dtype)
    outside(t, -3, 2).fill_(some(dtype))  # indices -3 and -2: the nearest, -2, is one further out than -1
    [breach] = guard.breaches()
    assert breach == bands.Breach("LSE", "before", 2, 1)
    assert breach.describe() == "LSE: 2 elements written before the start (first at -2)"


def test_a_single_write_further_out_gives_its_offset():
    guard = bands.Guard()
    t = guard.empty("dK", (16, 64), torch.float32)
    outside(t, 5, 1).fill_(0.0)
    assert guard.breaches() == [bands.Breach("dK", "after", 1, 5)]
    assert guard.breaches()[0].describe() == "dK: 1 element written after the end (first at +5)"


def test_each_tensor_and_side_is_reported_separately():
    guard = bands.Guard()
    q, o = guard.empty("Q", (4, 8), torch.float16), guard.empty("O", (4, 8), torch.float16)
    outside(q, -1, 1).fill_(1.0)
    outside(o, 0, 2).fill_(1.0)
    outside(o, -4, 4).fill_(1.0)
    assert guard.breaches() == [bands.Breach("Q", "before", 1, 0), bands.Breach("O", "before", 4, 0),
                                bands.Breach("O", "after", 2, 0)]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("value", [0.0, -0.0, 1.0, float("nan")])
def test_an_add_of_any_value_into_the_band_is_seen(dtype, value):
    # As values the band is NaN before and after, so only its bytes can show the add.
    guard = bands.Guard()
    t = guard.empty("dV", (3, 7), dtype)
    band = outside(t, 2, 3)
    assert band.isnan().all()
    band.add_(value)
    assert band.isnan().all()
    assert guard.breaches() == [bands.Breach("dV", "after", 3, 2)]


@pytest.mark.parametrize("dtype", DTYPES)
def test_a_store_of_what_a_kernel_would_write_is_seen(dtype):
    guard = bands.Guard()
    t = guard.empty("X", (5,), dtype)
    for value in (0, 1, True) if dtype == torch.bool else (0, 1, -1):
        outside(t, 0, 1).fill_(value)
        assert guard.breaches() == [bands.Breach("X", "after", 1, 0)]


def test_a_copy_of_one_band_into_another_is_seen():
    # A kernel that loads and stores past the end, the same dtype on both sides, copies band bytes verbatim.
    guard = bands.Guard()
    src, dst = guard.empty("V", (64,), torch.float16), guard.empty("O", (64,), torch.float16)
    outside(dst, 0, 16).copy_(outside(src, 0, 16))
    assert guard.breaches() == [bands.Breach("O", "after", 16, 0)]


def test_a_zero_element_tensor_still_has_bands():
    guard = bands.Guard()
    t = guard.empty("dSinks", (0,), torch.float32)
    assert t.numel() == 0 and guard.breaches() == []
    outside(t, 0, 1).fill_(0.5)
    outside(t, -1, 1).fill_(0.5)
    assert guard.breaches() == [bands.Breach("dSinks", "before", 1, 0), bands.Breach("dSinks", "after", 1, 0)]


def test_full_zeros_and_adopt_give_the_values_asked_for():
    guard = bands.Guard()
    src = torch.arange(24, dtype=torch.float32).reshape(2, 3, 4).transpose(1, 2).requires_grad_()
    copy = guard.adopt("K", src)
    assert torch.equal(copy, src.detach()) and copy.is_contiguous() and not copy.requires_grad
    copy.zero_()
    assert src[0, 0, 1] == 4  # a copy, not a view of the caller's tensor
    assert torch.equal(guard.full("M", (2, 2), -1, torch.int32), torch.full((2, 2), -1, dtype=torch.int32))
    assert torch.equal(guard.zeros("D", 5, torch.bfloat16), torch.zeros(5, dtype=torch.bfloat16))
    assert guard.names == ("K", "M", "D") and list(guard) == ["K", "M", "D"]
    assert guard.breaches() == []


def test_module_functions_allocate_plainly_outside_any_guard():
    assert bands.active() is None
    t = bands.full("LSE", 4, 2.0, torch.float32)
    assert torch.equal(t, torch.full((4,), 2.0)) and t.untyped_storage().nbytes() == 16
    assert bands.empty("O", (2, 3), torch.float16).untyped_storage().nbytes() == 12
    assert torch.equal(bands.zeros("D", (3,), torch.int32), torch.zeros(3, dtype=torch.int32))
    src = torch.ones(2, 3).t()
    adopted = bands.adopt("Q", src)
    assert torch.equal(adopted, src) and adopted.is_contiguous() and adopted.data_ptr() != src.data_ptr()


def test_guarding_contexts_nest_and_end():
    with bands.guarding() as outer:
        a = bands.zeros("A", 4, torch.float32)
        with bands.guarding() as inner:
            assert bands.active() is inner and inner is not outer
            b = bands.full("B", 4, 1.0, torch.float32)
            c = bands.adopt("C", torch.ones(4))
        assert bands.active() is outer
        d = bands.empty("D", 4, torch.float32)
    assert bands.active() is None
    with bands.guarding() as later:
        bands.zeros("E", 4, torch.float32)
    assert outer.names == ("A", "D") and inner.names == ("B", "C") and later.names == ("E",)
    outside(b, 0, 1).fill_(0.0)
    assert inner.breaches() == [bands.Breach("B", "after", 1, 0)] and outer.breaches() == []
    assert torch.equal(a + d.zero_(), torch.zeros(4)) and torch.equal(c, torch.ones(4))


@pytest.mark.parametrize("pattern", ["zeros", "large"])
def test_other_band_contents_for_the_read_check(pattern):
    guard = bands.Guard(pattern)
    t = guard.empty("K", (8,), torch.float16)
    band = outside(t, 0, 4)
    expected = 0.0 if pattern == "zeros" else torch.finfo(torch.float16).max / 16
    assert torch.equal(band, torch.full((4,), expected, dtype=torch.float16))
    assert guard.breaches() == []
    band[1] = 1.0
    assert guard.breaches() == [bands.Breach("K", "after", 1, 1)]


def test_refill_rewrites_bands_and_what_they_are_checked_against():
    guard = bands.Guard()
    k, v = guard.empty("K", (8,), torch.float32), guard.empty("V", (8,), torch.float32)
    guard.refill("large", names=["V"])
    assert outside(k, 0, 1).isnan().all() and (outside(v, -1, 1) == torch.finfo(torch.float32).max / 16).all()
    assert guard.breaches() == []
    guard.refill("zeros")
    assert (outside(k, 0, 1) == 0).all()
    outside(k, 0, 1).fill_(7.0)
    assert guard.breaches() == [bands.Breach("K", "after", 1, 0)]


def test_nan_patterns_are_signalling_nans_distinct_per_tensor():
    quiet_bit = {torch.float16: 1 << 9, torch.bfloat16: 1 << 6, torch.float32: 1 << 22, torch.float64: 1 << 51}
    for dtype, bit in quiet_bit.items():
        words = {bands.pattern_bytes(dtype, salt=s) for s in range(32)}
        assert len(words) == 32
        assert torch.tensor([list(w) for w in words], dtype=torch.uint8).view(dtype).isnan().all()
        assert not any(int.from_bytes(w, "little") & bit for w in words)  # what no arithmetic produces
    assert all(b not in (0, 1) for b in bands.pattern_bytes(torch.bool, salt=31))
    with pytest.raises(ValueError, match="unknown band pattern 'ones'"):
        bands.Guard("ones")


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32, torch.int32, torch.bool])
def test_fresh_tensors_hold_the_same_poison_whatever_the_bands_hold(dtype):
    # An element no kernel writes must read the same in the "nan" and "large" reruns, or the
    # out-of-bounds read check would blame an unwritten output on a read outside a buffer.
    bodies = [bands.Guard(p).empty("out", (3, 5), dtype).view(torch.uint8).clone() for p in bands.PATTERNS]
    assert all(torch.equal(b, bodies[0]) for b in bodies)
    assert bodies[0].view(-1, dtype.itemsize)[0].tolist() == list(bands.pattern_bytes(dtype, "nan", bands.POISON_SALT))
