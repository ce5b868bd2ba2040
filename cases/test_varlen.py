"""Varlen (packed, cu_seqlens) attention: the forward's O and LSE against the dense float64
reference per sequence, and every gradient of the backward against autograd through it."""
import pytest
from hypothesis import given

from harness import strategies
from harness.pool import default_size

KERNELS = default_size()  # kernels per example: one per worker


@pytest.mark.gpu
@given(suite=strategies.suites("varlen_fwd", KERNELS))
def test_varlen_forward_matches_reference(suite, gpu_pool, expect):
    expect(gpu_pool.run(suite), "PASS")


@pytest.mark.gpu
@given(suite=strategies.suites("varlen_bwd", KERNELS))
def test_varlen_backward_matches_autograd(suite, gpu_pool, expect):
    expect(gpu_pool.run(suite), "PASS")


@pytest.mark.compile
@given(suite=strategies.suites("varlen_fwd", KERNELS))
def test_varlen_forward_compiles_for_sm90a(suite, compile_pool, expect):
    expect(compile_pool.run(suite), "COMPILED")


@pytest.mark.compile
@given(suite=strategies.suites("varlen_bwd", KERNELS))
def test_varlen_backward_compiles_for_sm90a(suite, compile_pool, expect):
    expect(compile_pool.run(suite), "COMPILED")
