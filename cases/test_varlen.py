"""Varlen (packed, cu_seqlens) attention: the forward's O and LSE against the dense float64
reference per sequence, and every gradient of the backward against autograd through it."""
import pytest
from hypothesis import given

from harness import strategies


@pytest.mark.gpu
@given(case=strategies.cases("varlen_fwd"))
def test_varlen_forward_matches_reference(case, gpu_pool, expect):
    expect(gpu_pool.run_one(case), "PASS")


@pytest.mark.gpu
@given(case=strategies.cases("varlen_bwd"))
def test_varlen_backward_matches_autograd(case, gpu_pool, expect):
    expect(gpu_pool.run_one(case), "PASS")


@pytest.mark.compile
@given(case=strategies.cases("varlen_fwd"))
def test_varlen_forward_compiles_for_sm90a(case, compile_pool, expect):
    expect(compile_pool.run_one(case), "COMPILED")


@pytest.mark.compile
@given(case=strategies.cases("varlen_bwd"))
def test_varlen_backward_compiles_for_sm90a(case, compile_pool, expect):
    expect(compile_pool.run_one(case), "COMPILED")
