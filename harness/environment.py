"""What this machine runs: Python, TileLang (version, commit), torch, CUDA, driver, GPU.

Every value is a string but `compile_only` (a bool: no GPU here, so cases compile and are scanned, never run), so
an environment can be stored in a reproducer and compared.
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import shutil
import subprocess
import threading
from concurrent.futures import Future
from pathlib import Path

NOT_IMPORTABLE = "not importable"
NO_GPU = "none (compile-only: numerics need a GPU)"  # the `gpu` of a machine without one


def _first_line(text: str) -> str:
    lines = [l for l in str(text).splitlines() if l.strip()]
    return lines[0] if lines else ""


_PROBE = """
import json, os, re, tilelang as tl
version = str(getattr(tl, "__version__", "unknown"))
commit = next((str(getattr(tl, a)) for a in ("__git_commit__", "__commit__", "git_commit", "commit_id")
               if getattr(tl, a, None)), "")
if not commit:  # source builds carry it in the local version: 0.1.6+cu121.git1a2b3c4
    m = re.search(r"git([0-9a-f]{7,40})", version)
    commit = m.group(1) if m else ""
print(json.dumps({"tilelang": version, "tilelang_commit": commit, "tilelang_path": os.path.dirname(tl.__file__)}))
"""


def tilelang() -> dict:
    """{"tilelang": version or "not importable: ...", "tilelang_commit", "tilelang_path"}.

    Probed in a child process: a release built for another driver raises on import, and one
    with a clashing runtime library aborts the process; either way we get a line saying so.
    """
    import json
    import sys

    try:
        p = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=300)
        if p.returncode == 0:
            return json.loads(p.stdout.strip().splitlines()[-1])
        lines = [l.strip() for l in p.stderr.splitlines() if l.strip()]
        why = next((l for l in reversed(lines) if "Error" in l or "what()" in l), lines[-1] if lines else "")
        why = f"exit {p.returncode}: {why}"
    except (OSError, subprocess.SubprocessError, ValueError) as e:
        why = f"{type(e).__name__}: {_first_line(e)}"
    return {"tilelang": f"{NOT_IMPORTABLE}: {why}"[:300], "tilelang_commit": "", "tilelang_path": ""}


def in_background(probe) -> Future:
    """probe() (seconds: a child imports TileLang) in a daemon thread, while the caller starts its
    workers; a caller that stops early (bad input) does not wait for it."""
    future = Future()

    def call():
        try:
            future.set_result(probe())
        except BaseException as e:
            future.set_exception(e)
    threading.Thread(target=call, daemon=True).start()
    return future


def importable(env: dict) -> bool:
    return not env["tilelang"].startswith(NOT_IMPORTABLE)


def _run(cmd) -> str:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def harness_source() -> dict:
    """The harness commit ("-dirty" when harness/ has changes not committed; "unknown" outside a git
    checkout) and a digest of harness/kernels/, the programs a reproducer's case compiles."""
    package = Path(__file__).resolve().parent
    digest = hashlib.sha256()
    for path in sorted((package / "kernels").rglob("*.py")):
        digest.update(path.relative_to(package).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    commit = _run(["git", "-C", str(package.parent), "rev-parse", "--short=12", "HEAD"]).strip()
    if commit and _run(["git", "-C", str(package.parent), "status", "--porcelain", "--", "harness"]).strip():
        commit += "-dirty"
    return {"harness_commit": commit or "unknown",
            "kernels_digest": digest.hexdigest()[:12]}


def environment() -> dict:
    import torch

    env = {"python": platform.python_version(), **tilelang(), **harness_source(), "torch": torch.__version__,
           "cuda": str(torch.version.cuda)}
    smi = shutil.which("nvidia-smi")
    driver = _run([smi, "--query-gpu=driver_version", "--format=csv,noheader"]) if smi else ""
    env["driver"] = _first_line(driver) or "none"
    gpu = torch.cuda.is_available()
    if gpu:
        p = torch.cuda.get_device_properties(0)
        env["gpu"] = f"{p.name} x{torch.cuda.device_count()}"
        env["capability"] = f"sm_{p.major}{p.minor}"
    else:
        env["gpu"] = NO_GPU
        env["capability"] = ""
    env["compile_only"] = not gpu
    nvcc = shutil.which("nvcc")
    env["nvcc"] = (_run([nvcc, "--version"]).splitlines() or ["unknown"])[-1] if nvcc else "not found"
    if os.environ.get("PYTHONHASHSEED"):  # TileLang's code generation can depend on it (80929a5b6a72)
        env["pythonhashseed"] = os.environ["PYTHONHASHSEED"]
    return env


def gpu_count() -> int:
    """CUDA devices this process may use (CUDA_VISIBLE_DEVICES applies), asked of the driver:
    harness run and pytest decide how to start their workers before importing torch (seconds)."""
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
        count = ctypes.c_int(0)
        if cuda.cuInit(0) != 0 or cuda.cuDeviceGetCount(ctypes.byref(count)) != 0:
            return 0  # a driver without a usable device
    except (OSError, AttributeError):  # no NVIDIA driver, or a libcuda.so.1 that is none (a toolkit's link stub)
        return 0
    return count.value
