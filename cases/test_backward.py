"""Backward attention: every gradient (dQ, dK, dV, dSinks) against float64 autograd."""
import pytest
from hypothesis import given

from harness import strategies
from harness.report import explain


@pytest.mark.gpu
@given(case=strategies.cases("bwd"))
def test_backward_matches_autograd(case, gpu_pool):
    result = gpu_pool.run_one(case)
    assert result["verdict"] == "PASS", explain(result)


@pytest.mark.compile
@given(case=strategies.cases("bwd"))
def test_backward_compiles_for_sm90a(case, compile_pool):
    result = compile_pool.run_one(case)
    assert result["verdict"] == "COMPILED", explain(result)
