"""The pool side of the process boundary: worker processes, timeouts, scheduling.

An illegal memory access poisons a CUDA context and a barrier bug hangs forever, so every case
runs in a worker process (harness.worker): the pool gives each stage a deadline, kills a worker
that misses it (HANG), replaces one that dies (CRASH), and goes on. Cases that share a compiled
kernel go to the worker that compiled it; one kernel is never compiled twice at once.
"""
from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
import time
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

from harness import case as case_mod
from harness import kernels, oracle
from harness.worker import BUILD, SPAWNED_AT


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


@dataclass
class Timeouts:
    compile: float = 600.0  # worker start + compile
    run: float = 60.0       # inputs + kernel + judge


class _Worker:
    def __init__(self, slot, target, device, log_dir, env):
        self.slot, self.target, self.device = slot, target, device
        self.log_path = Path(log_dir) / f"worker-{slot}.log"
        env = dict(env)
        if device is not None:
            env["CUDA_VISIBLE_DEVICES"] = device
        env[SPAWNED_AT] = repr(time.time())
        self.log = open(self.log_path, "ab")
        self.proc = subprocess.Popen([sys.executable, "-m", "harness.worker", "--target", target],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log,
                                     env=env, start_new_session=True)
        os.set_blocking(self.proc.stdout.fileno(), False)
        self.buf = b""
        self.case = None
        self.stage = None
        self.found = {}  # the compiled kernel's hazards and code digest, for a case that never answers
        self.deadline = None

    def assign(self, case, timeouts, build=False):
        """Send `case` to run, or with `build` its kernel only to build (Pool.prepare)."""
        self.case, self.stage, self.found = case, "compile", {}
        self.deadline = time.monotonic() + timeouts.compile
        self.proc.stdin.write(((BUILD if build else "") + case_mod.to_json(case) + "\n").encode())
        self.proc.stdin.flush()

    def signal(self):
        if self.proc.poll() is None:  # never signal a reaped pid: it may belong to someone else now
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

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


