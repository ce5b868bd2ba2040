"""harness index: reproducers/INDEX.md from the reproducer files."""
from __future__ import annotations

from pathlib import Path

from harness import reproducer_index
from harness.commands.common import out_dir


def add(sub) -> None:
    ix = sub.add_parser("index", help="reproducers/INDEX.md: every reproducer, what it records, what is ready to file")
    ix.add_argument("--dir", type=out_dir, default="reproducers", help="where reproducers live; INDEX.md is written there")
    ix.set_defaults(func=cmd_index)


def cmd_index(args) -> int:
    """reproducers/INDEX.md from the reproducer files."""
    path = Path(args.dir) / "INDEX.md"
    path.write_text(reproducer_index.render(args.dir))
    print(f"wrote {path}")
    return 0
