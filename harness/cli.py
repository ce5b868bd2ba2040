"""harness run | repro | export | reduce | upstream | minimize | env: parse, call, print.

Exit statuses: run 0 nothing new failed, 1 a new failure, 125 TileLang does not import; repro
follows `git bisect run` (0 good, 1 bug reproduced, 125 cannot test); any command 2 for bad input
(a family that `--register` or a command cannot register or draw, kernels.FamilyError, among it),
with one line on stderr and nothing recorded. The harness's own failure (HARNESS_ERROR) is never 1:
125 for repro and a bisect step, 4 for the others; Ctrl-C is 130 (main).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from packaging.version import InvalidVersion, Version

from harness import case as case_mod
from harness import kernels, record, sanitizer
from harness.environment import environment
from harness.result import HARNESS_ERROR_STATUS
from harness.worker import ARCHES


class _Help(argparse.ArgumentDefaultsHelpFormatter):
    """--help shows each option's default, where it has one its help does not already state."""

    def _get_help_string(self, action):
        if action.default is None or action.default is False or action.default == argparse.SUPPRESS \
                or "default" in (action.help or ""):
            return action.help
        return super()._get_help_string(action)


class Parser(argparse.ArgumentParser):
    """argparse, but a bad argument is one line on stderr (exit 2), not usage plus a line."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", _Help)
        super().__init__(*args, **kwargs)

    def error(self, message):
        self.exit(2, f"{self.prog}: {message}\n")


# Upper bounds on numeric options: beyond these a value is a typo, not a plan (--help says each).
MAX_CASES = 100_000
DEFAULT_CASES = 100           # --cases: left unset so that --cases-from can refuse a count given with it
MAX_PER_KERNEL = 256          # --per-kernel, --per-row
MAX_WORKERS = 256             # --workers, --jobs
MAX_RUNS = 10_000             # --runs, --confirm
MAX_TIMEOUT = 86_400.0        # --compile-timeout, --run-timeout: a day
MAX_SECONDS = 7 * 86_400.0    # --time, --budget, --minimize-budget: a week
MAX_HASH_SEED = 4_294_967_295  # PYTHONHASHSEED's range is [0, 2**32 - 1]


def _positive(kind, most=None):
    def parse(text):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {'an' if kind is int else 'a'} {kind.__name__}, "
                                             f"got {text!r}") from None
        if not value > 0:
            raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
        if most is not None and not value <= most:  # inf too
            raise argparse.ArgumentTypeError(f"must be <= {most:g}, got {text}")
        return value
    parse.__name__ = f"positive {kind.__name__}"
    return parse


def _shard(text):
    i, sep, n = text.partition("/")
    if not (sep and i.isdigit() and n.isdigit() and 1 <= int(i) <= int(n)):
        raise argparse.ArgumentTypeError(f"expected I/N with 1 <= I <= N, got {text!r}")
    return int(i), int(n)


def _nonnegative_int(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an int, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return value


def _arch(text):
    if text not in ARCHES:
        raise argparse.ArgumentTypeError(f"unknown arch {text!r}; known: {', '.join(ARCHES)}")
    return text


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


def _cannot_write(path: Path) -> str | None:
    """Why no file can be made in directory `path` (or, not there yet, in the nearest directory
    above it, where it would be made), or None. Asked of access(2), which writes nothing and, for
    root too, answers no for a read-only mount or an immutable directory."""
    where = path.expanduser()
    while not where.exists() and where != where.parent:
        where = where.parent
    if not where.is_dir():
        return f"{where} is a file, not a directory"
    if not os.access(where, os.W_OK | os.X_OK):
        return f"cannot write in {where}: no write permission, or a read-only file system"
    return None


def _cannot_write_file(path: Path) -> str | None:
    """Why file `path` cannot be written (made, or replaced), or None."""
    if path.expanduser().is_dir():
        return f"{path} is a directory, not a file"
    return _cannot_write(path.expanduser().parent)


def _path(text) -> Path:
    if not text:  # Path("") is the current directory: never what was meant
        raise argparse.ArgumentTypeError("an empty path")
    return Path(text).expanduser()


def _checked(why):
    """An argparse type that takes a path when why(Path) is None, else says why not in one line."""
    def parse(text):
        reason = why(_path(text))
        if reason:
            raise argparse.ArgumentTypeError(reason)
        return text
    parse.__name__ = "path"
    return parse


_out_dir = _checked(_cannot_write)                 # a directory to write in (made if missing)
_out_file = _checked(_cannot_write_file)           # a file to write
_dir = _checked(lambda p: f"{p} is a file, not a directory" if p.exists() and not p.is_dir() else None)  # read, if there
_in_dir = _checked(lambda p: None if p.is_dir() else f"{p} is a file, not a directory" if p.exists() else
                   f"no directory {p}")
_in_file = _checked(lambda p: None if p.is_file() else f"{p} is a directory, not a file" if p.is_dir() else
                    f"no file {p}")


def _timeouts(args):
    from harness.pool import Timeouts
    return Timeouts(args.compile_timeout, args.run_timeout)


def cmd_env(args) -> int:
    for k, v in environment().items():
        print(f"{k:16} {v}")
    return 0


def cmd_forms(args) -> int:
    """One `block form` pair per line (the default first), with the families that write it."""
    users = {b: [n for n in kernels.FAMILIES if b in kernels.family(n).forms] for b in case_mod.FORMS}
    for block, forms in case_mod.FORMS.items():
        for i, (form, how) in enumerate(forms.items()):
            print(f"{block} {form}{' (default)' if i == 0 else ''}: {how} [{', '.join(users[block]) or 'no family'}]")
    return 0


def cmd_index(args) -> int:
    """reproducers/INDEX.md from the reproducer files."""
    path = Path(args.dir) / "INDEX.md"
    path.write_text(record.index(args.dir))
    print(f"wrote {path}")
    return 0


def cmd_programs(args) -> int:
    """The vocabulary of generated programs: statement kinds, the attention chains they start from, the twins."""
    from harness import compat
    from harness.kernels import program_family
    from harness.programs import KINDS, generate, model

    def first(doc):
        return " ".join(doc.split()).split(". ")[0].rstrip(".")
    for name, module in KINDS.items():
        print(f"statement {name}: {first(module.__doc__).removeprefix(f'{name}: ')}")
    for name, write in generate.TEMPLATES.items():
        print(f"chain {name}: {first(write.__doc__)} [{model.fingerprint(generate.template(name))}]")
    for knob in program_family.TWINS:
        print(f"twin {knob} ({compat.KNOBS[knob]}): bit for bit the knob-free kernel's outputs where the arithmetic is exact")
    return 0


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
        bare = [name for name in families if args.peer and not kernels.family(name).peer]
        if bare:
            raise case_mod.CaseError(f"no test shapes declared for {', '.join(bare)} (Family.peer)")
        _examples(args, families)
    except case_mod.CaseError as e:
        print(f"harness {args.command}: {e}", file=sys.stderr)
        return 2
    return _campaign(args, families)


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
    if fam.module != file.name:
        print(f"harness check: adapter {attr} is for {fam.module}, not {file.name}", file=sys.stderr)
        return 2
    families = (fam.name,) if args.inside_only else (fam.name,) + ((fam.name + kernels.OUTSIDE_MODE,)
                                                                   if any(not r.asserted for r in fam.rules) else ())
    return _campaign(args, families)


def _campaign(args, families) -> int:
    from harness import campaign

    if args.cases and (args.cases_from or args.peer):  # those run every case they list: a count would be ignored
        print(f"harness {args.command}: --cases does not go with {'--cases-from' if args.cases_from else '--peer'}, "
              "which runs every case it lists", file=sys.stderr)
        return 2
    opts = campaign.Options(out=Path(args.out), families=families, cases=args.cases or DEFAULT_CASES, seed=args.seed,
                            per_kernel=args.per_kernel, per_row=args.per_row,
                            cases_from=args.cases_from and Path(args.cases_from),
                            workers=args.workers, arch=args.arch, timeouts=_timeouts(args), time=args.time or 0,
                            reproducers=Path(args.reproducers), minimize=args.minimize,
                            minimize_budget=args.minimize_budget, pairwise=not args.no_pairwise,
                            shard=args.shard, stop_after=args.stop_after_failures, sanitize=args.sanitize_failures,
                            peer=args.peer, max_worker_restarts=args.max_worker_restarts)
    try:
        return campaign.run(opts)
    except campaign.CampaignError as e:
        print(f"harness {args.command}: {e}", file=sys.stderr)
        return 2


def cmd_report(args) -> int:
    from harness import campaign, report

    path = Path(args.dir) / "results.jsonl"
    if not path.is_file():
        print(f"harness report: no {path}", file=sys.stderr)
        return 2
    results, notes = campaign.read_results(path, resume=False)
    if results:
        why = _cannot_write(Path(args.dir))
    else:
        why = f"no line of {path} could be read as a result" if notes else f"{path} holds no results"
    if why:
        print(f"harness report: {why}", file=sys.stderr)
        return 2
    for note in notes:
        print(note, file=sys.stderr)
    broken = []
    known = record.known_signatures(args.reproducers, broken)
    if broken:
        print(record.skipped_line(args.reproducers, broken), file=sys.stderr)
    print(report.write(args.dir, results, known))
    print(f"wrote {Path(args.dir) / 'summary.md'}, results.csv, report.html")
    return 0


def _load(args, command):
    """The reproducer named on the command line (and, for a command taking --examples, its outside
    kernel's examples made ready), or None after one line on stderr."""
    try:
        path = record.find(args.reproducer, args.dir)
        rep = record.load(path)
        if hasattr(args, "examples"):
            _examples(args, (rep.case.family,))
        return rep, path
    except (record.RecordError, case_mod.CaseError) as e:
        print(f"harness {command}: {e}", file=sys.stderr)
        return None, None


def _examples(args, families) -> None:
    """With outside kernels among `families`: point the workers at --examples (or HARNESS_EXAMPLES),
    checked against the installed TileLang; CaseError (exit 2) when it is missing or of another release."""
    from importlib import metadata

    from harness.outside import source

    if not args.examples and not any(f.removesuffix(kernels.OUTSIDE_MODE) in kernels.OUTSIDE for f in families):
        return
    where = args.examples or os.environ.get(source.ENV)
    if not where:
        raise source.ExamplesError("outside kernels need TileLang's examples: --examples PATH "
                                   "(`harness examples fetch` unpacks the installed release's)")
    try:
        installed = metadata.version("tilelang")
    except metadata.PackageNotFoundError:
        installed = None
    release = source.use(where, installed) if installed else None
    for f in families:
        module = kernels.family(f).module
        if module:
            source.module_path(module)
    print(f"examples: {source.root()} (TileLang {release}'s)", file=sys.stderr)


def cmd_examples(args) -> int:
    from importlib import metadata

    from harness.outside import source

    release = args.version or metadata.version("tilelang")
    try:
        where = source.fetch(release, Path(args.to))
    except source.ExamplesError as e:
        print(f"harness examples: {e}", file=sys.stderr)
        return 2
    print(where / "examples")
    return 0


def cmd_repro(args) -> int:
    from harness import replay

    rep, path = _load(args, "repro")
    if rep is None:
        return 2
    if args.sanitize:
        return _sanitized(args, rep, path)
    env = environment()
    if not args.json:
        print(f"reproducer {rep.id} ({path}): {rep.title}")
        print(f"recorded:  {record.describe(rep.result)}  "
              f"[{replay.where(rep.environment)}]")
    out = replay.replay(rep, args.logs, args.runs, args.arch, _timeouts(args), env, fresh=args.fresh)
    if args.json:  # what bisect and matrix read: one object on one line
        print(json.dumps({"id": rep.id, "status": out.status, "verdict": out.verdict, "evidence": out.evidence,
                          "now": [record.describe(r) for r in out.results], "environment": env}))
        return out.status
    for line in out.evidence:
        print(line)
    print(out.verdict)
    return out.status


def cmd_triage(args) -> int:
    """Where in the compiler a recorded bug comes from (harness.triage), compiled here: the pass that
    raised a compile error, or the pass that made a generated-code hazard."""
    from harness import replay, triage

    rep, _ = _load(args, "triage")
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
    print(f"recorded:  {record.describe(rep.result)}  [{replay.where(rep.environment)}]")
    out, report = replay.sanitized(rep, args.sanitize, args.logs, args.arch, _timeouts(args), env)
    for line in [*out.evidence, out.verdict]:
        print(line)
    if report is None:  # nothing ran here
        return out.status
    print(report.describe())
    return 1 if report.hazards or out.status == 1 else out.status


def cmd_export(args) -> int:
    from harness import export

    rep, path = _load(args, "export")
    if rep is None:
        return 2
    to = Path(args.to) if args.to else Path(args.dir) / "upstream" / f"{rep.id}.standalone.py"
    why = _cannot_write_file(to)
    if why:
        print(f"harness export: {why}", file=sys.stderr)
        return 2
    try:
        written, calls = export.export(rep, to, flat=args.flat)
    except (export.ExportError, case_mod.CaseError) as e:
        print(f"harness export: {e}", file=sys.stderr)
        return 2
    print(f"wrote {written} ({', '.join(c.kernel for c in calls) or 'a generated program'})")
    if not args.check_program:
        return 0
    lines = export.check_program(written, calls)
    print("\n".join(lines))
    return 0 if all(line.startswith("same") for line in lines) else 1


def cmd_reduce(args) -> int:
    """A standalone reproducer shrunk while it prints the same REPRODUCED line (harness.reduce)."""
    from harness import reduce

    given, rep = Path(args.reproducer), None
    if not (given.suffix == ".py" and given.is_file()):
        rep, given = _load(args, "reduce")
        if rep is None:
            return 2
    to = Path(args.out) if args.out else reduce.default_out(given, rep and rep.id, Path(args.dir))
    why = _cannot_write_file(to)
    if why:
        print(f"harness reduce: {why}", file=sys.stderr)
        return 2
    try:
        r = reduce.reduce_file(given, to, args.jobs, args.timeout, rep=rep, log=lambda line: print(line, flush=True),
                               cache=args.cache and Path(args.cache), budget=args.budget)
    except reduce.ReduceError as e:  # 2: export refused it; 125: it does not reproduce here
        print(f"harness reduce: {e}", file=sys.stderr)
        return e.status
    print(r.summary(args.reproducer))
    print(r.line)
    print(f"wrote {to}")
    return 0


def cmd_upstream(args) -> int:
    """A report ready to file on TileLang's tracker (harness.upstream): what the harness holds, no network."""
    from harness import upstream

    rep, _ = _load(args, "upstream")
    if rep is None:
        return 2
    covering = upstream.primary(rep, Path(args.dir))  # one root cause, one report
    to = Path(args.to) if args.to else Path(args.dir) / "upstream" / f"{covering.id}.md"
    why = _cannot_write_file(to) or _not_states(args.state or (), {rep.id, covering.id})
    if why:
        print(f"harness upstream: {why}", file=sys.stderr)
        return 2
    if covering.id != rep.id:
        print(f"{rep.id} shares its root cause with {covering.id}: one report, {covering.id}'s, lists it")
        rep = covering
    unavailable = None
    try:
        _examples(args, (rep.case.family,))
    except case_mod.CaseError as e:  # an outside kernel without its examples: the report says triage could not run
        unavailable = str(e)
    try:
        out = upstream.write(rep, to, Path(args.dir), states=args.state or (), envs=Path(args.envs), arch=args.arch,
                             unavailable=unavailable)
    except OSError as e:
        print(f"harness upstream: cannot write {to}: {e.strerror or e}", file=sys.stderr)
        return 2
    print(f"wrote {to}: " + "; ".join(out.summary))
    return 0


def _not_states(paths, ids) -> str | None:
    """Why one of `paths` is not a `harness bisect` state file of a reproducer in `ids`, or None."""
    from harness import bisect

    for path in paths:
        try:
            of = (bisect.read_state(Path(path)) or {}).get("reproducer")
        except bisect.BisectError as e:
            return str(e)
        if of not in {f"{i}.json" for i in ids}:
            return f"state {path} is a bisect of {of!r}, not of {' or '.join(sorted(ids))}"
    return None


def cmd_minimize(args) -> int:
    from harness import replay

    rep, path = _load(args, "minimize")
    if rep is None:
        return 2
    why = _cannot_write_file(path)  # the minimized reproducer replaces it
    if why:
        print(f"harness minimize: {why}", file=sys.stderr)
        return 2
    status, line = replay.minimize(rep, path, Path(args.logs) / rep.id, _timeouts(args), args.arch, args.confirm,
                                   args.budget, args.runs, log=lambda text: print(text, file=sys.stderr))
    print(line)
    return status


def cmd_bisect(args) -> int:
    from harness import bisect

    rep, path = _load(args, "bisect")
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
    if kernels.family(rep.case.family).module:
        print(f"harness bisect: {rep.id} is of an outside kernel ({rep.case.family}), whose examples differ by "
              "release: bisect cannot give each step its own; `harness matrix --examples DIR` replays it per release",
              file=sys.stderr)
        return 2
    log = lambda line: print(line, file=sys.stderr, flush=True)
    try:
        if args.repo:
            provider = bisect.Commits(envs, Path(args.repo).resolve(), args.build)
            if args.at:  # one step, as `git bisect run` calls it
                status, evidence = bisect.at_commit(path.resolve(), provider, args.at, args.runs, envs, args.fresh)
                print(evidence)
                return status
        else:
            provider = bisect.Releases(envs, args.wheels and Path(args.wheels))
        run = bisect.start(path.resolve(), rep.id, args.good, args.bad, provider, args.state and Path(args.state), envs,
                           args.runs, args.fresh, log=log)
        text = run.run()
    except bisect.Pending as e:
        done = ", ".join(f"{v} {bisect.WORDS[s['status']]}" for v, s in run.steps.items()) or "none"
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


def cmd_matrix(args) -> int:
    """Everything it cannot do here is said before anything installs: releases, reproducers, examples."""
    from harness import bisect, campaign

    paths = sorted(Path(args.dir).glob("*.json"))
    releases = bisect.Releases(Path(args.envs).expanduser(), args.wheels and Path(args.wheels))
    try:
        if args.cases_from:
            families = {c.family for c in campaign.load_cases(args.cases_from)}
        else:
            if not Path(args.dir).is_dir():
                raise record.RecordError(f"--dir {args.dir}: no such directory")
            if not paths:
                raise record.RecordError(f"--dir {args.dir}: no reproducers (*.json) in it")
            families = {record.load(p).case.family for p in paths}
        wanted = [Version(v) for v in args.releases.split(",")]
        twice = sorted({str(v) for v in wanted if wanted.count(v) > 1})
        if twice:
            raise bisect.BisectError(f"--releases lists {', '.join(twice)} twice")
        _matrix_examples(args, families, wanted)
        here = all(releases.at_hand(v) for v in wanted)  # all installed: no index needed (a GPU machine offline)
        known = wanted if here else bisect.available(releases.wheels)
        missing = [str(v) for v in wanted if v not in known]
        if missing:
            raise bisect.BisectError(f"not TileLang releases: {', '.join(missing)}")
    except (record.RecordError, bisect.BisectError, campaign.CampaignError, InvalidVersion) as e:
        print(f"harness matrix: {e}", file=sys.stderr)
        return 2
    log = lambda line: print(line, file=sys.stderr)  # noqa: E731
    examples = args.examples and Path(args.examples)
    if args.cases_from:
        print(bisect.cases_matrix(Path(args.cases_from), sorted(wanted), releases, Path(args.out), log=log,
                                  examples=examples))
    else:
        print(bisect.matrix(paths, sorted(wanted), releases, args.runs, log=log, jobs=args.jobs, fresh=args.fresh,
                            examples=examples))
    return 0


def _matrix_examples(args, families, releases) -> None:
    """Outside kernels need each release's examples: --examples DIR, holding one tree per release as
    `harness examples fetch --to DIR` leaves them; BisectError naming what is missing."""
    from harness import bisect

    outside = sorted(f for f in families if kernels.family(f).module)
    if not outside:
        return
    fetch = "`harness examples fetch --version V --to DIR` for each release"
    if not args.examples:
        named = ", ".join(outside[:3]) + (f" and {len(outside) - 3} more" if len(outside) > 3 else "")
        raise bisect.BisectError(f"outside kernels ({named}) need each release's examples: --examples DIR ({fetch})")
    missing = [str(v) for v in releases if bisect.examples_tree(Path(args.examples), v) is None]
    if missing:
        raise bisect.BisectError(f"--examples {args.examples} has no tree for TileLang {', '.join(missing)} "
                                 f"(tilelang-<release>/: {fetch})")


def cmd_determinism(args) -> int:
    from harness import campaign, determinism

    try:
        cases = campaign.load_cases(args.cases_from)
    except campaign.CampaignError as e:
        print(f"harness determinism: {e}", file=sys.stderr)
        return 2
    text, found = determinism.check(cases, args.hash_seeds, Path(args.out), args.arch, args.workers)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "determinism.md").write_text(text)
    print(text)
    return 1 if found else 0


