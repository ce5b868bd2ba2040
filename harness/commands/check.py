"""harness check: a kernel file of your own under the harness, through an adapter you write; a run otherwise."""
from __future__ import annotations

import sys
from pathlib import Path

from harness import case as case_mod
from harness import kernels
from harness.commands.campaign_options import EXITS as RUN_EXITS
from harness.commands.campaign_options import campaign_args, run_campaign
from harness.commands.common import in_file

EXITS = RUN_EXITS  # a run otherwise


def add(sub) -> None:
    ck = sub.add_parser("check", help="a kernel file of your own, under an adapter you write (docs/outside-kernels.md)")
    ck.add_argument("file", type=in_file, help="the kernel's Python file")
    ck.add_argument("--adapter", required=True, metavar="FILE.py:NAME", help="the adapter (a Family) for it")
    ck.add_argument("--inside-only", action="store_true", help="skip the draws just outside its stated contract")
    campaign_args(ck)
    ck.set_defaults(func=cmd_check, reproducers="reproducers", out="reports/check")


def cmd_check(args) -> int:
    """A user's kernel file under the harness: its adapter (harness.outside.family(name, "<file
    name>", ...), docs/outside-kernels.md) registered for this run and its workers."""
    from harness.outside import source

    adapter, _, attr = args.adapter.rpartition(":")
    if not adapter.endswith(".py") or not attr:
        print(f"harness check: --adapter must be FILE.py:NAME, got {args.adapter!r}", file=sys.stderr)
        return 2
    if not Path(adapter).is_file():
        print(f"harness check: --adapter: no file {adapter}", file=sys.stderr)
        return 2
    where = f"{Path(adapter).resolve()}:{attr}"
    try:
        adapted = kernels.load(where)
    except (Exception, SystemExit) as e:  # the user's file ran: what it raised is its error, not the harness's
        first = next(iter(str(e).splitlines()), "")
        print(f"harness check: adapter {args.adapter} does not load: {type(e).__name__}: {first}", file=sys.stderr)
        return 2
    if not isinstance(adapted, kernels.Family):
        print(f"harness check: adapter {args.adapter} is a {type(adapted).__name__}, not a harness.kernels.Family",
              file=sys.stderr)
        return 2
    try:
        file = source.use_file(args.file)
        kernels.register(adapted.name, where)  # for this run and, through the pool, its workers
        fam = kernels.family(adapted.name)
    except (case_mod.CaseError, OSError, AttributeError, ImportError) as e:
        print(f"harness check: {e}", file=sys.stderr)
        return 2
    if fam.runner.module != file.name:
        print(f"harness check: adapter {attr} is for {fam.runner.module}, not {file.name}", file=sys.stderr)
        return 2
    families = (fam.name,) if args.inside_only else (fam.name,) + ((fam.name + kernels.OUTSIDE_MODE,)
                                                                   if any(not r.asserted for r in fam.offer.rules) else ())
    return run_campaign(args, families)
