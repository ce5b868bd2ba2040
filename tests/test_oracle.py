import torch

from harness import blame, oracle
from harness.case import Case
from harness.result import Result, ScanFinding


def locate_nowhere(name, index):
    return "interior"


def judge(out, ref, base, k=oracle.K_FORWARD, dtype=torch.float16):
    return oracle.check("O", out, ref, base, dtype, k, locate_nowhere)


def test_rule_is_k_times_baseline_error_plus_floor():
    ref = torch.zeros(1, 1, 4, 2, dtype=torch.float64)
    base = ref.clone()
    base[0, 0, 0, 0] = 0.01
    c = judge(ref + 0.02, ref, base)
    atol = oracle.atol_floor(ref, torch.float16)
    assert c.tolerance == 2 * 0.01 + atol
    assert c.ok
    bad = judge(ref + 0.0201 + atol, ref, base)
    assert not bad.ok and bad.verdict == "MISMATCH"


def test_gradients_get_k_3():
    ref = torch.zeros(1, 1, 2, 2, dtype=torch.float64)
    base = ref + 0.01
    assert judge(ref + 0.029, ref, base, k=oracle.K_GRADIENT).ok
    assert not judge(ref + 0.029, ref, base, k=oracle.K_FORWARD).ok


def test_zero_error_baseline_uses_the_dtype_floor():
    # FlashAttention's floor: rounding of x + 0.3 - 0.3 in the dtype, over the reference's values.
    ref = torch.linspace(-2, 2, 64, dtype=torch.float64).reshape(1, 1, 8, 8)
    c = judge(ref, ref, ref.clone())
    r = ref.to(torch.float16)
    assert c.ok and c.base_error == 0
    assert c.atol == max(2 * (r + 0.3 - 0.3 - r).abs().max().item(), 2 ** -10 * 2) > 0
    assert judge(ref + c.atol / 2, ref, ref.clone()).ok
    assert not judge(ref + 2 * c.atol, ref, ref.clone()).ok


def test_a_lone_value_gets_at_least_one_ulp():
    # For bf16 3.0, 3.0 + 0.3 - 0.3 rounds back to 3.0: FlashAttention's term is 0; one ulp at 3 is 2**-6.
    ref = torch.tensor([3.0], dtype=torch.float64)
    assert oracle.atol_floor(ref, torch.bfloat16) == 2 ** -6
    many = torch.linspace(-2, 2, 4096, dtype=torch.float64)
    r = many.to(torch.float16)
    assert oracle.atol_floor(many, torch.float16) == 2 * (r + 0.3 - 0.3 - r).abs().max().item()


def test_exact_zero_reference_with_zero_floor_demands_exact_zero():
    ref = torch.zeros(1, 1, 2, 2, dtype=torch.float64)
    assert judge(ref.clone(), ref, ref.clone()).ok
    assert not judge(ref + 1e-3, ref, ref.clone()).ok


def test_minus_inf_reference_must_be_matched_exactly():
    ref = torch.tensor([[[float("-inf"), 1.0]]], dtype=torch.float64)
    assert oracle.check("LSE", ref.clone(), ref, ref.clone(), torch.float16, 2, locate_nowhere).ok
    got = torch.tensor([[[0.0, 1.0]]], dtype=torch.float64)
    c = oracle.check("LSE", got, ref, ref.clone(), torch.float16, 2, locate_nowhere)
    assert c.verdict == "MISMATCH" and c.where["index"] == [0, 0, 0]
    assert oracle.failure_message(c).startswith("LSE: differs where the reference is not finite, at [0, 0, 0]")


def test_a_mismatch_of_values_and_one_where_the_reference_overflows_are_told_apart():
    """A minimizing step once turned a value mismatch (error 8.5) into a program whose float16 tile overflows, where
    only the reference's infs and the kernel's nans differ: the same signature while the message blanked both."""
    ref = torch.tensor([[[float("inf"), 1.0, 2.0]]], dtype=torch.float64)
    overflow = oracle.check("G", torch.tensor([[[float("nan"), 1.0, 2.0]]], dtype=torch.float64), ref, ref.clone(),
                            torch.float16, 2, locate_nowhere)
    values = oracle.check("G", torch.tensor([[[float("inf"), 1.0, 10.5]]], dtype=torch.float64), ref, ref.clone(),
                          torch.float16, 2, locate_nowhere)
    assert overflow.verdict == values.verdict == "MISMATCH"
    said = [Result.of(Case(), c.verdict, "judge", oracle.failure_message(c), tensor="G") for c in (overflow, values)]
    assert said[0].signature != said[1].signature
    assert said[1].message == "G: max error 8.5 > tolerance 0.001953 at [0, 0, 2]"


