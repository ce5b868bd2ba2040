"""What the commands share: bounds on numbers, argparse types that refuse a bad value in one line
(before anything is written, compiled or installed), and the reproducer a command names."""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from harness import case as case_mod
from harness import kernels, record
from harness.worker import ARCHES

# Upper bounds on numeric options: beyond these a value is a typo, not a plan (--help says each).
MAX_WORKERS = 256             # --workers, --jobs
MAX_RUNS = 10_000             # --runs, --confirm
MAX_TIMEOUT = 86_400.0        # --compile-timeout, --run-timeout: a day
MAX_SECONDS = 7 * 86_400.0    # --time, --budget, --minimize-budget: a week


def positive(kind, most=None):
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


def nonnegative_int(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an int, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return value


def arch(text):
    if text not in ARCHES:
        raise argparse.ArgumentTypeError(f"unknown arch {text!r}; known: {', '.join(ARCHES)}")
    return text


def cannot_write(path: Path) -> str | None:
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


def cannot_write_file(path: Path) -> str | None:
    """Why file `path` cannot be written (made, or replaced), or None."""
    if path.expanduser().is_dir():
        return f"{path} is a directory, not a file"
    return cannot_write(path.expanduser().parent)


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


out_dir = _checked(cannot_write)                 # a directory to write in (made if missing)
out_file = _checked(cannot_write_file)           # a file to write
maybe_dir = _checked(lambda p: f"{p} is a file, not a directory" if p.exists() and not p.is_dir() else None)  # read, if there
in_dir = _checked(lambda p: None if p.is_dir() else f"{p} is a file, not a directory" if p.exists() else
                   f"no directory {p}")
in_file = _checked(lambda p: None if p.is_file() else f"{p} is a directory, not a file" if p.is_dir() else
                    f"no file {p}")


def timeouts(args):
    from harness.pool import Timeouts
    return Timeouts(args.compile_timeout, args.run_timeout)

def load(args, command):
    """The reproducer named on the command line (and, for a command taking --examples, its outside
    kernel's examples made ready), or None after one line on stderr."""
    try:
        path = record.find(args.reproducer, args.dir)
        rep = record.load(path)
        if hasattr(args, "examples"):
            use_examples(args, (rep.case.family,))
        return rep, path
    except (record.RecordError, case_mod.CaseError) as e:
        print(f"harness {command}: {e}", file=sys.stderr)
        return None, None


def use_examples(args, families) -> None:
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


def reproducer_args(p, dir_help="where reproducers live"):
    """The recorded reproducer a command reads: a file, or an id (or unique prefix) in --dir."""
    p.add_argument("reproducer", help="a reproducer file, or an id (or unique id prefix) in --dir")
    p.add_argument("--dir", type=maybe_dir, default="reproducers", help=dir_help)


def replay_args(p):
    reproducer_args(p)
    p.add_argument("--arch", type=arch, default="sm_90a",
                   help=f"compile target for replaying a compile error without a GPU: {', '.join(ARCHES)}")
    p.add_argument("--logs", type=out_dir, default="reports/repro", help="worker logs go here")
    timeout_args(p)


def timeout_args(p):
    p.add_argument("--compile-timeout", type=positive(float, MAX_TIMEOUT), default=600,
                   help=f"seconds for start + compile (at most {MAX_TIMEOUT:g}, a day)")
    p.add_argument("--run-timeout", type=positive(float, MAX_TIMEOUT), default=60,
                   help=f"seconds for inputs + run + judge (at most {MAX_TIMEOUT:g})")

