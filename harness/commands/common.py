"""What the commands share: bounds on numbers, argparse types that refuse a bad value in one line
(before anything is written, compiled or installed), and the reproducer a command names."""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from harness import case as case_mod
from harness import kernels, reproducer_files, reproducer_loading, reproducer_model
from harness.worker import ARCHES

# Upper bounds on numeric options: beyond these a value is a typo, not a plan (--help says each).
MAX_WORKERS = 256             # --workers, --jobs
MAX_RUNS = 10_000             # --runs, --confirm
MAX_TIMEOUT = 86_400.0        # --compile-timeout, --run-timeout: a day
MAX_SECONDS = 7 * 86_400.0    # --time, --budget, --minimize-budget: a week
# Lower bound on a timeout that covers a process's start (--compile-timeout, reduce --timeout): a worker
# imports torch and TileLang before it compiles, 0.9 to 2.3 s on an idle 2-core machine; below 5 s a
# timeout would time out the start and call it a hang of the compiler.
MIN_START_TIMEOUT = 5.0


# Exit statuses every command shares; each command's module declares its own in EXITS (the README's table is
# cli.exit_table(), a test keeps the two the same). 130, Ctrl-C, is cli.main's for every command.
BAD_INPUT = "bad input"
HARNESS_ERROR = "HARNESS_ERROR"
DONE = {0: "done", 2: BAD_INPUT, 4: HARNESS_ERROR}
FOUND = {**DONE, 1: "found: `triage` a culprit pass, `export --check-program` a prim_func that differs"}
# reduce and minimize change nothing where the bug is not here: not 1, which repro says for "reproduced"
NOT_HERE = {**DONE, 125: "nothing changed: not reproduced here, or cannot test here"}


def positive(kind, most=None, least=None):
    def parse(text):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {'an' if kind is int else 'a'} {kind.__name__}, "
                                             f"got {text!r}") from None
        if not value > 0:
            raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
        if least is not None and not value >= least:
            raise argparse.ArgumentTypeError(f"must be >= {least:g} (what a worker needs to start), got {text}")
        if most is not None and not value <= most:  # inf too
            raise argparse.ArgumentTypeError(f"must be <= {most:g}, got {text}")
        return value
    parse.__name__ = f"positive {kind.__name__}"
    return parse


def nonnegative_int(text, most=None):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an int, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    if most is not None and value > most:
        raise argparse.ArgumentTypeError(f"must be <= {most:g}, got {text}")
    return value


def runs_or_none(text):
    """A count of runs, 0 allowed (none), bounded as every --runs is."""
    return nonnegative_int(text, MAX_RUNS)


def arch(text):
    if text not in ARCHES:
        raise argparse.ArgumentTypeError(f"unknown arch {text!r}; known: {', '.join(ARCHES)}")
    return text


NAME_MAX = 255    # bytes in one path component (Linux): a longer one fails every call with ENAMETOOLONG
PATH_MAX = 4096   # bytes in a whole path, its final NUL included


def bad_path(text: str) -> str | None:
    """Why `text` cannot be a path on this system (empty, a NUL, too long, not encodable), or None."""
    if not text:  # Path("") is the current directory: never what was meant
        return "an empty path"
    if "\0" in text:
        return f"a NUL character in the path {text[:60]!r}"
    try:
        raw = os.fsencode(text)
    except UnicodeEncodeError as e:
        return f"the path {text[:60]!r} cannot be encoded ({e.reason})"
    if len(raw) >= PATH_MAX:
        return f"a path of {len(raw)} bytes (at most {PATH_MAX - 1}): {text[:40]!r}..."
    long = next((c for c in raw.split(b"/") if len(c) > NAME_MAX), None)
    if long is not None:
        return f"a path component of {len(long)} bytes (at most {NAME_MAX}): {os.fsdecode(long)[:40]!r}..."
    return None


def _dangling(path: Path) -> str | None:
    """Why `path` names a symbolic link that leads nowhere (a missing target, or a loop), or None."""
    if path.is_symlink() and not path.exists():
        return f"{path} is a symbolic link to nothing (its target is missing, or the links loop)"
    return None


