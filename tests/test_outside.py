"""Outside kernels without TileLang or a GPU: where examples come from, the contract rules, the draws
inside and just outside a contract, and an adapter's I/O mapping run on the CPU with a fake kernel."""
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from harness import bands, kernels, oracle, reference, strategies
from harness.case import Case, CaseError
from harness.outside import flash_attention, source

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def tree(tmp_path, monkeypatch):
    """A fake TileLang 0.1.14 source tree: VERSION, and an example that imports its sibling."""
    ex = tmp_path / "tilelang-0.1.14" / "examples" / "flash_attention"
    ex.mkdir(parents=True)
    (tmp_path / "tilelang-0.1.14" / "VERSION").write_text("0.1.14\n")
    (ex / "helper.py").write_text("FACTOR = 3\n")
    (ex / "example_fake.py").write_text("from helper import FACTOR\n\ndef flashattn(n):\n    return n * FACTOR\n")
    monkeypatch.delenv(source.ENV, raising=False)
    return tmp_path / "tilelang-0.1.14"


def test_examples_are_found_checked_and_loaded(tree, monkeypatch):
    assert source.use(str(tree), "0.1.14") == "0.1.14"
    assert source.root() == tree / "examples"
    assert source.load("flash_attention/example_fake.py").flashattn(2) == 6  # its sibling imported
    assert len(source.digest("flash_attention/example_fake.py")) == 16
    assert source.use(str(tree / "examples"), "0.1.15") == "0.1.14"  # 0.1.15 published no examples


@pytest.mark.parametrize("where, installed, message", [
    ("missing", "0.1.14", "is not a directory"),
    ("tree", "0.1.12", "holds TileLang 0.1.14's examples, but TileLang 0.1.12 is installed"),
])
def test_bad_examples_paths_are_one_line_errors(tree, where, installed, message):
    with pytest.raises(source.ExamplesError, match=message):
        source.use(str(tree if where == "tree" else tree / where), installed)


def test_a_tree_without_version_or_module_is_refused(tree):
    source.use(str(tree), "0.1.14")
    with pytest.raises(source.ExamplesError, match="has no flash_attention/example_gone.py"):
        source.load("flash_attention/example_gone.py")
    (tree / "VERSION").unlink()
    with pytest.raises(source.ExamplesError, match="no VERSION file"):
        source.use(str(tree), "0.1.14")
    assert issubclass(source.ExamplesError, CaseError)  # the CLI's exit 2


def test_rules_split_asserted_from_stated_and_outside_mode_flips_the_stated():
    inside = kernels.family("tl_mha_bwd_bhsd")
    outside = kernels.family("tl_mha_bwd_bhsd@outside")
    ok = Case(family="tl_mha_bwd_bhsd", seqlen_q=64, seqlen_k=64)
    assert inside.breaks(ok) is None
    assert "multiple of 8" in inside.breaks(ok.replace(seqlen_q=63, seqlen_k=63))
    assert "seqlen_q == seqlen_k" in inside.breaks(ok.replace(seqlen_k=128))
    assert "inside the stated contract" in outside.breaks(ok.replace(family=outside.name))
    assert outside.breaks(ok.replace(family=outside.name, seqlen_q=63, seqlen_k=63)) is None
    # An asserted clause holds in outside mode too: the kernel could not take the case at all.
    assert "seqlen_q == seqlen_k" in outside.breaks(ok.replace(family=outside.name, seqlen_q=63, seqlen_k=64))
    assert inside.breaks(ok.replace(seqlen_q=63), static_only=True) is None  # lengths are not a kernel's


def test_only_outside_kernels_have_an_outside_mode():
    with pytest.raises(CaseError, match="unknown kernel family 'fwd@outside'"):
        kernels.check(Case(family="fwd@outside"))


@pytest.mark.parametrize("name", ["tl_mha_bwd_bhsd", "tl_gqa_decode", "tl_mha_sink_fwd_bhsd", "tl_gqa_fwd_varlen",
                                  "tl_gqa_bwd_tma_reduce_varlen"])
