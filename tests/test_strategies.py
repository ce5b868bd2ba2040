"""The strategies produce valid, supported cases and reach the edges they promise."""
import shutil
from collections import Counter

import pytest

from harness import case as case_mod
from harness import kernels, strategies
from harness.case import KNOBS
from harness.kernels import bwd_family, fwd_family

CASES = strategies.draw("fwd", 400, seed=1, per_kernel=1)
BWD = strategies.draw("bwd", 200, seed=1, per_kernel=1)


def test_every_case_is_valid_and_supported():
    for c in CASES + BWD:
        c.validate()
        assert kernels.family(c.family).offer.unsupported(c) is None, c


def test_backward_reaches_every_variant_and_tile():
    assert {c.variant for c in BWD} == set(bwd_family.FAMILY.offer.variants)
    assert {(c.block_m, c.block_n, c.num_stages, c.threads) for c in BWD} == set(bwd_family.FAMILY.offer.tiles)


def test_lengths_hit_tile_edges_and_odd_values():
    def edges(c):
        return {1, c.block_m - 1, c.block_m, c.block_m + 1}
    assert any(c.seqlen_q == 1 for c in CASES)
    assert sum(c.seqlen_q in edges(c) for c in CASES) > 20
    assert any(c.seqlen_q % 8 and c.seqlen_q > 64 for c in CASES)
    assert any(c.seqlen_q > c.seqlen_k for c in CASES) and any(c.seqlen_q < c.seqlen_k for c in CASES)
    assert any(c.seqlen_q == c.seqlen_k for c in CASES)


def test_features_and_configs_are_all_reached():
    assert {c.dtype for c in CASES} == {"float16", "bfloat16"}
    assert {c.layout for c in CASES} == {"bhsd", "bshd"}
    assert any(c.kv_heads == 1 and c.heads > 1 for c in CASES)     # MQA
    assert any(1 < c.kv_heads < c.heads for c in CASES)            # GQA
    assert any(c.heads == c.kv_heads for c in CASES)               # MHA
    assert any(c.causal for c in CASES) and any(c.sinks for c in CASES)
    windows = Counter(b for c in CASES for b in c.window)
    assert windows[0] and windows[4096] and windows[-1]
    assert {(c.block_m, c.block_n, c.num_stages, c.threads) for c in CASES} == set(fwd_family.FAMILY.offer.tiles)
    assert {c.head_dim for c in CASES} == set(fwd_family.FAMILY.offer.head_dims)


def test_draw_is_reproducible_and_groups_share_a_kernel():
    a = strategies.draw("fwd", 12, seed=3, per_kernel=4)
    assert [c.id for c in a] == [c.id for c in strategies.draw("fwd", 12, seed=3, per_kernel=4)]
    # Groups of 4 share a kernel; a duplicate case dropped from a group may split one.
    assert len({case_mod.static_key(c) for c in a}) <= len(a) // 2


def test_compile_knobs_are_drawn():
    drawn = [c.knobs for c in CASES]
    assert drawn.count(()) > len(drawn) // 5
    assert {k for ks in drawn for k in ks} == set(case_mod.DRAWN_KNOBS) == set(KNOBS) - {"no_warp_specialize", "no_safe_memory"}


def test_a_suite_is_several_kernels_with_several_lengths_each_and_shrinks_to_one_case():
    from hypothesis import find, settings

    suites = []
    strategies._examples(suites.append, strategies.suites("bwd", kernels=5, per_kernel=3), seed=3, count=60)
    for suite in suites:
        keys = Counter(case_mod.static_key(c) for c in suite)
        assert 1 <= len(keys) <= 5 and len(suite) <= 5 * 3
        for c in suite:
            c.validate()
    assert max(len(s) for s in suites) > 5  # several kernels at once, not one case per example
    # A failure anywhere shrinks to a suite of one case: the reproducer is a single case.
    # Derandomized: a random search once (1 CI run of 3) stopped at a 3-case suite, a local minimum.
    smallest = find(strategies.suites("fwd", kernels=5), lambda suite: any(c.heads > 1 for c in suite),
                    settings=settings(database=None, max_examples=500, derandomize=True))
    assert len(smallest) == 1


