"""The options `harness run` and `harness check` share, and the campaign they start: one module that both commands
import, so that no command imports another."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from harness import reproducer_model, sanitizer
from harness.commands.common import (
    BAD_INPUT,
    HARNESS_ERROR,
    MAX_SECONDS,
    MAX_WORKERS,
    any_path,
    arch,
    cannot_write_any,
    cannot_write_files,
    guard_bands,
    in_file,
    inside_sources,
    nonnegative_int,
    out_dir,
    positive,
    timeout_args,
    timeouts,
)
from harness.worker import ARCHES

# What a run writes in --out (logs/ beside them), each checked writable before the first compile.
RUN_FILES = ("cases.jsonl", "results.jsonl", "run.json", "summary.md", "results.csv", "report.html")
# Upper bounds, as in harness.commands.common, for the options of a campaign alone.
MAX_CASES = 100_000
DEFAULT_CASES = 100           # --cases: left unset so that --cases-from can refuse a count given with it
MAX_PER_KERNEL = 256          # --per-kernel, --per-row


EXITS = {0: "nothing new failed", 1: "a new failure (or workers died past --max-worker-restarts)", 2: BAD_INPUT,
         4: HARNESS_ERROR, 125: "TileLang does not import"}


def run_campaign(args, families) -> int:
    """A campaign over `families` with the options `campaign_args` added (harness run and harness check)."""
    from harness import campaign

    if args.cases and (args.cases_from or args.peer):  # those run every case they list: a count would be ignored
        print(f"harness {args.command}: --cases does not go with {'--cases-from' if args.cases_from else '--peer'}, "
              "which runs every case it lists", file=sys.stderr)
        return 2
    groups = tuple(reproducer_model.FOLDER_OF_KIND.values())
    why = cannot_write_any(lambda: inside_sources(args.out, args.reproducers),
                           lambda: cannot_write_files(Path(args.out), files=RUN_FILES, dirs=("logs",)),
                           lambda: cannot_write_files(Path(args.reproducers), dirs=groups))
    if why:
        print(f"harness {args.command}: {why}", file=sys.stderr)
        return 2
    opts = campaign.Options(out=Path(args.out), families=families, cases=args.cases or DEFAULT_CASES, seed=args.seed,
                            per_kernel=args.per_kernel, per_row=args.per_row,
                            cases_from=args.cases_from and Path(args.cases_from),
                            workers=args.workers, arch=args.arch, timeouts=timeouts(args), time=args.time or 0,
                            reproducers=Path(args.reproducers), minimize=args.minimize,
                            minimize_budget=args.minimize_budget, pairwise=not args.no_pairwise,
                            shard=args.shard, stop_after=args.stop_after_failures, sanitize=args.sanitize_failures,
                            peer=args.peer, max_worker_restarts=args.max_worker_restarts,
                            server=args.server and Path(args.server), mutate=args.mutate, bands=guard_bands())
    try:
        return campaign.run(opts)
    except campaign.CampaignError as e:
        print(f"harness {args.command}: {e}", file=sys.stderr)
        return 2


def _share(text):
    try:
        share = float(text)
    except ValueError:
        share = -1
    if not 0 <= share <= 0.9:
        raise argparse.ArgumentTypeError(f"expected a share from 0 to 0.9, got {text!r}")
    return share


def _shard(text):
    i, sep, n = text.partition("/")
    if not (sep and i.isdigit() and n.isdigit() and 1 <= int(i) <= int(n)):
        raise argparse.ArgumentTypeError(f"expected I/N with 1 <= I <= N, got {text!r}")
    return int(i), int(n)


def campaign_args(p):
    """The options `harness run` and `harness check` share."""
    p.add_argument("--cases", type=positive(int, MAX_CASES),
                   help=f"number of distinct cases (at most {MAX_CASES}) (default: {DEFAULT_CASES})")
    p.add_argument("--cases-from", type=in_file,
                   help="run exactly the cases of this JSON-lines file (a run's cases.jsonl); not with --cases")
    p.add_argument("--peer", action="store_true",
                   help="run the shapes the kernels' own tests run (outside kernels), not drawn cases: the baseline")
    p.add_argument("--time", type=positive(float, MAX_SECONDS),
                   help="end the cases this many seconds after the command's start (loading the cases and earlier "
                        "results and the draw of --cases included; those in flight are dropped; the same command "
                        f"continues; at most {MAX_SECONDS:g}, a week; default: no limit)")
    p.add_argument("--seed", type=nonnegative_int, default=0, help="Hypothesis seed the cases are drawn from")
    p.add_argument("--per-kernel", type=positive(int, MAX_PER_KERNEL), default=4,
                   help=f"length variants per compiled kernel (at most {MAX_PER_KERNEL})")
    p.add_argument("--per-row", type=positive(int, MAX_PER_KERNEL), default=1,
                   help=f"length variants per covering-array kernel (more where compiles are slow; at most {MAX_PER_KERNEL})")
    p.add_argument("--shard", type=_shard, default="1/1", metavar="I/N",
                   help="run the I-th of N disjoint parts of the cases, split by kernel (several runners)")
    p.add_argument("--stop-after-failures", type=nonnegative_int, default=0, metavar="N",
                   help="stop starting cases after N new failures (not a recorded bug; 0: run them all)")
    p.add_argument("--max-worker-restarts", type=nonnegative_int, metavar="N",
                   help="replace workers that died or hung N times in a row (no case ran a kernel on a worker "
                        "that lived between), then stop the run (exit 1; the same command continues it; default: 4 "
                        "per worker)")
    p.add_argument("--no-pairwise", action="store_true",
                   help="draw every kernel at random (default: first a covering array of static feature pairs)")
    p.add_argument("--mutate", type=_share, default=1 / 3, metavar="SHARE",
                   help="of a drawn campaign of generated programs, the share of cases that mutate programs of its "
                        "corpus (<out>/corpus: those that showed new CUDA features; 0: none) (default: 1/3)")
    p.add_argument("--out", type=out_dir, default="reports/run", help="results directory (the same one resumes)")
    p.add_argument("--workers", type=positive(int, MAX_WORKERS), default=0,
                   help=f"worker processes (default: CPU cores - 1; at most {MAX_WORKERS})")
    p.add_argument("--server", type=any_path, default=os.environ.get("HARNESS_SERVER") or None, metavar="SOCKET",
                   help="run the cases on the workers of `harness serve SOCKET`, which outlive this command "
                        "(default: $HARNESS_SERVER, else a pool of its own)")
    p.add_argument("--arch", type=arch, default="sm_90a", help=f"compile target when there is no GPU: {', '.join(ARCHES)}")
    timeout_args(p)
    p.add_argument("--reproducers", type=out_dir, default="reproducers",
                   help="where to record one reproducer per new failure")
    p.add_argument("--minimize", action="store_true", help="minimize each new failure before recording it")
    p.add_argument("--minimize-budget", type=positive(float, MAX_SECONDS), default=300,
                   help=f"seconds per failure (at most {MAX_SECONDS:g})")
    p.add_argument("--sanitize-failures", metavar="TOOL", choices=sanitizer.TOOLS,
                   help="rerun each new reproducer once under compute-sanitizer TOOL (slow)")
