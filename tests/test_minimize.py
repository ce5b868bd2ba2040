"""minimize() keeps the failure signature while shrinking; triage() counts reproductions."""

from harness.case import Case
from harness.kernels.fwd_family import FAMILY
from harness.minimize import minimize, triage
from harness.result import Result

BIG = Case(batch=4, heads=8, kv_heads=2, seqlen_q=300, seqlen_k=500, head_dim=128, head_dim_v=128,
           dtype="bfloat16", causal=True, sinks=True, layout="bshd", block_m=128, block_n=64, num_stages=2,
           threads=256, seed=7)


def fake(fails, region=lambda c: "tail_q_tile"):
    """evaluate(): MISMATCH of O in region(c) when fails(c), else PASS; records what it ran."""
    def evaluate(c):
        c.validate()
        assert FAMILY.offer.unsupported(c) is None, "minimize evaluated an unsupported case"
        evaluate.calls.append(c)
        if not fails(c):
            return Result.of(c, "PASS", "judge")
        message = f"O: max error 0.{c.seqlen_q} > tolerance 0.001 at [0, 0, {c.seqlen_q - 1}, 3]"
        return Result.of(c, "MISMATCH", "judge", message, tensor="O", region=region(c))
    evaluate.calls = []
    return evaluate


def shrink(case, evaluate, budget=60):
    log = []
    target = evaluate(case).signature
    small, steps = minimize(case, target, evaluate, budget, log.append)
    assert steps == log and all("\n" not in s for s in steps)
    assert evaluate(small).signature == target
    return small, steps


def test_shrinks_everything_but_what_the_failure_needs():
    small, steps = shrink(BIG, fake(lambda c: c.seqlen_q > 100 and c.causal))
    assert small == Case(seqlen_q=101, seqlen_k=1, causal=True)  # every other field at its default
    assert small.tile == FAMILY.offer.tiles[0]
    assert any(s.startswith("batch 4 -> 1") for s in steps)


def test_never_accepts_a_step_that_changes_the_region():
    # Failing from 64 on; the region is "interior" only at multiples of 64: 128 cannot shrink to 65..127.
    evaluate = fake(lambda c: c.seqlen_q >= 64, region=lambda c: "tail_q_tile" if c.seqlen_q % 64 else "interior")
    small, steps = shrink(BIG.replace(seqlen_q=128, causal=False), evaluate)
    assert small.seqlen_q == 128 and small.batch == 1 and small.heads == 1
    assert not any("seqlen_q" in s for s in steps)
    tails = [c for c in evaluate.calls if c.seqlen_q % 64 and c.seqlen_q >= 64]
    assert tails, "the signature-changing candidates were tried and rejected"


def test_keeps_the_gqa_group_and_the_length_difference():
    needs = lambda c: c.heads // c.kv_heads == 4 and c.seqlen_k - c.seqlen_q == 37 and c.seqlen_q > 10
    small, _ = shrink(BIG.replace(seqlen_q=200, seqlen_k=237), fake(needs))
    assert (small.heads, small.kv_heads, small.seqlen_q, small.seqlen_k) == (4, 1, 11, 48)


def test_budget_is_respected(monkeypatch):
    """On a clock that only evaluations move (1/16 s each), so that a loaded machine changes nothing: a budget
    of 6 evaluations stops the search after the one that spends it, the seventh."""
    clock = [0.0]

    def slow(c):
        clock[0] += 1 / 16
        return evaluate(c)
    monkeypatch.setattr("harness.minimize.time.monotonic", lambda: clock[0])
    evaluate = fake(lambda c: c.seqlen_q > 100)
    target = evaluate(BIG).signature
    evaluate.calls.clear()
    small, steps = minimize(BIG, target, slow, 6 / 16)
    assert len(evaluate.calls) == 7  # at most one evaluation past the budget
    assert small != BIG and evaluate(small).signature == target
    evaluate.calls.clear()
    minimize(BIG, target, slow, 0)
    assert len(evaluate.calls) <= 1  # a spent budget: the one evaluation past it at most


def test_triage():
    always = fake(lambda c: True)
    sig = always(BIG).signature
    assert triage(BIG, always, 3, sig) == {"runs": 3, "reproduced": 3, "deterministic": True}
    flip = iter(range(100))
    flaky = fake(lambda c: next(flip) % 2 == 0)
    assert triage(BIG, flaky, 4, sig) == {"runs": 4, "reproduced": 2, "deterministic": False}
    assert triage(BIG, fake(lambda c: False), 2) == {"runs": 2, "reproduced": 0, "deterministic": True}


def test_a_race_gets_tries_replays_before_minimize_gives_up(monkeypatch, tmp_path):
    """harness minimize --tries: the recorded case is replayed up to `tries` times, and the first replay that shows
    the recorded signature starts the shrinking; a race that passes once is not "not reproduced"."""
    from harness import replay, reproducer_building
    from harness.pool import Timeouts

    case = Case(seqlen_q=101, seqlen_k=1, causal=True)
    failing = fake(lambda c: c == case)(case)
    rep = reproducer_building.build(failing, {"tilelang": "0.1.15"})
    path = tmp_path / "r.json"

    class Replays:  # the pool: the recorded case passes its first `passes` replays, then fails; others pass
        def __init__(self, *args, **kwargs):
            self.seen = 0

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def run_one(self, c):
            self.seen += c == case
            return failing if c == case and self.seen > Replays.passes else Result.of(c, "PASS", "judge")

    monkeypatch.setattr(replay, "Pool", Replays)
    monkeypatch.setattr(replay, "target", lambda rep, env, arch: ("auto", ""))
    Replays.passes = 2
    status, line = replay.minimize(rep, path, tmp_path, Timeouts(), confirm=1, runs=0, tries=2)
    assert (status, line) == (125, "NOT REPRODUCED in 2 replays, nothing to minimize: now PASS (judge)")
    status, line = replay.minimize(rep, path, tmp_path, Timeouts(), confirm=1, runs=0, tries=3)
    assert (status, line) == (0, f"already minimal: {path}")
