"""A pool that outlives a command: `harness serve SOCKET` keeps its workers (their imports of torch and
TileLang, and every kernel they compiled or loaded) for the `harness run --server SOCKET` commands that
follow, as the commands of a CI job or a benchmark's warm run.

One Unix socket, readable by its owner only; one client at a time (the next waits for it); JSON lines
both ways. A client first says who it is (Identity); the server refuses one that differs in anything
its workers' answers depend on: the harness's source (a server started before a change), the Python,
the environment the workers read, the families they register. Then each run: the cases, timeouts and
budget of worker replacements of one `harness run`, answered by one result line per case and an end
line. Hangs and crashes are the pool's, as in a command's own pool (harness.pool).
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import socket
import stat
import subprocess
import sys
import time
from concurrent.futures import Future
from dataclasses import asdict, dataclass
from pathlib import Path

from harness import case as case_mod
from harness import kernels, reproducer_loading
from harness.pool import Pool, PoolError, RestartsExhausted, Timeouts, Workers
from harness.result import Result

# What the workers read from their environment (TileLang's kernel cache, the GPUs they see, code generation that
# depends on the hash seed), and what the command reads to make their arguments (the guard bands: harness.commands.
# common.guard_bands): a client whose values differ is refused.
WATCHED = ("HARNESS_BANDS", "TILELANG_CACHE_DIR", "CUDA_VISIBLE_DEVICES", "PYTHONHASHSEED", "OMP_NUM_THREADS")
SOCKET_PATH_MAX = 107  # sun_path, less its terminating NUL
LINE_MAX = 1 << 30     # a run's cases in one line: 100,000 cases of about 1 kB


class ServerError(PoolError):
    """No server to use at that socket, or one that refused this command; the message is one line."""


def source_digest() -> str:
    """The harness package's source, as one digest: a server and a client of different sources differ."""
    root = Path(__file__).parent
    h = hashlib.sha1()
    for path in sorted(root.rglob("*.py")):
        h.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes())
    return h.hexdigest()[:12]


@dataclass(frozen=True)
class Identity:
    harness: str
    python: str
    env: dict
    families: dict
    examples: str | None  # the outside kernels' source tree (harness.kernels.use_examples)

    @classmethod
    def here(cls) -> Identity:
        tree = kernels.examples()
        return cls(source_digest(), sys.executable, {k: os.environ.get(k) for k in WATCHED}, kernels.registered(),
                   tree and str(tree))

    def differences(self, other: dict) -> list[str]:
        """What `other` (a client's identity) has unlike this one, each as a phrase."""
        mine = asdict(self)
        out = []
        for field in ("harness", "python", "families", "examples"):
            if other.get(field) != mine[field]:
                out.append(f"{field} {other.get(field)!r} (the server's: {mine[field]!r})")
        theirs = other.get("env") if isinstance(other.get("env"), dict) else {}
        out += [f"{k}={theirs.get(k)!r} (the server's: {v!r})" for k, v in self.env.items() if theirs.get(k) != v]
        return out


def check_path(path: Path) -> Path:
    if len(os.fsencode(path)) > SOCKET_PATH_MAX:
        raise ServerError(f"socket path {path} is longer than {SOCKET_PATH_MAX} bytes, the most a Unix socket takes")
    return path


# ----------------------------------------------------------------------------- the server
def serve(path: Path, workers: int, target: str, gpus: int, log_dir: Path, idle: float, log=print, bands=True) -> int:
    """Serve clients at `path` until one asks it to stop, `idle` seconds pass without one (0: never), or a
    SIGTERM or SIGINT. The workers start at once, so they are up before the first client comes; they guard
    their buffers unless not `bands` (harness.bands)."""
    path = check_path(Path(path))
    identity = Identity.here()
    with _listening(path) as sock, Pool(workers, target, log_dir, gpus=list(range(gpus)) or None, bands=bands) as pool:
        pool.start(workers)
        probed = pool.probe()  # once for every client (they are like the server): seconds each
        ready = {"target": target, "gpus": gpus, "workers": workers, "environment": probed}
        log(f"harness serve: {workers} workers, target {target}, harness {identity.harness}, at {path}")
        sock.settimeout(idle or None)
        while True:
            try:
                conn, _ = sock.accept()
            except TimeoutError:
                log(f"harness serve: no client for {idle:g} s: ended")
                return 0
            conn.settimeout(None)
            # A client gone, or out of step (a message that is no JSON object, or lacks what it must say): the next one.
            with contextlib.suppress(OSError, ValueError), conn:
                with conn.makefile("rwb") as stream:
                    if _session(stream, pool, identity, ready, log) == "stop":
                        log("harness serve: asked to stop: ended")
                        return 0
    log("harness serve: terminated: ended")
    return 0


