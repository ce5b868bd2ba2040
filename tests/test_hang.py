"""A barrier deadlock is a HANG, found without a GPU by the generated-code check and on one by
the pool's run timeout, after which the next case runs in a fresh worker and passes."""
import pytest

from harness import worker
from harness.case import Case
from harness.pool import Pool, Timeouts

# Three key blocks through a two-slot ring: the unprimed double's producer stalls on slot 1.
UNPRIMED = Case(family="ws_unprimed", variant="smem", heads=2, kv_heads=1, seqlen_q=128, seqlen_k=192,
                block_m=64, block_n=64, num_stages=2, threads=256)
PRIMED = UNPRIMED.replace(family="ws")


@pytest.mark.compile
@pytest.mark.parametrize("case, deadlock", [(UNPRIMED, True), (PRIMED, False),
                                            (UNPRIMED.replace(num_stages=1), False)],
                         ids=["unprimed", "primed", "unprimed_one_stage"])
def test_the_barrier_check_sees_the_deadlock(case, deadlock):
    result = worker.run_case(case, "sm_90a", {})
    assert result.verdict == "COMPILED"
    found = [f for f in result.hazards if f.check == "mbarrier_protocol"]
    assert bool(found) == deadlock, found
    if deadlock:
        assert "deadlock" in found[0].message and "empty[1]" in found[0].message


@pytest.mark.gpu
def test_an_unprimed_ring_hangs_and_the_next_case_passes(tmp_path):
    with Pool(1, "auto", tmp_path, Timeouts(compile=600, run=30)) as pool:
        hung = pool.run_one(UNPRIMED)
        after = pool.run_one(PRIMED)
    assert (hung.verdict, hung.stage) == ("HANG", "run"), hung
    assert after.verdict == "PASS", after
