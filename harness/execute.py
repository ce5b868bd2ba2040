"""Run cases in worker subprocesses, with timeouts, and append each verdict as it ends.

An illegal memory access poisons a CUDA context and a barrier bug hangs forever, so every
case runs in a worker process: the parent gives each stage a deadline, kills a worker that
misses it (HANG), replaces one that dies (CRASH), and goes on. Workers keep compiled kernels
in memory (keyed by the family's static key) and TileLang keeps them on disk
(TILELANG_CACHE_DIR), so a second run of the same configurations compiles nothing.

Worker protocol (JSON lines): parent -> worker: a case; worker -> parent:
{"event": "stage", "stage": "run"} when compiling is done, then {"event": "result", ...}.
"""
from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
import time
import traceback
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

from harness import case as case_mod
from harness import kernels, oracle


# ----------------------------------------------------------------------------- one case
def result_of(case, verdict, stage, message="", **extra) -> dict:
    r = {"case_id": case.id, "case": case_mod.to_dict(case), "verdict": verdict, "stage": stage,
         "message": message, "tensor": "", "region": ""}
    r.update(extra)
    return r


def run_case(case, target, cache: dict, on_stage=lambda stage: None) -> dict:
    """Compile (cached), run, compare to the references, and return one result dict."""
    fam = kernels.family(case.family)
    reason = fam.unsupported(case)
    if reason:
        return result_of(case, "UNSUPPORTED", "plan", reason)
    key = fam.static_key(case)
    seconds = {}
    if key not in cache:
        t0 = time.perf_counter()
        try:
            kernel = fam.build(case, target)
        except Exception as e:  # the compiler rejected an ordinary program: that is a finding
            return result_of(case, "COMPILE_ERROR", "compile", _last_line(e),
                             seconds={"compile": time.perf_counter() - t0}, traceback=_tb(e))
        seconds["compile"] = time.perf_counter() - t0
        cache[key] = (kernel, hazards(fam, case, kernel))
    kernel, found = cache[key]
    if target != "auto":
        return result_of(case, "COMPILED", "compile", seconds=seconds, hazards=found)
    on_stage("run")
    return {**_run_and_judge(case, fam, kernel, seconds), "hazards": found}


def hazards(fam, case, kernel) -> list[str]:
    """What the compile-only checks see in the generated code (harness.codegen)."""
    from harness import codegen, compat
    found = codegen.check(compat.kernel_source(kernel), fam.contiguous(case))
    return [f"{f.check}: {f.message}" for f in found]


def _run_and_judge(case, fam, kernel, seconds) -> dict:
    stage = "inputs"
    try:
        inputs = fam.make_inputs(case, "cuda")
        stage = "run"
        t0 = time.perf_counter()
        outputs = fam.run(kernel, case, inputs)  # returns after the device finished
        seconds["run"] = time.perf_counter() - t0
        stage = "judge"
        checks = judge(case, fam, inputs, outputs)
    except Exception as e:
        # A device fault is the kernel's, wherever it surfaces (a sticky fault can escape the
        # launch's synchronize and hit the next torch call); the context is dead either way.
        if _is_cuda_fault(e):
            return result_of(case, "CRASH", stage, _first_line(e), seconds=seconds, fatal=True, traceback=_tb(e))
        return result_of(case, "HARNESS_ERROR", stage, _last_line(e), seconds=seconds, traceback=_tb(e))
    bad = oracle.first_failure(checks)
    extra = {"seconds": seconds, "checks": [oracle.as_dict(c) for c in checks]}
    if bad is None:
        return result_of(case, "PASS", "judge", **extra)
    msg = f"{bad.tensor}: max error {bad.error:.4g} > tolerance {bad.tolerance:.4g} at {bad.where['index']}"
    return result_of(case, bad.verdict, "judge", msg, tensor=bad.tensor, region=bad.region, **extra)


def judge(case, fam, inputs, outputs) -> list:
    """Every tensor the family produces, against the float64 reference and the same-dtype baseline."""
    import torch
    from harness import reference

    dtype = reference.DTYPES[case.dtype]
    ref = fam.reference(case, inputs, torch.float64)
    base = fam.reference(case, inputs, dtype)
    got = fam.canonical(case, outputs)
    left, right = case.bounds
    seen = reference.visible(case.seqlen_q, case.seqlen_k, left, right, device=inputs["q"].device)
    locate = oracle.region_locator(case, seen.any(dim=1), seen.any(dim=0))
    floors = fam.floors(case, inputs)
    return [oracle.check(name, got[name], ref[name], base[name], dtype, k, locate, floors.get(name, 0.0))
            for name, k in fam.tensors(case)]