def _unused(path: Path) -> None:
    """ServerError if a server listens at `path`, or something other than a socket is there; a socket that a
    server which died left is removed."""
    if path.exists() or path.is_symlink():
        if not stat.S_ISSOCK(path.lstat().st_mode):
            raise ServerError(f"{path} is there and is no socket: choose another path")
        try:
            with socket.socket(socket.AF_UNIX) as probe:
                probe.connect(str(path))
            raise ServerError(f"a server is already listening at {path}")
        except ConnectionRefusedError:
            path.unlink()


@contextlib.contextmanager
def _listening(path: Path):
    _unused(path)
    sock = socket.socket(socket.AF_UNIX)
    old = os.umask(0o177)  # the socket is its owner's alone from its first moment
    try:
        sock.bind(str(path))
    finally:
        os.umask(old)
    sock.listen(8)
    ended = signal.getsignal(signal.SIGTERM)
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # SIGTERM ends the pool as Ctrl-C does
    try:
        yield sock
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, ended)
        sock.close()
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def _send(stream, **msg) -> None:
    stream.write(json.dumps(msg).encode() + b"\n")
    stream.flush()


def _receive(stream) -> dict | None:
    line = stream.readline(LINE_MAX)
    if not line:
        return None
    msg = json.loads(line)
    if not isinstance(msg, dict):
        raise ValueError("a message is a JSON object")
    return msg


def _field(msg: dict, name: str, kind):
    """msg[name], of type `kind`; ValueError (the client is out of step) otherwise."""
    value = msg.get(name)
    if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
        raise ValueError(f"a message's {name!r} is {type(value).__name__}")
    return value


def _session(stream, pool: Pool, identity: Identity, ready: dict, log) -> str | None:
    """One client: its identity checked, then its runs, until it leaves (or asks the server to stop)."""
    hello = _receive(stream)
    if hello is None:  # a probe that it listens (detach)
        return None
    if hello.get("stop"):
        _send(stream, stopped=True)
        return "stop"
    differ = identity.differences(_field(hello, "identity", dict))
    if differ:
        _send(stream, refused="this command is unlike the server: " + "; ".join(differ))
        return None
    _send(stream, ready={**ready, "environment": ready["environment"].result()})
    while (msg := _receive(stream)) is not None:
        run = _field(msg, "run", dict)
        given = [_field({"case": d}, "case", dict) for d in _field(run, "cases", list)]
        timeouts = Timeouts(*(_field(_field(run, "timeouts", dict), k, (int, float)) for k in ("compile", "run")))
        budget, seconds = _field(run, "max_restarts", (int, type(None))), _field(run, "seconds", (int, float, type(None)))
        try:
            cases = [reproducer_loading.checked_case(d) for d in given]
        except case_mod.CaseError as e:
            _send(stream, end={"started": 0, "stopped": None, "refused": f"a case the server cannot read: {e}"})
            continue
        pool.renew(timeouts, budget)
        started, stopped = pool.started, None
        deadline = None if seconds is None else time.monotonic() + seconds
        log(f"harness serve: a run of {len(cases)} cases")
        try:
            with contextlib.closing(pool.run(cases, deadline)) as results:  # a client gone ends the run's jobs
                for r in results:
                    _send(stream, result=r.to_dict())
        except RestartsExhausted as e:
            stopped = str(e)
        _send(stream, end={"started": pool.started - started, "stopped": stopped})
    return None


