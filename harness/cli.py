"""The `harness` command: a small parser, one module per command (harness.commands), one boundary.

Exit statuses: each command module's EXITS, the README's table (exit_table). Run 0 nothing new failed,
1 a new failure, 125 TileLang does not import; repro follows `git bisect run` (0 good, 1 bug reproduced,
125 cannot test); any command 2 for bad input (a family that `--register` or a command cannot register or
draw, kernels.FamilyError, among it), with one line on stderr and nothing recorded. The harness's own
failure (HARNESS_ERROR) is never 1: 125 for repro and a bisect step, 4 for the others; Ctrl-C is 130 (main).
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from harness import kernels
from harness.commands import (
    bisect,
    check,
    determinism,
    env,
    examples,
    export,
    forms,
    index,
    matrix,
    minimize,
    programs,
    reduce,
    report,
    repro,
    run,
    serve,
    triage,
    upstream,
)
from harness.result import HARNESS_ERROR_STATUS

# In the order `harness` lists them; each module adds its subcommand (add) and runs it (cmd_<name>).
COMMANDS = (run, check, repro, triage, examples, export, reduce, upstream, minimize, bisect, matrix, determinism, report,
            forms, index, programs, serve, env)


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


def parser() -> Parser:
    p = Parser(prog="harness", description="Correctness harness for TileLang attention kernels")
    p.add_argument("--register", action="append", default=[], metavar="NAME=MODULE:ATTR",
                   help="a kernel family of your own (a harness.kernels.Family at MODULE:ATTR) for this command and "
                        "its workers; repeatable, before the command")
    sub = p.add_subparsers(dest="command", required=True, parser_class=Parser)
    for command in COMMANDS:
        command.add(sub)
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
    try:
        args = p.parse_args(argv)
    except Exception as e:  # an argument check that raised instead of saying why: still one line, never 1
        command = next((a for a in argv if a in {c.__name__.rsplit(".", 1)[1] for c in COMMANDS}), "harness")
        print(f"harness {command}: HARNESS_ERROR, the harness's own failure, not TileLang's: {type(e).__name__}: "
              f"{next(iter(str(e).splitlines()), '')} ({_keep_traceback(command, argv, e)})", file=sys.stderr)
        return 125 if command == "repro" or command == "bisect" and "--at" in " ".join(argv) else HARNESS_ERROR_STATUS
    try:
        tree = os.environ.get(kernels.EXAMPLES_ENV)  # every command's default examples tree; --examples replaces it
        if tree:
            kernels.use_examples(Path(tree).resolve())
        for text in args.register:
            _register(*kernels.spec(text))
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


def _register(name: str, where: str) -> None:
    """`--register name=where`, its module imported and its Family checked now, as Hypothesis's registries check
    at registration: a family that cannot load is bad input before the command starts, not a failure once used."""
    kernels.register(name, where)
    try:
        kernels.family(name)
    except kernels.FamilyError:
        raise
    except (Exception, SystemExit) as e:  # the user's module ran: what it raised is its error, not the harness's
        first = next(iter(str(e).splitlines()), "")
        raise kernels.FamilyError(f"family {name!r}: {where} does not load: {type(e).__name__}: {first}") from None


CTRL_C = "Ctrl-C"
COLUMNS = (0, 1, 2, 3, 4, 125, 130)


def exit_table() -> str:
    """The README's table of exit statuses, from each command's EXITS: one row per set of statuses, the
    commands that share it named in it."""
    rows: dict[tuple, list[str]] = {}
    for command in COMMANDS:
        exits = {130: CTRL_C, **command.EXITS}
        rows.setdefault(tuple(exits.get(c, "") for c in COLUMNS), []).append(command.__name__.rsplit(".", 1)[1])
    head = "| command | " + " | ".join(map(str, COLUMNS)) + " |\n|---|" + "---|" * len(COLUMNS) + "\n"
    return head + "".join(f"| {', '.join(f'`harness {n}`' for n in names)} | {' | '.join(cells)} |\n"
                          for cells, names in rows.items())


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