def _replay_args(p):
    p.add_argument("reproducer", help="a reproducer file, or an id (or unique id prefix) in --dir")
    p.add_argument("--arch", type=_arch, default="sm_90a",
                   help=f"compile target for replaying a compile error without a GPU: {', '.join(ARCHES)}")
    p.add_argument("--dir", type=_dir, default="reproducers", help="where reproducers live")
    p.add_argument("--logs", type=_out_dir, default="reports/repro", help="worker logs go here")
    _timeout_args(p)


def _campaign_args(p):
    """The options `harness run` and `harness check` share."""
    p.add_argument("--cases", type=_positive(int, MAX_CASES),
                   help=f"number of distinct cases (at most {MAX_CASES}) (default: {DEFAULT_CASES})")
    p.add_argument("--cases-from", type=_in_file,
                   help="run exactly the cases of this JSON-lines file (a run's cases.jsonl); not with --cases")
    p.add_argument("--peer", action="store_true",
                   help="run the shapes the kernels' own tests run (outside kernels), not drawn cases: the baseline")
    p.add_argument("--time", type=_positive(float, MAX_SECONDS),
                   help="end the cases after this many seconds (those in flight are dropped; the same command "
                        f"continues; at most {MAX_SECONDS:g}, a week; default: no limit)")
    p.add_argument("--seed", type=_nonnegative_int, default=0, help="Hypothesis seed the cases are drawn from")
    p.add_argument("--per-kernel", type=_positive(int, MAX_PER_KERNEL), default=4,
                   help=f"length variants per compiled kernel (at most {MAX_PER_KERNEL})")
    p.add_argument("--per-row", type=_positive(int, MAX_PER_KERNEL), default=1,
                   help=f"length variants per covering-array kernel (more where compiles are slow; at most {MAX_PER_KERNEL})")
    p.add_argument("--shard", type=_shard, default="1/1", metavar="I/N",
                   help="run the I-th of N disjoint parts of the cases, split by kernel (several runners)")
    p.add_argument("--stop-after-failures", type=_nonnegative_int, default=0, metavar="N",
                   help="stop starting cases after N new failures (not a recorded bug; 0: run them all)")
    p.add_argument("--max-worker-restarts", type=_nonnegative_int, metavar="N",
                   help="replace workers that died or hung N times in all, then stop the run (exit 1; the same "
                        "command continues it; default: 4 per worker)")
    p.add_argument("--no-pairwise", action="store_true",
                   help="draw every kernel at random (default: first a covering array of static feature pairs)")
    p.add_argument("--out", type=_out_dir, default="reports/run", help="results directory (the same one resumes)")
    p.add_argument("--workers", type=_positive(int, MAX_WORKERS), default=0,
                   help=f"worker processes (default: CPU cores - 1; at most {MAX_WORKERS})")
    p.add_argument("--arch", type=_arch, default="sm_90a", help=f"compile target when there is no GPU: {', '.join(ARCHES)}")
    _timeout_args(p)
    p.add_argument("--reproducers", type=_out_dir, default="reproducers",
                   help="where to record one reproducer per new failure")
    p.add_argument("--minimize", action="store_true", help="minimize each new failure before recording it")
    p.add_argument("--minimize-budget", type=_positive(float, MAX_SECONDS), default=300,
                   help=f"seconds per failure (at most {MAX_SECONDS:g})")
    p.add_argument("--sanitize-failures", metavar="TOOL", choices=sanitizer.TOOLS,
                   help="rerun each new reproducer once under compute-sanitizer TOOL (slow)")