def detach(path: Path, argv: list[str], log_file: Path, wait: float = 120) -> None:
    """Start `argv` (harness serve without --detach) in its own session, logging to `log_file`, and
    return once it listens at `path`; ServerError with its log's end if it exits or does not listen in time."""
    path = check_path(Path(path))
    _unused(path)
    log_file.parent.mkdir(parents=True, exist_ok=True)
    with open(log_file, "ab") as out:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True)
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = log_file.read_text(errors="replace").strip().splitlines()[-1:] or [""]
            raise ServerError(f"the server exited with status {proc.returncode}: {tail[0]}")
        with contextlib.suppress(OSError), socket.socket(socket.AF_UNIX) as probe:
            probe.connect(str(path))
            return
        time.sleep(0.1)
    proc.kill()
    raise ServerError(f"the server did not listen at {path} within {wait:g} s (log: {log_file})")


# ----------------------------------------------------------------------------- the client
class Remote(Workers):
    """The server at `path` as a campaign's Workers: its target, workers and GPUs, and the `environment`
    (harness.environment) the server probed once, which is this command's too. ServerError (a PoolError) when the
    server refuses this command or goes away."""

    def __init__(self, path: Path, timeouts: Timeouts | None = None):
        self.path, self.timeouts = check_path(Path(path)), timeouts or Timeouts()
        self.sock = socket.socket(socket.AF_UNIX)
        try:
            self.sock.connect(str(self.path))
        except OSError as e:
            self.sock.close()
            raise ServerError(f"no server at {self.path} ({e.strerror or e}): start one with "
                              f"`harness serve {self.path} --detach`") from None
        self.stream = self.sock.makefile("rwb")
        _send(self.stream, identity=asdict(Identity.here()))
        answer = self._next()
        if "refused" in answer:
            self.close()
            raise ServerError(f"the server at {self.path} refused: {answer['refused']}")
        ready = answer["ready"]
        self.target, self.n, self.gpus = ready["target"], ready["workers"], ready["gpus"]
        self.environment = ready["environment"]
        self.started, self.max_restarts = 0, None

    def _next(self) -> dict:
        msg = _receive(self.stream)
        if msg is None:
            raise ServerError(f"the server at {self.path} went away")
        return msg

    def start(self, cases: int) -> None:
        """The server's workers are up already."""

    def probe(self) -> Future:
        """The environment the server probed once (its clients are like it), as Pool.probe gives it."""
        done = Future()
        done.set_result(self.environment)
        return done

    def run(self, cases, deadline=None, more=None):
        """As Pool.run; `more()` is asked once each batch has ended (the server runs one batch at a time)."""
        while cases:
            yield from self._batch(cases, deadline)
            cases = more() if more is not None and (deadline is None or time.monotonic() < deadline) else []

    def _batch(self, cases, deadline):
        seconds = None if deadline is None else max(0.0, deadline - time.monotonic())
        _send(self.stream, run={"cases": [case_mod.to_dict(c) for c in cases], "timeouts": asdict(self.timeouts),
                                "max_restarts": self.max_restarts, "seconds": seconds})
        while "end" not in (msg := self._next()):
            yield Result.from_dict(msg["result"])
        end = msg["end"]
        self.started += end["started"]
        if end.get("refused"):
            raise ServerError(f"the server at {self.path} refused the run: {end['refused']}")
        if end["stopped"]:
            raise RestartsExhausted(end["stopped"])

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.stream.close()
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def stop(path: Path, wait: float = 60) -> None:
    """Ask the server at `path` to end (after the client it serves, if any, leaves), and return once it
    has ended its workers and removed its socket (or after `wait` seconds)."""
    path = check_path(Path(path))
    with socket.socket(socket.AF_UNIX) as sock:
        try:
            sock.connect(str(path))
        except OSError as e:
            raise ServerError(f"no server at {path} ({e.strerror or e})") from None
        with sock.makefile("rwb") as stream:
            _send(stream, stop=True)
            if _receive(stream) is None:
                raise ServerError(f"the server at {path} went away before it answered")
    deadline = time.monotonic() + wait
    while path.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
