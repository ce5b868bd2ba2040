"""The pool side of the process boundary: worker processes, their protocol, timeouts.

An illegal memory access poisons a CUDA context and a barrier bug hangs forever, so every case
runs in a worker process (harness.worker): the pool gives each stage a deadline, kills a worker
that misses it (HANG), replaces one that dies (CRASH), and goes on, up to a budget of
replacements if one is given (max_restarts). Which case goes to which worker is harness.schedule's
policy: cases that share a compiled kernel go to the worker that compiled it; one kernel is never
compiled twice at once.

Each worker event (a JSON line, harness.worker) has one handler (Pool.handlers); a line that is
no known event is the harness's error for that case, and the worker, out of step, is ended. Every
worker that goes down (hung, dead, out of step, or abandoned) goes through Pool._down.

A campaign runs its cases through `Workers`, the interface a Pool of its own and a server's pool
(harness.server.Remote) both declare, as pytest-xdist's schedulers share its Scheduling protocol.
"""
from __future__ import annotations

import json
import os
import selectors
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Protocol

from harness import kernels, oracle, schedule
from harness.environment import environment, in_background
from harness.result import Result, ScanFinding
from harness.schedule import Job, Scheduler, Timeouts
from harness.worker import SPAWNED_AT, control, request_line

WORKER = [sys.executable, "-m", "harness.worker"]  # the worker's command line, less its --target


def _xdist_processes() -> int:
    return int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))