def test_nan_output_is_nonfinite_even_when_small_errors_elsewhere():
    ref = torch.ones(1, 2, 2, 2, dtype=torch.float64)
    out = ref.clone()
    out[0, 1, 1, 0] = float("nan")
    c = judge(out, ref, ref.clone())
    assert c.verdict == "NONFINITE" and c.where["index"] == [0, 1, 1, 0] and c.where["bad_heads"] == [1]


def test_regions():
    case = Case(seqlen_q=70, seqlen_k=3, causal=True, block_m=64, block_n=64)
    seen = torch.zeros(70, 3, dtype=torch.bool)
    seen[67:] = True  # only the last three queries see a key
    locate = oracle.region_locator(case, seen.any(1), seen.any(0))
    assert locate("O", (0, 0, 5, 0)) == "empty_rows"
    assert locate("O", (0, 0, 68, 0)) == "tail_q_tile"
    case = Case(seqlen_q=64, seqlen_k=64, block_m=64, block_n=64)
    all_seen = torch.ones(64, dtype=torch.bool)
    assert oracle.region_locator(case, all_seen, all_seen)("O", (0, 0, 10, 0)) == "interior"


def test_signature_ignores_numbers_and_paths():
    r1 = Result.of(Case(), "COMPILE_ERROR", "compile", "InternalError: /tmp/a/b.cu:12: block_K (72) at 0x7f00")
    r2 = r1.replace(message="InternalError: /opt/x.cu:99: block_K (104) at 0xdead")
    assert r1.signature == r2.signature
    assert r1.signature != r1.replace(verdict="CRASH").signature


def test_a_failure_pinned_on_a_shared_kernel_has_one_signature_across_families():
    dense = Case(family="bwd", variant="atomic_nolayout", sinks=True)
    packed = Case(family="varlen_bwd", variant="split", sinks=True, layout="thd", seqlens=((3, 4),), seqlen_q=3,
                  seqlen_k=4)
    msg = "LaunchError: sink_grad: CUDA error: misaligned address"
    pinned = [Result.of(c, "CRASH", "run", msg, kernel="sink_grad") for c in (dense, packed)]
    assert pinned[0].signature == pinned[1].signature
    assert pinned[0].signature[:2] == ("", "kernel:sink_grad")
    own = [Result.of(c, "CRASH", "run", msg) for c in (dense, packed)]
    assert own[0].signature != own[1].signature  # not pinned: each family's own


def test_a_hang_names_the_code_scan_finding_that_explains_it():
    """Two fwd hangs with different causes (0.1.12's barrier count, 0.1.10's register request)
    must not share a signature, or the second is reported as the first, known bug."""
    loads = ScanFinding("unwaited_async_loads", "TMA load into q_s ...")
    plain = oracle.hang(Case(), 60, "run", [loads])
    barrier = oracle.hang(Case(), 20, "run", [ScanFinding("named_barrier_counts", "bar.sync 3 counts 192 ..."), loads])
    registers = oracle.hang(Case(), 60, "run", [ScanFinding("register_budget", "setmaxnreg asks ...")])
    assert (plain.message, plain.predicted) == ("no answer within 60 s (run)", None)
    assert barrier.message == "no answer within 20 s (run); the code scan predicts it: named_barrier_counts"
    assert barrier.predicted == ("named_barrier_counts",) and registers.predicted == ("register_budget",)
    budget = oracle.hang(Case(), 5, "run", [ScanFinding("register_budget", "x")])
    sigs = {r.signature for r in (plain, barrier, registers, budget)}
    assert len(sigs) == 3
    # What the pool writes when a case never answered: the scan's findings (if it got that far), then the cause.
    assert list(oracle.hang(Case(), 60, "run", [loads], code="ab").to_dict())[-2:] == ["hazards", "code"]
    assert list(registers.to_dict())[-2:] == ["hazards", "predicted"]
    assert "hazards" not in oracle.hang(Case(), 600, "compile").to_dict()


def test_a_launch_refused_for_shared_memory_is_a_resource_limit():
    from harness.kernels import LaunchError, Unbuildable
    e = LaunchError("bwd", "Failed to set the allowed dynamic shared memory size to 239616")
    assert blame.classify(e, "run") == ("UNSUPPORTED", f"LaunchError: {e}")
    assert blame.classify(Unbuildable("x.py: flashattn does not build on this TileLang"), "compile")[0] == "UNSUPPORTED"
