"""The pytest path against `harness run` on the same cases, each cold (empty kernel cache) and warm.

    python benchmarks/pytest_vs_run.py --tests fwd,bwd --seed 1 --examples 4
    python benchmarks/pytest_vs_run.py --rows --select "row-fwd-" --examples 5 [--xdist 15]

pytest runs the gpu property tests (compile-only ones without a GPU) under the `bench` Hypothesis
profile and logs the cases it ran (`--cases-log`): by default the suite tests of `--tests`, each
example a suite through one pool; with `--rows`, cases/test_rows.py (a test per covering-array
kernel), in one process whose pool builds the selected rows' kernels ahead, or spread over
`--xdist N` processes. `harness run --cases-from` then runs exactly those cases with CPU cores - 1
workers. Prints cases, seconds and cases/s of each run, and pytest's share of harness run's rate.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FAMILIES_TEST = "cases/test_families.py"
TEST = {"gpu": "test_family_matches_reference", "compile": "test_family_compiles_for_sm90a"}


def timed(argv, cache: Path, log: Path, examples: int) -> float:
    env = dict(os.environ, TILELANG_CACHE_DIR=str(cache), HARNESS_BENCH_EXAMPLES=str(examples))
    t0 = time.perf_counter()
    with open(log, "w") as f:
        code = subprocess.run(argv, cwd=ROOT, env=env, stdout=f, stderr=subprocess.STDOUT).returncode
    seconds = time.perf_counter() - t0
    print(f"  exit {code}, {seconds:.1f} s: {' '.join(map(str, argv[2:]))[:160]} (log {log})", flush=True)
    return seconds


def count(path: Path) -> int:
    return sum(1 for line in path.read_text().splitlines() if line.strip()) if path.exists() else 0


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tests", default="fwd,bwd", help="comma-separated family names (cases/test_families.py)")
    p.add_argument("--seed", type=int, default=1, help="--hypothesis-seed for pytest")
    p.add_argument("--examples", type=int, default=20, help="Hypothesis examples per property test")
    p.add_argument("--rows", action="store_true", help="the row tests (cases/test_rows.py)")
    p.add_argument("--xdist", type=int, default=0, help="with --rows: pytest-xdist processes (default: none)")
    p.add_argument("--select", help="pytest -k expression (for --rows: row ids such as row-fwd-3)")
    p.add_argument("--keep", help="directory for caches, logs and results (default: a temporary one)")
    a = p.parse_args()
    marker = "gpu" if subprocess.run([sys.executable, "-c", "import torch,sys; sys.exit(not torch.cuda.is_available())"],
                                     capture_output=True).returncode == 0 else "compile"
    workers = max(1, (os.cpu_count() or 2) - 1)
    tests = (["cases/test_rows.py", "-m", f"rows and {marker}", "-n", str(a.xdist)] if a.rows
             else [f"{FAMILIES_TEST}::{TEST[marker]}[{t}]" for t in a.tests.split(",")] + ["-m", marker])
    tests += ["-k", a.select] if a.select else []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(a.keep or tmp)
        tmp.mkdir(parents=True, exist_ok=True)
        known = tmp / "reproducers"  # a copy: both runs know the recorded bugs, neither adds to reproducers/
        shutil.copytree(ROOT / "reproducers", known, dirs_exist_ok=True)
        rows = []

        def row(label, n, s):
            rows.append((label, n, s))
            print(f"{label:60} {n:5d} cases {s:8.1f} s {n / s:7.2f} cases/s", flush=True)
        cases = tmp / "pytest-cold-distinct.jsonl"  # harness run runs exactly the cases pytest ran cold, each once
        for name in ("cold", "warm"):  # the same seed draws the same cases; the second runs find them cached
            log = tmp / f"pytest-{name}.jsonl"
            log.unlink(missing_ok=True)
            s = timed([sys.executable, "-m", "pytest", *tests, "-q", "-p", "no:cacheprovider",
                       "--hypothesis-profile=bench", f"--hypothesis-seed={a.seed}", f"--cases-log={log}",
                       f"--record-dir={known}"],
                      tmp / "cache-pytest", tmp / f"pytest-{name}.log", a.examples)
            row(f"pytest {name}", count(log), s)
            if name == "cold":  # two tests may draw one case; harness run refuses a case listed twice
                cases.write_text("".join(dict.fromkeys(log.read_text().splitlines(keepends=True))))
            out = tmp / f"run-{name}"
            s = timed([sys.executable, "-m", "harness.cli", "run", "--cases-from", cases, "--out", out,
                       "--reproducers", known, "--workers", str(workers)],
                      tmp / "cache-run", tmp / f"run-{name}.log", a.examples)
            results = out / "results.jsonl"
            lines = results.read_text().splitlines() if results.exists() else []
            verdicts = dict(Counter(json.loads(line)["verdict"] for line in lines))
            row(f"harness run {name} {verdicts}", len(lines), s)
    what = (f"row tests ({f'{a.xdist} xdist processes' if a.xdist else 'one process, kernels built ahead'})" if a.rows
            else f"suite tests {a.tests}")
    print(f"\n{marker} {what}{f' -k {a.select!r}' if a.select else ''}, pytest --hypothesis-seed={a.seed}, "
          f"{a.examples} examples per test, {workers} harness run workers")
    for i, name in enumerate(("cold", "warm")):
        (_, n1, s1), (_, n2, s2) = rows[2 * i], rows[2 * i + 1]
        print(f"{name}: pytest reaches {100 * (n1 / s1) / (n2 / s2):.0f}% of harness run's cases/s")


if __name__ == "__main__":
    main()