def _timeout_args(p):
    p.add_argument("--compile-timeout", type=_positive(float, MAX_TIMEOUT), default=600,
                   help=f"seconds for start + compile (at most {MAX_TIMEOUT:g}, a day)")
    p.add_argument("--run-timeout", type=_positive(float, MAX_TIMEOUT), default=60,
                   help=f"seconds for inputs + run + judge (at most {MAX_TIMEOUT:g})")


def parser() -> Parser:
    p = Parser(prog="harness", description="Correctness harness for TileLang attention kernels")
    p.add_argument("--register", action="append", default=[], metavar="NAME=MODULE:ATTR",
                   help="a kernel family of your own (a harness.kernels.Family at MODULE:ATTR) for this command and "
                        "its workers; repeatable, before the command")
    sub = p.add_subparsers(dest="command", required=True, parser_class=Parser)
    r = sub.add_parser("run", help="generate cases, run them, judge, report")
    r.add_argument("--families", default="fwd", help=f"comma-separated, each once, from {', '.join(kernels.names())}")
    _campaign_args(r)
    r.add_argument("--examples", type=_in_dir, help="a TileLang source tree (or its examples/) for outside kernels (tl_*)")
    r.set_defaults(func=cmd_run)
    ck = sub.add_parser("check", help="a kernel file of your own, under an adapter you write (docs/outside-kernels.md)")
    ck.add_argument("file", type=_in_file, help="the kernel's Python file")
    ck.add_argument("--adapter", required=True, metavar="FILE.py:NAME", help="the adapter (a Family) for it")
    ck.add_argument("--inside-only", action="store_true", help="skip the draws just outside its stated contract")
    _campaign_args(ck)
    ck.set_defaults(func=cmd_check, reproducers="reproducers", out="reports/check")
    rp = sub.add_parser("repro", help="replay a reproducer: exit 0 correct, 1 bug reproduced, 125 cannot test")
    rp.add_argument("--runs", type=_positive(int, MAX_RUNS), default=1,
                    help=f"run it this many times (flakiness; at most {MAX_RUNS})")
    rp.add_argument("--fresh", action="store_true", help="compile afresh for every run (a new worker, an empty "
                    "kernel cache): for bugs in which code a compile emits")
    _replay_args(rp)
    rp.add_argument("--examples", type=_in_dir,
                    help="a TileLang source tree (or its examples/), for an outside kernel's reproducer")
    rp.add_argument("--json", action="store_true", help="print one JSON object (status, verdict, evidence, the "
                    "environment) instead of the lines; the exit status is the same")
    rp.add_argument("--sanitize", metavar="TOOL", help="run it under compute-sanitizer: memcheck, racecheck, "
                    "synccheck or initcheck (slow; the caching allocator and guard bands off)")
    rp.set_defaults(func=cmd_repro)
    tr = sub.add_parser("triage", help="where in the compiler a recorded bug comes from: the pass that raised a compile "
                                       "error (and where what it rejects appeared), or the pass that made a generated-"
                                       "code hazard (IR excerpt)")
    tr.add_argument("reproducer", help="a reproducer file, or an id (or unique id prefix) in --dir")
    tr.add_argument("--dir", type=_dir, default="reproducers", help="where reproducers live")
    tr.add_argument("--arch", type=_arch, default="sm_90a", help=f"compile target without a GPU: {', '.join(ARCHES)}")
    tr.add_argument("--examples", type=_in_dir,
                    help="a TileLang source tree (or its examples/), for an outside kernel's reproducer")
    tr.set_defaults(func=cmd_triage)
    ex = sub.add_parser("examples", help="TileLang's own examples, for outside kernels: `harness examples fetch`")
    ex.add_argument("fetch", choices=["fetch"], help="fetch: download a release's source package and unpack its "
                    "examples/ and VERSION into TO/tilelang-<release>/ (the only action)")
    ex.add_argument("--version", help="TileLang release (default: the installed one)")
    ex.add_argument("--to", type=_out_dir, default="examples-src", help="unpack under this directory")
    ex.set_defaults(func=cmd_examples)
    xp = sub.add_parser("export", help="a reproducer as one Python file needing only tilelang and torch")
    xp.add_argument("reproducer", help="a reproducer file, or an id (or unique id prefix) in --dir")
    xp.add_argument("--dir", type=_dir, default="reproducers", help="where reproducers live")
    xp.add_argument("--to", type=_out_file, help="the file to write (default: DIR/upstream/<id>.standalone.py)")
    xp.add_argument("--check-program", action="store_true",
                    help="build the file's prim_funcs and compare their TIR script with the harness's (no compile)")
    xp.add_argument("--flat", action="store_true", help="the kernel modules merged into the file as plain code (what "
                    "harness reduce shrinks); a compile error's file then only compiles")
    xp.set_defaults(func=cmd_export)
    rd = sub.add_parser("reduce", help="shrink a standalone reproducer (a .py file, or a reproducer's flat export) while "
                        "it prints the same REPRODUCED line: picire's delta debugging, then lines (docs/reduce.md)")
    rd.add_argument("reproducer", help="a standalone .py file, or a reproducer file, id or unique id prefix in --dir")
    rd.add_argument("--dir", type=_dir, default="reproducers", help="where reproducers live")
    rd.add_argument("--out", type=_out_file, help="the reduced file (default: DIR/upstream/<id>.min.py, or FILE's "
                    "name with .min.py)")
    rd.add_argument("--jobs", type=_positive(int, MAX_WORKERS), default=1,
                    help=f"candidates tested at once (each its own process; at most {MAX_WORKERS})")
    rd.add_argument("--timeout", type=_positive(float, MAX_TIMEOUT), default=120,
                    help=f"seconds for one run of a candidate; past it, it does not reproduce (at most {MAX_TIMEOUT:g})")
    rd.add_argument("--cache", type=_out_dir, help="keep each candidate's outcome here: a rerun with it resumes")
    rd.add_argument("--budget", type=_positive(float, 7 * 24 * 3600), help="seconds; then the passes stop and "
                    "--out holds the smallest reproducing file found (it does at every moment of the run)")
    rd.set_defaults(func=cmd_reduce)
    up = sub.add_parser("upstream", help="a report ready to file on TileLang's tracker (markdown): environment, "
                        "standalone program, expected/observed, bisects, culprit pass, links; no network")
    up.add_argument("reproducer", help="a reproducer file, or an id (or unique id prefix) in --dir")
    up.add_argument("--dir", type=_dir, default="reproducers",
                    help="where reproducers live (others here: same root cause)")
    up.add_argument("--to", type=_out_file,
                    help="the report to write (default: DIR/upstream/<id>.md; the program goes beside it)")
    up.add_argument("--arch", type=_arch, default="sm_90a",
                    help=f"compile target for the triage without a GPU: {', '.join(ARCHES)}")
    up.add_argument("--examples", type=_in_dir,
                    help="a TileLang source tree (or its examples/), to triage an outside kernel")
    up.add_argument("--envs", type=_dir, default="~/.cache/harness/releases",
                    help="where `harness bisect` keeps its state files")
    up.add_argument("--state", type=_in_file, action="append", help="a bisect state file of this reproducer (--state "
                    "of `harness bisect`); repeatable")
    up.set_defaults(func=cmd_upstream)
    m = sub.add_parser("minimize", help="shrink a reproducer's case while its failure signature stays the same")
    m.add_argument("--budget", type=_positive(float, MAX_SECONDS), default=600,
                   help=f"seconds to spend shrinking (at most {MAX_SECONDS:g})")
    m.add_argument("--confirm", type=_positive(int, MAX_RUNS), default=2,
                   help=f"a step is kept only if it reproduces this many times in a row (at most {MAX_RUNS})")
    m.add_argument("--runs", type=_nonnegative_int, default=3, help="runs of the minimized case to triage flakiness (0: none)")
    _replay_args(m)
    m.set_defaults(func=cmd_minimize)
    b = sub.add_parser("bisect", help="find the TileLang release that changed a reproducer's behaviour")
    b.add_argument("reproducer", help="a reproducer file, or an id (or unique id prefix) in --dir")
    b.add_argument("--good", help="required (but with --at): a release (or commit) where the case behaves correctly")
    b.add_argument("--bad", help="required (but with --at): a release (or commit) where the bug shows (older than "
                   "--good: where it was fixed)")
    b.add_argument("--repo", type=_in_dir,
                   help="bisect the first-parent commits of this TileLang checkout instead of releases")
    b.add_argument("--build", help="with --repo: shell command, run in a checkout of each commit, that leaves a "
                                   "tilelang wheel in $HARNESS_WHEEL_DIR")
    b.add_argument("--at", help="with --repo: test this one commit and exit 0/1/125 (a `git bisect run` script)")
    b.add_argument("--runs", type=_positive(int, MAX_RUNS), default=1,
                   help=f"replays per step (flaky bugs: bad if any fails; at most {MAX_RUNS})")
    b.add_argument("--fresh", action="store_true", help="compile afresh for every replay (see repro --fresh)")
    b.add_argument("--envs", type=_out_dir, default="~/.cache/harness/releases",
                   help="one install directory per release, reused")
    b.add_argument("--wheels", type=_in_dir, help="install from the wheels in this directory, offline")
    b.add_argument("--state", type=_out_file,
                   help="bisect state file (default: under --envs); an interrupted bisect resumes from it")
    b.add_argument("--dir", type=_dir, default="reproducers", help="where reproducers live")
    b.set_defaults(func=cmd_bisect)
    mx = sub.add_parser("matrix", help="replay every reproducer on every release listed")
    mx.add_argument("--releases", required=True, help="comma-separated, e.g. 0.1.6.post2,0.1.10,0.1.15")
    mx.add_argument("--runs", type=_positive(int, MAX_RUNS), default=1, help=f"replays per reproducer and release "
                    f"(at most {MAX_RUNS})")
    mx.add_argument("--fresh", action="store_true", help="compile afresh for every replay (see repro --fresh)")
    mx.add_argument("--jobs", type=_positive(int, MAX_WORKERS), default=1,
                    help=f"reproducers replayed at once (each its own worker; at most {MAX_WORKERS})")
    mx.add_argument("--envs", type=_out_dir, default="~/.cache/harness/releases",
                    help="one install directory per release, reused")
    mx.add_argument("--wheels", type=_in_dir, help="install from the wheels in this directory, offline")
    mx.add_argument("--dir", type=_dir, default="reproducers", help="where reproducers live")
    mx.add_argument("--cases-from", type=_in_file, help="instead of the reproducers: run this campaign's cases "
                    "(cases.jsonl) on each release and count the verdicts")
    mx.add_argument("--out", type=_out_dir, default="reports/matrix",
                    help="with --cases-from: one results directory per release")
    mx.add_argument("--examples", type=_in_dir, help="for outside kernels: a directory of examples trees, one per "
                    "release, as `harness examples fetch --version V --to DIR` leaves them (DIR/tilelang-V)")
    mx.set_defaults(func=cmd_matrix)
    dt = sub.add_parser("determinism", help="compile a campaign's cases under several PYTHONHASHSEEDs; "
                        "list kernels whose generated code differs")
    dt.add_argument("--cases-from", type=_in_file, required=True, help="a campaign's cases.jsonl")
    dt.add_argument("--hash-seeds", type=_hash_seeds, default="0,7,13",
                    help=f"comma-separated PYTHONHASHSEED values, two different ones at least, each in [0, {MAX_HASH_SEED}]")
    dt.add_argument("--out", type=_out_dir, default="reports/determinism", help="one run per seed goes here")
    dt.add_argument("--arch", type=_arch, default="sm_90a", help=f"compile target without a GPU: {', '.join(ARCHES)}")
    dt.add_argument("--workers", type=_positive(int, MAX_WORKERS),
                    help=f"worker processes per run (default: CPU cores - 1; at most {MAX_WORKERS})")
    dt.set_defaults(func=cmd_determinism)
    rr = sub.add_parser("report", help="summary.md, results.csv and report.html (with plots) from a run's results")
    rr.add_argument("dir", type=_in_dir, help="a run's --out directory")
    rr.add_argument("--reproducers", type=_dir, default="reproducers", help="known bugs, to mark failures already recorded")
    rr.set_defaults(func=cmd_report)
    fo = sub.add_parser("forms", help="each kernel block's equivalent forms, and the families that write them")
    fo.set_defaults(func=cmd_forms)
    ix = sub.add_parser("index", help="reproducers/INDEX.md: every reproducer, what it records, what is ready to file")
    ix.add_argument("--dir", type=_out_dir, default="reproducers", help="where reproducers live; INDEX.md is written there")
    ix.set_defaults(func=cmd_index)
    pg = sub.add_parser("programs", help="generated programs' vocabulary: statement kinds, the chains they start from, the twins")
    pg.set_defaults(func=cmd_programs)
    e = sub.add_parser("env", help="what TileLang, torch, CUDA and GPU this machine has")
    e.set_defaults(func=cmd_env)
    return p