def cannot_write(path: Path) -> str | None:
    """Why no file can be made in directory `path` (or, not there yet, in the nearest directory
    above it, where it would be made), or None. Asked of access(2), which writes nothing and, for
    root too, answers no for a read-only mount or an immutable directory."""
    where = path.expanduser()
    while not where.exists() and where != where.parent:
        why = _dangling(where)
        if why:
            return why
        where = where.parent
    if not where.is_dir():
        return f"{where} is a file, not a directory"
    if not os.access(where, os.W_OK | os.X_OK):
        return f"cannot write in {where}: no write permission, or a read-only file system"
    return None


def cannot_write_file(path: Path) -> str | None:
    """Why file `path` cannot be written (made, or replaced), or None."""
    path = path.expanduser()
    if path.is_dir():
        return f"{path} is a directory, not a file"
    why = _dangling(path)
    if why:
        return why
    if path.exists() and not os.access(path, os.W_OK):
        return f"cannot write {path}: read-only (or immutable), or on a read-only file system"
    return cannot_write(path.parent)


def cannot_write_files(directory: Path, files=(), dirs=()) -> str | None:
    """Why one of `files` or `dirs` (names) in `directory` cannot be written, or None: every output
    of a command, checked before its first compile."""
    directory = directory.expanduser()
    for name in dirs:
        d = directory / name
        why = _dangling(d) or (f"{d} is a file, not a directory" if d.exists() and not d.is_dir() else
                               cannot_write(d) if d.is_dir() else None)
        if why:
            return why
    return cannot_write(directory) or next(filter(None, (cannot_write_file(directory / f) for f in files)), None)


def cannot_write_any(*checks) -> str | None:
    """The first reason among `checks` (callables), any OSError a check raised said in one line."""
    for check in checks:
        try:
            why = check()
        except OSError as e:
            why = f"{e.filename or ''}: {e.strerror or e}".lstrip(": ")
        if why:
            return why
    return None


ROOT = Path(__file__).resolve().parents[2]  # the folder holding the harness package: a checkout, or site-packages
# The checkout's own folders: a run's files written there would be read as sources (its run.json as a reproducer).
SOURCES = ("harness", "cases", "tests", "docs", "findings", "reproducers", "benchmarks", "scripts", ".ci", ".github", ".git")


def inside_sources(out, reproducers) -> str | None:
    """Why a run's output folder `out` may not be used: it is the checkout itself, or is or lies inside
    the reproducers folder or one of the project's own folders; else None."""
    where = Path(out).expanduser().resolve()
    if where == ROOT:
        return f"{out} is {ROOT}, the project itself: a run writes elsewhere (reports/run, say)"
    for folder, what in ((Path(reproducers).expanduser().resolve(), "--reproducers"),
                         *((ROOT / s, f"the project's own {s}/") for s in SOURCES)):
        if where == folder or folder in where.parents:
            return f"{out} is {'' if where == folder else 'inside '}{folder} ({what}): a run writes elsewhere"
    return None


def is_file(path: Path) -> bool:
    """path.is_file(), False where the check itself fails (EACCES on the way, say)."""
    try:
        return path.is_file()
    except OSError:
        return False


def _path(text) -> Path:
    why = bad_path(text)
    if why:
        raise argparse.ArgumentTypeError(why)
    try:
        return Path(text).expanduser()
    except RuntimeError as e:  # ~nosuchuser
        raise argparse.ArgumentTypeError(f"{text[:60]!r}: {e}") from None


def _checked(why):
    """An argparse type that takes a path when why(Path) is None, else says why not in one line
    (an OSError the check meets, ELOOP or EACCES on the way, said too: argparse would let it out raw)."""
    def parse(text):
        path = _path(text)
        reason = bad_path(str(path)) or cannot_write_any(lambda: why(path))
        if reason:
            raise argparse.ArgumentTypeError(reason)
        return text
    parse.__name__ = "path"
    return parse


