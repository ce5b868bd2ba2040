"""Backward attention: every gradient (dQ, dK, dV, dSinks) against float64 autograd."""
import pytest
from hypothesis import given

from harness import strategies
from harness.pool import default_size

KERNELS = default_size()  # kernels per example: one per worker


@pytest.mark.gpu
@given(suite=strategies.suites("bwd", KERNELS))
def test_backward_matches_autograd(suite, gpu_pool, expect):
    expect(gpu_pool.run(suite), "PASS")


@pytest.mark.compile
@given(suite=strategies.suites("bwd", KERNELS))
def test_backward_compiles_for_sm90a(suite, compile_pool, expect):
    expect(compile_pool.run(suite), "COMPILED")
