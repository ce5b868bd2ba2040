"""The search of a bisect, alone: which adjacent pair of an ordered list changes from good to bad.

A pure function of the list and a test callback: no install, no subprocess, no file. What a test
costs (an install, a build, a replay) and where its answer is kept are the caller's business, so the
search is tested with plain lists (tests/test_bisect_search.py: a property over any statuses).
"""
from __future__ import annotations

from harness.bisect import BisectError
from harness.status import BAD, GOOD


def search(order: list, test) -> tuple[int, int, list[int]]:
    """(index of the last good, index of the first bad, skipped indexes between them).
    `test(version) -> status`; order[0] must test good and order[-1] bad (checked first: both are
    tested before the error names the first that is not). A status neither good nor bad is a skip,
    stepped around. Between the endpoints each version is tested once at most, and without skips
    ceil(log2(len(order) - 1)) of them at most."""
    first, last = test(order[0]), test(order[-1])
    if first != GOOD:
        raise BisectError(f"--good {order[0]} is not good here (status {first})")
    if last != BAD:
        raise BisectError(f"--bad {order[-1]} is not bad here (status {last})")
    lo, hi, skipped = 0, len(order) - 1, set()
    while True:
        untested = [i for i in range(lo + 1, hi) if i not in skipped]
        if not untested:
            return lo, hi, [i for i in sorted(skipped) if lo < i < hi]
        i = min(untested, key=lambda i: (abs(i - (lo + hi) / 2), i))
        status = test(order[i])
        if status == GOOD:
            lo = i
        elif status == BAD:
            hi = i
        else:
            skipped.add(i)
