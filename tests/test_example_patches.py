"""reproducers/examples/*.patch: the fixes for TileLang's examples, each with its pull-request text.

Each patch applies (`git apply --check`) to the examples of TileLang 0.1.14's source package, alone and all of them
in turn (one pull request, one fix each); the tree is the one `harness examples fetch --version 0.1.14` unpacks, found where
scripts/verify_example_patches.py looks ($HARNESS_EXAMPLES, .gpu/examples/tilelang-0.1.14,
examples-src/tilelang-0.1.14). Without it those tests skip, saying so: nothing of TileLang's is kept here.
The script's plan (which shapes fail without a patch and pass with it) is checked on the CPU, and its dry run
applies the patches to copies of the tree.
"""
import functools
import importlib.util
import re
import shutil
import sys
from pathlib import Path

import pytest

from harness import reproducer_files

ROOT = Path(__file__).resolve().parent.parent
HERE = ROOT / "reproducers" / "examples"
PATCHES = sorted(HERE.glob("*.patch"))
SCRIPT = ROOT / "scripts" / "verify_example_patches.py"


@functools.cache
def script():
    spec = importlib.util.spec_from_file_location("verify_example_patches", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def examples_tree():
    try:
        return script().find_tree(None)
    except script().SetupError as e:
        pytest.skip(f"TileLang 0.1.14's examples are not here: {e}")


def test_each_patch_is_one_the_script_verifies_and_has_its_text():
    assert [p.stem for p in PATCHES] == sorted(script().ORDER)  # scripts/verify_example_patches.py covers each
    for patch in PATCHES:
        text = patch.with_suffix(".md").read_text()
        ids = set(re.findall(r"\]\((?:\.\./compiler/)?([0-9a-f]{12})\.json\)", text))
        assert ids, f"{patch.stem}.md links no reproducer"
        assert all(reproducer_files.find(i, ROOT / "reproducers") for i in ids), ids
        assert "```python" in text, f"{patch.stem}.md shows no failing shape"
        assert all(f.startswith("examples/") for f in script().patched_files(patch)), patch.name


@pytest.mark.parametrize("patch", PATCHES, ids=lambda p: p.stem)
def test_each_patch_applies_to_the_release_examples(patch):
    tree = examples_tree()
    assert (tree / "VERSION").read_text().strip() == "0.1.14"
    p = script().git_apply(patch, tree, check=True)
    assert p.returncode == 0, p.stderr
    checked = re.findall(r"^Checking patch (\S+)\.\.\.$", p.stderr, flags=re.M)
    assert sorted(checked) == sorted(script().patched_files(patch))  # each file checked, none skipped


def test_the_patches_apply_one_after_another(tmp_path):
    tree = examples_tree()
    copy = tmp_path / "tilelang-0.1.14"
    shutil.copytree(tree, copy, ignore=shutil.ignore_patterns("__pycache__"))
    for patch in PATCHES:
        p = script().git_apply(patch, copy, check=False)
        assert p.returncode == 0, f"{patch.name} after the others: {p.stderr}"


def test_every_patch_has_shapes_failing_without_it_and_test_shapes_with_it():
    verify = script()
    assert {s.patch for s in verify.SHAPES} == {p.stem for p in PATCHES}
    todo = verify.plans(verify.SHAPES)  # every case built and validated, no GPU needed
    for patch in PATCHES:
        mine = [s for s in verify.SHAPES if s.patch == patch.stem]
        assert any(s.without == "fail" for s in mine), patch.stem
        assert any(s.without is None for s in mine), f"{patch.stem}: no test shape checked with the patch only"
        assert len(set(todo[patch.stem].cases.values())) == len(todo[patch.stem].cases)  # no case twice
    for shape in verify.SHAPES:
        if shape.case and "repro" in shape.case:
            assert reproducer_files.find(shape.case["repro"], ROOT / "reproducers"), shape.label


def test_the_dry_run_applies_each_patch_to_a_copy(tmp_path, capsys):
    tree = examples_tree()
    assert script().main(["--dry-run", "--examples", str(tree), "--out", str(tmp_path)]) == 0
    for patch in PATCHES:
        copy = tmp_path / patch.stem / "tree"
        for name in script().patched_files(patch):
            assert (copy / name).read_text() != (tree / name).read_text(), f"{patch.stem} left {name} as it was"
        assert (tmp_path / patch.stem / "cases.jsonl").exists()
    assert f"dry run: {len(PATCHES)} patches applied" in capsys.readouterr().err


def test_a_call_passes_when_it_returns_fails_when_it_raises_and_skips_a_missing_package(tmp_path):
    verify = script()
    folder = tmp_path / "tree" / "examples" / "flash_attention"
    folder.mkdir(parents=True)
    (folder / "example_fake.py").write_text("def main(n):\n    assert n > 0, 'n must be positive'\n"
                                            "def needs():\n    import flash_attn_not_here  # noqa\n"
                                            "def counts():\n    print('CALL NOTE: 3 of 5 late')\n")
    logs = tmp_path / "logs"
    logs.mkdir()

    def call(code, without=None):
        shape = verify.Shape("p", code, call=("flash_attention", "example_fake", code), without=without)
        outcome = verify.run_call(shape, tmp_path / "tree", logs, dict(__import__("os").environ), 60, quick=False)
        return verify.judge_call(shape, "base" if without else "p", outcome)

    assert call("main(1)").ok is True
    raised = call("main(0)")
    assert raised.ok is False and "AssertionError n must be positive" in raised.what
    assert call("main(0)", without="fail").ok is True  # expected to fail without the patch: it did
    missing = call("needs()")
    assert missing.skip == "flash_attn_not_here is not installed here"
    assert call("counts()").what.endswith("s): 3 of 5 late")  # a diagnostic's note is on its line


def test_a_diagnostic_runs_without_the_patch_only():
    verify = script()
    shape = verify.Shape("p", "diag", call=("flash_attention", "m", "f()"), without="info", with_patch=False)
    todo = verify.plans([shape, verify.Shape("p", "test", call=("flash_attention", "m", "g()"))])
    assert todo["base"].shapes == [shape]
    assert [s.label for s in todo["p"].shapes] == ["test"]


def test_the_flash_attn_stand_in_is_varlen_attention():
    """The float64 reference that stands in for flash_attn_varlen_func in the varlen forwards' tests: GQA,
    causal aligned bottom-right, a sequence with no keys (or no queries) giving 0."""
    import itertools
    import math

    import torch

    namespace = {}
    exec(script().FLASH_ATTN_REFERENCE, namespace)
    stand_in = namespace["flash_attn_varlen_func"]
    seqlens, heads, kv_heads, dim = [(5, 9), (9, 5), (0, 4), (3, 0), (7, 7)], 4, 2, 16
    cu_q = torch.tensor([0, *itertools.accumulate(n for n, _ in seqlens)], dtype=torch.int32)
    cu_k = torch.tensor([0, *itertools.accumulate(n for _, n in seqlens)], dtype=torch.int32)
    g = torch.Generator().manual_seed(0)
    q = torch.randn(int(cu_q[-1]), heads, dim, generator=g).half()
    k, v = (torch.randn(int(cu_k[-1]), kv_heads, dim, generator=g).half() for _ in range(2))
    for causal in (False, True):
        out = stand_in(q, k, v, cu_q, cu_k, 9, 9, 0.0, causal=causal)
        assert out.dtype == torch.float16 and out.shape == q.shape
        want = torch.zeros(q.shape, dtype=torch.float64)
        for b, (sq, sk) in enumerate(seqlens):
            for i in range(sq):
                keys = [j for j in range(sk) if not causal or j <= i + sk - sq]
                for h in range(heads):
                    if keys:
                        kh, row = h // (heads // kv_heads), int(cu_q[b]) + i
                        s = torch.stack([q[row, h].double() @ k[int(cu_k[b]) + j, kh].double() for j in keys])
                        p = torch.softmax(s / math.sqrt(dim), 0)
                        want[row, h] = sum(p[t] * v[int(cu_k[b]) + j, kh].double() for t, j in enumerate(keys))
        assert (out.double() - want).abs().max() < 1e-3, causal
        assert not out[int(cu_q[3]):int(cu_q[4])].any()  # the sequence with no keys


PR_END = "<!-- end of the pull-request text"


@pytest.mark.parametrize("patch", PATCHES, ids=lambda p: p.stem)
def test_a_pull_request_text_is_short_and_holds_nothing_of_this_project(patch):
    """The part of <patch>.md above its end marker is what is pasted as the pull request: under 40 lines, no path
    into this project, no reproducer file, no command of the tool, none of its words."""
    assert PR_END in patch.with_suffix(".md").read_text(), "no end marker: the whole text would be pasted"
    text = patch.with_suffix(".md").read_text().split(PR_END, 1)[0]
    assert len(text.strip().splitlines()) < 40
    for word in ("reproducers/", ".json", "harness", "guard band", "peer case", "scripts/", "/tmp", "$OUT", ".gpu/"):
        assert word not in text, word
    assert not re.search(r"\b[0-9a-f]{12}\b", text), "a reproducer id"
