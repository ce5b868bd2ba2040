"""Outside kernels without TileLang or a GPU: where examples come from, the contract rules, the draws
inside and just outside a contract, and an adapter's I/O mapping run on the CPU with a fake kernel."""
import functools
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
    assert inside.offer.breaks(ok) is None
    assert "multiple of 8" in inside.offer.breaks(ok.replace(seqlen_q=63, seqlen_k=63))
    assert "seqlen_q == seqlen_k" in inside.offer.breaks(ok.replace(seqlen_k=128))
    assert "inside the stated contract" in outside.offer.breaks(ok.replace(family=outside.name))
    assert outside.offer.breaks(ok.replace(family=outside.name, seqlen_q=63, seqlen_k=63)) is None
    # An asserted clause holds in outside mode too: the kernel could not take the case at all.
    assert "seqlen_q == seqlen_k" in outside.offer.breaks(ok.replace(family=outside.name, seqlen_q=63, seqlen_k=64))
    assert inside.offer.breaks(ok.replace(seqlen_q=63), static_only=True) is None  # lengths are not a kernel's


def test_only_outside_kernels_have_an_outside_mode():
    with pytest.raises(CaseError, match="unknown kernel family 'fwd@outside'"):
        kernels.check(Case(family="fwd@outside"))


@pytest.mark.parametrize("name", ["tl_mha_bwd_bhsd", "tl_gqa_decode", "tl_mha_sink_fwd_bhsd", "tl_gqa_fwd_varlen",
                                  "tl_gqa_bwd_tma_reduce_varlen"])
def test_draws_keep_the_contract_and_outside_draws_break_a_stated_clause(name):
    for c in strategies.draw(name, 8, seed=0, per_kernel=1, cover=True):
        assert kernels.family(name).offer.unsupported(c) is None, c
    outside = [c for c in strategies.draw(name + "@outside", 8, seed=0, per_kernel=1)]
    fam = kernels.family(name + "@outside")
    assert all(fam.offer.unsupported(c) is None for c in outside)
    assert all(any(not r.holds(c) for r in fam.offer.rules if not r.asserted) for c in outside)


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
    inputs = fam.runner.make_inputs(case, "cpu")
    with bands.guarding() as guard:
        outputs = flash_attention.forward_run({"fwd": _attention_kernel(case, spill)}, case, inputs)
        breaches = guard.breaches()
    assert guard.names == ("O",)
    result = oracle.out_of_bounds(case, breaches) or oracle.judge(case, fam, inputs, outputs)
    if spill:
        assert (result.verdict, result.tensor, result.region) == ("OOB_WRITE", "O", "after the tensor")
        assert "5 elements written after the end" in result.message
    else:
        assert result.verdict == "PASS", result


def test_the_backward_lse_is_converted_from_log2():
    assert flash_attention.LN2 == pytest.approx(math.log(2))


