"""Pools shared by the property tests of one pytest process."""
import pytest

from harness.execute import Pool, Timeouts


@pytest.fixture(scope="session")
def gpu_pool(tmp_path_factory):
    with Pool(1, "auto", tmp_path_factory.mktemp("gpu-workers"), Timeouts(compile=600, run=60)) as pool:
        yield pool


@pytest.fixture(scope="session")
def compile_pool(tmp_path_factory):
    with Pool(1, "sm_90a", tmp_path_factory.mktemp("compile-workers"), Timeouts(compile=600)) as pool:
        yield pool
