"""Who is blamed: COMPILE_ERROR only for the compiler, CRASH only for the device, else HARNESS_ERROR."""

import dataclasses

import pytest

from harness import blame, kernels, reproducer_building
from harness.case import Case
from harness.environment import gpu_count
from harness.pool import Pool, Timeouts
from harness.result import Result


def fake(behaviour, **kw):
    return Case(family="fake", heads=behaviour, **kw)


def run(cases, target, tmp_path):
    with Pool(1, target, tmp_path, Timeouts(compile=20, run=5)) as pool:
        return {(r.case.heads, r.case.variant): r for r in pool.run(cases)}, pool.started


def test_a_python_bug_in_a_program_builder_is_ours(tmp_path):
    results, _ = run([fake(8), fake(9), fake(12), fake(1)], "sm_90a", tmp_path)
    assert (results[8, "default"].verdict, results[8, "default"].stage) == ("HARNESS_ERROR", "compile")
    assert results[8, "default"].message == "KeyError: 'no such program'"
    assert (results[9, "default"].verdict, results[9, "default"].stage) == ("COMPILE_ERROR", "compile")
    assert results[9, "default"].message.startswith("InternalError: Check failed")
    # A broken generated-code scan is ours too, and the worker lives on to compile the next case.
    assert (results[12, "default"].verdict, results[12, "default"].stage) == ("HARNESS_ERROR", "hazards")
    assert results[1, "default"].verdict == "COMPILED"


def test_an_nvcc_error_that_only_nvcc_printed_is_the_message(tmp_path):
    results, _ = run([fake(13), fake(1)], "sm_90a", tmp_path)
    r = results[13, "default"]
    assert (r.verdict, r.stage) == ("COMPILE_ERROR", "compile")
    assert r.message == "InternalError: nvcc rejected the generated CUDA: line 63: too many arguments in function call"
    assert any("tmpab.cu(63): error" in p.read_text() for p in tmp_path.rglob("*") if p.is_file())  # still logged
    assert results[1, "default"].verdict == "COMPILED"


def test_an_illegal_word_is_not_a_device_fault(tmp_path):
    results, started = run([fake(10), fake(1)], "auto", tmp_path)
    assert results[10, "default"].verdict == "HARNESS_ERROR"
    assert results[10, "default"].message == "ValueError: illegal value for argument 'q'"
    assert results[1, "default"].verdict == "PASS" and started == 1  # the worker was not thrown away


def test_a_fault_in_a_shared_kernel_is_one_bug_whatever_the_variant(tmp_path):
    results, _ = run([fake(11), fake(11, variant="other"), fake(6), fake(6, variant="other")], "auto", tmp_path)
    shared = [results[11, v] for v in ("default", "other")]
    assert all(r.verdict == "CRASH" and r.kernel == "common" for r in shared)
    assert shared[0].signature == shared[1].signature
    assert shared[0].signature[1] == "kernel:common"
    # fake_kernel is not shared: each variant is its own signature.
    assert results[6, "default"].signature != results[6, "other"].signature


def _raise_in(filename, exc):
    code = compile("def f(e):\n    raise e\n", filename, "exec")
    scope = {}
    exec(code, scope)
    try:
        scope["f"](exc)
    except Exception as e:
        return e