def test_draws_keep_the_contract_and_outside_draws_break_a_stated_clause(name):
    for c in strategies.draw(name, 8, seed=0, per_kernel=1, cover=True):
        assert kernels.family(name).unsupported(c) is None, c
    outside = [c for c in strategies.draw(name + "@outside", 8, seed=0, per_kernel=1)]
    fam = kernels.family(name + "@outside")
    assert all(fam.unsupported(c) is None for c in outside)
    assert all(any(not r.holds(c) for r in fam.rules if not r.asserted) for c in outside)


def _attention_kernel(case, spill=0):
    """A stand-in for the compiled example: O = softmax(Q K^T / sqrt(d)) V into its O argument,
    and `spill` elements past O's end (a missing tail guard)."""
    def kernel(q, k, v, o):
        seen = reference.visible(case.seqlen_q, case.seqlen_k, *case.bounds)
        out, _ = reference.attention(q.double(), k.double(), v.double(), None, seen, case.head_dim ** -0.5)
        o.copy_(out.to(o.dtype))
        if spill:
            storage = torch.empty(0, dtype=o.dtype).set_(o.untyped_storage())
            storage[o.storage_offset() + o.numel():][:spill] = 1.0
    return kernel


@pytest.mark.parametrize("spill", [0, 5])
def test_an_adapter_maps_the_case_to_the_kernel_and_bands_catch_a_spill(spill):
    fam = kernels.family("tl_mha_fwd_bhsd")
    case = Case(family="tl_mha_fwd_bhsd", batch=2, heads=3, kv_heads=3, seqlen_q=5, seqlen_k=9, causal=True)
    inputs = fam.make_inputs(case, "cpu")
    with bands.guarding() as guard:
        outputs = flash_attention.forward_run({"fwd": _attention_kernel(case, spill)}, case, inputs)
        breaches = guard.breaches()
    assert guard.names == ("O",)
    result = oracle.out_of_bounds(case, breaches) or oracle.judge(case, fam, inputs, outputs)
    if spill:
        assert (result["verdict"], result["tensor"], result["region"]) == ("OOB_WRITE", "O", "after the tensor")
        assert "5 elements written after the end" in result["message"]
    else:
        assert result["verdict"] == "PASS", result


def test_the_backward_lse_is_converted_from_log2():
    assert flash_attention.LN2 == pytest.approx(math.log(2))


@pytest.mark.parametrize("argv, message", [
    (["--families", "tl_mha_fwd_bhsd"], "outside kernels need TileLang's examples"),
    (["--families", "tl_mha_fwd_bhsd", "--examples", "/no/such/tree"], "is not a directory"),
    (["--families", "nope@outside"], "unknown kernel family"),
])
def test_the_cli_refuses_bad_examples_input_in_one_line(tmp_path, argv, message):
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HOME": str(tmp_path)}
    p = subprocess.run([sys.executable, "-m", "harness.cli", "run", *argv, "--out", str(tmp_path / "out")],
                       capture_output=True, text=True, env=env, cwd=tmp_path)
    assert p.returncode == 2 and message in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert not (tmp_path / "out").exists()  # nothing recorded


def _check(tmp_path, *argv):
    return subprocess.run([sys.executable, "-m", "harness.cli", "check", *argv, "--out", str(tmp_path / "out"),
                           "--reproducers", str(tmp_path / "repro"), "--workers", "1"],
                          capture_output=True, text=True, cwd=ROOT)


@pytest.mark.parametrize("file, adapter, message", [
    ("harness/kernels/bwd.py", "docs/examples/my_fwd_adapter.py:FAMILY", "is for fwd.py, not bwd.py"),
    ("harness/kernels/fwd.py", "docs/examples/my_fwd_adapter.py", "--adapter must be FILE.py:NAME"),
    ("no/such/kernel.py", "docs/examples/my_fwd_adapter.py:FAMILY", "does not exist"),
])
def test_check_refuses_a_mismatched_adapter_in_one_line(tmp_path, file, adapter, message):
    p = _check(tmp_path, file, "--adapter", adapter)
    assert p.returncode == 2 and message in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr


