"""Shrink a failing Case while its failure signature stays the same; triage flakiness.

`evaluate(case) -> Result` is injected (an `Evaluator` over a worker pool in production, a
pure function in tests), so nothing here knows about GPUs. The search is greedy, one dimension at a time:
each dimension is shrunk as far as the signature allows (largest step first), and passes
over all dimensions repeat until none changes or the time budget is spent.
"""
from __future__ import annotations

import time

from harness import kernels
from harness.case import FEATURES, CaseError
from harness.result import Result, unscoped


def _toward(value: int, target: int) -> list[int]:
    """Values between target and value, the biggest jump first: target, then halving the gap."""
    out, gap = [], value - target
    while gap > 0:
        out.append(value - gap)
        gap //= 2
    return out


def _batch(c):
    return [(f"batch {c.batch} -> {b}", c.replace(batch=b)) for b in _toward(c.batch, 1)]


def _heads(c):
    group = c.heads // c.kv_heads
    out = [(f"heads/kv_heads {c.heads}/{c.kv_heads} -> {kv * group}/{kv}", c.replace(heads=kv * group, kv_heads=kv))
           for kv in _toward(c.kv_heads, 1)]
    return out + [(f"heads/kv_heads {c.heads}/{c.kv_heads} -> {c.kv_heads * g}/{c.kv_heads}",
                   c.replace(heads=c.kv_heads * g)) for g in _toward(group, 1)]


def _seqlens(c):
    q, k = c.seqlen_q, c.seqlen_k
    both = [(f"seqlen_q/seqlen_k {q}/{k} -> {q - d}/{k - d}", c.replace(seqlen_q=q - d, seqlen_k=k - d))
            for d in (min(q, k) - v for v in _toward(min(q, k), 1))]  # keeps seqlen_k - seqlen_q
    return (both + [(f"seqlen_q {q} -> {v}", c.replace(seqlen_q=v)) for v in _toward(q, 1)]
            + [(f"seqlen_k {k} -> {v}", c.replace(seqlen_k=v)) for v in _toward(k, 1)])


def _features(c):
    """Each feature's shrink steps (harness.case.FEATURES): off first, then one part at a time."""
    return [step for f in FEATURES for step in f.shrink(c)]


def _head_dims(c):
    out = []
    for name in ("head_dim", "head_dim_v"):
        v = getattr(c, name)
        values = [64] if v < 64 else [x for x in (64, v // 2) if 64 <= x < v]
        out += [(f"{name} {v} -> {x}", c.replace(**{name: x})) for x in dict.fromkeys(values)]
    return out


def _tiles(c):
    keys = ("block_m", "block_n", "num_stages", "threads")
    tiles = list(kernels.family(c.family).offer.tiles)  # the first is the family's default
    now = c.tile
    earlier = tiles[:tiles.index(now)] if now in tiles else tiles
    return [(f"tile {now} -> {t}", c.replace(**dict(zip(keys, t)))) for t in earlier]


# Cheap dimensions first: lengths and batch reuse the compiled kernel, the rest recompile.
DIMENSIONS = (_batch, _seqlens, _heads, _features, _head_dims, _tiles)


def minimize(case, signature, evaluate, budget_s: float, log=lambda step: None):
    """Return (smallest case found with the same signature, accepted steps)."""
    target = unscoped(signature)
    fam = kernels.family(case.family)
    deadline = time.monotonic() + budget_s
    verdicts = {}  # candidate -> keeps the signature

    def keeps(c) -> bool:
        if c not in verdicts:
            try:
                c.validate()
            except CaseError:
                return False
            verdicts[c] = fam.offer.unsupported(c) is None and unscoped(evaluate(c).signature) == target
        return verdicts[c]

    steps = []
    changed = True
    while changed:
        changed = False
        for dimension in DIMENSIONS:
            shrinking = True
            while shrinking:
                shrinking = False
                for step, candidate in dimension(case):
                    if time.monotonic() > deadline:
                        return case, steps
                    if candidate != case and keeps(candidate):
                        case, changed, shrinking = candidate, True, True
                        steps.append(step)
                        log(step)
                        break
    return case, steps


def triage(case, evaluate, runs: int = 3, signature=None) -> dict:
    """Run `case` `runs` times: how often the failure (`signature`, or any failure verdict)
    shows, and whether every run gave the same signature."""
    seen = [evaluate(case) for _ in range(runs)]
    hit = (lambda r: unscoped(r.signature) == unscoped(signature)) if signature else (lambda r: r.failed)
    return {"runs": runs, "reproduced": sum(map(hit, seen)), "deterministic": len({r.signature for r in seen}) <= 1}


class Evaluator:
    """evaluate(case) -> result through a pool, keeping every result (minimize, triage, replay).

    With `confirm` > 1 and a `target` signature, a case showing the target is run again, up to
    `confirm` times, and the first run that differs is returned: a minimizing step of a flaky
    failure (a race) is accepted only when it reproduces every time. `view` maps each result
    first (oracle.as_predicted: a compile that shows a hang's cause counts as that hang).
    """

    def __init__(self, pool, confirm=1, target=None, view=lambda result: result):
        self.pool, self.results, self.confirm, self.target, self.view = pool, [], confirm, target, view

    def __call__(self, case) -> Result:
        for _ in range(self.confirm):
            self.results.append(self.view(self.pool.run_one(case)))
            if self.target is None or unscoped(self.results[-1].signature) != unscoped(self.target):
                break
        return self.results[-1]

    def last(self, case, signature) -> Result:
        """The latest result of `case` that showed `signature`."""
        return next(r for r in reversed(self.results) if r.case_id == case.id and unscoped(r.signature) == unscoped(signature))


def shrink(result, evaluate, budget, runs, log=lambda line: None):
    """Minimize a failing result's case, then triage it: (case, its result, flaky or None)."""
    case, sig = result.case, result.signature
    small, steps = minimize(case, sig, evaluate, budget, log=lambda s: log(f"  {s}"))
    flaky = triage(small, evaluate, runs, sig) if runs else None
    log(f"  {len(steps)} steps" + (f"; flaky {flaky}" if flaky else ""))
    return small, (evaluate.last(small, sig) if steps else result), flaky
