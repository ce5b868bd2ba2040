"""Varlen (packed, cu_seqlens) forward: O and LSE against the dense float64 reference per sequence."""
import pytest
from hypothesis import given

from harness import strategies


@pytest.mark.gpu
@given(case=strategies.cases("varlen_fwd"))
def test_varlen_forward_matches_reference(case, gpu_pool, expect):
    expect(gpu_pool.run_one(case), "PASS")


@pytest.mark.compile
@given(case=strategies.cases("varlen_fwd"))
def test_varlen_forward_compiles_for_sm90a(case, compile_pool, expect):
    expect(compile_pool.run_one(case), "COMPILED")