def _is_cuda_fault(e) -> bool:
    text = f"{type(e).__name__} {e}"
    return any(s in text for s in ("CUDA error", "AcceleratorError", "illegal", "unspecified launch failure",
                                   "misaligned address", "CUDA_ERROR"))


def _first_line(e) -> str:
    """A CUDA error's cause comes first; torch appends advice after it."""
    lines = [l for l in str(e).strip().splitlines() if l.strip()]
    return f"{type(e).__name__}: {lines[0] if lines else ''}"[:500]


def _last_line(e) -> str:
    lines = [l for l in str(e).strip().splitlines() if l.strip()]
    return f"{type(e).__name__}: {lines[-1] if lines else ''}"[:500]


def _tb(e) -> str:
    return "".join(traceback.format_exception(type(e), e, e.__traceback__))[-4000:]


# ----------------------------------------------------------------------------- the worker process
def worker_main(target: str) -> None:
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # TileLang and nvcc print freely; only the protocol goes to the parent.

    def send(msg):
        proto.write(json.dumps(msg) + "\n")

    cache: dict = {}
    for line in sys.stdin:
        case = case_mod.from_json(line)
        result = run_case(case, target, cache, on_stage=lambda s: send({"event": "stage", "stage": s}))
        send({"event": "result", **result})
        if result.get("fatal"):
            return  # the CUDA context is poisoned: the parent starts a fresh worker


# ----------------------------------------------------------------------------- the parent's pool
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
        self.log = open(self.log_path, "ab")
        self.proc = subprocess.Popen([sys.executable, "-m", "harness.worker", "--target", target],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log,
                                     env=env, start_new_session=True)
        os.set_blocking(self.proc.stdout.fileno(), False)
        self.buf = b""
        self.case = None
        self.stage = None
        self.deadline = None
        self.key = None

    def assign(self, case, timeouts):
        self.case, self.stage = case, "compile"
        self.deadline = time.monotonic() + timeouts.compile
        self.proc.stdin.write((case_mod.to_json(case) + "\n").encode())
        self.proc.stdin.flush()

    def kill(self):
        if self.proc.poll() is None:  # never signal a reaped pid: it may belong to someone else now
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
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
        self.env = env if env is not None else os.environ
        self.started = 0  # worker processes started, replacements included
        self.workers: dict[int, _Worker] = {}
        self.owners = {}  # static key -> slot that compiled it
        self.compiled = set()  # static keys some worker has finished compiling (now on disk)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        for w in self.workers.values():
            w.kill()
        self.workers.clear()

    def _fresh(self, slot) -> "_Worker":
        """The worker in `slot`, started or replaced if it is missing or dead."""
        w = self.workers.get(slot)
        if w is None or w.proc.poll() is not None:
            if w is not None:
                w.kill()
            self.started += 1
            w = self.workers[slot] = _Worker(slot, self.target, self.gpus[slot % len(self.gpus)], self.log_dir, self.env)
            self.owners = {k: s for k, s in self.owners.items() if s != slot}  # its kernels died with it
        return w

    def run_one(self, case) -> dict:
        return next(iter(self.run([case])))

    def run(self, cases, deadline=None):
        """Yield one result dict per case, in completion order. Stops dispatching at `deadline`."""
        groups = OrderedDict()
        for c in cases:
            groups.setdefault(kernels.family(c.family).static_key(c), []).append(c)
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
                    self.compiled.add(kernels.family(w.case.family).static_key(w.case))
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
                        r = result_of(w.case, "HANG", w.stage, f"no answer within {limit:g} s ({w.stage})")
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
            r = result_of(w.case, "CRASH", w.stage, f"worker died (status {code}): {msg}")
            w.kill()
            return r
        w.buf += chunk
        result = None
        while b"\n" in w.buf:
            line, w.buf = w.buf.split(b"\n", 1)
            msg = json.loads(line)
            if msg["event"] == "stage":
                w.stage = msg["stage"]
                w.deadline = time.monotonic() + self.timeouts.run
            elif msg["event"] == "result":
                msg.pop("event")
                result = msg
        return result
