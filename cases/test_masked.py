"""Masked attention (uint8 mask, additive bias): the forward's O and LSE and every gradient of the
backward (dQ, dK, dV, dBias) against float64 autograd, for both key-tail variants (pad, ragged)."""
import pytest
from hypothesis import given

from harness import strategies


@pytest.mark.gpu
@given(case=strategies.cases("masked_fwd"))
def test_masked_forward_matches_reference(case, gpu_pool, expect):
    expect(gpu_pool.run_one(case), "PASS")


@pytest.mark.gpu
@given(case=strategies.cases("masked_bwd"))
def test_masked_backward_matches_autograd(case, gpu_pool, expect):
    expect(gpu_pool.run_one(case), "PASS")


@pytest.mark.compile
@given(case=strategies.cases("masked_fwd"))
def test_masked_forward_compiles_for_sm90a(case, compile_pool, expect):
    expect(compile_pool.run_one(case), "COMPILED")


@pytest.mark.compile
@given(case=strategies.cases("masked_bwd"))
def test_masked_backward_compiles_for_sm90a(case, compile_pool, expect):
    expect(compile_pool.run_one(case), "COMPILED")
