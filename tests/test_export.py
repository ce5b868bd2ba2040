"""`harness export`: the standalone file's pieces held to the harness's own (no TileLang needed:
the file is generated from a recorded builder call and its kernels are stubs), the module bundle,
bad input, and, where TileLang imports, the program the file builds against the harness's."""
import importlib.util
import json
import subprocess
import sys
from types import SimpleNamespace

import pytest
import torch

from harness import export, kernels, oracle, reproducer_building, reproducer_files, reproducer_loading
from harness import reference as ref
from harness.case import Case
from harness.result import Result

FWD = Case(family="fwd", heads=4, kv_heads=2, seqlen_q=70, seqlen_k=93, head_dim=64, head_dim_v=64, window=(40, 5),
           sinks=True, layout="bshd", seed=11)
BWD = FWD.replace(family="bwd", variant="split", causal=True)


def _program_call(case):
    """The builder call fwd_family.build makes for `case` (recorded by hand: no TileLang here)."""
    left, right = case.bounds
    args = dict(heads=case.heads, kv_heads=case.kv_heads, head_dim=case.head_dim, head_dim_v=case.head_dim_v,
                dtype=case.dtype, left=left, right=right, sinks=case.sinks, layout_name=case.layout,
                block_m=case.block_m, block_n=case.block_n, num_stages=case.num_stages, threads=case.threads,
                variant="default")
    return [export.Call("fwd", "harness.kernels.fwd", "program", args, list(case.knobs))]


def _reproducer(case, verdict, tmp_path, tensor="O"):
    failing = Result.of(case, verdict, "judge" if verdict != "COMPILE_ERROR" else "compile", "recorded message",
                     tensor=tensor if verdict != "COMPILE_ERROR" else "", checks=[])
    written = reproducer_building.write(failing, {"tilelang": "0.1.15", "gpu": "H100"}, tmp_path / "reproducers")
    return reproducer_loading.load(written)


def _standalone(case, verdict, tmp_path):
    """The exported file for `case`, imported as a module."""
    rep = _reproducer(case, verdict, tmp_path)
    path = tmp_path / f"{rep.id}.standalone.py"
    path.write_text(export.source(rep, _program_call(case)))
    spec = importlib.util.spec_from_file_location(f"standalone_{rep.id}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_bundle_carries_the_program_and_what_it_imports_with_imports_rewritten():
    modules = export.bundle(["harness.kernels.fwd", "harness.compat"])
    assert set(modules) == {"fwd", "blocks", "masking", "layout", "compat"}
    assert "from _PACKAGE_ import blocks, masking" in modules["fwd"]
    assert not any("from harness" in text or "import harness" in text for text in modules.values())


def test_bundle_refuses_a_module_that_needs_the_harness_machinery():
    with pytest.raises(export.ExportError, match="imports Family from harness.kernels"):
        export.bundle(["harness.kernels.fwd_family"])


def test_the_file_imports_no_harness(tmp_path):
    module = _standalone(FWD, "MISMATCH", tmp_path)
    text = open(module.__file__).read()
    assert "import harness" not in text and "from harness" not in text
    assert module.BUILDS[0]["module"] == "fwd" and set(module.MODULES) >= {"fwd", "blocks", "compat"}


@pytest.mark.parametrize("case", [FWD, BWD], ids=["fwd", "bwd"])
def test_inputs_reference_and_floors_are_the_harnesss(case, tmp_path):
    module = _standalone(case, "MISMATCH", tmp_path)
    fam = kernels.family(case.family)
    inputs = fam.runner.make_inputs(case, "cpu")
    mine = module.make_inputs("cpu")
    assert set(mine) == set(inputs) and all(torch.equal(mine[n], inputs[n]) for n in inputs)
    expect = module.forward if case.family == "fwd" else module.gradients
    for dtype in (torch.float64, torch.float16):
        theirs, ours = fam.judge.reference(case, inputs, dtype), expect(inputs, dtype)
        for name, _ in fam.judge.tensors(case):
            torch.testing.assert_close(ours[name], theirs[name], rtol=0, atol=0)
    assert module.floors(inputs) == pytest.approx(fam.judge.floors(case, inputs), rel=1e-12)


def test_tolerance_rule_is_the_oracles(tmp_path):
    module = _standalone(FWD, "MISMATCH", tmp_path)
    inputs = ref.make_inputs(FWD, "cpu")
    r, base = ref.forward(FWD, inputs, torch.float64), ref.forward(FWD, inputs, torch.float16)
    for out in (base["O"], base["O"] + 0.01, base["O"].masked_fill(base["O"] > 2, float("nan"))):
        theirs = oracle.check("O", out, r["O"], base["O"], torch.float16, 2, lambda *a: "")
        assert module.check(out, r["O"], base["O"], torch.float16, 2) == (theirs.verdict, theirs.error, theirs.tolerance)


def _stub(module, wrong=0.0):
    """A forward "kernel" that writes the float32 reference (plus `wrong`) into O and LSE."""
    def kernel(q, k, v, sinks, out, lse):
        got = module.forward({"q": q, "k": k, "v": v, "sinks": sinks}, torch.float32)
        out.copy_(module.in_layout(got["O"] + wrong))
        lse.copy_(got["LSE"])
    return kernel


@pytest.mark.parametrize("wrong, status", [(0.0, 0), (0.05, 1)])
def test_exit_status_follows_the_judgement(wrong, status, tmp_path, monkeypatch, capsys):
    module = _standalone(FWD, "MISMATCH", tmp_path)
    monkeypatch.setattr(module, "target", lambda: "auto")
    monkeypatch.setattr(module, "load_modules", lambda: {"compat": SimpleNamespace(VERSION="stub")})
    monkeypatch.setattr(module, "build", lambda mods, where: {"fwd": _stub(module, wrong)})
    assert module.main([]) == status
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[:2] for line in lines if line.startswith(("O ", "LSE"))] == \
        [["O", "PASS" if not wrong else "MISMATCH"], ["LSE", "PASS"]]
    assert lines[-1].startswith("NOT REPRODUCED" if not wrong else "REPRODUCED")


