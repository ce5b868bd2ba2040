"""The pool's scheduling policy over plain data: which job goes to which idle worker, and when a
job is overdue. No processes and no pipes: harness.pool runs the workers and does what this decides.

A job is a case to run, or a kernel to build ahead (Pool.prepare). Workers sit in slots 0..n-1.
Cases that share a compiled kernel (the same `key(case)`; the pool's key is
harness.kernels.kernel_key) form a group, in the order the cases came, and go to the slot that
compiled their kernel; one kernel is never compiled by two slots at once; a kernel already compiled
(on disk) is loaded by another idle slot while its owner is busy.
"""
from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import Any


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


class Scheduler:
    """Who compiled which kernel, which kernels to build ahead, and the jobs for idle slots."""

    def __init__(self, slots: int, key: Callable[[Any], Hashable]):
        self.n, self.key = slots, key
        self.owners: dict = {}      # kernel key -> the slot that compiled it, or is compiling it
        self.compiled: set = set()  # kernel keys some worker has finished with (now on disk)
        self.builds: list = []      # cases whose kernels are queued to build ahead, not yet handed out

    def group(self, cases) -> OrderedDict:
        """The cases by kernel: groups in the order of their first case, each in the cases' order."""
        groups = OrderedDict()
        for c in cases:
            groups.setdefault(self.key(c), []).append(c)
        return groups

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
            jobs.append(Job(slot, groups[key].pop(0)))
            if not groups[key]:
                del groups[key]
            idle.remove(slot)
        for slot in idle:
            while self.builds:
                case = self.builds.pop(0)
                key = self.key(case)
                if key not in self.owners and key not in self.compiled:
                    self.owners[key] = slot
                    jobs.append(Job(slot, case, build=True))
                    break
        return jobs

    def pick(self, groups: OrderedDict, slot: int, idle: list[int]):
        """The group `slot` takes next, or None: the first one whose kernel it compiled, else the
        first one nobody owns (it becomes the owner), else the largest one whose kernel is compiled
        and whose owner is not idle (a disk-cache load). Never one kernel compiled twice at once."""
        mine = [k for k in groups if self.owners.get(k) == slot]
        if mine:
            return mine[0]
        free = [k for k in groups if k not in self.owners]
        if free:
            self.owners[free[0]] = slot
            return free[0]
        ready = [k for k in groups if k in self.compiled and self.owners.get(k) not in idle]
        return max(ready, key=lambda k: len(groups[k]), default=None)

    def finished(self, case) -> None:
        """A worker answered for `case` (or died on it): its kernel is done compiling."""
        self.compiled.add(self.key(case))

    def forget(self, slot: int) -> None:
        """The worker in `slot` went down: the kernels it compiled died with it."""
        self.owners = {k: s for k, s in self.owners.items() if s != slot}
