"""harness upstream: a report ready to file on TileLang's tracker, from what the harness holds."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness import case as case_mod
from harness.commands.common import (
    DONE,
    arch,
    cannot_write_any,
    cannot_write_file,
    in_dir,
    in_file,
    load,
    maybe_dir,
    out_file,
    reproducer_args,
    use_examples,
)
from harness.worker import ARCHES

EXITS = DONE


def add(sub) -> None:
    up = sub.add_parser("upstream", help="a report ready to file on TileLang's tracker (markdown): environment, "
                        "standalone program, expected/observed, bisects, culprit pass, links; no network")
    reproducer_args(up, "where reproducers live (others here: same root cause)")
    up.add_argument("--to", type=out_file,
                    help="the report to write (default: DIR/upstream/<id>.md; the program goes beside it)")
    up.add_argument("--arch", type=arch, default="sm_90a",
                    help=f"compile target for the triage without a GPU: {', '.join(ARCHES)}")
    up.add_argument("--examples", type=in_dir,
                    help="a TileLang source tree (or its examples/), to triage an outside kernel")
    up.add_argument("--envs", type=maybe_dir, default="~/.cache/harness/releases",
                    help="where `harness bisect` keeps its state files")
    up.add_argument("--state", type=in_file, action="append", help="a bisect state file of this reproducer (--state "
                    "of `harness bisect`); repeatable")
    up.add_argument("--outputs", type=in_dir, help="a folder of captured outputs, <id>[.<control>].txt "
                    "(scripts/run_report_programs.py on a GPU machine): pasted verbatim, before DIR/upstream/outputs/")
    up.add_argument("--no-run", dest="run", action="store_false",
                    help="paste only outputs already captured; run nothing (a missing one is a marked gap)")
    up.set_defaults(func=cmd_upstream)


def cmd_upstream(args) -> int:
    """A report ready to file on TileLang's tracker (harness.upstream): what the harness holds, no network."""
    from harness import upstream

    # Loaded without --examples: a report whose words are recorded needs no outside kernel; the triage below says so
    rep, _ = load(argparse.Namespace(**{k: v for k, v in vars(args).items() if k != "examples"}), "upstream")
    if rep is None:
        return 2
    covering = upstream.primary(rep, Path(args.dir))  # one root cause, one report
    to = Path(args.to) if args.to else Path(args.dir) / "upstream" / f"{covering.id}.md"
    beside = to.parent / f"{covering.id}.standalone.py"  # a generated program's export, made when missing
    why = cannot_write_any(lambda: cannot_write_file(to),
                           lambda: upstream.generated(covering) and not beside.exists() and cannot_write_file(beside),
                           lambda: _not_states(args.state or (), {rep.id, covering.id}))
    if why:
        print(f"harness upstream: {why}", file=sys.stderr)
        return 2
    if covering.id != rep.id:
        print(f"{rep.id} shares its root cause with {covering.id}: one report, {covering.id}'s, lists it")
        rep = covering
    unavailable = None
    try:
        use_examples(args, (rep.case.family,))
    except case_mod.CaseError as e:  # an outside kernel without its examples: the report says triage could not run
        unavailable = str(e)
    try:
        out = upstream.write(rep, to, Path(args.dir), states=args.state or (), envs=Path(args.envs), arch=args.arch,
                             unavailable=unavailable, outputs=args.outputs, run=args.run)
    except OSError as e:
        print(f"harness upstream: cannot write {to}: {e.strerror or e}", file=sys.stderr)
        return 2
    print(f"wrote {to}: " + "; ".join(out.summary))
    return 0


def _not_states(paths, ids) -> str | None:
    """Why one of `paths` is not a `harness bisect` state file of a reproducer in `ids`, or None."""
    from harness import bisect, reproducer_files
    from harness.bisect import steps

    for path in paths:
        try:
            of = (steps.read_state(Path(path)) or {}).get("reproducer")
        except bisect.BisectError as e:
            return str(e)
        if of not in {reproducer_files.file_name(i) for i in ids}:
            return f"state {path} is a bisect of {of!r}, not of {' or '.join(sorted(ids))}"
    return None
