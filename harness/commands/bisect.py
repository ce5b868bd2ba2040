"""harness bisect: the release (or commit) that changed a reproducer's behaviour (harness.bisect).
Exit 0 report written, 2 bad input, 3 paused (a step must run elsewhere); with --at, one step: 0/1/125."""
from __future__ import annotations

import sys
from pathlib import Path

from harness import kernels
from harness.commands.common import BAD_INPUT, HARNESS_ERROR, MAX_RUNS, in_dir, load, out_dir, out_file, positive, reproducer_args
from harness.status import REGRESS

EXITS = {0: "report written", 1: "--at: reproduced", 2: BAD_INPUT, 3: "paused: a step must run elsewhere",
         4: HARNESS_ERROR, 125: "--at: cannot test here, or HARNESS_ERROR"}


def add(sub) -> None:
    b = sub.add_parser("bisect", help="find the TileLang release that changed a reproducer's behaviour")
    reproducer_args(b)
    b.add_argument("--good", help="required (but with --at): a release (or commit) where the case behaves correctly")
    b.add_argument("--bad", help="required (but with --at): a release (or commit) where the bug shows (older than "
                   "--good: where it was fixed)")
    b.add_argument("--repo", type=in_dir,
                   help="bisect the first-parent commits of this TileLang checkout instead of releases")
    b.add_argument("--build", help="with --repo: shell command, run in a checkout of each commit, that leaves a "
                                   "tilelang wheel in $HARNESS_WHEEL_DIR")
    b.add_argument("--at", help="with --repo: test this one commit and exit 0/1/125 (a `git bisect run` script)")
    b.add_argument("--runs", type=positive(int, MAX_RUNS), default=1,
                   help=f"replays per step (flaky bugs: bad if any fails; at most {MAX_RUNS})")
    b.add_argument("--fresh", action="store_true", help="compile afresh for every replay (see repro --fresh)")
    b.add_argument("--regress", choices=REGRESS, default="failure",
                   help="what a step counts as bad: any failure (default), or only the recorded signature, when "
                        "another bug makes the program fail on one side of the range")
    b.add_argument("--envs", type=out_dir, default="~/.cache/harness/releases",
                   help="one install directory per release, reused")
    b.add_argument("--wheels", type=in_dir, help="install from the wheels in this directory, offline")
    b.add_argument("--state", type=out_file,
                   help="bisect state file (default: under --envs); an interrupted bisect resumes from it")
    b.set_defaults(func=cmd_bisect)


def cmd_bisect(args) -> int:
    from harness import bisect
    from harness.bisect import environments, steps
    from harness.status import WORDS

    rep, path = load(args, "bisect")
    if rep is None:
        return 2
    envs = Path(args.envs).expanduser()
    if bool(args.repo) != bool(args.build):
        print("harness bisect: --repo and --build go together", file=sys.stderr)
        return 2
    if args.at and not args.repo:
        print("harness bisect: --at COMMIT needs --repo PATH and --build CMD (one step across commits)", file=sys.stderr)
        return 2
    if not args.at and not (args.good and args.bad):
        print("harness bisect: --good and --bad are required (or --repo ... --at COMMIT for one step)", file=sys.stderr)
        return 2
    if kernels.family(rep.case.family).runner.module:
        print(f"harness bisect: {rep.id} is of an outside kernel ({rep.case.family}), whose examples differ by "
              "release: bisect cannot give each step its own; `harness matrix --examples DIR` replays it per release",
              file=sys.stderr)
        return 2
    log = lambda line: print(line, file=sys.stderr, flush=True)
    try:
        if args.repo:
            provider = environments.Commits(envs, Path(args.repo).resolve(), args.build)
            if args.at:  # one step, as `git bisect run` calls it
                status, evidence = steps.at_commit(path.resolve(), provider, args.at, args.runs, envs, args.fresh,
                                                    args.regress)
                print(evidence)
                return status
        else:
            provider = environments.Releases(envs, args.wheels and Path(args.wheels))
        run = steps.start(path.resolve(), rep.id, args.good, args.bad, provider, args.state and Path(args.state), envs,
                           args.runs, args.fresh, args.regress, log=log)
        text = run.run()
    except bisect.Pending as e:
        done = ", ".join(f"{v} {WORDS[s['status']]}" for v, s in run.steps.items()) or "none"
        print(f"harness bisect: paused: {e}\nsteps so far: {done}; state: {run.state_path}\n"
              "run the same command where that step can run", file=sys.stderr)
        return 3
    except bisect.BisectError as e:
        print(f"harness bisect: {e}", file=sys.stderr)
        return 2
    print(text)
    print(f"installed this run: {', '.join(run.releases.installs) or 'nothing (all cached)'}; state: {run.state_path}",
          file=sys.stderr)
    return 0
