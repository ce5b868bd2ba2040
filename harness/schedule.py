"""The pool's scheduling policy over plain data: which job goes to which idle worker, and when a
job is overdue. No processes and no pipes: harness.pool runs the workers and does what this decides.

A job is a case to run, or a kernel to build ahead (Pool.prepare). Workers sit in slots 0..n-1.
Cases that share a compiled kernel (the same `key(case)`; the pool's key is
harness.kernels.kernel_key) form a group, in the order the cases came. A case may need a second
kernel, its `partner` (the forms check's default-forms kernel, a twin's knob-free one: built in the
same job). Each kernel is compiled once per run, by the slot that first needs it (its owner), and
never by two slots at once; a slot keeps every kernel it compiled or loaded in memory, and its next
case is one whose kernels it holds. Another slot loads a kernel from the disk cache only at the end
of a run, when no kernel is left to compile, the owner is busy, and enough of the kernel's cases are
left (`steal_at`) for the load to pay.
"""
from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import Any

# Cases of a kernel left (not yet handed out) for an idle slot to load it from the disk cache while
# its owner is busy. A load costs about as much as a few cases (0.2-0.6 s alone, 1-3 s beside 15
# compiles, against 0.2 s for a case): fewer left are quicker run by the owner alone.
STEAL_AT = 8


@dataclass
class Timeouts:
    compile: float = 600.0  # worker start + compile
    run: float = 60.0       # inputs + kernel + judge


@dataclass
class Job:
    """A case handed to the worker in `slot`, and how long it may take."""
    slot: int
    case: Any
    build: bool = False             # its kernel only, built ahead: no run() waits for the result
    stage: str = "compile"
    deadline: float = float("inf")  # time.monotonic() after which the job has hung

    def start(self, now: float, timeouts: Timeouts) -> None:
        """Sent to the worker: the compile timeout covers the worker's start and the compile."""
        self.stage, self.deadline = "compile", now + timeouts.compile

    def reached(self, stage: str, now: float, timeouts: Timeouts) -> None:
        """The kernel is compiled and `stage` begins: the rest (inputs, run, judge) gets the run timeout."""
        self.stage, self.deadline = stage, now + timeouts.run

    def overdue(self, now: float) -> bool:
        return now > self.deadline

    def limit(self, timeouts: Timeouts) -> float:
        """The timeout the job's stage had (for the HANG message)."""
        return timeouts.compile if self.stage == "compile" else timeouts.run


def wait(now: float, jobs: Iterable[Job], until: float | None = None) -> float:
    """Seconds until the first job's deadline or `until`, whichever comes first (0 if past)."""
    return max(0.0, min([j.deadline for j in jobs] + ([until] if until is not None else [])) - now)


def no_partner(case) -> None:
    return None


