"""Is code generation deterministic? The same cases compiled several times, in fresh processes.

TileLang 0.1.12 drops the two barriers of a kernel's O epilogue in some compiles and not in others
(80929a5b6a72): a race that only some processes compile, and that one campaign sees or not by
chance. Here the cases are compiled once per hash seed, through a pool of fresh workers with that
PYTHONHASHSEED and their own empty kernel cache, and every kernel whose generated code (the worker's `code`
digest) differs between runs is listed with the hazards each run's code shows.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from harness import case as case_mod
from harness.environment import environment, importable
from harness.pool import Pool, Timeouts, default_size
from harness.result import Result


def run_seed(cases: list[case_mod.Case], seed: int, out: Path, arch: str, workers: int | None) -> list[Result]:
    """The cases compiled for `arch` by workers with PYTHONHASHSEED=seed and an empty kernel cache of their own;
    their results are kept in <out>/seed-<seed>/results.jsonl (the workers' logs beside it)."""
    env = dict(os.environ, PYTHONHASHSEED=str(seed), TILELANG_CACHE_DIR=str(out / f"cache-{seed}"))
    where = out / f"seed-{seed}"
    with Pool(workers or default_size(), arch, where / "logs", Timeouts(), env=env) as pool:
        results = list(pool.run(cases))
    (where / "results.jsonl").write_text("".join(json.dumps(r.to_dict()) + "\n" for r in results))
    return results


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


def check(cases: list[case_mod.Case], seeds: list[int], out: Path, arch: str = "sm_90a", workers: int | None = None
          ) -> tuple[str, int]:
    """(markdown report, number of kernels whose code differs between seeds). RuntimeError if TileLang does not
    import here (every compile would fail alike)."""
    env = environment()
    if not importable(env):
        raise RuntimeError(f"cannot test here: tilelang {env['tilelang']}")
    kernels = kernels_of({seed: run_seed(cases, seed, out, arch, workers) for seed in seeds})
    differ = [row for row in kernels if len(set(row["code"].values())) > 1]
    return report(differ, seeds, len(kernels)), len(differ)
