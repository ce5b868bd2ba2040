"""harness examples fetch: TileLang's own examples of a release, unpacked for outside kernels."""
from __future__ import annotations

import sys
from pathlib import Path

from harness.commands.common import DONE, out_dir

EXITS = DONE


def add(sub) -> None:
    ex = sub.add_parser("examples", help="TileLang's own examples, for outside kernels: `harness examples fetch`")
    ex.add_argument("fetch", choices=["fetch"], help="fetch: download a release's source package and unpack its "
                    "examples/ and VERSION into TO/tilelang-<release>/ (the only action)")
    ex.add_argument("--version", help="TileLang release (default: the installed one)")
    ex.add_argument("--to", type=out_dir, default="examples-src", help="unpack under this directory")
    ex.set_defaults(func=cmd_examples)


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
