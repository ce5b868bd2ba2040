"""Hypothesis profiles, the gpu/compile/rows markers, and one GPU per xdist worker."""
import os
import shutil

import pytest
from hypothesis import HealthCheck, settings

from harness.environment import NOT_IMPORTABLE, gpu_count, in_background, tilelang

# function_scoped_fixture: `expect` only reports; it keeps no state between examples.
_COMMON = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                                    HealthCheck.function_scoped_fixture])
settings.register_profile("dev", max_examples=8, **_COMMON)
settings.register_profile("ci", max_examples=60, **_COMMON)
# benchmarks/pytest_vs_run.py --examples N
settings.register_profile("bench", max_examples=int(os.environ.get("HARNESS_BENCH_EXAMPLES", "20")), **_COMMON)
settings.register_profile("nightly", max_examples=1000, **_COMMON)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))


_probe = None  # the TileLang probe's future, started in pytest_configure


def _tilelang_error(wait=True):
    """Why TileLang does not import here, or None; without `wait`, None while the probe runs."""
    if not wait and not _probe.done():
        return None
    version = _probe.result()["tilelang"]
    return f"TileLang does not import here ({version})" if version.startswith(NOT_IMPORTABLE) else None


@pytest.fixture(scope="session")
def tilelang_error():
    """_tilelang_error, for a test that awaits the probe only when a result disappoints."""
    return _tilelang_error


def pytest_configure(config):
    global _probe
    # The probe (in a child: an import may abort) runs while this process collects; xdist's
    # controller collects nothing and needs none.
    if not (getattr(config.option, "numprocesses", None) and "PYTEST_XDIST_WORKER" not in os.environ):
        _probe = in_background(tilelang)


def pytest_collection_modifyitems(config, items):
    if "rows" not in (config.getoption("markexpr") or ""):  # hundreds of compiles: only when asked
        rows = [item for item in items if "rows" in item.keywords]
        if rows:
            config.hook.pytest_deselected(items=rows)
            items[:] = [item for item in items if "rows" not in item.keywords]
    gpu_reason = None if gpu_count() else "needs a CUDA GPU (none visible)"
    nvcc_reason = None if shutil.which("nvcc") else "needs nvcc on the PATH"
    for item in items:
        if "gpu" in item.keywords and gpu_reason:
            item.add_marker(pytest.mark.skip(reason=gpu_reason))
        elif "compile" in item.keywords and nvcc_reason:
            item.add_marker(pytest.mark.skip(reason=nvcc_reason))


def pytest_runtest_setup(item):
    # The TileLang probe is awaited by a test's setup, not by the collection: meanwhile the
    # collected row tests' kernels start building (cases/conftest.py). A test of the compiler suite
    # (the `expect` fixture) awaits it only when a result disappoints: results as expected show that
    # TileLang imports, and the probe, an import beside the pool's starting workers, held the first
    # test back by 2 s.
    if "gpu" in item.keywords or "compile" in item.keywords:
        reason = _tilelang_error(wait="expect" not in item.fixturenames)
        if reason:
            pytest.skip(reason)
