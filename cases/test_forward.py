"""Forward attention: generated cases against the float64 autograd reference."""
import pytest
from hypothesis import given

from harness import strategies


@pytest.mark.gpu
@given(case=strategies.cases("fwd"))
def test_forward_matches_reference(case, gpu_pool, expect):
    expect(gpu_pool.run_one(case), "PASS")


@pytest.mark.compile
@given(case=strategies.cases("fwd"))
def test_forward_compiles_for_sm90a(case, compile_pool, expect):
    expect(compile_pool.run_one(case), "COMPILED")
