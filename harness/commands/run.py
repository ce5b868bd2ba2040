"""harness run: draw (or load) cases, run them, judge, report, record each new failure.
Exit 0 nothing new failed, 1 a new failure, 125 TileLang does not import (harness.campaign)."""
from __future__ import annotations

import sys

from harness import case as case_mod
from harness import kernels
from harness.commands.campaign_options import EXITS, campaign_args, run_campaign
from harness.commands.common import in_dir, use_examples

__all__ = ["EXITS", "add", "cmd_run"]


def add(sub) -> None:
    r = sub.add_parser("run", help="generate cases, run them, judge, report")
    r.add_argument("--families", default="fwd", help=f"comma-separated, each once, from {', '.join(kernels.names())}")
    campaign_args(r)
    r.add_argument("--examples", type=in_dir, help="a TileLang source tree (or its examples/) for outside kernels (tl_*)")
    r.set_defaults(func=cmd_run)


def cmd_run(args) -> int:
    families = tuple(args.families.split(","))
    try:
        if "" in families:
            raise case_mod.CaseError(f"empty family name in --families {args.families!r}")
        twice = sorted({name for name in families if families.count(name) > 1})
        if twice:
            raise case_mod.CaseError(f"{', '.join(twice)} given twice in --families {args.families!r}")
        for name in families:
            kernels.family(name)  # registered (CaseError) and what it declares checked (FamilyError) before any work
        bare = [name for name in families if args.peer and not kernels.family(name).offer.peer]
        if bare:
            raise case_mod.CaseError(f"no test shapes declared for {', '.join(bare)} (Offer.peer)")
        use_examples(args, families)
    except case_mod.CaseError as e:
        print(f"harness {args.command}: {e}", file=sys.stderr)
        return 2
    return run_campaign(args, families)


