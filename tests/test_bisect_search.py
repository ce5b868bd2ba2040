"""The search of a bisect alone (harness.bisect.search), over plain lists: literal sequences, then properties
over any statuses checked against a brute-force answer, as cargo-bisect-rustc tests its least_satisfying."""
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.bisect import BisectError
from harness.bisect.search import search
from harness.status import BAD, GOOD, SKIP

ORDER = ["0.1.6.post2", "0.1.7", "0.1.7.post3", "0.1.8", "0.1.10", "0.1.12", "0.1.15"]
CHEAP = settings(max_examples=500)  # a pure function over lists: many examples cost well under a second


def statuses(table):
    calls = []

    def test(version):
        calls.append(version)
        return table[version]
    return test, calls


def test_search_finds_the_first_bad_release_in_few_steps():
    test, calls = statuses(dict(zip(ORDER, [GOOD] * 4 + [BAD] * 3)))
    lo, hi, skipped = search(ORDER, test)
    assert (ORDER[lo], ORDER[hi], skipped) == ("0.1.8", "0.1.10", [])
    assert calls[:2] == ["0.1.6.post2", "0.1.15"] and len(calls) <= 2 + 3  # endpoints first, then log2


def test_search_steps_around_untestable_releases():
    table = dict(zip(ORDER, [GOOD] * 4 + [BAD] * 3))
    table["0.1.8"] = table["0.1.7.post3"] = SKIP  # e.g. does not import here
    lo, hi, skipped = search(ORDER, statuses(table)[0])
    assert (ORDER[lo], ORDER[hi]) == ("0.1.7", "0.1.10") and [ORDER[i] for i in skipped] == ["0.1.7.post3", "0.1.8"]


def test_endpoints_are_checked_first():
    order = ["a", "b", "c"]
    with pytest.raises(BisectError, match="--good a is not good here"):
        search(order, statuses({"a": BAD, "c": BAD})[0])
    with pytest.raises(BisectError, match="--bad c is not bad here .status 125"):
        search(order, statuses({"a": GOOD, "c": SKIP})[0])


# ----------------------------------------------------------------------------- properties
@st.composite
def monotone(draw, skips=False):
    """(versions, statuses): good up to a first bad index, bad from it on; with `skips`, any version
    strictly between the endpoints may be untestable instead."""
    versions = draw(st.lists(st.integers(), min_size=2, max_size=300, unique=True))
    first_bad = draw(st.integers(1, len(versions) - 1))
    table = {v: GOOD if i < first_bad else BAD for i, v in enumerate(versions)}
    if skips:
        for i in draw(st.sets(st.integers(1, len(versions) - 2))) if len(versions) > 2 else ():
            table[versions[i]] = SKIP
    return versions, table


def brute_force(versions, table):
    """The last testable good before the first testable bad, and the untestable ones between them."""
    hi = next(i for i, v in enumerate(versions) if table[v] == BAD)
    lo = max(i for i in range(hi) if table[versions[i]] == GOOD)
    return lo, hi, list(range(lo + 1, hi))


@CHEAP
@given(monotone())
def test_the_search_finds_the_first_bad_of_any_monotone_list_in_log2_probes(drawn):
    versions, table = drawn
    test, calls = statuses(table)
    assert search(versions, test) == brute_force(versions, table)
    assert calls[:2] == [versions[0], versions[-1]]  # the endpoints are checked first
    assert len(calls) == len(set(calls)) <= 2 + math.ceil(math.log2(len(versions) - 1))


@CHEAP
@given(monotone(skips=True))
def test_the_search_steps_around_untestable_versions_to_the_brute_force_answer(drawn):
    versions, table = drawn
    test, calls = statuses(table)
    assert search(versions, test) == brute_force(versions, table)
    assert len(calls) == len(set(calls))  # each version tested once at most


@CHEAP
@given(st.lists(st.sampled_from([GOOD, BAD, SKIP, 2]), max_size=200))
def test_any_statuses_end_at_a_change_from_good_to_bad_with_only_untestable_ones_between(middle):
    """Not monotone (a flaky or twice-changed bug): still one good next to one bad, past skips only.
    A status neither good nor bad (2: the replay refused its input) counts as untestable."""
    said = [GOOD, *middle, BAD]
    versions = list(range(len(said)))
    test, calls = statuses(dict(zip(versions, said)))
    lo, hi, skipped = search(versions, test)
    assert said[lo] == GOOD and said[hi] == BAD and lo < hi
    assert skipped == list(range(lo + 1, hi)) and all(said[i] not in (GOOD, BAD) for i in skipped)
    assert len(calls) == len(set(calls))


@CHEAP
@given(st.lists(st.sampled_from([GOOD, BAD, SKIP]), min_size=2, max_size=50).filter(lambda s: (s[0], s[-1]) != (GOOD, BAD)))
def test_endpoints_not_good_and_bad_as_claimed_are_named_before_any_other_step(said):
    versions = [f"v{i}" for i in range(len(said))]
    test, calls = statuses(dict(zip(versions, said)))
    with pytest.raises(BisectError) as e:
        search(versions, test)
    if said[0] != GOOD:
        assert str(e.value) == f"--good v0 is not good here (status {said[0]})"
    else:
        assert str(e.value) == f"--bad {versions[-1]} is not bad here (status {said[-1]})"
    assert calls == [versions[0], versions[-1]]
