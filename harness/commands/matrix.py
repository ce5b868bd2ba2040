"""harness matrix: every reproducer, or a campaign's cases, on every release listed (harness.bisect.matrix)."""
from __future__ import annotations

import sys
from pathlib import Path

from packaging.version import InvalidVersion, Version

from harness import kernels, reproducer_files, reproducer_loading, reproducer_model
from harness.commands.common import (
    DONE,
    MAX_RUNS,
    MAX_WORKERS,
    cannot_write_any,
    in_dir,
    in_file,
    inside_sources,
    maybe_dir,
    out_dir,
    positive,
)

EXITS = DONE


def add(sub) -> None:
    mx = sub.add_parser("matrix", help="replay every reproducer on every release listed")
    mx.add_argument("--releases", required=True, help="comma-separated, e.g. 0.1.6.post2,0.1.10,0.1.15")
    mx.add_argument("--runs", type=positive(int, MAX_RUNS), default=1, help=f"replays per reproducer and release "
                    f"(at most {MAX_RUNS})")
    mx.add_argument("--fresh", action="store_true", help="compile afresh for every replay (see repro --fresh)")
    mx.add_argument("--jobs", type=positive(int, MAX_WORKERS), default=1,
                    help=f"reproducers replayed at once (each its own worker; at most {MAX_WORKERS})")
    mx.add_argument("--envs", type=out_dir, default="~/.cache/harness/releases",
                    help="one install directory per release, reused")
    mx.add_argument("--wheels", type=in_dir, help="install from the wheels in this directory, offline")
    mx.add_argument("--dir", type=maybe_dir, default="reproducers", help="where reproducers live")
    mx.add_argument("--cases-from", type=in_file, help="instead of the reproducers: run this campaign's cases "
                    "(cases.jsonl) on each release and count the verdicts")
    mx.add_argument("--out", type=out_dir, default="reports/matrix",
                    help="with --cases-from: one results directory per release")
    mx.add_argument("--examples", type=in_dir, help="for outside kernels: a directory of examples trees, one per "
                    "release, as `harness examples fetch --version V --to DIR` leaves them (DIR/tilelang-V)")
    mx.set_defaults(func=cmd_matrix)


def cmd_matrix(args) -> int:
    """Everything it cannot do here is said before anything installs: releases, reproducers, examples."""
    from harness import bisect, campaign
    from harness.bisect import environments, matrix

    paths = reproducer_files.paths(args.dir)  # every group's
    releases = environments.Releases(Path(args.envs).expanduser(), args.wheels and Path(args.wheels))
    try:
        if args.cases_from:
            why = cannot_write_any(lambda: inside_sources(args.out, args.dir))
            if why:
                raise campaign.CampaignError(why)
            families = {c.family for c in campaign.load_cases(args.cases_from)}
        else:
            if not Path(args.dir).is_dir():
                raise reproducer_model.RecordError(f"--dir {args.dir}: no such directory")
            if not paths:
                raise reproducer_model.RecordError(f"--dir {args.dir}: no reproducers (*.json) in it")
            families = {reproducer_loading.load(p).case.family for p in paths}
        try:
            wanted = [Version(v) for v in args.releases.split(",")]
        except InvalidVersion as e:
            raise bisect.BisectError(f"--releases {args.releases!r}: {e}") from None
        twice = sorted({str(v) for v in wanted if wanted.count(v) > 1})
        if twice:
            raise bisect.BisectError(f"--releases lists {', '.join(twice)} twice")
        _matrix_examples(args, families, wanted)
        here = all(releases.at_hand(v) for v in wanted)  # all installed: no index needed (a GPU machine offline)
        known = wanted if here else environments.available(releases.wheels)
        missing = [str(v) for v in wanted if v not in known]
        if missing:
            raise bisect.BisectError(f"not TileLang releases: {', '.join(missing)}")
    except (reproducer_model.RecordError, bisect.BisectError, campaign.CampaignError, InvalidVersion) as e:
        print(f"harness matrix: {e}", file=sys.stderr)
        return 2
    log = lambda line: print(line, file=sys.stderr)  # noqa: E731
    examples = args.examples and Path(args.examples)
    if args.cases_from:
        print(matrix.cases_matrix(Path(args.cases_from), sorted(wanted), releases, Path(args.out), log=log,
                                  examples=examples))
    else:
        print(matrix.matrix(paths, sorted(wanted), releases, args.runs, log=log, jobs=args.jobs, fresh=args.fresh,
                            examples=examples))
    return 0


def _matrix_examples(args, families, releases) -> None:
    """Outside kernels need each release's examples: --examples DIR, holding one tree per release as
    `harness examples fetch --to DIR` leaves them; BisectError naming what is missing."""
    from harness import bisect
    from harness.bisect import matrix

    outside = sorted(f for f in families if kernels.family(f).runner.module)
    if not outside:
        return
    fetch = "`harness examples fetch --version V --to DIR` for each release"
    if not args.examples:
        named = ", ".join(outside[:3]) + (f" and {len(outside) - 3} more" if len(outside) > 3 else "")
        raise bisect.BisectError(f"outside kernels ({named}) need each release's examples: --examples DIR ({fetch})")
    missing = [str(v) for v in releases if matrix.examples_tree(Path(args.examples), v) is None]
    if missing:
        raise bisect.BisectError(f"--examples {args.examples} has no tree for TileLang {', '.join(missing)} "
                                 f"(tilelang-<release>/: {fetch})")
