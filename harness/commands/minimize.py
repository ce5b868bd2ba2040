"""harness minimize: shrink a reproducer's case while its failure signature stays the same.
Exit 0 minimized (or already minimal), 125 nothing to minimize here: not reproduced, or cannot test."""
from __future__ import annotations

import sys
from pathlib import Path

from harness.commands.common import (
    MAX_RUNS,
    MAX_SECONDS,
    NOT_HERE,
    cannot_write_any,
    cannot_write_file,
    load,
    positive,
    replay_args,
    runs_or_none,
    timeouts,
)

EXITS = NOT_HERE


def add(sub) -> None:
    m = sub.add_parser("minimize", help="shrink a reproducer's case while its failure signature stays the same")
    m.add_argument("--budget", type=positive(float, MAX_SECONDS), default=600,
                   help=f"seconds to spend shrinking (at most {MAX_SECONDS:g})")
    m.add_argument("--confirm", type=positive(int, MAX_RUNS), default=2,
                   help=f"a step is kept only if it reproduces this many times in a row (at most {MAX_RUNS})")
    m.add_argument("--tries", type=positive(int, MAX_RUNS), default=1,
                   help=f"replays of the recorded case before it counts as not reproduced: a race may need several "
                        f"(at most {MAX_RUNS})")
    m.add_argument("--runs", type=runs_or_none, default=3,
                   help=f"runs of the minimized case to triage flakiness (0: none; at most {MAX_RUNS})")
    replay_args(m)
    m.set_defaults(func=cmd_minimize)


def cmd_minimize(args) -> int:
    from harness import replay

    rep, path = load(args, "minimize")
    if rep is None:
        return 2
    why = cannot_write_any(lambda: cannot_write_file(path))  # the minimized reproducer replaces it
    if why:
        print(f"harness minimize: {why}", file=sys.stderr)
        return 2
    status, line = replay.minimize(rep, path, Path(args.logs) / rep.id, timeouts(args), args.arch, args.confirm,
                                   args.budget, args.runs, args.tries, log=lambda text: print(text, file=sys.stderr))
    print(line)
    return status
