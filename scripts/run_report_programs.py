"""Run every report's program and each of its controls, and write each output to OUT/<id>[.<control>].txt (verbatim,
then an end line: exit status, where it ran, TileLang's version), for `harness upstream <id> --outputs OUT`.

    python scripts/run_report_programs.py OUT [ID ...]

The programs are reproducers/upstream/<id>.min.py, their controls the record's upstream.controls. On a machine without
a GPU, the compile-only ones show the bug and the others exit 125 ("no GPU here"); `harness upstream` pastes an output
that needs a GPU only from a run on one. Prints one line per run.
"""
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness import reproducer_files, reproducer_loading, reproducer_model  # noqa: E402
from harness.upstream import outputs  # noqa: E402


def main(argv) -> int:
    if not argv:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    out, ids = Path(argv[0]), set(argv[1:])
    out.mkdir(parents=True, exist_ok=True)
    reports = ROOT / "reproducers" / "upstream"
    for program in sorted(reports.glob("*.min.py")):
        rid = program.name.split(".")[0]
        if (ids and rid not in ids) or not (reports / f"{rid}.md").exists():
            continue  # a program without a report of its own (a face folded into another report's controls)
        try:
            rep = reproducer_loading.load(reproducer_files.find(rid, ROOT / "reproducers"))
        except reproducer_model.RecordError as e:
            print(f"{rid}: skipped: {e}")
            continue
        if rep.upstream is None or rep.upstream.withdrawn:
            continue
        for control in ["", *(c.name for c in rep.upstream.controls)]:
            start = time.time()
            result = outputs.run_program(program, control)
            (out / outputs.output_name(rid, control)).write_text(result.dumps())
            last = (result.text.strip().splitlines() or [""])[-1][:100]
            print(f"{outputs.output_name(rid, control)}: exit {result.status} in {time.time() - start:.0f} s: {last}",
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