def test_blame_follows_the_innermost_frame(monkeypatch, tmp_path):
    compiler = tmp_path / "tilelang"
    monkeypatch.setattr(blame, "_compiler_roots", lambda: [str(compiler)])
    inside = _raise_in(str(compiler / "op" / "gemm.py"), AssertionError("block_K (72) must be a multiple of 16"))
    outside = _raise_in(str(tmp_path / "harness" / "kernels" / "fwd.py"), NameError("name 'q_s' is not defined"))
    native = _raise_in("<unknown>", RuntimeError("Check failed: layout"))
    # 0.1.15's CUDA codegen with no_warp_specialize: a builtin TypeError raised in TVM's C++ header.
    header = _raise_in("/project/3rdparty/tvm/include/tvm/ir/cast.h", TypeError("Downcast from tirx.Sub to ir.IntImm failed."))
    assert blame.classify(inside, "compile") == ("COMPILE_ERROR",
                                                  "AssertionError: block_K (72) must be a multiple of 16")
    assert blame.classify(outside, "compile")[0] == "HARNESS_ERROR"
    assert blame.classify(native, "compile")[0] == "COMPILE_ERROR"
    assert blame.classify(header, "compile")[0] == "COMPILE_ERROR"
    assert blame.classify(inside, "run")[0] == "HARNESS_ERROR"  # at run time only a device fault is the compiler's
    # 0.1.15's nvcc failure ends with the command line: the message is what ptxas said, and a
    # register file too small for the tile is a resource limit, not a bug.
    ptxas = _raise_in("<unknown>", RuntimeError("x.cu(142): warning #1046-D: inexact\nptxas fatal   : (C7602) "
                                                 "Insufficient registers (128) to compile instruction\nCommand: nvcc -o x"))
    assert blame.classify(ptxas, "compile") == (
        "UNSUPPORTED", "RuntimeError: nvcc rejected the generated CUDA: ptxas: (C7602) Insufficient registers (128) "
        "to compile instruction")
    syntax = _raise_in("<unknown>", RuntimeError("x.cu(63): error: too many arguments in function call\nCommand: nvcc"))
    assert blame.classify(syntax, "compile") == (
        "COMPILE_ERROR", "RuntimeError: nvcc rejected the generated CUDA: line 63: too many arguments in function call")
    # 0.1.15's scan at 192 threads: the error is in TileLang's header, the template says which operation.
    header_assert = _raise_in("<unknown>", RuntimeError(
        "/site/tilelang/src/tl_templates/cuda/scan.h(122): error: static assertion failed\n"
        "    static_assert(threads == 1024 or threads == 512 or threads == 256 or\n          detected during:\n"
        '            instantiation of class "tl::InclusiveScan2D<Reducer, threads, Axis, reverse> [with threads=192]" '
        "at line 169\n1 error detected in the compilation of \"/tmp/x/tvm_kernels.cu\".\nCommand: nvcc"))
    assert blame.classify(header_assert, "compile") == (
        "COMPILE_ERROR", "RuntimeError: nvcc rejected the generated CUDA: scan.h line 122: static assertion failed "
        "in tl::InclusiveScan2D")
    fault = RuntimeError("CUDA error: an illegal memory access was encountered\nCompile with TORCH_USE_CUDA_DSA")
    assert blame.classify(fault, "judge") == ("CRASH", "RuntimeError: CUDA error: an illegal memory access was encountered")
    assert blame.classify(ValueError("illegal shape"), "run")[0] == "HARNESS_ERROR"
    def faulting():
        raise fault
    with pytest.raises(kernels.LaunchError) as launched:
        kernels.launch("sink_grad", faulting)
    assert blame.classify(launched.value, "run") == (
        "CRASH", "LaunchError: sink_grad: CUDA error: an illegal memory access was encountered")


def test_the_message_is_tvms_error_not_what_it_indents_under_it():
    # 0.1.15's layout inference: the error line first, then the layouts it compared, the loop AST and the source.
    injective = _raise_in("<unknown>", RuntimeError(
        "Loop layout is not injective: Fragment((58, 18) -> (24,), replicate: 1, thread: 128)\n"
        "  errors: (\"logical coordinates [0, 0, 0] and [48, 0, 0] both map to physical coordinates [45, 0]\",)\n"
        "  loop AST: for i in T.parallel(58):\n    for j in T.parallel(18):\n"
        "        F1[69 + i, 41 + j] = T.Cast(\"float16\", T.float32(-3.0))\n"))
    different = _raise_in("<unknown>", RuntimeError(
        "Get different layout for F1\n current layout: Fragment((128, 64) -> (32,), replicate: 1)\n"
        " previous layout: Fragment((128, 64) -> (64,), replicate: 2)\n  --> /tmp/p.py:11:1\n     |\n"
        " 11 |         F1 = T.alloc_fragment((128, 64), \"float16\")\n     |         ^\n"))
    assert blame.classify(injective, "compile") == (
        "COMPILE_ERROR", "RuntimeError: Loop layout is not injective: Fragment((58, 18) -> (24,), replicate: 1, thread: 128)")
    assert blame.classify(different, "compile") == ("COMPILE_ERROR", "RuntimeError: Get different layout for F1")


def test_a_harness_error_is_never_recorded(tmp_path):
    r = Result.of(fake(8), "HARNESS_ERROR", "compile", "KeyError: 'no such program'")
    with pytest.raises(ValueError, match="only compiler failures"):
        reproducer_building.write(r, {}, tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_a_release_without_the_language_a_family_needs_is_unsupported(monkeypatch):
    from harness import worker
    fake = kernels.family("fake")
    fam = dataclasses.replace(fake, runner=dataclasses.replace(fake.runner, needs=("no_such_language",)))
    monkeypatch.setattr(kernels, "family", lambda name: fam)
    r = worker.run_case(Case(family="fake"), "sm_90a", {})
    assert r.verdict == "UNSUPPORTED" and "has no T.no_such_language" in r.message


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(
    not gpu_count(), reason="needs a CUDA GPU (none visible)"))])
