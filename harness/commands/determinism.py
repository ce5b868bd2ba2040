"""harness determinism: a campaign's cases compiled under several PYTHONHASHSEEDs; exit 1 if some code differs."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness.commands.common import (
    BAD_INPUT,
    HARNESS_ERROR,
    MAX_WORKERS,
    arch,
    cannot_write_any,
    cannot_write_files,
    in_file,
    inside_sources,
    out_dir,
    positive,
)
from harness.worker import ARCHES

MAX_HASH_SEED = 4_294_967_295  # PYTHONHASHSEED's range is [0, 2**32 - 1]


EXITS = {0: "the same code every compile", 1: "some kernel's code differs", 2: BAD_INPUT, 4: HARNESS_ERROR}


def add(sub) -> None:
    dt = sub.add_parser("determinism", help="compile a campaign's cases under several PYTHONHASHSEEDs; "
                        "list kernels whose generated code differs")
    dt.add_argument("--cases-from", type=in_file, required=True, help="a campaign's cases.jsonl")
    dt.add_argument("--hash-seeds", type=_hash_seeds, default="0,7,13",
                    help=f"comma-separated PYTHONHASHSEED values, two different ones at least, each in [0, {MAX_HASH_SEED}]")
    dt.add_argument("--out", type=out_dir, default="reports/determinism", help="one run per seed goes here")
    dt.add_argument("--arch", type=arch, default="sm_90a", help=f"compile target without a GPU: {', '.join(ARCHES)}")
    dt.add_argument("--workers", type=positive(int, MAX_WORKERS),
                    help=f"worker processes per run (default: CPU cores - 1; at most {MAX_WORKERS})")
    dt.set_defaults(func=cmd_determinism)


def _hash_seeds(text):
    """Comma-separated PYTHONHASHSEED values, two different ones at least."""
    try:
        seeds = [int(s) for s in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated ints, got {text!r}") from None
    bad = [s for s in seeds if not 0 <= s <= MAX_HASH_SEED]
    if bad:
        raise argparse.ArgumentTypeError(f"a PYTHONHASHSEED must be in [0, {MAX_HASH_SEED}], got {bad[0]}")
    if len(set(seeds)) < 2:
        raise argparse.ArgumentTypeError(f"needs two different seeds or more, got {text!r}")
    return seeds


def cmd_determinism(args) -> int:
    from harness import campaign, determinism

    try:
        cases = campaign.load_cases(args.cases_from)
    except campaign.CampaignError as e:
        print(f"harness determinism: {e}", file=sys.stderr)
        return 2
    out = Path(args.out)
    why = cannot_write_any(lambda: inside_sources(out, "reproducers"),
                           lambda: cannot_write_files(out, files=("determinism.md",),
                                                      dirs=[f"{d}-{s}" for s in args.hash_seeds for d in ("seed", "cache")]),
                           *(lambda s=s: cannot_write_files(out / f"seed-{s}", files=("results.jsonl",), dirs=("logs",))
                             for s in args.hash_seeds))
    if why:
        print(f"harness determinism: {why}", file=sys.stderr)
        return 2
    text, found = determinism.check(cases, args.hash_seeds, Path(args.out), args.arch, args.workers)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "determinism.md").write_text(text)
    print(text)
    return 1 if found else 0