@pytest.mark.parametrize("argv, message", [
    (["--families", "tl_mha_fwd_bhsd"], "outside kernels need TileLang's examples"),
    (["--families", "tl_mha_fwd_bhsd", "--examples", "/no/such/tree"], "no directory /no/such/tree"),
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
    ("no/such/kernel.py", "docs/examples/my_fwd_adapter.py:FAMILY", "no file no/such/kernel.py"),
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
    with_peer = [n for n in kernels.OUTSIDE if kernels.family(n).offer.peer]
    assert "tl_gqa_bwd_tma_reduce" not in with_peer  # no test of TileLang's runs it
    for name in with_peer:
        fam = kernels.family(name)
        for c in strategies.peer(name):
            assert fam.offer.unsupported(c) is None, (name, c)
    # example_mha_bwd_bhsd.main(BATCH=1, H=16, N_CTX=512, D_HEAD=64, causal=False)
    (c,) = strategies.peer("tl_mha_bwd_bhsd")
    assert (c.batch, c.heads, c.seqlen_q, c.seqlen_k, c.head_dim, c.causal) == (1, 16, 512, 512, 64, False)
    # their varlen tests: each length in [n - 20, n], as generate_random_padding_mask draws them
    for c in strategies.peer("tl_gqa_fwd_varlen"):
        assert c.batch == 4 and all(492 <= q <= 512 and 492 <= k <= 512 for q, k in c.seqlens)


def test_a_peer_run_of_kernels_without_test_shapes_is_a_one_line_error(tmp_path):
    p = subprocess.run([sys.executable, "-m", "harness.cli", "run", "--peer", "--families", "tl_gqa_bwd_tma_reduce",
                        "--out", str(tmp_path / "out")], cwd=ROOT, capture_output=True, text=True,
                       env={k: v for k, v in os.environ.items() if k != kernels.EXAMPLES_ENV})
    assert p.returncode == 2, p.stderr
    assert p.stderr.strip() == "harness run: no test shapes declared for tl_gqa_bwd_tma_reduce (Offer.peer)"


# --- older releases' examples: files they lack or keep under another name, builders renamed or unfit ---

def _release_tree(tmp_path, monkeypatch, release, files):
    """A fake source tree of TileLang `release` holding `files` ({path under examples/: source})."""
    top = tmp_path / f"tilelang-{release}"
    (top / "examples").mkdir(parents=True, exist_ok=True)
    for relative, text in files.items():
        (top / "examples" / relative).parent.mkdir(parents=True, exist_ok=True)
        (top / "examples" / relative).write_text(text)
    (top / "VERSION").write_text(release + "\n")
    kernels.use_examples(top)
    return top / "examples"


def test_an_older_tree_keeps_a_moved_example_under_its_old_name(tmp_path, monkeypatch):
    bwd = "def flashattn_fwd(batch, heads, seq_len, dim, is_causal, block_M, block_N):\n    return 'bshd'\n"
    ex = _release_tree(tmp_path, monkeypatch, "0.1.6.post2", {"flash_attention/example_mha_bwd.py": bwd})
    assert source.module_path("flash_attention/example_mha_bwd_bshd.py") == ex / "flash_attention/example_mha_bwd.py"
    assert source.load("flash_attention/example_mha_bwd_bshd.py").flashattn_fwd(1, 1, 8, 64, False, 64, 64) == "bshd"
    assert len(source.digest("flash_attention/example_mha_bwd_bshd.py")) == 16
    _release_tree(tmp_path, monkeypatch, "0.1.7", {"flash_attention/example_mha_bwd.py": bwd})  # renamed by then
    with pytest.raises(source.ExamplesError, match="has no flash_attention/example_mha_bwd_bshd.py"):
        source.module_path("flash_attention/example_mha_bwd_bshd.py")


def test_an_example_a_release_predates_is_unsupported_there_and_missing_elsewhere(tmp_path, monkeypatch):
    _release_tree(tmp_path, monkeypatch, "0.1.6.post2", {})
    varlen = "attention_sink/example_gqa_sink_fwd_varlen.py"
    source.module_path(varlen)  # no error: the run goes on (the CLI checks every family's file so)
    reason = "TileLang 0.1.6.post2's examples have no attention_sink/example_gqa_sink_fwd_varlen.py (added in 0.1.7.post2)"
    assert source.lacks(varlen) == reason
    with pytest.raises(source.ExamplesError, match="have no attention_sink"):
        source.load(varlen)
    case = strategies.draw("tl_gqa_sink_fwd_varlen", 1, seed=0, per_kernel=1)[0].replace(knobs=())
    from harness import worker
    result = worker.run_case(case, "sm_90a", {})
    assert (result.verdict, result.message) == ("UNSUPPORTED", f"Unbuildable: {reason}"), result
    assert "added in 0.1.9" in source.lacks("flash_attention_sm100/mha_fwd_bshd.py")
    _release_tree(tmp_path, monkeypatch, "0.1.10", {})
    assert source.lacks(varlen) is None  # 0.1.10 shipped it: a tree without it is refused
    with pytest.raises(source.ExamplesError, match="has no attention_sink/example_gqa_sink_fwd_varlen.py"):
        source.module_path(varlen)


@pytest.mark.parametrize("name, release, message", [
    ("tl_gqa_decode", "0.1.6.post2", "flash_decoding/example_gqa_decode.py of TileLang 0.1.6.post2: its kernel takes "
                                     "glse and Output_partial as arguments; the adapter passes Q, K, V, mask and Output "
                                     "only (changed in 0.1.9)"),
    ("tl_gqa_bwd_tma_reduce_varlen", "0.1.6.post2", "example_gqa_bwd_tma_reduce_varlen.py of TileLang 0.1.6.post2: "
                                                    "its builders take no N_CTX"),
    ("tl_gqa_bwd_tma_reduce_varlen", "0.1.7.post1", "of TileLang 0.1.7.post1: its atomic variant keeps dQ, dK and dV "
                                                    "as [heads, total, dim]"),
])
def test_an_adapter_that_does_not_fit_an_older_example_is_unsupported_there(tmp_path, monkeypatch, name, release,
                                                                            message):
    fam = kernels.family(name)
    _release_tree(tmp_path, monkeypatch, release, {fam.runner.module: "raise AssertionError('never imported')\n"})
    case = strategies.draw(name, 1, seed=0, per_kernel=1)[0]
    with pytest.raises(kernels.Unbuildable, match=message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
        fam.runner.build(case, "sm_90a")


def _builders(*names):
    """An example file whose builders are plain functions returning their own name."""
    return "".join(f"def {n}(*args, **kwargs):\n    return {n!r}\n" for n in names)


@pytest.mark.parametrize("name, release, file, bwd", [
    ("tl_gqa_bwd_tma_reduce", "0.1.6.post2", "flash_attention/example_gqa_bwd_tma_reduce.py", "flashattn_bwd_split"),
    ("tl_gqa_bwd_tma_reduce", "0.1.7", "flash_attention/example_gqa_bwd_tma_reduce.py", "flashattn_bwd_split_novarlen"),
    ("tl_mha_bwd_bshd", "0.1.6.post2", "flash_attention/example_mha_bwd.py", "flashattn_bwd"),
    ("tl_mha_bwd_bshd", "0.1.10", "flash_attention/example_mha_bwd_bshd.py", "flashattn_bwd"),
])
def test_an_adapter_builds_an_older_release_by_its_file_and_builder_names(tmp_path, monkeypatch, name, release, file,
                                                                          bwd):
    """tma_reduce's split builder was flashattn_bwd_split before 0.1.7 (same arguments and buffers);
    example_mha_bwd_bshd.py was example_mha_bwd.py."""
    compat = pytest.importorskip("harness.compat")  # the builder imports it (and so TileLang)
    monkeypatch.setattr(compat, "compile", lambda func, target, knobs, kernel, pass_configs: func)
    _release_tree(tmp_path, monkeypatch, release, {file: _builders(
        "flashattn_fwd", "flashattn_bwd_preprocess", "flashattn_bwd_postprocess", bwd)})
    case = next(c for c in strategies.draw(name, 4, seed=0, per_kernel=1) if c.variant in ("split", "default"))
    assert kernels.family(name).runner.build(case, "sm_90a") == {"fwd": "flashattn_fwd", "preprocess": "flashattn_bwd_preprocess",
                                                          "bwd": bwd, "postprocess": "flashattn_bwd_postprocess"}


class _Jit:
    """The shape of TileLang 0.1.6.post2's @tilelang.jit: a functools wrapper that compiles when called,
    its settings in the wrapper's closure."""

    def __init__(self, out_idx=None, pass_configs=None):
        self.out_idx, self.pass_configs = out_idx, pass_configs

    def __call__(self, func):
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            raise AssertionError(f"compiled {func.__name__} with out_idx {self.out_idx}")
        return wrapper


def _autotune(fn):
    """0.1.6.post2's @autotune(...) above it: one more functools wrapper, which tunes when called."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        raise AssertionError(f"tuned {fn.__name__}")
    return wrapper


def test_a_pre_0_1_7_builder_gives_its_prim_func_and_pass_configs_without_compiling():
    compat = pytest.importorskip("harness.compat")  # it imports TileLang

    @_autotune
    @_Jit(out_idx=[3], pass_configs={"tl.enable_fast_math": True})
    def flashattn(batch, heads, block_M=64):
        return ("prim_func", batch, heads, block_M)

    assert compat.example_program(flashattn, 2, 4, block_M=128) == (("prim_func", 2, 4, 128),
                                                                     {"tl.enable_fast_math": True})
    assert compat.example_program(_Jit()(lambda n: ("prim_func", n)), 3) == (("prim_func", 3), {})
    assert compat.example_program(lambda n: ("mine", n), 5) == (("mine", 5), {})  # a user's plain builder


@pytest.mark.parametrize("release, posted", [("0.1.6.post2", True), ("0.1.7.post1", True), ("0.1.7.post2", False),
                                             ("0.1.10", False)])
def test_the_tma_reduce_atomic_variant_is_postprocessed_where_its_release_lays_dk_dv_out_so(tmp_path, monkeypatch,
                                                                                          release, posted):
    """Before 0.1.7.post2 its atomic variant kept dQ, dK and dV as [b, h, l, d] and its own backward ran
    the postprocess on all three; later ones accumulate in plain layout and need none."""
    _release_tree(tmp_path, monkeypatch, release, {})
    fam = kernels.family("tl_gqa_bwd_tma_reduce")
    case = Case(family=fam.name, variant="atomic", batch=1, heads=4, kv_heads=2, seqlen_q=8, seqlen_k=8, layout="bshd")
    calls = []

    def fill(*values):
        def kernel(*args):
            calls.append(values)
            for out, value in zip(args[-len(values):], values):
                out.fill_(value)
        return kernel

    def postprocess(dq, dk, dv, dq_out, dk_out, dv_out):
        calls.append("postprocess")
        for acc, out in ((dq, dq_out), (dk, dk_out), (dv, dv_out)):
            out.copy_(acc + 100)

    kernels_ = {"fwd": fill(0.0, 0.0), "preprocess": fill(0.0), "bwd": fill(1.0, 2.0, 3.0), "postprocess": postprocess}
    out = fam.runner.run(kernels_, case, fam.runner.make_inputs(case, "cpu"))
    assert ("postprocess" in calls) == posted
    assert [out[n].float().unique().tolist() for n in ("dQ", "dK", "dV")] == ([[101.0], [102.0], [103.0]] if posted
                                                                             else [[1.0], [2.0], [3.0]])
