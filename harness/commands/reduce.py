"""harness reduce: a standalone reproducer shrunk while it reproduces (harness.reduce; docs/reduce.md)."""
from __future__ import annotations

import sys
from pathlib import Path

from harness.commands.common import (
    MAX_SECONDS,
    MAX_TIMEOUT,
    MAX_WORKERS,
    MIN_START_TIMEOUT,
    NOT_HERE,
    any_path,
    cannot_write_any,
    cannot_write_file,
    is_file,
    load,
    maybe_dir,
    out_dir,
    out_file,
    positive,
)

EXITS = NOT_HERE


def add(sub) -> None:
    rd = sub.add_parser("reduce", help="shrink a standalone reproducer (a .py file, or a reproducer's flat export) while "
                        "it prints the same REPRODUCED line: picire's delta debugging, then lines (docs/reduce.md)")
    rd.add_argument("reproducer", type=any_path,
                    help="a standalone .py file, or a reproducer file, id or unique id prefix in --dir")
    rd.add_argument("--dir", type=maybe_dir, default="reproducers", help="where reproducers live")
    rd.add_argument("--out", type=out_file, help="the reduced file (default: DIR/upstream/<id>.min.py, or FILE's "
                    "name with .min.py)")
    rd.add_argument("--jobs", type=positive(int, MAX_WORKERS), default=1,
                    help=f"candidates tested at once (each its own process; at most {MAX_WORKERS})")
    rd.add_argument("--timeout", type=positive(float, MAX_TIMEOUT, MIN_START_TIMEOUT), default=120,
                    help=f"seconds for one run of a candidate; past it, it does not reproduce (at least "
                         f"{MIN_START_TIMEOUT:g}: a candidate's python imports torch and TileLang, up to 2.3 s on 2 idle "
                         f"cores; at most {MAX_TIMEOUT:g})")
    rd.add_argument("--cache", type=out_dir, help="keep each candidate's outcome here: a rerun with it resumes")
    rd.add_argument("--budget", type=positive(float, MAX_SECONDS), help="seconds; then the passes stop and "
                    "--out holds the smallest reproducing file found (it does at every moment of the run)")
    rd.set_defaults(func=cmd_reduce)


def _flat_export(json_path: str, to: str) -> str | None:
    """The reproducer's flat export written to `to` (run in a process of its own), or why export refuses it."""
    from harness import case as case_mod
    from harness import export, reproducer_loading

    try:
        export.export(reproducer_loading.load(Path(json_path)), Path(to), flat=True)
    except (export.ExportError, case_mod.CaseError) as e:
        return str(e)
    return None


def _not_python(path: Path) -> str | None:
    """Why the file at `path` is not Python source the reducer can read, or None (said before any run)."""
    import ast

    try:
        ast.parse(path.read_bytes().decode("utf-8"), str(path))
    except UnicodeDecodeError as e:
        return f"{path}: not UTF-8 text (byte {e.start}): not a Python file"
    except (SyntaxError, ValueError) as e:  # ValueError: a NUL byte, before Python 3.12
        return f"{path}: not Python: {f'line {e.lineno}: {e.msg}' if isinstance(e, SyntaxError) else e}"
    except OSError as e:
        return f"{path}: cannot read: {e.strerror or e}"
    return None


def cmd_reduce(args) -> int:
    """A standalone reproducer shrunk while it prints the same REPRODUCED line (harness.reduce). A reproducer's
    flat export is made in a spawned process, so that no TileLang is loaded in the one picire forks."""
    import multiprocessing
    import tempfile
    import textwrap
    from concurrent.futures import ProcessPoolExecutor

    from harness.reduce import reduction

    given, rep = Path(args.reproducer), None
    if given.suffix == ".py" and is_file(given):
        why = _not_python(given)
    else:
        rep, given = load(args, "reduce")
        if rep is None:
            return 2
        why = None
    to = Path(args.out) if args.out else reduction.default_out(given, rep and rep.id, Path(args.dir))
    why = why or cannot_write_any(lambda: cannot_write_file(to))
    if why:
        print(f"harness reduce: {why}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="harness-reduce-") as work:
        header = ""
        if rep is not None:
            flat = Path(work) / f"{rep.id}.py"
            with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as apart:
                refused = apart.submit(_flat_export, str(given), str(flat)).result()
            if refused:
                print(f"harness reduce: {refused}", file=sys.stderr)
                return 2
            header = (textwrap.fill(f"{rep.id}: {rep.title}", 110) + "\nReduced by harness reduce: python THIS_FILE "
                      "prints REPRODUCED (exit 1) while the bug is here.")
            given = flat
        try:
            r = reduction.reduce_file(given, to, args.jobs, args.timeout, log=lambda line: print(line, flush=True),
                                   cache=args.cache and Path(args.cache), budget=args.budget, header=header)
        except reduction.ReduceError as e:  # 125: it does not reproduce here
            print(f"harness reduce: {e}", file=sys.stderr)
            return e.status
    print(r.summary(args.reproducer))
    print(r.line)
    print(f"wrote {to}")
    return 0