out_dir = _checked(cannot_write)                 # a directory to write in (made if missing)
out_file = _checked(cannot_write_file)           # a file to write
maybe_dir = _checked(lambda p: f"{p} is a file, not a directory" if p.exists() and not p.is_dir() else None)  # read, if there
in_dir = _checked(lambda p: None if p.is_dir() else f"{p} is a file, not a directory" if p.exists() else
                   _dangling(p) or f"no directory {p}")
in_file = _checked(lambda p: None if p.is_file() else f"{p} is a directory, not a file" if p.is_dir() else
                    f"{p} is not a regular file (a FIFO, a socket or a device)" if p.exists() else
                    _dangling(p) or f"no file {p}")
any_path = _checked(lambda p: None)              # a path the command checks itself (a socket, a file or an id)


def timeouts(args):
    from harness.pool import Timeouts
    return Timeouts(args.compile_timeout, args.run_timeout)

def load(args, command):
    """The reproducer named on the command line (and, for a command taking --examples, its outside
    kernel's examples made ready; for one taking --logs, its worker log checked writable), or None after
    one line on stderr."""
    try:
        path = reproducer_files.find(args.reproducer, args.dir)
        rep = reproducer_loading.load(path)
        why = getattr(args, "logs", None) and cannot_write_any(
            lambda: cannot_write_files(Path(args.logs) / rep.id, files=("worker-0.log",)))
        if why:
            raise reproducer_model.RecordError(f"--logs: {why}")
        if hasattr(args, "examples"):
            use_examples(args, (rep.case.family,))
        return rep, path
    except (reproducer_model.RecordError, case_mod.CaseError) as e:
        print(f"harness {command}: {e}", file=sys.stderr)
        return None, None


def guard_bands() -> bool:
    """Whether a campaign's workers (or a server's) guard their buffers (harness.bands): HARNESS_BANDS=off turns
    the bands off, to measure what they cost."""
    return os.environ.get("HARNESS_BANDS", "on") != "off"


def use_examples(args, families) -> None:
    """With outside kernels among `families`: point the workers at --examples (or $HARNESS_EXAMPLES: cli.main),
    checked against the installed TileLang; CaseError (exit 2) when it is missing or of another release."""
    from importlib import metadata

    from harness.outside import source

    if not args.examples and not any(f.removesuffix(kernels.OUTSIDE_MODE) in kernels.OUTSIDE for f in families):
        return
    where = args.examples or kernels.examples()
    if not where:
        raise source.ExamplesError("outside kernels need TileLang's examples: --examples PATH "
                                   "(`harness examples fetch` unpacks the installed release's)")
    try:
        installed = metadata.version("tilelang")
    except metadata.PackageNotFoundError:
        installed = None
    release = source.use(where, installed) if installed else None
    for f in families:
        module = kernels.family(f).runner.module
        if module:
            source.module_path(module)
    print(f"examples: {source.root()} (TileLang {release}'s)", file=sys.stderr)


def reproducer_args(p, dir_help="where reproducers live"):
    """The recorded reproducer a command reads: a file, or an id (or unique prefix) in --dir."""
    p.add_argument("reproducer", type=any_path, help="a reproducer file, or an id (or unique id prefix) in --dir")
    p.add_argument("--dir", type=maybe_dir, default="reproducers", help=dir_help)


def replay_args(p):
    reproducer_args(p)
    p.add_argument("--arch", type=arch, default="sm_90a",
                   help=f"compile target for replaying a compile error without a GPU: {', '.join(ARCHES)}")
    p.add_argument("--logs", type=out_dir, default="reports/repro", help="worker logs go here")
    timeout_args(p)


def timeout_args(p):
    p.add_argument("--compile-timeout", type=positive(float, MAX_TIMEOUT, MIN_START_TIMEOUT), default=600,
                   help=f"seconds for start + compile (at least {MIN_START_TIMEOUT:g}: a worker needs up to 2.3 s to "
                        f"start on 2 idle cores; at most {MAX_TIMEOUT:g}, a day)")
    p.add_argument("--run-timeout", type=positive(float, MAX_TIMEOUT), default=60,
                   help=f"seconds for inputs + run + judge (at most {MAX_TIMEOUT:g})")

