"""harness repro: replay a reproducer; exit as `git bisect run` reads it: 0 good, 1 reproduced, 125 cannot test."""
from __future__ import annotations

import argparse
import json
import sys

from harness import sanitizer
from harness.commands.common import BAD_INPUT, MAX_RUNS, in_dir, load, positive, replay_args, timeouts
from harness.environment import environment
from harness.status import BAD

EXITS = {0: "not reproduced", 1: "reproduced", 2: BAD_INPUT, 125: "cannot test here, or HARNESS_ERROR"}


def add(sub) -> None:
    rp = sub.add_parser("repro", help="replay a reproducer: exit 0 correct, 1 bug reproduced, 125 cannot test")
    rp.add_argument("--runs", type=positive(int, MAX_RUNS), default=1,
                    help=f"run it this many times (flakiness; at most {MAX_RUNS})")
    rp.add_argument("--fresh", action="store_true", help="compile afresh for every run (a new worker, an empty "
                    "kernel cache): for bugs in which code a compile emits")
    replay_args(rp)
    rp.add_argument("--examples", type=in_dir,
                    help="a TileLang source tree (or its examples/), for an outside kernel's reproducer")
    rp.add_argument("--json", action="store_true", help="print one JSON object (status, verdict, evidence, the "
                    "environment) instead of the lines; the exit status is the same")
    rp.add_argument("--sanitize", metavar="TOOL", type=_tool, help="run it under compute-sanitizer: memcheck, "
                    "racecheck, synccheck or initcheck (slow; the caching allocator and guard bands off)")
    rp.set_defaults(func=cmd_repro)


def _tool(text):
    if text not in sanitizer.TOOLS:  # '' too: no tool is not a plain replay
        raise argparse.ArgumentTypeError(f"unknown sanitizer tool {text!r}: choose one of {', '.join(sanitizer.TOOLS)}")
    return text


def cmd_repro(args) -> int:
    from harness import replay

    rep, path = load(args, "repro")
    if rep is None:
        return 2
    if args.sanitize is not None:
        return _sanitized(args, rep, path)
    env = environment()
    if not args.json:
        print(f"reproducer {rep.id} ({path}): {rep.title}")
        print(f"recorded:  {rep.result.describe()}  "
              f"[{replay.where(rep.environment)}]")
    out = replay.replay(rep, args.logs, args.runs, args.arch, timeouts(args), env, fresh=args.fresh)
    if args.json:  # for scripts: one object on one line
        print(json.dumps({"id": rep.id, "status": out.status.value, "verdict": out.verdict, "evidence": out.evidence,
                          "now": [r.describe() for r in out.results], "environment": env}))
        return out.status.exit
    for line in out.evidence:
        print(line)
    print(out.verdict)
    return out.status.exit


def _sanitized(args, rep, path) -> int:
    """The replay once more, its worker under compute-sanitizer (harness.replay.sanitized: caching allocator
    and guard bands off, memcheck padded); the replay's lines, then the tool's report parsed. Exit: 1 if the
    tool found errors or the bug reproduced, else the replay's own status."""
    from harness import replay

    try:
        sanitizer.command(args.sanitize, [])  # an unknown tool, or none here: bad input, before any output
    except sanitizer.SanitizerError as e:
        print(f"harness repro: {e}", file=sys.stderr)
        return 2
    env = environment()
    print(f"reproducer {rep.id} ({path}): {rep.title}")
    print(f"recorded:  {rep.result.describe()}  [{replay.where(rep.environment)}]")
    out, report = replay.sanitized(rep, args.sanitize, args.logs, args.arch, timeouts(args), env)
    for line in [*out.evidence, out.verdict]:
        print(line)
    if report is None:  # nothing ran here
        return out.status.exit
    print(report.describe())
    return BAD if report.hazards else out.status.exit
