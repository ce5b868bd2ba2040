"""harness triage: the compiler pass a recorded bug comes from (exit 1 when one is found)."""
from __future__ import annotations

import sys

from harness import kernels
from harness.commands.common import FOUND, arch, in_dir, load, reproducer_args
from harness.environment import environment
from harness.worker import ARCHES

EXITS = FOUND


def add(sub) -> None:
    tr = sub.add_parser("triage", help="where in the compiler a recorded bug comes from: the pass that raised a compile "
                                       "error (and where what it rejects appeared), or the pass that made a generated-"
                                       "code hazard (IR excerpt)")
    reproducer_args(tr)
    tr.add_argument("--arch", type=arch, default="sm_90a", help=f"compile target without a GPU: {', '.join(ARCHES)}")
    tr.add_argument("--examples", type=in_dir,
                    help="a TileLang source tree (or its examples/), for an outside kernel's reproducer")
    tr.set_defaults(func=cmd_triage)


def cmd_triage(args) -> int:
    """Where in the compiler a recorded bug comes from (harness.triage), compiled here: the pass that
    raised a compile error, or the pass that made a generated-code hazard."""
    from harness import replay, triage

    rep, _ = load(args, "triage")
    if rep is None:
        return 2
    target, why = replay.target(rep, environment(), args.arch, compile_only=True)
    if target is None:
        print(f"harness triage: cannot compile {rep.id} here: {why}", file=sys.stderr)
        return 2
    print(f"reproducer {rep.id}: {rep.title}")
    lines, _, found = triage.run(kernels.family(rep.case.family), rep.case, target)
    for line in lines:
        print(line)
    return 1 if found else 0
