"""Every registered family's generated cases: judged against the float64 autograd reference on a GPU,
compiled for sm_90a without one. What differs between families is what each declares
(harness.kernels.Family): its features and lengths strategy drive the draws, `clean` names the
generated-code checks that must find nothing in its compiles."""
import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness import kernels, strategies
from harness.pool import default_size

KERNELS = default_size()  # kernels per example: one per worker
# Drawn generated programs find compiler bugs (CI's own draw found 2c588fe8e1d7): they run in campaigns, where a
# new bug is a finding, not here, where it would fail an unrelated change. cases/test_chains.py runs their chains.
WRITTEN = tuple(f for f in kernels.FAMILIES if f != "program")


@pytest.mark.gpu
@pytest.mark.parametrize("family", WRITTEN)
@given(data=st.data())
def test_family_matches_reference(family, data, gpu_pool, expect):
    expect(gpu_pool.run(data.draw(strategies.suites(family, KERNELS))), "PASS")


@pytest.mark.compile
@pytest.mark.parametrize("family", WRITTEN)
@given(data=st.data())
def test_family_compiles_for_sm90a(family, data, compile_pool, expect):
    results = expect(compile_pool.run(data.draw(strategies.suites(family, KERNELS))), "COMPILED")
    clean = kernels.family(family).judge.clean
    found = [str(f) for r in results for f in r.hazards or () if f.check in clean]
    assert not found, found
