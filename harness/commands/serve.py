"""harness serve: a pool whose workers outlive a command (harness.server), for `harness run --server`."""
from __future__ import annotations

import sys
from pathlib import Path

from harness import server
from harness.commands.common import (
    BAD_INPUT,
    HARNESS_ERROR,
    MAX_SECONDS,
    MAX_WORKERS,
    any_path,
    arch,
    cannot_write_any,
    cannot_write_file,
    cannot_write_files,
    guard_bands,
    nonnegative_int,
    out_dir,
    positive,
)
from harness.environment import gpu_count
from harness.pool import default_size

EXITS = {0: "ended (idle, --stop, Ctrl-C, SIGTERM), or listening (--detach)", 2: BAD_INPUT, 4: HARNESS_ERROR,
         130: "Ctrl-C before it listens"}


def add(sub) -> None:
    s = sub.add_parser("serve", help="keep workers (their imports, their kernels) for the runs that follow")
    s.add_argument("socket", type=any_path, help="the Unix socket to listen at (`harness run --server SOCKET`)")
    s.add_argument("--workers", type=positive(int, MAX_WORKERS), default=0,
                   help=f"worker processes (default: CPU cores - 1; at most {MAX_WORKERS})")
    s.add_argument("--arch", type=arch, default="sm_90a", help="compile target when there is no GPU")
    s.add_argument("--idle", type=nonnegative_int, default=3600,
                   help="end after this many seconds without a client (0: never)")
    s.add_argument("--logs", type=out_dir, help="the workers' logs (default: SOCKET.logs/)")
    s.add_argument("--detach", action="store_true", help="serve in the background; return once it listens")
    s.add_argument("--stop", action="store_true", help="ask the server at SOCKET to end, and return")
    s.set_defaults(func=cmd_serve)


def cmd_serve(args) -> int:
    args.socket = Path(args.socket).expanduser()
    logs = Path(args.logs) if args.logs else args.socket.with_name(args.socket.name + ".logs")
    try:
        if args.idle > MAX_SECONDS:
            raise server.ServerError(f"--idle must be <= {MAX_SECONDS:g}, got {args.idle}")
        reason = None if args.stop else cannot_write_any(
            lambda: cannot_write_file(args.socket),
            lambda: cannot_write_files(logs, files=("server.log", "worker-0.log")))
        if reason:
            raise server.ServerError(f"cannot listen at {args.socket}: {reason}")
        if args.stop:
            server.stop(args.socket)
            print(f"harness serve: the server at {args.socket} was asked to stop")
            return 0
        if args.detach:
            argv = [*(f"--register={r}" for r in args.register), "serve", str(args.socket), "--arch", args.arch,
                    "--idle", str(args.idle), "--logs", str(logs), *(["--workers", str(args.workers)] if args.workers else [])]
            server.detach(args.socket, [sys.executable, "-m", "harness.cli", *argv], logs / "server.log")
            print(f"harness serve: listening at {args.socket} (log: {logs / 'server.log'}; "
                  f"end it with `harness serve {args.socket} --stop`)")
            return 0
        gpus = gpu_count()
        return server.serve(args.socket, args.workers or default_size(), "auto" if gpus else args.arch, gpus, logs,
                            args.idle, log=lambda line: print(line, flush=True), bands=guard_bands())
    except server.ServerError as e:
        print(f"harness serve: {e}", file=sys.stderr)
        return 2
