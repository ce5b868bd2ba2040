"""The pool's scheduling policy (harness.schedule) over plain data: no process is started here.

Cases are strings "KERNEL.n": the cases of one kernel share its compile."""
import pytest

from harness.schedule import Job, Scheduler, Timeouts, wait


def sched(slots=2, steal_at=1, partners=None):
    """Kernels are the case's prefix; `partners` {kernel: partner kernel} (a forms kernel's default-forms one)."""
    partners = partners or {}
    return Scheduler(slots, key=lambda case: case.split(".")[0], partner=lambda case: partners.get(case.split(".")[0]),
                     steal_at=steal_at)


def given(jobs):
    return [(j.slot, j.case, j.build) for j in jobs]


def test_cases_group_by_kernel_in_the_order_they_came():
    groups = sched().group(["B.1", "A.1", "B.2", "C.1", "A.2"])
    assert list(groups.items()) == [("B", ["B.1", "B.2"]), ("A", ["A.1", "A.2"]), ("C", ["C.1"])]


def test_idle_slots_take_the_groups_in_order_and_own_their_kernels():
    s = sched(3)
    groups = s.group(["A.1", "A.2", "B.1", "C.1"])
    assert given(s.dispatch(groups, 4, busy=set(), alive=set())) == [(0, "A.1", False), (1, "B.1", False),
                                                                      (2, "C.1", False)]
    assert s.owners == {"A": 0, "B": 1, "C": 2} and list(groups.items()) == [("A", ["A.2"])]


def test_a_kernel_is_never_compiled_twice_at_once():
    s = sched(2)
    groups = s.group(["A.1", "A.2"])
    # Slot 1 stays idle: A is its owner's to compile, and not compiled yet.
    assert given(s.dispatch(groups, 2, busy=set(), alive=set())) == [(0, "A.1", False)]
    assert given(s.dispatch(groups, 2, busy={0}, alive={0})) == []


def test_a_case_goes_to_the_worker_that_compiled_its_kernel():
    s = sched(2)
    groups = s.group(["A.1", "B.1", "A.2"])
    s.dispatch(groups, 3, busy=set(), alive=set())  # A.1 to 0, B.1 to 1
    s.finished("A.1")
    s.finished("B.1")
    # Both idle: slot 0, A's owner, takes A.2; slot 1 finds nothing of its own and nothing free.
    assert given(s.dispatch(groups, 3, busy=set(), alive={0, 1})) == [(0, "A.2", False)]


def test_a_compiled_kernel_whose_owner_is_busy_is_loaded_by_another_slot_largest_group_first():
    s = sched(3)
    groups = s.group(["A.1", "B.1", "C.1", "B.2", "C.2", "C.3"])
    s.dispatch(groups, 6, busy=set(), alive=set())  # A, B, C owned by 0, 1, 2
    for case in ("A.1", "B.1", "C.1"):
        s.finished(case)
    # Slot 0 is idle, owns nothing left: C (2 cases left) before B (1), their owners busy.
    assert given(s.dispatch(groups, 6, busy={1, 2}, alive={0, 1, 2})) == [(0, "C.2", False)]
    assert s.owners["C"] == 2  # a disk-cache load does not move the kernel's owner
    # A compiled kernel whose owner is idle is its owner's to run, not a load elsewhere.
    assert given(s.dispatch(groups, 6, busy={0}, alive={0, 1, 2})) == [(1, "B.2", False), (2, "C.3", False)]


def test_a_kernel_not_yet_compiled_is_not_loaded_elsewhere():
    s = sched(2)
    groups = s.group(["A.1", "A.2", "A.3"])
    s.dispatch(groups, 3, busy=set(), alive=set())
    assert given(s.dispatch(groups, 3, busy={0}, alive={0})) == []  # A.1 still compiling
    s.finished("A.1")
    assert given(s.dispatch(groups, 3, busy={0}, alive={0})) == [(1, "A.2", False)]


def test_workers_are_started_up_to_the_cases_wanted_but_live_ones_all_serve():
    s = sched(4)
    assert s.idle(1, busy=set(), alive=set()) == [0]
    assert s.idle(2, busy={0}, alive={3}) == [1, 3]
    assert s.idle(9, busy={2}, alive=set()) == [0, 1, 3]


def test_a_worker_that_went_down_takes_its_kernels_with_it():
    s = sched(2)
    groups = s.group(["A.1", "A.2", "B.1"])
    s.dispatch(groups, 3, busy=set(), alive=set())
    s.finished("A.1")
    s.forget(0)
    assert s.owners == {"B": 1}
    # A is free again: the next idle slot takes it (it loads it: A is compiled) and holds it.
    assert given(s.dispatch(groups, 3, busy={1}, alive={1})) == [(0, "A.2", False)] and s.held[0] == {"A"}


