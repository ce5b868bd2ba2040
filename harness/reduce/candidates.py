"""Whether a candidate text reproduces: it runs as a file in a temporary directory under a timeout, and its
outcome is cached by the text's sha256, shared by the processes picire forks."""
from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

SIGNAL = "REPRODUCED"
TRACEBACK = "Traceback (most recent call last)"


def reproduced_line(stdout: str) -> str | None:
    """The first line of `stdout` that starts with REPRODUCED ("NOT REPRODUCED" does not)."""
    return next((s.strip() for s in stdout.splitlines() if s.strip().startswith(SIGNAL)), None)


class Predicate:
    """Is a text interesting? Runs it (python, a temporary directory, `timeout` seconds); outcomes cached in
    `cache` by the text's sha256, shared by the processes picire forks. `want`: the REPRODUCED line it must print
    (None: any); `status`: the exit status it must end with (None: any); `traceback`: whether it may end in an
    uncaught exception (exit 1, as a check's own exit 1 would: a NameError after the REPRODUCED line is not the
    check saying so). `deadline` (time.monotonic()): past it no text runs and each is not interesting, and a run
    it cuts short is not cached; `best`: each interesting text shorter than the file there is written to it, so
    that a reduction stopped at any moment leaves the smallest reproducing file it found."""

    def __init__(self, cache: Path, timeout: float, want: str | None = None, status: int | None = None,
                 python: str = sys.executable, traceback: bool = True, deadline: float | None = None,
                 best: Path | None = None):
        self.cache, self.timeout, self.want, self.status, self.python = Path(cache), timeout, want, status, python
        self.traceback, self.deadline, self.best = traceback, deadline, best
        self.cache.mkdir(parents=True, exist_ok=True)

    def spent(self) -> bool:
        return self.deadline is not None and time.monotonic() >= self.deadline

    def run(self, text: str) -> tuple[int | None, str, str]:
        """(exit status, None if it timed out; stdout; stderr) of `text` run as a file."""
        timeout = self.timeout if self.deadline is None else max(0.0, min(self.timeout, self.deadline - time.monotonic()))
        with tempfile.TemporaryDirectory(prefix="reduce-") as d:
            (Path(d) / "repro.py").write_text(text)
            p = subprocess.Popen([self.python, "repro.py"], cwd=d, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 stdin=subprocess.DEVNULL, text=True, start_new_session=True)
            try:
                out, err = p.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)  # its own session: nvcc and the like go with it
                p.communicate()
                return None, "", ""
            return p.returncode, out, err

    def __call__(self, text: str) -> bool:
        key = hashlib.sha256(f"{self.want}\n{self.status}\n{self.traceback}\n{text}".encode()).hexdigest()
        hit = self.cache / key
        if hit.exists():
            ok = hit.read_text().startswith("1")
            if ok and self.best is not None:
                self._offer(text)  # a resumed reduction's file holds what the last one found
            return ok
        if self.spent():
            return False
        try:
            with warnings.catch_warnings():  # a candidate's SyntaxWarnings are not the reduction's business
                warnings.simplefilter("ignore")
                compile(text, "repro.py", "exec")
        except (SyntaxError, ValueError):
            self._store(hit, "0 syntax")
            return False
        status, out, err = self.run(text)
        line = reproduced_line(out)
        ok = line is not None and (self.want is None or line == self.want) and self.status in (None, status) \
            and (self.traceback or TRACEBACK not in err)
        if status is None and self.spent():
            return False  # cut short by the deadline, not by its own timeout: not an outcome to keep
        self._store(hit, f"{int(ok)} run")
        if ok and self.best is not None:
            self._offer(text)
        return ok

    def _offer(self, text: str) -> None:
        """`text` to the best file if it is shorter than what is there (one writer at a time: picire's processes)."""
        import fcntl

        with open(self.cache / "best.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not self.best.exists() or len(text) < len(self.best.read_text()):
                self._store(self.best, text)

    @staticmethod
    def _store(path: Path, value: str) -> None:
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_text(value)
        os.replace(tmp, path)

    def counts(self) -> tuple[int, int]:
        """(texts run, texts skipped because they do not compile)."""
        kinds = [p.read_text().split()[-1] for p in self.cache.iterdir() if not p.name.endswith((".tmp", ".lock"))]
        return kinds.count("run"), kinds.count("syntax")
