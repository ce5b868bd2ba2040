"""What this machine runs: Python, TileLang (version, commit), torch, CUDA, driver, GPU.

Every value is a string, so an environment can be stored in a reproducer and compared.
"""
from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess

NOT_IMPORTABLE = "not importable"


def _first_line(text: str) -> str:
    lines = [l for l in str(text).splitlines() if l.strip()]
    return lines[0] if lines else ""


def tilelang() -> dict:
    """{"tilelang": version or "not importable: ...", "tilelang_commit", "tilelang_path"}."""
    try:
        import tilelang as tl
    except Exception as e:  # an old release without a matching driver fails to import: say so
        return {"tilelang": f"{NOT_IMPORTABLE}: {type(e).__name__}: {_first_line(e)}",
                "tilelang_commit": "", "tilelang_path": ""}
    version = str(getattr(tl, "__version__", "unknown"))
    commit = next((str(getattr(tl, a)) for a in ("__git_commit__", "__commit__", "git_commit", "commit_id")
                   if getattr(tl, a, None)), "")
    if not commit:  # source builds carry it in the local version: 0.1.6+cu121.git1a2b3c4
        m = re.search(r"git([0-9a-f]{7,40})", version)
        commit = m.group(1) if m else ""
    return {"tilelang": version, "tilelang_commit": commit, "tilelang_path": os.path.dirname(tl.__file__)}


def importable(env: dict) -> bool:
    return not env["tilelang"].startswith(NOT_IMPORTABLE)


def _run(cmd) -> str:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def environment() -> dict:
    import torch

    env = {"python": platform.python_version(), **tilelang(), "torch": torch.__version__,
           "cuda": str(torch.version.cuda)}
    smi = shutil.which("nvidia-smi")
    driver = _run([smi, "--query-gpu=driver_version", "--format=csv,noheader"]) if smi else ""
    env["driver"] = _first_line(driver) or "none"
    if torch.cuda.is_available():
        p = torch.cuda.get_device_properties(0)
        env["gpu"] = f"{p.name} x{torch.cuda.device_count()}"
        env["capability"] = f"sm_{p.major}{p.minor}"
    else:
        env["gpu"] = "none (compile-only: numerics need a GPU)"
        env["capability"] = ""
    nvcc = shutil.which("nvcc")
    env["nvcc"] = (_run([nvcc, "--version"]).splitlines() or ["unknown"])[-1] if nvcc else "not found"
    return env
