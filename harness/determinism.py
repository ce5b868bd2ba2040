"""Is code generation deterministic? The same cases compiled several times, in fresh processes.

TileLang 0.1.12 drops the two barriers of a kernel's O epilogue in some compiles and not in others
(80929a5b6a72): a race that only some processes compile, and that one campaign sees or not by
chance. Here the cases run once per hash seed (`harness run --cases-from`: fresh workers with that
PYTHONHASHSEED and their own empty kernel cache), and every kernel whose generated code (the
worker's `code` digest) differs between runs is listed with the hazards each run's code shows.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from harness import case as case_mod
from harness import untrusted
from harness.result import Result


def run_seed(cases: Path, seed: int, out: Path, arch: str, workers: int | None) -> list[Result]:
    """The campaign's results with PYTHONHASHSEED=seed, compiled from an empty kernel cache."""
    env = dict(os.environ, PYTHONHASHSEED=str(seed), TILELANG_CACHE_DIR=str(out / f"cache-{seed}"))
    cmd = [sys.executable, "-m", "harness.cli", "run", "--cases-from", str(cases), "--out", str(out / f"seed-{seed}"),
           "--arch", arch, "--reproducers", str(out / "reproducers")] + (["--workers", str(workers)] if workers else [])
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if done.returncode not in (0, 1):
        raise RuntimeError(f"harness run with PYTHONHASHSEED={seed} exited {done.returncode}: {done.stderr[-500:]}")
    path = out / f"seed-{seed}" / "results.jsonl"
    return [Result.from_dict(untrusted.loads(line)) for line in path.read_text().splitlines() if line.strip()]


def kernels_of(by_seed: dict[int, list[Result]]) -> list[dict]:
    """One row per kernel (static fields): its code digest and hazards under each seed."""
    kernels: dict[tuple, dict] = {}
    for seed, results in by_seed.items():
        for r in results:
            if r.code is None:
                continue
            case = r.case
            row = kernels.setdefault(case_mod.static_key(case), {"case_id": r.case_id, "family": case.family,
                                                                 "variant": case.variant, "code": {}, "hazards": {}})
            row["code"][seed] = r.code
            row["hazards"][seed] = [str(f) for f in r.hazards or ()]
    return list(kernels.values())


def report(rows: list[dict], seeds: list[int], kernels: int) -> str:
    lines = [f"{kernels} kernels compiled under PYTHONHASHSEED {', '.join(map(str, seeds))}: "
             f"{len(rows)} with code that depends on the seed"]
    if rows:
        lines += ["", "| family | variant | example case | code digest per seed | hazards per seed |", "|---|---|---|---|---|"]
        for row in rows:
            codes = ", ".join(f"{s}: {c}" for s, c in row["code"].items())
            found = "; ".join(f"{s}: {', '.join(h) or 'none'}" for s, h in row["hazards"].items())
            lines.append(f"| {row['family']} | {row['variant']} | {row['case_id']} | {codes} | {found.replace('|', '/')} |")
    return "\n".join(lines) + "\n"


def check(cases: Path, seeds: list[int], out: Path, arch: str = "sm_90a", workers: int | None = None) -> tuple[str, int]:
    """(markdown report, number of kernels whose code differs between seeds)."""
    kernels = kernels_of({seed: run_seed(cases, seed, out, arch, workers) for seed in seeds})
    differ = [row for row in kernels if len(set(row["code"].values())) > 1]
    return report(differ, seeds, len(kernels)), len(differ)
