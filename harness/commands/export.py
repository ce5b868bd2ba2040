"""harness export: a reproducer as one Python file that needs only tilelang and torch."""
from __future__ import annotations

import sys
from pathlib import Path

from harness import case as case_mod
from harness.commands.common import FOUND, cannot_write_any, cannot_write_file, load, out_file, reproducer_args

EXITS = FOUND


def add(sub) -> None:
    xp = sub.add_parser("export", help="a reproducer as one Python file needing only tilelang and torch")
    reproducer_args(xp)
    xp.add_argument("--to", type=out_file, help="the file to write (default: DIR/upstream/<id>.standalone.py)")
    xp.add_argument("--check-program", action="store_true",
                    help="build the file's prim_funcs and compare their TIR script with the harness's (no compile)")
    xp.add_argument("--flat", action="store_true", help="the kernel modules merged into the file as plain code (what "
                    "harness reduce shrinks); a compile error's file then only compiles")
    xp.set_defaults(func=cmd_export)


def cmd_export(args) -> int:
    from harness import export

    rep, path = load(args, "export")
    if rep is None:
        return 2
    to = Path(args.to) if args.to else Path(args.dir) / "upstream" / f"{rep.id}.standalone.py"
    why = cannot_write_any(lambda: cannot_write_file(to))
    if why:
        print(f"harness export: {why}", file=sys.stderr)
        return 2
    try:
        written, calls = export.export(rep, to, flat=args.flat)
    except (export.ExportError, case_mod.CaseError) as e:
        print(f"harness export: {e}", file=sys.stderr)
        return 2
    except OSError as e:  # where access(2) said yes and the write says no: /proc, a full disk
        print(f"harness export: cannot write {to}: {e.strerror or e}", file=sys.stderr)
        return 2
    print(f"wrote {written} ({', '.join(c.kernel for c in calls) or 'a generated program'})")
    if not args.check_program:
        return 0
    lines = export.check_program(written, calls)
    print("\n".join(lines))
    return 0 if all(line.startswith("same") for line in lines) else 1