def test_a_compile_error_reproduces_when_the_compile_raises(tmp_path, monkeypatch, capsys):
    module = _standalone(FWD, "COMPILE_ERROR", tmp_path)
    monkeypatch.setattr(module, "load_modules", lambda: {"compat": SimpleNamespace(VERSION="stub")})

    def raising(mods, where):
        e = RuntimeError("[ThreadSync] Cannot lower a required sync\nmore detail")
        e.kernel = "fwd"
        raise e
    monkeypatch.setattr(module, "build", raising)
    assert module.main([]) == 1
    assert "COMPILE_ERROR in kernel fwd: RuntimeError: [ThreadSync] Cannot lower" in capsys.readouterr().out
    monkeypatch.setattr(module, "build", lambda mods, where: {"fwd": None})
    assert module.main([]) == 0


def test_a_numerical_reproducer_cannot_be_tested_without_a_gpu(tmp_path, monkeypatch):
    module = _standalone(FWD, "MISMATCH", tmp_path)
    monkeypatch.setattr(module, "target", lambda: "sm_90a")
    assert module.main([]) == 125


def test_a_numerical_reproducer_of_a_family_without_exported_run_is_refused(tmp_path):
    rep = _reproducer(Case(family="masked_fwd", variant="pad"), "MISMATCH", tmp_path)
    with pytest.raises(export.ExportError, match="only compile errors export yet"):
        export.source(rep, [])


def harness(*argv):
    p = subprocess.run([sys.executable, "-m", "harness.cli", *map(str, argv)], capture_output=True, text=True,
                       timeout=600)
    return p.returncode, p.stdout, p.stderr


def test_bad_input_is_one_line_and_exit_2(tmp_path):
    code, out, err = harness("export", "0123456789ab", "--dir", tmp_path)
    assert (code, out) == (2, "") and err.count("\n") == 1 and "no reproducer '0123456789ab'" in err
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    code, _, err = harness("export", bad)
    assert code == 2 and err.count("\n") == 1 and "not valid JSON" in err


def test_an_outside_kernel_is_refused(tmp_path):
    path = tmp_path / "outside.json"
    d = json.loads((reproducer_files.find("3264ffa39b5d")).read_text())
    path.write_text(json.dumps(d))
    code, _, err = harness("export", path, "--to", tmp_path / "x.py")
    assert code == 2 and err.count("\n") == 1 and "outside kernel" in err


def test_the_file_builds_the_harnesss_program(tmp_path):
    """With TileLang: the recorded builder calls and the file's prim_funcs (no compile)."""
    pytest.importorskip("tilelang")
    rep = _reproducer(BWD.replace(variant="dq_shared", block_m=64, block_n=64, threads=128), "COMPILE_ERROR",
                      tmp_path)
    path, calls = export.export(rep, tmp_path / "bwd.standalone.py")
    assert [c.kernel for c in calls] == ["main", "preprocess", "postprocess", "sink_grad"]
    lines = export.check_program(path, calls)
    assert len(lines) == 4 and all(line.startswith("same TIR script") for line in lines), lines


def test_the_file_checks_guard_bands_before_values(tmp_path, monkeypatch, capsys):
    """A forward that is right but also writes 3 elements past O's end: OOB_WRITE, exit 1."""
    module = _standalone(FWD, "OOB_WRITE", tmp_path)
    monkeypatch.setattr(module, "target", lambda: "auto")
    monkeypatch.setattr(module, "load_modules", lambda: {"compat": SimpleNamespace(VERSION="stub")})
    right = _stub(module)

    def spilling(q, k, v, sinks, out, lse):
        right(q, k, v, sinks, out, lse)
        storage = torch.empty(0, dtype=out.dtype).set_(out.untyped_storage())
        storage[out.storage_offset() + out.numel():][:3] = 1.0

    monkeypatch.setattr(module, "build", lambda mods, where: {"fwd": spilling})
    assert module.main([]) == 1
    out = capsys.readouterr().out
    assert "OOB_WRITE O: 3 elements written after the end (first at +0)" in out
    assert "O       PASS" in out and "OOB_WRITE LSE" not in out


def test_the_backward_reads_the_o_and_lse_the_harness_hands_its_kernels(tmp_path):
    module = _standalone(BWD, "MISMATCH", tmp_path)
    fam = kernels.family("bwd")

    def handed(run, kernels_of):
        seen = {}

        def preprocess(o, do, delta):
            seen["O"] = o.clone()

        def main(q, k, v, do, lse, *rest):
            seen["LSE"] = lse.clone()

        run(kernels_of(preprocess, main, lambda *a: None), BWD, fam.runner.make_inputs(BWD, "cpu"))
        return seen

    ours = handed(fam.runner.run, lambda pre, main, nothing: (pre, main, nothing, nothing))
    theirs = handed(lambda compiled, case, inputs: module.run_backward(compiled, inputs),
                    lambda pre, main, nothing: {"preprocess": pre, "main": main, "postprocess": nothing,
                                                "sink_grad": nothing})
    for name in ("O", "LSE"):
        assert ours[name].dtype == theirs[name].dtype and torch.equal(ours[name], theirs[name]), name
