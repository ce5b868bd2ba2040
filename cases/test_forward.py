"""Forward attention: generated cases against the float64 autograd reference."""
import pytest
from hypothesis import given

from harness import strategies
from harness.report import explain


@pytest.mark.gpu
@given(case=strategies.cases("fwd"))
def test_forward_matches_reference(case, gpu_pool):
    result = gpu_pool.run_one(case)
    assert result["verdict"] == "PASS", explain(result)


@pytest.mark.compile
@given(case=strategies.cases("fwd"))
def test_forward_compiles_for_sm90a(case, compile_pool):
    result = compile_pool.run_one(case)
    assert result["verdict"] == "COMPILED", explain(result)
