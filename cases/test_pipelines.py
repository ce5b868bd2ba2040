"""Warp-specialized attention, forward and backward (producer/consumer warpgroups, an mbarrier ring of
1 to 4 stages):
generated cases at the ring's trip counts against the float64 autograd reference, and compiled
for sm_90a with the generated barrier protocol checked."""
import pytest
from hypothesis import given

from harness import strategies


@pytest.mark.gpu
@given(case=strategies.cases("ws"))
def test_ws_forward_matches_reference(case, gpu_pool, expect):
    expect(gpu_pool.run_one(case), "PASS")


@pytest.mark.compile
@given(case=strategies.cases("ws"))
def test_ws_forward_compiles_for_sm90a(case, compile_pool, expect):
    result = compile_pool.run_one(case)
    expect(result, "COMPILED")
    assert not result.get("hazards"), result["hazards"]


@pytest.mark.gpu
@given(case=strategies.cases("ws_bwd"))
def test_ws_backward_matches_autograd(case, gpu_pool, expect):
    expect(gpu_pool.run_one(case), "PASS")


@pytest.mark.compile
@given(case=strategies.cases("ws_bwd"))
def test_ws_backward_compiles_for_sm90a(case, compile_pool, expect):
    result = compile_pool.run_one(case)
    expect(result, "COMPILED")
    # Its forward is the dense one, whose known Q-load hazard is not this family's.
    assert not [h for h in result.get("hazards", []) if h.startswith("mbarrier_protocol")], result["hazards"]