def main(argv=None) -> int:
    """The one boundary of every command: an exception it did not expect is the harness's own failure
    (HARNESS_ERROR), one line here and its traceback in a file, never exit 1 ("a bug found"); Ctrl-C is
    one line and 130, what was written so far kept (a run resumes)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    p = parser()
    if not argv:  # a bare `harness`: what it can do
        p.print_help()
        return 0
    args = p.parse_args(argv)
    try:
        for text in args.register:
            kernels.register(*kernels.spec(text))
        return args.func(args)
    except kernels.FamilyError as e:  # a family that cannot be registered or drawn: bad input, one line
        print(f"harness {args.command}: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"harness {args.command}: interrupted; what was written so far is kept", file=sys.stderr)
        return 130
    except Exception as e:
        # git bisect reads 1 as "bad": a step that failed on its own account says 125, "cannot test"
        step = args.command == "repro" or args.command == "bisect" and args.at
        first = next(iter(str(e).splitlines()), "")
        print(f"harness {args.command}: HARNESS_ERROR, the harness's own failure, not TileLang's: "
              f"{type(e).__name__}: {first} ({_keep_traceback(args.command, argv, e)})", file=sys.stderr)
        return 125 if step else HARNESS_ERROR_STATUS


ERROR_LOGS = "~/.cache/harness/errors"  # where a HARNESS_ERROR's traceback goes


def _keep_traceback(command, argv, e) -> str:
    """Write the traceback of `e` to a file under ERROR_LOGS: where it is (or why it is not)."""
    import time
    import traceback

    path = Path(ERROR_LOGS).expanduser() / f"{command}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.log"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"harness {' '.join(argv)}\n" + "".join(traceback.format_exception(type(e), e, e.__traceback__)))
    except OSError as err:
        return f"its traceback not kept: cannot write {path}: {err.strerror or err}"
    return f"traceback in {path}"


if __name__ == "__main__":
    sys.exit(main())
