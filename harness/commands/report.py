"""harness report: summary.md, results.csv and report.html again, from a run's results."""
from __future__ import annotations

import sys
from pathlib import Path

from harness import reproducer_files
from harness.commands.common import DONE, cannot_write_any, cannot_write_files, in_dir, maybe_dir

REPORT_FILES = ("summary.md", "results.csv", "report.html")  # what it writes, each checked first


EXITS = DONE


def add(sub) -> None:
    rr = sub.add_parser("report", help="summary.md, results.csv and report.html (with plots) from a run's results")
    rr.add_argument("dir", type=in_dir, help="a run's --out directory")
    rr.add_argument("--reproducers", type=maybe_dir, default="reproducers", help="known bugs, to mark failures already recorded")
    rr.set_defaults(func=cmd_report)


def cmd_report(args) -> int:
    from harness import campaign, report

    path = Path(args.dir) / "results.jsonl"
    if not path.is_file():
        print(f"harness report: no {path}", file=sys.stderr)
        return 2
    results, notes = campaign.read_results(path, resume=False)
    if results:
        why = cannot_write_any(lambda: cannot_write_files(Path(args.dir), files=REPORT_FILES))
    else:
        why = f"no line of {path} could be read as a result" if notes else f"{path} holds no results"
    if why:
        print(f"harness report: {why}", file=sys.stderr)
        return 2
    for note in notes:
        print(note, file=sys.stderr)
    broken = []
    known = reproducer_files.known_signatures(args.reproducers, broken)
    if broken:
        print(reproducer_files.skipped_line(args.reproducers, broken), file=sys.stderr)
    print(report.write(args.dir, results, known))
    print(f"wrote {Path(args.dir) / 'summary.md'}, results.csv, report.html")
    return 0