def default_size() -> int:
    """Workers for one process: the cores but one, shared among pytest-xdist's processes if any."""
    cores = max(1, (os.cpu_count() or 2) - 1)
    return max(1, cores // _xdist_processes())


def threads_per_worker(workers: int) -> int:
    """CPU threads for each worker's torch (inputs, references): the cores shared out among every
    worker of this machine (pytest-xdist's processes each have a pool). Left alone, every worker
    takes all cores, and 15 workers on 16 cores run 240 threads for small tensors."""
    return max(1, (os.cpu_count() or 2) // max(workers * _xdist_processes(), 1))


def device_names(gpus, env) -> list[str]:
    """Each of `gpus` (indices into the devices this process may use) as CUDA_VISIBLE_DEVICES names
    it: the variable in `env` may already narrow them (a runner given GPUs 5 and 7)."""
    visible = [d.strip() for d in env.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
    return [visible[g] if visible else str(g) for g in gpus]


def default_max_restarts(workers: int) -> int:
    """A campaign's budget of worker replacements in a row (none of them followed by a case that ran its kernel on a
    worker that lived): pytest-xdist's default (--max-worker-restart), 4 per worker. A kernel that hangs or crashes
    costs a replacement per case of it (--per-kernel), so 4 per worker lets a campaign go on past a bad kernel on
    every worker; a worker that dies whatever its case (a broken install, a lost GPU, memory) would otherwise make
    every remaining case a CRASH, each after a worker start. Counted in a row, not in all: on a release where one
    generated program in ten crashes (0.1.12), a budget in all stopped a 15-worker campaign after 150 s, each crash
    a finding. A campaign resumes (results.jsonl), so one stopped by the budget loses nothing."""
    return 4 * workers


def control_key(case):
    """The kernel of the case's control (harness.worker.control: the default forms, a twin's knobs off), or None."""
    base = control(kernels.family(case.family), case)
    return None if base is None else kernels.kernel_key(base)


class PoolError(Exception):
    """The pool cannot go on; the message is one line."""


class RestartsExhausted(PoolError):
    """Workers died or hung more often than the pool may replace them (Pool's max_restarts)."""


class Workers(Protocol):
    """The processes that run a campaign's cases. run() raises RestartsExhausted when workers died or hung more
    often in a row than `max_restarts`, and PoolError (one line) when the workers can no longer be reached; either
    way the results yielded so far stand."""
    target: str                # "auto": run on the GPUs; else the arch a compile-only run compiles for
    n: int                     # workers
    started: int               # worker processes started so far, replacements included
    max_restarts: int | None   # replacements in a row allowed (None: always replaced)

    def start(self, cases: int) -> None:
        """Have the workers `cases` cases will use up, or starting, now."""

    def probe(self) -> Future:
        """The environment (harness.environment) the workers see."""

    def run(self, cases, deadline: float | None = None,
            more: Callable[[], list] | None = None) -> Iterator[Result]:
        """One Result per case, in completion order, until `deadline` (time.monotonic()); `more()`, asked when the
        cases run low (a server: when its batch ended), gives cases to add, until it gives none."""

    def close(self) -> None:
        """End the workers (or the connection to them)."""

    def __enter__(self) -> Workers: ...

    def __exit__(self, *exc) -> None: ...


class _Worker:
    def __init__(self, slot, target, device, log_dir, env, command=()):
        self.slot, self.target, self.device = slot, target, device
        self.log_path = Path(log_dir) / f"worker-{slot}.log"
        env = dict(env)
        if device is not None:
            env["CUDA_VISIBLE_DEVICES"] = device
        env[SPAWNED_AT] = repr(time.time())
        self.log = open(self.log_path, "ab")
        # In the run's process group and session, not its own: killing the run's group kills its workers.
        self.proc = subprocess.Popen([*(command or WORKER), "--target", target],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, env=env)
        os.set_blocking(self.proc.stdout.fileno(), False)
        self.buf = b""
        self.job: Job | None = None
        self.found = {}  # the compiled kernel's hazards and code digest, for a case that never answers
        self.down = False     # Pool._down ended it
        self.retired = False  # ended by the pool's choice (a run abandoned, close()), not lost

    def assign(self, job: Job, timeouts: Timeouts):
        """Send the job's case to run, or for a build its kernel only to build (Pool.prepare)."""
        self.job, self.found = job, {}
        job.start(time.monotonic(), timeouts)
        self.proc.stdin.write(request_line(job.case, job.build).encode())
        self.proc.stdin.flush()

    def signal(self):
        if self.proc.poll() is None:  # never signal a reaped pid: it may belong to someone else now
            self.proc.kill()

    def kill(self):
        self.signal()
        self.proc.wait()
        self.log.close()

    def log_tail(self, n=2000) -> str:
        self.log.flush()
        data = self.log_path.read_bytes()[-n:].decode(errors="replace")
        lines = [l for l in data.splitlines() if l.strip()]
        interesting = [l for l in lines if any(w in l for w in ("rror", "Fault", "fault", "Abort", "illegal"))]
        return (interesting or lines or [""])[-1][:500]


class Pool(Workers):
    """`workers` subprocesses (spread over `gpus`), fed cases grouped by compiled kernel.

    Workers outlive a call to run() (their compiled kernels stay warm); close() ends them.
    prepare() queues kernels to build ahead: workers that no case of a run() is waiting for
    build them, and a later case of the same kernel goes to the worker that built it.
    With `max_restarts`, workers that died or hung are replaced at most that many times in a row (a case that ran
    its kernel and left its worker alive starts the count again): the next replacement raises RestartsExhausted
    instead, and the pool runs nothing more (None: always replaced).
    Its workers register `families` (name -> "module:attr"; by default the families registered in this process,
    harness.kernels.register) and use this process's examples tree (harness.kernels.use_examples), guard their
    buffers unless not `bands` (harness.bands), and run under the command line `wrap` if one is given
    (compute-sanitizer's).
    """

    def __init__(self, workers: int, target: str, log_dir, timeouts: Timeouts | None = None, gpus=None, env=None,
                 max_restarts: int | None = None, families: dict | None = None, wrap=(), bands=True):
        self.n, self.target, self.timeouts = workers, target, timeouts or Timeouts()
        families = kernels.registered() if families is None else families
        tree = kernels.examples()
        self.command = [*wrap, *WORKER, *(f"--family={name}={where}" for name, where in families.items()),
                        *([f"--examples={tree}"] if tree else []), *([] if bands else ["--no-bands"])]
        self.log_dir = Path(log_dir)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.env = dict(env if env is not None else os.environ)
        self.devices = device_names(gpus, self.env) if gpus else [None]
        self.env.setdefault("OMP_NUM_THREADS", str(threads_per_worker(workers)))
        self.started = 0  # worker processes started, replacements included
        self.max_restarts = max_restarts
        self.restarts = 0       # workers that died or hung, replaced
        self.in_a_row = 0       # of those, since a case last ran its kernel on a worker that lived (the budget's)
        self.lost = None        # the last worker that died or hung: what it was doing
        self.stopped = None     # why the pool stopped (RestartsExhausted's message), once it has
        self.workers: dict[int, _Worker] = {}
        # On a GPU a forms or twin case's worker builds its control's kernel too (harness.worker.control).
        self.sched = Scheduler(workers, kernels.kernel_key, partner=control_key if target == "auto" else schedule.no_partner)
        self.busy: dict[int, _Worker] = {}  # slot -> worker with a job out (a run()'s case or a build)
        self.sel = selectors.DefaultSelector()
        # One handler per worker event (harness.worker's protocol): None while the job goes on, else its result.
        self.handlers = {"stage": self._on_stage, "refused": self._on_refused, "result": self._on_result}

    @property
    def builds(self) -> list:
        """Cases whose kernels prepare() queued, not yet handed to a worker."""
        return self.sched.builds

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def finish(self, timeout: float) -> None:
        """Let the idle workers end on their own (their input closed) within `timeout` seconds: a worker run
        under a tool (`wrap`: compute-sanitizer) then has the tool write its report. close() ends the rest."""
        for w in self.workers.values():
            if w.job is None and w.proc.poll() is None:
                w.proc.stdin.close()
        deadline = time.monotonic() + timeout
        for w in self.workers.values():
            try:
                w.proc.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass

    def close(self):
        for w in self.workers.values():  # all at once: a worker with a CUDA context takes a while to exit
            w.signal()
        for slot in list(self.workers):
            self._down(slot, lost=False)
        self.workers.clear()
        self.sched.builds.clear()

    # ------------------------------------------------------------------ workers up and down
    def _fresh(self, slot) -> _Worker:
        """The worker in `slot`, started or replaced if it is missing or dead."""
        w = self.workers.get(slot)
        if w is None or w.proc.poll() is not None:
            if w is not None:
                if not w.down:  # it died while idle
                    self._down(slot)
                if not w.retired:
                    self._budget([slot])
                    self.restarts += 1
                    self.in_a_row += 1
            self.started += 1
            w = self.workers[slot] = _Worker(slot, self.target, self.devices[slot % len(self.devices)], self.log_dir, self.env,
                                             self.command)
        return w

    def _replacing(self, slot) -> bool:
        """Whether a job for `slot` needs its worker, which died or hung, replaced."""
        w = self.workers.get(slot)
        return w is not None and w.proc.poll() is not None and not w.retired

    def _budget(self, slots) -> None:
        """RestartsExhausted if replacing the lost workers of `slots` passes max_restarts."""
        if self.stopped is None:
            wanted = sum(map(self._replacing, slots))
            if not wanted or self.max_restarts is None or self.in_a_row + wanted <= self.max_restarts:
                return
            self.stopped = (f"a worker died or hung ({self.lost}) and {self.in_a_row} were replaced in a row "
                            f"(no case ran a kernel between), the most allowed")
        raise RestartsExhausted(self.stopped)

    def _down(self, slot, result: Result | None = None, lost: bool = True) -> Result | None:
        """The one place a worker goes down: `slot`'s worker is killed (or reaped) and its kernels
        die with it. `lost`: it hung, died or went out of step (its replacement counts against
        max_restarts), else the pool ended it (a run abandoned, close()). Returns `result`, the
        verdict of the case it had, if any, as run() yields it."""
        w = self._drop(slot) if slot in self.busy else self.workers[slot]
        w.kill()
        w.down, w.retired = True, not lost
        self.sched.forget(slot)
        if lost:
            self.lost = (f"{result.verdict} at {result.stage} of case {result.case_id}" if result
                         else f"worker {slot} exited with status {w.proc.returncode} while idle")
        return None if result is None else self._tagged(result, w)

    def probe(self) -> Future:
        """The environment its workers see (harness.environment), probed in a child while they start."""
        return in_background(environment)

    def renew(self, timeouts: Timeouts, max_restarts: int | None) -> None:
        """A new run on a pool that outlives runs (harness.server): its own timeouts and budget of
        replacements; the workers, and the kernels they hold, stay."""
        self.timeouts, self.max_restarts = timeouts, max_restarts
        self.restarts, self.in_a_row, self.stopped = 0, 0, None

    def start(self, cases: int) -> None:
        """Start the workers `cases` cases will use now, so that their imports and warm-up overlap
        with what the caller does next (run() starts missing ones itself)."""
        self._budget([])
        for slot in range(min(self.n, cases)):
            if slot not in self.busy:
                self._fresh(slot)

    # ------------------------------------------------------------------ jobs
    def prepare(self, cases) -> None:
        """Queue the kernels of `cases` (one each, in order) to be built ahead, and start building."""
        self._budget([])
        self.sched.queue_builds(cases)
        self._dispatch({}, 0)

    def run_one(self, case) -> Result:
        return next(iter(self.run([case])))

    def run(self, cases, deadline=None, more=None):
        """Yield one Result per case, in completion order, until `deadline` (time.monotonic()):
        then the cases not yet answered are not run, and those in flight are abandoned (a cold
        compile can outlast a time box by minutes). RestartsExhausted ends it the same way when the
        next job would need a replacement past max_restarts (every result so far was yielded).
        `more()`, asked whenever an idle worker could find too few cases to take (Scheduler.starved), gives cases
        to add (a campaign's next round: no worker waits for the last case of the one before)."""
        self._budget([])
        groups = self.sched.group(cases)
        wanted = len(cases)
        mine = set()  # slots running a case of this run
        try:
            while deadline is None or time.monotonic() < deadline:
                if more is not None and self.sched.starved(groups):
                    extra = more()
                    for key, group in self.sched.group(extra).items():
                        groups.setdefault(key, []).extend(group)
                    wanted += len(extra)
                mine |= self._dispatch(groups, wanted)
                if not mine and not groups:
                    return
                for slot, r in self._events(deadline):
                    if slot in mine:
                        mine.discard(slot)
                        yield r
        finally:
            # Abandoned mid-case: their answers would be stale. All signalled before any is waited for, as in
            # close(): a worker with a CUDA context takes a while to exit, and a time box abandons one per GPU slot.
            for slot in mine & set(self.busy):
                self.busy[slot].signal()
            for slot in mine:
                self._down(slot, lost=False)

    def _dispatch(self, groups, wanted) -> set[int]:
        """Hand out the scheduler's jobs to idle workers (harness.schedule), replacing lost ones
        within the budget (checked for all the jobs before any is sent). Returns the slots given a
        case of `groups`."""
        alive = {s for s, w in self.workers.items() if w.proc.poll() is None}
        jobs = self.sched.dispatch(groups, wanted, set(self.busy), alive)
        self._budget([j.slot for j in jobs])
        for job in jobs:
            w = self._fresh(job.slot)
            w.assign(job, self.timeouts)
            self.sel.register(w.proc.stdout, selectors.EVENT_READ, job.slot)
            self.busy[job.slot] = w
        return {j.slot for j in jobs if not j.build}

    def _drop(self, slot) -> _Worker:
        """`slot`'s job is over: its worker is idle (or dead)."""
        w = self.busy.pop(slot)
        self.sel.unregister(w.proc.stdout)
        w.job = None
        return w

    def _events(self, until=None):
        """Wait for the next answers or deadlines of the jobs out, or for `until`: (slot, result) for
        each job that ended. A build's result only marks its kernel built; a failure shows in the
        cases that use it."""
        wait = schedule.wait(time.monotonic(), [w.job for w in self.busy.values()], until)
        for key_obj, _ in self.sel.select(wait):
            slot = key_obj.data
            w = self.busy[slot]
            ended = self._read(w)
            if ended is None:
                continue
            result, out_of_step = ended
            self.sched.finished(w.job.case)
            fatal, result = result.fatal, result.without("fatal")
            if fatal or out_of_step or w.proc.poll() is not None:  # a poisoned CUDA context, or dead
                yield slot, self._down(slot, result)
            else:
                self._drop(slot)
                if self.target != "auto" or result.stage not in ("start", "compile"):  # it ran a kernel (on a GPU)
                    self.in_a_row = 0                                                       # and lived: all is well
                yield slot, self._tagged(result, w)
        now = time.monotonic()
        for slot, w in list(self.busy.items()):
            if w.job.overdue(now):
                yield slot, self._down(slot, oracle.hang(w.job.case, w.job.limit(self.timeouts), w.job.stage, **w.found))

    def _tagged(self, result: Result, w) -> Result:
        """The result, naming the GPU it ran on when the pool spreads over several."""
        return result.replace(gpu=w.device) if len(self.devices) > 1 else result

    # ------------------------------------------------------------------ the worker's protocol
    def _read(self, w):
        """Consume worker output: (result, out_of_step) when the job ended, else None. A worker that
        died, or sent a line that is no known event, ends its job (and, out of step, must go down)."""
        try:
            chunk = os.read(w.proc.stdout.fileno(), 1 << 16)
        except BlockingIOError:
            return None
        if not chunk:  # EOF: the worker died in the middle of the case
            w.proc.wait()
            code = w.proc.returncode
            msg = w.log_tail() or f"worker exited with status {code}"
            return Result.of(w.job.case, "CRASH", w.job.stage, f"worker died (status {code}): {msg}", **w.found), False
        w.buf += chunk
        result = None
        while b"\n" in w.buf:
            line, w.buf = w.buf.split(b"\n", 1)
            try:
                msg = json.loads(line)
                name = msg["event"] if isinstance(msg, dict) else None
            except (ValueError, KeyError):
                name = None
            handler = self.handlers.get(name) if isinstance(name, str) else None
            try:
                if handler is not None:
                    result = handler(w, msg) or result
                    continue
                what = f"an unknown event {name!r}" if isinstance(name, str) else "a line that is no event"
            except (KeyError, TypeError, ValueError) as e:  # a known event without the fields its handler reads
                what = f"a malformed {name!r} event ({type(e).__name__}: {e})"
            text = line[:200].decode(errors="replace")
            return Result.of(w.job.case, "HARNESS_ERROR", "protocol", (
                f"worker sent {what} (known events: {', '.join(self.handlers)}): {text}; pool and worker are out "
                "of step, so the worker was ended")), True
        return None if result is None else (result, False)

    def _on_stage(self, w, msg) -> None:
        """The kernel is compiled (and scanned: what the scan found is kept for a case that never answers)."""
        w.job.reached(msg["stage"], time.monotonic(), self.timeouts)
        w.found = {k: msg[k] for k in ("hazards", "code") if k in msg}
        if "hazards" in w.found:
            w.found["hazards"] = tuple(ScanFinding.from_json(f) for f in w.found["hazards"])

    def _on_refused(self, w, msg) -> Result:
        """The worker could not read the case (parent and worker disagree about the Case); it lives on."""
        return Result.of(w.job.case, "HARNESS_ERROR", "protocol", msg["message"])

    def _on_result(self, w, msg) -> Result:
        msg.pop("event")
        return Result.from_dict(msg)