class Pool:
    """`workers` subprocesses (spread over `gpus`), fed cases grouped by compiled kernel.

    Workers outlive a call to run() (their compiled kernels stay warm); close() ends them.
    prepare() queues kernels to build ahead: workers that no case of a run() is waiting for
    build them, and a later case of the same kernel goes to the worker that built it.
    """

    def __init__(self, workers: int, target: str, log_dir, timeouts: Timeouts | None = None, gpus=None, env=None):
        self.n, self.target, self.timeouts = workers, target, timeouts or Timeouts()
        self.log_dir = Path(log_dir)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.env = dict(env if env is not None else os.environ)
        self.devices = device_names(gpus, self.env) if gpus else [None]
        self.env.setdefault("OMP_NUM_THREADS", str(threads_per_worker(workers)))
        self.started = 0  # worker processes started, replacements included
        self.workers: dict[int, _Worker] = {}
        self.owners = {}  # static key -> slot that compiled it
        self.compiled = set()  # static keys some worker has finished compiling (now on disk)
        self.builds: list = []  # cases whose kernels prepare() queued, not yet handed to a worker
        self.busy: dict[int, _Worker] = {}  # slot -> worker with a job out (a run()'s case or a build)
        self.sel = selectors.DefaultSelector()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        for w in self.workers.values():  # all at once: a worker with a CUDA context takes a while to exit
            w.signal()
        for w in self.workers.values():
            w.kill()
        self.workers.clear()
        for w in self.busy.values():
            self.sel.unregister(w.proc.stdout)
        self.busy.clear()
        self.builds.clear()

    def _fresh(self, slot) -> _Worker:
        """The worker in `slot`, started or replaced if it is missing or dead."""
        w = self.workers.get(slot)
        if w is None or w.proc.poll() is not None:
            if w is not None:
                w.kill()
            self.started += 1
            w = self.workers[slot] = _Worker(slot, self.target, self.devices[slot % len(self.devices)], self.log_dir, self.env)
        return w

    def _end(self, slot, w):
        """Kill `slot`'s worker (or reap a dead one): the kernels it compiled die with it."""
        w.kill()
        self.owners = {k: s for k, s in self.owners.items() if s != slot}

    def start(self, cases: int) -> None:
        """Start the workers `cases` cases will use now, so that their imports and warm-up overlap
        with what the caller does next (run() starts missing ones itself)."""
        for slot in range(min(self.n, cases)):
            self._fresh(slot)

    def prepare(self, cases) -> None:
        """Queue the kernels of `cases` (one each, in order) to be built ahead, and start building."""
        queued = {kernels.kernel_key(c) for c in self.builds}
        for c in cases:
            key = kernels.kernel_key(c)
            if key not in queued and key not in self.owners and key not in self.compiled:
                queued.add(key)
                self.builds.append(c)
        self._dispatch({}, 0)

    def run_one(self, case) -> dict:
        return next(iter(self.run([case])))

    def run(self, cases, deadline=None):
        """Yield one result dict per case, in completion order, until `deadline` (time.monotonic()):
        then the cases not yet answered are not run, and those in flight are abandoned (a cold
        compile can outlast a time box by minutes)."""
        groups = OrderedDict()
        for c in cases:
            groups.setdefault(kernels.kernel_key(c), []).append(c)
        mine = set()  # slots running a case of this run
        try:
            while deadline is None or time.monotonic() < deadline:
                mine |= self._dispatch(groups, len(cases))
                if not mine and not groups:
                    return
                for slot, r in self._events(deadline):
                    if slot in mine:
                        mine.discard(slot)
                        yield r
        finally:
            for slot in mine:  # abandoned mid-case: their answers would be stale
                self._end(slot, self._drop(slot))

    def _dispatch(self, groups, wanted) -> set[int]:
        """Hand out jobs to idle workers: the cases in `groups` first, then queued builds. Returns
        the slots given a case. Workers are started up to `wanted` (or all, with builds queued)."""
        limit = self.n if self.builds else min(self.n, wanted)
        slots = set(range(limit)) | {s for s, w in self.workers.items() if w.proc.poll() is None}
        idle = [s for s in sorted(slots) if s not in self.busy]
        given = set()
        for slot in list(idle):
            key = self._pick(groups, slot, idle)
            if key is None:
                continue
            self._assign(slot, groups[key].pop(0))
            if not groups[key]:
                del groups[key]
            idle.remove(slot)
            given.add(slot)
        for slot in idle:
            while self.builds:
                case = self.builds.pop(0)
                key = kernels.kernel_key(case)
                if key not in self.owners and key not in self.compiled:
                    self.owners[key] = slot
                    self._assign(slot, case, build=True)
                    break
        return given

    def _assign(self, slot, case, build=False):
        w = self._fresh(slot)
        w.assign(case, self.timeouts, build)
        self.sel.register(w.proc.stdout, selectors.EVENT_READ, slot)
        self.busy[slot] = w

    def _drop(self, slot) -> _Worker:
        """`slot`'s job is over: its worker is idle (or dead)."""
        w = self.busy.pop(slot)
        self.sel.unregister(w.proc.stdout)
        w.case = None
        return w

    def _events(self, until=None):
        """Wait for the next answers or deadlines of the jobs out, or for `until`: (slot, result) for
        each job that ended. A build's result only marks its kernel built; a failure shows in the
        cases that use it."""
        first = min([w.deadline for w in self.busy.values()] + ([until] if until is not None else []))
        wait = max(0.0, first - time.monotonic())
        for key_obj, _ in self.sel.select(wait):
            slot = key_obj.data
            w = self.busy[slot]
            done = self._read(w)
            if done is None:
                continue
            self.compiled.add(kernels.kernel_key(w.case))
            self._drop(slot)
            if done.pop("fatal", False) or w.proc.poll() is not None:  # a poisoned CUDA context, or dead
                self._end(slot, w)
            yield slot, self._tagged(done, w)
        now = time.monotonic()
        for slot, w in list(self.busy.items()):
            if now > w.deadline:
                limit = self.timeouts.compile if w.stage == "compile" else self.timeouts.run
                message = oracle.hang_message(limit, w.stage, w.found.get("hazards", ()))
                r = {**oracle.result(w.case, "HANG", w.stage, message), **w.found}
                self._end(slot, self._drop(slot))
                yield slot, self._tagged(r, w)

    def _tagged(self, result, w) -> dict:
        """The result, naming the GPU it ran on when the pool spreads over several."""
        if len(self.devices) > 1:
            result["gpu"] = w.device
        return result

    def _pick(self, groups, slot, idle):
        """Prefer a group this worker compiled, then an unowned one, then the largest group whose
        kernel is already compiled (a disk-cache load) and whose owner is busy; never compile one
        kernel twice at once."""
        mine = [k for k in groups if self.owners.get(k) == slot]
        if mine:
            return mine[0]
        free = [k for k in groups if k not in self.owners]
        if free:
            self.owners[free[0]] = slot
            return free[0]
        ready = [k for k in groups if k in self.compiled and self.owners.get(k) not in idle]
        return max(ready, key=lambda k: len(groups[k]), default=None)

    def _read(self, w):
        """Consume worker output; return its result when the case ended, else None."""
        try:
            chunk = os.read(w.proc.stdout.fileno(), 1 << 16)
        except BlockingIOError:
            return None
        if not chunk:  # EOF: the worker died in the middle of the case
            w.proc.wait()
            code = w.proc.returncode
            msg = w.log_tail() or f"worker exited with status {code}"
            r = {**oracle.result(w.case, "CRASH", w.stage, f"worker died (status {code}): {msg}"), **w.found}
            w.kill()
            return r
        w.buf += chunk
        result = None
        while b"\n" in w.buf:
            line, w.buf = w.buf.split(b"\n", 1)
            msg = json.loads(line)
            if msg["event"] == "stage":
                w.stage = msg["stage"]
                w.found = {k: msg[k] for k in ("hazards", "code") if k in msg}
                w.deadline = time.monotonic() + self.timeouts.run
            elif msg["event"] == "refused":
                result = oracle.result(w.case, "HARNESS_ERROR", "protocol", msg["message"])
            elif msg["event"] == "result":
                msg.pop("event")
                result = msg
        return result