def test_builds_ahead_are_queued_once_and_go_to_slots_no_case_needs():
    s = sched(3)
    s.queue_builds(["A.1", "A.2", "B.1"])
    s.finished("C.1")
    s.queue_builds(["B.2", "C.2", "D.1"])  # B queued already, C compiled already
    assert s.builds == ["A.1", "B.1", "D.1"]
    # Builds queued: every slot may start, cases first, then one build per idle slot.
    groups = s.group(["E.1"])
    assert given(s.dispatch(groups, 1, busy=set(), alive=set())) == [(0, "E.1", False), (1, "A.1", True),
                                                                      (2, "B.1", True)]
    assert s.builds == ["D.1"] and s.owners == {"E": 0, "A": 1, "B": 2}
    # A kernel that meanwhile got an owner is no longer built.
    s.queue_builds(["F.1"])
    s.dispatch(s.group(["D.5"]), 1, busy={1, 2}, alive={0, 1, 2})  # slot 0 takes D's case: owns D
    assert s.builds == ["D.1", "F.1"]  # dropped when an idle slot comes to it
    assert given(s.dispatch({}, 0, busy={0, 2}, alive={0, 1, 2})) == [(1, "F.1", True)]
    assert s.builds == []
    s.queue_builds(["A.3"])  # owned (built by slot 1): nothing to build
    assert s.builds == []


def test_a_kernel_built_ahead_serves_its_cases_on_the_worker_that_built_it():
    s = sched(2)
    s.queue_builds(["A.1"])
    assert given(s.dispatch({}, 0, busy=set(), alive=set())) == [(0, "A.1", True)]
    s.finished("A.1")
    groups = s.group(["B.1", "A.2"])
    # Slot 0 built A: it takes A's case though B comes first; slot 1 gets B.
    assert given(s.dispatch(groups, 2, busy=set(), alive={0})) == [(0, "A.2", False), (1, "B.1", False)]


def test_a_job_has_the_compile_timeout_then_the_run_timeout():
    t = Timeouts(compile=600, run=60)
    job = Job(0, "A.1")
    assert job.stage == "compile" and not job.overdue(1e12)  # not sent yet: no deadline
    job.start(100.0, t)
    assert (job.deadline, job.limit(t)) == (700.0, 600)
    assert not job.overdue(700.0) and job.overdue(700.5)
    job.reached("run", 650.0, t)
    assert (job.stage, job.deadline, job.limit(t)) == ("run", 710.0, 60)


def test_the_pool_waits_for_the_first_deadline_or_its_own():
    t = Timeouts(compile=10, run=5)
    a, b = Job(0, "A.1"), Job(1, "B.1")
    a.start(0.0, t)
    b.start(2.0, t)
    assert wait(3.0, [a, b]) == 7.0
    assert wait(3.0, [a, b], until=4.0) == 1.0
    assert wait(20.0, [a, b]) == 0.0  # overdue: no wait
    assert wait(3.0, [], until=5.0) == 2.0


@pytest.mark.parametrize("slots", [1, 4])
def test_every_case_is_handed_out_once(slots):
    """Workers that finish at once, a run of many kernels: each case once, each kernel's cases in order."""
    s = sched(slots)
    cases = [f"{k}.{i}" for k in "ABCDE" for i in range(3)]
    groups, out, busy = s.group(cases), [], set()
    while groups or busy:
        jobs = s.dispatch(groups, len(cases), busy=busy, alive=set(range(slots)))
        out += [j.case for j in jobs]
        for j in jobs:
            s.finished(j.case)
        busy = set()
    assert sorted(out) == sorted(cases)
    for k in "ABCDE":
        assert [c for c in out if c[0] == k] == [f"{k}.{i}" for i in range(3)]


def test_a_slot_that_loaded_a_kernel_keeps_taking_its_cases():
    s = sched(3)
    groups = s.group(["A.1", "B.1", "A.2", "A.3", "B.2", "A.4"])
    s.dispatch(groups, 6, busy=set(), alive=set())  # A to 0, B to 1; slot 2 waits (nothing compiled)
    s.finished("A.1")
    s.finished("B.1")
    assert given(s.dispatch(groups, 6, busy={0, 1}, alive={0, 1, 2})) == [(2, "A.2", False)]  # a load of A
    # Slot 2 holds A now: it takes A's cases again (no load), not B's, which its busy owner holds.
    assert given(s.dispatch(groups, 6, busy={0, 1}, alive={0, 1, 2})) == [(2, "A.3", False)]
    assert s.held == {0: {"A"}, 1: {"B"}, 2: {"A"}}


