"""Masked attention (uint8 mask, additive bias): the forward's O and LSE and every gradient of the
backward (dQ, dK, dV, dBias) against float64 autograd, for both key-tail variants (pad, ragged)."""
import pytest
from hypothesis import given

from harness import strategies
from harness.pool import default_size

KERNELS = default_size()  # kernels per example: one per worker


@pytest.mark.gpu
@given(suite=strategies.suites("masked_fwd", KERNELS))
def test_masked_forward_matches_reference(suite, gpu_pool, expect):
    expect(gpu_pool.run(suite), "PASS")


@pytest.mark.gpu
@given(suite=strategies.suites("masked_bwd", KERNELS))
def test_masked_backward_matches_autograd(suite, gpu_pool, expect):
    expect(gpu_pool.run(suite), "PASS")


@pytest.mark.compile
@given(suite=strategies.suites("masked_fwd", KERNELS))
def test_masked_forward_compiles_for_sm90a(suite, compile_pool, expect):
    expect(compile_pool.run(suite), "COMPILED")


@pytest.mark.compile
@given(suite=strategies.suites("masked_bwd", KERNELS))
def test_masked_backward_compiles_for_sm90a(suite, compile_pool, expect):
    expect(compile_pool.run(suite), "COMPILED")
