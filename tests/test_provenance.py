"""Reproducers record which harness and which kernel programs they were found with; a replay says when those moved."""
from __future__ import annotations

import re
import types

from harness import environment, replay


def test_the_source_is_a_commit_and_a_digest_of_the_kernel_programs():
    src = environment.harness_source()
    assert re.fullmatch(r"[0-9a-f]{12}", src["kernels_digest"])
    assert src["harness_commit"] == "unknown" or re.fullmatch(r"[0-9a-f]{12}(-dirty)?", src["harness_commit"])


def _rep(**env):
    return types.SimpleNamespace(environment=env)


def test_a_replay_warns_when_the_kernel_programs_differ_from_the_recorded_ones():
    lines = replay.kernels_moved(_rep(kernels_digest="aaaaaaaaaaaa", harness_commit="0123456789ab"),
                                 {"kernels_digest": "bbbbbbbbbbbb", "harness_commit": "fedcba987654"})
    assert len(lines) == 1 and "aaaaaaaaaaaa" in lines[0] and "bbbbbbbbbbbb" in lines[0] and "0123456789ab" in lines[0]


def test_no_warning_for_the_same_programs_or_an_older_reproducer():
    assert replay.kernels_moved(_rep(kernels_digest="aaaaaaaaaaaa"), {"kernels_digest": "aaaaaaaaaaaa"}) == []
    assert replay.kernels_moved(_rep(), {"kernels_digest": "aaaaaaaaaaaa"}) == []


def test_a_libcuda_that_is_no_driver_means_no_gpu(monkeypatch):
    """A libcuda.so.1 that is a link stub (toolkits and CI images ship one; no cuInit) is no GPU, not the harness's
    error: every compile-only command still runs."""
    import ctypes

    monkeypatch.setattr(ctypes, "CDLL", lambda name: types.SimpleNamespace())
    assert environment.gpu_count() == 0
    monkeypatch.setattr(ctypes, "CDLL", lambda name: types.SimpleNamespace(cuInit=lambda flags: 100))  # no device
    assert environment.gpu_count() == 0
