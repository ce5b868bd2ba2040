"""Forward attention: generated cases against the float64 autograd reference."""
import pytest
from hypothesis import given

from harness import strategies
from harness.pool import default_size

KERNELS = default_size()  # kernels per example: one per worker


@pytest.mark.gpu
@given(suite=strategies.suites("fwd", KERNELS))
def test_forward_matches_reference(suite, gpu_pool, expect):
    expect(gpu_pool.run(suite), "PASS")


@pytest.mark.compile
@given(suite=strategies.suites("fwd", KERNELS))
def test_forward_compiles_for_sm90a(suite, compile_pool, expect):
    expect(compile_pool.run(suite), "COMPILED")