def test_the_warm_up_judges_real_cases(device):
    """The warm-up's judge (on the GPU it loads the references' CUDA kernels before the first case)
    passes its small cases: a warm-up that fails quietly would leave that cost to the first case."""
    from harness.worker import judge_small_cases
    assert judge_small_cases(device) == ["PASS", "PASS"]


def test_a_kernel_that_failed_to_compile_fails_again_without_a_second_compile(monkeypatch):
    from harness import worker

    builds = []
    real = worker.build
    monkeypatch.setattr(worker, "build", lambda *a: builds.append(1) or real(*a))
    cache = {}
    first, second = (worker.run_case(fake(9, seqlen_q=n), "sm_90a", cache) for n in (64, 77))
    assert len(builds) == 1 and first.verdict == second.verdict == "COMPILE_ERROR"
    assert second.message == first.message and second.case.seqlen_q == 77
    assert "compile" in first.seconds and "compile" not in second.seconds


def test_guard_bands_tell_writes_and_reads_outside_a_buffer_from_a_wrong_value(tmp_path):
    results, _ = run([fake(16), fake(17), fake(18), fake(1)], "auto", tmp_path)
    write, read, noisy = results[16, "default"], results[17, "default"], results[18, "default"]
    assert (write.verdict, write.tensor, write.region) == ("OOB_WRITE", "O", "after the tensor")
    assert write.message == "O: 3 elements written after the end (first at +0)"
    assert (read.verdict, read.tensor) == ("OOB_READ", "O")
    # A wrong value that changes from run to run proves no read outside: it stays a mismatch.
    assert noisy.verdict in ("MISMATCH", "NONFINITE")
    assert results[1, "default"].verdict == "PASS"
    assert write.signature != read.signature


def test_bits_compare_as_stored_nan_payloads_and_signed_zeros_included():
    """The forms and twin checks' bit-for-bit comparison, on the device's tensors without copying them out."""
    import torch

    from harness.worker import _same_bits, _unlike_bits

    a = torch.tensor([1.0, -0.0, float("nan")], dtype=torch.float32)
    quiet = a.clone()
    payload = a.clone()
    payload.view(torch.int32)[2] += 1  # another NaN: equal as floats never, unequal as bits
    assert _same_bits(a, quiet)
    assert not _same_bits(a, payload)
    assert not _same_bits(a, torch.tensor([1.0, 0.0, float("nan")]))  # -0.0 is not 0.0 here
    assert not _same_bits(a, a.double())  # another dtype
    assert not _same_bits(a, a[:2])  # another shape
    half = torch.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=torch.bfloat16)
    assert _unlike_bits({"O": half, "LSE": a, "dQ": a}, {"O": half.t().contiguous().t(), "LSE": payload, "dQ": a + 1}) \
        == ["LSE", "dQ"]
    assert _unlike_bits({"O": half.t()}, {"O": half.t().contiguous()}) == []  # the layout in memory is not the value


@pytest.mark.parametrize("family", kernels.FAMILIES)
def test_inputs_moved_in_one_copy_are_make_inputs_own(family):
    """device_inputs: every family's inputs, in one copy, with the dtype, shape, strides and bytes make_inputs gives,
    each in an allocation of its own, the guard's when there is one (the CPU stands in for the device: the bytes are
    the host's either way)."""
    import torch

    from harness import bands, strategies
    from harness.worker import device_inputs

    fam = kernels.family(family)
    for case in strategies.draw(family, 6, seed=5):
        want = fam.runner.make_inputs(case, "cpu")
        with bands.guarding() as guard:
            guarded = device_inputs(fam, case, guard, "cpu")
        for got in (device_inputs(fam, case, device="cpu"), guarded):
            assert got.keys() == want.keys()
            tensors = [n for n, t in want.items() if isinstance(t, torch.Tensor)]
            assert tensors
            for n in tensors:
                a, b = want[n], got[n]
                assert (b.dtype, b.shape) == (a.dtype, a.shape), n
                assert torch.equal(a.reshape(-1).view(torch.uint8), b.reshape(-1).view(torch.uint8)), n
            starts = [got[n].untyped_storage().data_ptr() for n in tensors if got[n].numel()]
            assert len(set(starts)) == len(starts)
        plain = device_inputs(fam, case, device="cpu")
        assert all(plain[n].stride() == t.stride() for n, t in want.items() if isinstance(t, torch.Tensor))
        assert set(guard.names) == {n for n, t in want.items() if isinstance(t, torch.Tensor)}
