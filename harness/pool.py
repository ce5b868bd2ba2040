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
from harness import oracle
from harness.worker import SPAWNED_AT


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


@dataclass
class Timeouts:
    compile: float = 600.0  # worker start + compile
    run: float = 60.0       # inputs + kernel + judge


class _Worker:
    def __init__(self, slot, target, gpu, log_dir, env):
        self.slot, self.target, self.gpu = slot, target, gpu
        self.log_path = Path(log_dir) / f"worker-{slot}.log"
        env = dict(env)
        if gpu is not None:
            env["CUDA_VISIBLE_DEVICES"] = str(gpu)
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
        self.key = None

    def assign(self, case, timeouts):
        self.case, self.stage, self.found = case, "compile", {}
        self.deadline = time.monotonic() + timeouts.compile
        self.proc.stdin.write((case_mod.to_json(case) + "\n").encode())
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
    """

    def __init__(self, workers: int, target: str, log_dir, timeouts: Timeouts | None = None, gpus=None, env=None):
        self.n, self.target, self.timeouts = workers, target, timeouts or Timeouts()
        self.log_dir = Path(log_dir)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.gpus = gpus or [None]
        self.env = dict(env if env is not None else os.environ)
        self.env.setdefault("OMP_NUM_THREADS", str(threads_per_worker(workers)))
        self.started = 0  # worker processes started, replacements included
        self.workers: dict[int, _Worker] = {}
        self.owners = {}  # static key -> slot that compiled it
        self.compiled = set()  # static keys some worker has finished compiling (now on disk)

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

    def _fresh(self, slot) -> _Worker:
        """The worker in `slot`, started or replaced if it is missing or dead."""
        w = self.workers.get(slot)
        if w is None or w.proc.poll() is not None:
            if w is not None:
                w.kill()
            self.started += 1
            w = self.workers[slot] = _Worker(slot, self.target, self.gpus[slot % len(self.gpus)], self.log_dir, self.env)
            self.owners = {k: s for k, s in self.owners.items() if s != slot}  # its kernels died with it
        return w

    def start(self, cases: int) -> None:
        """Start the workers `cases` cases will use now, so that their imports and warm-up overlap
        with what the caller does next (run() starts missing ones itself)."""
        for slot in range(min(self.n, cases)):
            self._fresh(slot)

    def run_one(self, case) -> dict:
        return next(iter(self.run([case])))

    def run(self, cases, deadline=None):
        """Yield one result dict per case, in completion order. Stops dispatching at `deadline`."""
        groups = OrderedDict()
        for c in cases:
            groups.setdefault(case_mod.static_key(c), []).append(c)
        sel = selectors.DefaultSelector()
        idle = list(range(min(self.n, len(cases))))
        busy = {}
        try:
            while True:
                for slot in list(idle):
                    if deadline is not None and time.monotonic() > deadline:
                        break
                    key = self._pick(groups, slot)
                    if key is None:
                        continue
                    w = self._fresh(slot)
                    w.assign(groups[key].pop(0), self.timeouts)
                    if not groups[key]:
                        del groups[key]
                    sel.register(w.proc.stdout, selectors.EVENT_READ, slot)
                    idle.remove(slot)
                    busy[slot] = w
                if not busy:
                    return
                wait = max(0.0, min(w.deadline for w in busy.values()) - time.monotonic())
                for key_obj, _ in sel.select(wait):
                    slot = key_obj.data
                    w = busy[slot]
                    done = self._read(w)
                    if done is None:
                        continue
                    sel.unregister(w.proc.stdout)
                    self.compiled.add(case_mod.static_key(w.case))
                    w.case = None
                    del busy[slot]
                    idle.append(slot)
                    if done.pop("fatal", False):  # poisoned CUDA context: never reuse this worker
                        w.kill()
                    yield done
                now = time.monotonic()
                for slot, w in list(busy.items()):
                    if now > w.deadline:
                        sel.unregister(w.proc.stdout)
                        limit = self.timeouts.compile if w.stage == "compile" else self.timeouts.run
                        message = oracle.hang_message(limit, w.stage, w.found.get("hazards", ()))
                        r = {**oracle.result(w.case, "HANG", w.stage, message), **w.found}
                        w.kill()
                        w.case = None
                        del busy[slot]
                        idle.append(slot)
                        yield r
        finally:
            for w in busy.values():  # abandoned mid-case: their answers would be stale
                w.kill()
            sel.close()

    def _pick(self, groups, slot):
        """Prefer a group this worker compiled, then an unowned one, then the largest group whose
        kernel is already compiled (a disk-cache load); never compile one kernel twice at once."""
        mine = [k for k in groups if self.owners.get(k) == slot]
        if mine:
            return mine[0]
        free = [k for k in groups if k not in self.owners]
        if free:
            self.owners[free[0]] = slot
            return free[0]
        ready = [k for k in groups if k in self.compiled]
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