def test_a_kernel_with_few_cases_left_stays_with_its_busy_owner():
    s = sched(2, steal_at=3)
    groups = s.group(["A.1", "A.2", "A.3", "B.1", "B.2"])
    s.dispatch(groups, 5, busy=set(), alive=set())
    s.finished("A.1")
    s.finished("B.1")
    # A has 2 cases left, B 1: fewer than steal_at, so an idle slot loads neither; each owner runs its own.
    assert given(s.dispatch(groups, 5, busy={0}, alive={0, 1})) == [(1, "B.2", False)]
    assert given(s.dispatch(groups, 5, busy={1}, alive={0, 1})) == [(0, "A.2", False)]
    # With 3 left, an idle slot whose own kernels are done loads A.
    s = sched(2, steal_at=3)
    groups = s.group(["A.1", "A.2", "A.3", "A.4", "B.1"])
    s.dispatch(groups, 5, busy=set(), alive=set())
    s.finished("A.1")
    s.finished("B.1")
    assert given(s.dispatch(groups, 5, busy={0}, alive={0, 1})) == [(1, "A.2", False)]


def test_a_kernel_whose_worker_went_down_is_taken_whatever_is_left():
    s = sched(2, steal_at=8)
    groups = s.group(["A.1", "A.2", "B.1"])
    s.dispatch(groups, 3, busy=set(), alive=set())
    s.finished("A.1")
    s.forget(0)
    assert given(s.dispatch(groups, 3, busy={0}, alive={1})) == [(1, "A.2", False)]


def test_a_partner_is_built_with_the_kernel_that_needs_it_and_never_twice_at_once():
    # F1 and F2 are forms kernels; D is the default-forms kernel both are checked against, also a kernel of the run.
    s = sched(3, steal_at=2, partners={"F1": "D", "F2": "D"})
    groups = s.group(["F1.1", "F2.1", "D.1", "F1.2", "E.1"])
    # Slot 0 takes F1 and builds D with it; F2 and D's own cases would need D, being compiled: slot 1 takes E.
    assert given(s.dispatch(groups, 5, busy=set(), alive=set())) == [(0, "F1.1", False), (1, "E.1", False)]
    assert s.owners == {"F1": 0, "D": 0, "E": 1} and s.held[0] == {"F1", "D"}
    s.finished("F1.1")
    s.finished("E.1")
    # D is on disk: slot 1 takes F2 (compiles F2, loads D); slot 0 goes on with F1, then D's case is its own.
    assert given(s.dispatch(groups, 5, busy=set(), alive={0, 1})) == [(0, "F1.2", False), (1, "F2.1", False)]
    assert given(s.dispatch(groups, 5, busy={1}, alive={0, 1})) == [(0, "D.1", False)]
    assert s.owners == {"F1": 0, "D": 0, "E": 1, "F2": 1}


@pytest.mark.parametrize("slots,steal_at", [(1, 1), (4, 1), (4, 2), (3, 8)])
def test_every_case_is_handed_out_once_with_partners(slots, steal_at):
    s = sched(slots, steal_at=steal_at, partners={"A": "B", "C": "B", "E": "X"})
    cases = [f"{k}.{i}" for k in "ABCDE" for i in range(4)]
    groups, out, busy = s.group(cases), [], set()
    while groups or busy:
        jobs = s.dispatch(groups, len(cases), busy=busy, alive=set(range(slots)))
        assert jobs or busy
        out += [j.case for j in jobs]
        busy = {j.slot for j in jobs[:1]}  # one worker stays busy a round longer
        for j in jobs[1:]:
            s.finished(j.case)
        if jobs:
            s.finished(jobs[0].case)
    assert sorted(out) == sorted(cases)


def test_a_run_adds_cases_when_the_waiting_ones_are_all_held_by_busy_slots():
    s = sched(3)
    groups = s.group(["A.1", "A.2", "A.3", "B.1", "B.2", "B.3", "C.1", "C.2", "C.3"])
    assert not s.starved(groups)  # nine cases no slot holds, three slots
    s.dispatch(groups, 9, busy=set(), alive=set())  # A, B, C owned by 0, 1, 2
    # Six cases wait, more than the slots, but each is its busy owner's: a slot that finishes its own
    # has nothing to take, so the run must add cases now.
    assert sum(map(len, groups.values())) == 6 and s.starved(groups)
    groups.update(s.group(["D.1", "E.1", "F.1"]))
    assert not s.starved(groups)
