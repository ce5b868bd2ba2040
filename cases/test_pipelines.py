"""Warp-specialized attention, forward and backward (producer/consumer warpgroups, an mbarrier ring of
1 to 4 stages):
generated cases at the ring's trip counts against the float64 autograd reference, and compiled
for sm_90a with the generated barrier protocol checked."""
import pytest
from hypothesis import given

from harness import strategies
from harness.pool import default_size

KERNELS = default_size()  # kernels per example: one per worker


@pytest.mark.gpu
@given(suite=strategies.suites("ws", KERNELS))
def test_ws_forward_matches_reference(suite, gpu_pool, expect):
    expect(gpu_pool.run(suite), "PASS")


@pytest.mark.compile
@given(suite=strategies.suites("ws", KERNELS))
def test_ws_forward_compiles_for_sm90a(suite, compile_pool, expect):
    results = expect(compile_pool.run(suite), "COMPILED")
    hazards = [h for r in results for h in r.get("hazards", [])]
    assert not hazards, hazards


@pytest.mark.gpu
@given(suite=strategies.suites("ws_bwd", KERNELS))
def test_ws_backward_matches_autograd(suite, gpu_pool, expect):
    expect(gpu_pool.run(suite), "PASS")


@pytest.mark.compile
@given(suite=strategies.suites("ws_bwd", KERNELS))
def test_ws_backward_compiles_for_sm90a(suite, compile_pool, expect):
    results = expect(compile_pool.run(suite), "COMPILED")
    # Its forward is the dense one, whose known Q-load hazard is not this family's.
    barriers = [h for r in results for h in r.get("hazards", []) if h.startswith("mbarrier_protocol")]
    assert not barriers, barriers