def test_fwd_misfit_names_a_tile_the_register_file_cannot_hold():
    # Compiled for sm_90a on 0.1.15 at head_dim_v 256: 192x64 with 384 threads fails in ptxas
    # ("Insufficient registers"); 128x128 with 256 and 64x96 with 128 threads compile.
    assert "registers per thread" in fwd_family.misfit(192, 64, 1, 384, 64, 256)
    assert fwd_family.misfit(128, 128, 1, 256, 64, 256) is None and fwd_family.misfit(64, 96, 2, 128, 64, 256) is None
    assert fwd_family.misfit(192, 64, 1, 384, 64, 128) is None


def test_a_campaign_deals_its_families_in_turn():
    """A run stopped by --time early on has still run every family (the pool starts kernels in order)."""
    from harness import campaign
    cases = campaign.draw(("fwd", "bwd", "ws"), 7, 0, 1, cover=False)
    assert [c.family for c in cases] == ["fwd", "bwd", "ws"] * 2 + ["fwd"]


def test_a_row_keeps_its_kernel_and_draws_lengths():
    from harness import pairwise
    for family in kernels.FAMILIES:
        row = pairwise.covering(family, 0)[-1]
        drawn = []
        strategies._examples(drawn.append, strategies.lengths_of(row), 3, 20)
        assert {case_mod.static_key(c) for c in drawn} == {case_mod.static_key(row)}, family
        assert len({(c.batch, c.seqlen_q, c.seqlen_k, tuple(c.seqlens)) for c in drawn}) > 5, family


def test_row_tests_run_only_when_asked():
    import subprocess
    import sys
    from pathlib import Path

    from harness import pairwise

    def collected(*args):
        out = subprocess.run([sys.executable, "-m", "pytest", "cases/test_rows.py", "--collect-only", "-q",
                              "-p", "no:cacheprovider", *args], cwd=Path(__file__).parent.parent,
                             capture_output=True, text=True).stdout
        return [line for line in out.splitlines() if "::test_row[" in line]
    assert collected() == []
    rows = collected("-m", "rows and compile")
    assert len(rows) == sum(len(pairwise.covering(f, 0)) for f in kernels.FAMILIES)
    assert all(r.endswith("-compile]") for r in rows)
    # Row 0 of every family first: a time-boxed session reaches every family.
    assert [r.split("[row-")[1] for r in rows[:len(kernels.FAMILIES)]] == [f"{f}-0-compile]" for f in kernels.FAMILIES]


@pytest.mark.skipif(not shutil.which("nvcc"), reason="without nvcc the compile tests skip for that")
def test_a_time_box_skips_the_tests_it_leaves_out_and_removes_the_worker_logs(tmp_path):
    import os
    import subprocess
    import sys
    from pathlib import Path

    p = subprocess.run([sys.executable, "-m", "pytest", "cases/test_rows.py", "-m", "rows and compile", "-q", "-rs",
                        "-k", "row-fwd-0- or row-bwd-0-", "--time-box", "0", "-p", "no:cacheprovider", "-p", "no:xdist"],
                       cwd=Path(__file__).parent.parent, env={**os.environ, "TMPDIR": str(tmp_path)},
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stdout[-2000:]
    assert "2 skipped" in p.stdout and "--time-box 0 s reached" in p.stdout, p.stdout[-2000:]
    assert list(tmp_path.glob("harness-*")) == []


@pytest.mark.skipif(not shutil.which("nvcc"), reason="without nvcc the compile tests skip for that")
@pytest.mark.parametrize("import_seconds", [0, 4])
def test_compiler_tests_skip_when_tilelang_does_not_import(tmp_path, import_seconds):
    """A broken TileLang skips the compile and GPU tests with the reason, it does not fail them:
    the probe is awaited at a test's setup or, still running then (a slow import), when the
    test's first result disappoints."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    broken = tmp_path / "site" / "tilelang"
    broken.mkdir(parents=True)
    (broken / "__init__.py").write_text(f"import time\ntime.sleep({import_seconds})\n"
                                        "raise ImportError('libcuda.so.1: cannot open shared object file')\n")
    root = Path(__file__).parent.parent
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(broken.parent), str(root)])}
    p = subprocess.run([sys.executable, "-m", "pytest", "cases/test_families.py::test_family_compiles_for_sm90a[fwd]",
                        "-q", "-rs", "-p", "no:cacheprovider", "-p", "no:xdist", "--record-dir", str(tmp_path / "reproducers")],
                       cwd=root, env=env, capture_output=True, text=True)
    assert p.returncode == 0, p.stdout[-2000:]
    assert "1 skipped" in p.stdout and "TileLang does not import here" in p.stdout
    assert not list((tmp_path / "reproducers").glob("*")), "a broken install is no compiler bug"