@pytest.mark.compile
@pytest.mark.skipif(not __import__("shutil").which("nvcc"), reason="compiles with nvcc")
def test_check_runs_a_users_kernel_file_under_its_adapter(tmp_path):
    """The worked example of docs/outside-kernels.md: compile-only without a GPU, judged with one."""
    p = _check(tmp_path, "harness/kernels/fwd.py", "--adapter", "docs/examples/my_fwd_adapter.py:FAMILY",
               "--cases", "2", "--per-kernel", "2")
    if "TileLang does not import" in p.stderr + p.stdout:
        pytest.skip("TileLang does not import here")
    verdicts = {__import__("json").loads(line)["verdict"] for line in (tmp_path / "out" / "results.jsonl").open()}
    assert p.returncode == 0 and verdicts <= {"COMPILED", "PASS"} and verdicts, p.stdout[-2000:] + p.stderr[-2000:]


def test_fetch_tells_an_unknown_release_from_one_without_a_source_package(tmp_path, monkeypatch):
    import io
    import json

    index = {"files": [{"filename": "tilelang-0.1.15-cp38-abi3-manylinux_2_27_x86_64.whl", "url": "u"}]}
    monkeypatch.setattr(source.urllib.request, "urlopen", lambda *a, **k: io.BytesIO(json.dumps(index).encode()))
    with pytest.raises(source.ExamplesError, match="no source package of tilelang 0.1.15"):
        source.fetch("0.1.15", tmp_path)
    with pytest.raises(source.ExamplesError, match="no release 9.9.9"):
        source.fetch("9.9.9", tmp_path)


def test_a_training_varlen_backward_draws_as_many_keys_as_queries_per_sequence():
    cases = strategies.draw("tl_gqa_bwd_tma_reduce_varlen", 12, seed=1, per_kernel=2, cover=True)
    assert cases and all(q == k for c in cases for q, k in c.seqlens)
    outside = strategies.draw("tl_gqa_bwd_tma_reduce_varlen@outside", 6, seed=1, per_kernel=1)
    assert outside and all(any(q != k for q, k in c.seqlens) for c in outside)


def test_peer_shapes_are_the_examples_own_test_calls_inside_their_contract():
    with_peer = [n for n in kernels.OUTSIDE if kernels.family(n).peer]
    assert "tl_gqa_bwd_tma_reduce" not in with_peer  # no test of TileLang's runs it
    for name in with_peer:
        fam = kernels.family(name)
        for c in strategies.peer(name):
            assert fam.unsupported(c) is None, (name, c)
    # example_mha_bwd_bhsd.main(BATCH=1, H=16, N_CTX=512, D_HEAD=64, causal=False)
    (c,) = strategies.peer("tl_mha_bwd_bhsd")
    assert (c.batch, c.heads, c.seqlen_q, c.seqlen_k, c.head_dim, c.causal) == (1, 16, 512, 512, 64, False)
    # their varlen tests: each length in [n - 20, n], as generate_random_padding_mask draws them
    for c in strategies.peer("tl_gqa_fwd_varlen"):
        assert c.batch == 4 and all(492 <= q <= 512 and 492 <= k <= 512 for q, k in c.seqlens)


def test_a_peer_run_of_kernels_without_test_shapes_is_a_one_line_error(tmp_path):
    p = subprocess.run([sys.executable, "-m", "harness.cli", "run", "--peer", "--families", "tl_gqa_bwd_tma_reduce",
                        "--out", str(tmp_path / "out")], cwd=ROOT, capture_output=True, text=True,
                       env={k: v for k, v in os.environ.items() if k != source.ENV})
    assert p.returncode == 2, p.stderr
    assert p.stderr.strip() == "harness run: no test shapes declared for tl_gqa_bwd_tma_reduce (Family.peer)"
