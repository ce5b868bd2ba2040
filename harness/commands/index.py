"""harness index: reproducers/INDEX.md from the reproducer files."""
from __future__ import annotations

import sys
from pathlib import Path

from harness import reproducer_index, reproducer_model
from harness.commands.common import DONE, cannot_write_any, cannot_write_file, out_dir

EXITS = DONE


def add(sub) -> None:
    ix = sub.add_parser("index", help="reproducers/INDEX.md: every reproducer, what it records, what is ready to file")
    ix.add_argument("--dir", type=out_dir, default="reproducers", help="where reproducers live; INDEX.md is written there")
    ix.set_defaults(func=cmd_index)


def cmd_index(args) -> int:
    """reproducers/INDEX.md from the reproducer files."""
    path = Path(args.dir) / "INDEX.md"
    why = cannot_write_any(lambda: cannot_write_file(path))
    if why:
        print(f"harness index: {why}", file=sys.stderr)
        return 2
    try:
        text = reproducer_index.render(args.dir)
    except reproducer_model.RecordError as e:  # the index lists every reproducer: one it cannot read is not left out silently
        print(f"harness index: {e}", file=sys.stderr)
        return 2
    try:
        path.write_text(text)
    except OSError as e:  # where access(2) said yes and the write says no: /proc, a full disk
        print(f"harness index: cannot write {path}: {e.strerror or e}", file=sys.stderr)
        return 2
    print(f"wrote {path}")
    return 0