class Scheduler:
    """Who compiled which kernel, what each slot holds, which kernels to build ahead, and the jobs
    for idle slots."""

    def __init__(self, slots: int, key: Callable[[Any], Hashable], partner: Callable[[Any], Hashable | None] = no_partner,
                 steal_at: int = STEAL_AT):
        self.n, self.key, self.partner, self.steal_at = slots, key, partner, steal_at
        self.owners: dict = {}      # kernel key -> the slot that compiled it, or is compiling it
        self.compiled: set = set()  # kernel keys some worker has finished with (now on disk)
        self.held: dict = {}        # slot -> the kernel keys its worker compiled or loaded (or is building)
        self.holders: dict = {}     # kernel key -> the slots that hold it
        self._needs: dict = {}      # kernel key -> what its cases need (needs)
        self.builds: list = []      # cases whose kernels are queued to build ahead, not yet handed out

    def needs(self, case, key=None) -> tuple:
        """The kernels a case runs: its own (`key`, if known), then its partner's if it has one. The same
        for every case of a kernel: computed once per kernel."""
        key = self.key(case) if key is None else key
        if key not in self._needs:
            other = self.partner(case)
            self._needs[key] = (key,) if other is None or other == key else (key, other)
        return self._needs[key]

    def group(self, cases) -> OrderedDict:
        """The cases by kernel: groups in the order of their first case, each in the cases' order."""
        groups = OrderedDict()
        for c in cases:
            groups.setdefault(self.key(c), []).append(c)
        return groups

    def starved(self, groups: OrderedDict) -> bool:
        """Whether a run should add cases now: fewer wait than there are slots, counting only the groups no slot
        holds. The rest wait for the slot that holds their kernel, so an idle slot cannot take them: counting them
        left slots idle while every waiting case was a busy slot's (a compile at a time, `per_kernel` cases each)."""
        return sum(len(cases) for k, cases in groups.items() if not self.holders.get(k)) < self.n

    def queue_builds(self, cases) -> None:
        """Queue the kernels of `cases` to build ahead, in order: each once, and none that a slot
        owns or that is compiled already."""
        queued = {self.key(c) for c in self.builds}
        for c in cases:
            key = self.key(c)
            if key not in queued and key not in self.owners and key not in self.compiled:
                queued.add(key)
                self.builds.append(c)

    def idle(self, wanted: int, busy, alive) -> list[int]:
        """The slots free for a job, in order: those up to `wanted` (every slot while builds are
        queued) and any whose worker is alive, less the `busy` ones."""
        limit = self.n if self.builds else min(self.n, wanted)
        return [s for s in sorted(set(range(limit)) | set(alive)) if s not in busy]

    def dispatch(self, groups: OrderedDict, wanted: int, busy, alive) -> list[Job]:
        """Jobs for the idle slots: the cases of `groups` (taken out of it) first, then queued
        builds. A build whose kernel meanwhile got an owner or was compiled is dropped."""
        idle = self.idle(wanted, busy, alive)
        jobs = []
        for slot in list(idle):
            key = self.pick(groups, slot, idle)
            if key is None:
                continue
            case = groups[key].pop(0)
            self._take(slot, case, key)
            jobs.append(Job(slot, case))
            if not groups[key]:
                del groups[key]
            idle.remove(slot)
        for slot in idle:
            while self.builds:
                case = self.builds.pop(0)
                if self.key(case) not in self.owners and self.key(case) not in self.compiled \
                        and not self._elsewhere(case, slot):
                    self._take(slot, case)
                    jobs.append(Job(slot, case, build=True))
                    break
        return jobs

    def _elsewhere(self, case, slot, key=None) -> bool:
        """Whether a kernel `case` needs is being compiled by another slot now (not yet on disk)."""
        return any(self.owners.get(k, slot) != slot and k not in self.compiled and k not in self.held.get(slot, ())
                   for k in self.needs(case, key))

    def _take(self, slot, case, key=None) -> None:
        """`slot`'s worker builds or loads what `case` needs that it does not hold: it owns each
        kernel nobody compiled yet."""
        held = self.held.setdefault(slot, set())
        for k in self.needs(case, key):
            if k not in held and k not in self.owners and k not in self.compiled:
                self.owners[k] = slot
            held.add(k)
            self.holders.setdefault(k, set()).add(slot)

    def pick(self, groups: OrderedDict, slot: int, idle: list[int]):
        """The group `slot` takes next, or None: the first one whose kernels it holds, else the first
        one whose kernel no slot holds (the slot compiles it, or loads it if a worker that went down
        compiled it; its partner too, unless that is being compiled elsewhere), else, while no kernel
        is being compiled (until then a run's end waits for a compile, not for cases), of the kernels
        compiled whose holders are all busy, the one with the most cases left if at least `steal_at`
        (a disk-cache load). Never one kernel compiled twice at once."""
        held = self.held.get(slot, set())
        for k, cases in groups.items():
            if set(self.needs(cases[0], k)) <= held:
                return k
        for k, cases in groups.items():
            if not self.holders.get(k) and not self._elsewhere(cases[0], slot, k):
                return k
        if any(k not in self.compiled for k in self.owners):
            return None
        ready = [k for k, cases in groups.items() if len(cases) >= self.steal_at and not self.holders.get(k, set()) & set(idle)
                 and all(n in self.compiled or n in held for n in self.needs(cases[0], k))]
        return max(ready, key=lambda k: len(groups[k]), default=None)

    def finished(self, case) -> None:
        """A worker answered for `case` (or died on it): its kernels are done compiling."""
        self.compiled.update(self.needs(case))

    def forget(self, slot: int) -> None:
        """The worker in `slot` went down: the kernels it compiled or loaded died with it."""
        self.owners = {k: s for k, s in self.owners.items() if s != slot}
        for k in self.held.pop(slot, ()):
            self.holders[k].discard(slot)
