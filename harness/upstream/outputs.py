"""A report's captured output: each program (or control) run in an empty folder, its output kept verbatim in
DIR/upstream/outputs/ with an end line saying where it ran, and read back. Where it ran is a typed fact of the
Output (the GPU, or none and the arch compiled for), set where the program ran and read from the end line once,
when a file is loaded."""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

OUTPUTS = "outputs"    # DIR/upstream/outputs/<id>[.<control>].txt: each run's output, verbatim, and an end line
_END = re.compile(r"^# exit (-?\d+) on (.+?), TileLang ([^\s,]+)(?:, (.+))?$")
_NO_GPU = re.compile(r"^no GPU \(compile-only, (.+)\)$")  # where a program ran without a GPU, in the end line
PROGRAM_NAME = "repro.py"  # what a report calls its program


@dataclass
class Output:
    """What a program printed (stdout and stderr, verbatim), its exit status, and where it ran."""
    text: str
    status: int
    tilelang: str
    gpu: str | None     # the GPU it ran on; None: a machine without one, where it compiled for `arch` only
    arch: str = ""      # without a GPU: the target it compiled for
    versions: str = ""  # "torch X, CUDA Y, Python Z" of the interpreter that ran it

    def dumps(self) -> str:
        where = self.gpu if self.gpu is not None else f"no GPU (compile-only, {self.arch})"
        return self.text.rstrip("\n") + ("\n" if self.text.strip() else "") + \
            f"# exit {self.status} on {where}, TileLang {self.tilelang}" + \
            (f", {self.versions}" if self.versions else "") + "\n"


def output_name(rep_id: str, control: str = "") -> str:
    return f"{rep_id}.{control}.txt" if control else f"{rep_id}.txt"


def read_output(path: Path) -> Output | None:
    """An output file as `run_program` (or scripts/run_report_programs.py) writes it; None if absent or without
    its end line."""
    try:
        lines = Path(path).read_text().rstrip("\n").splitlines()
    except OSError:
        return None
    m = _END.match(lines[-1]) if lines else None
    if not m:
        return None
    no_gpu = _NO_GPU.match(m.group(2))
    gpu, arch = (None, no_gpu.group(1)) if no_gpu else (m.group(2), "")
    return Output("\n".join(lines[:-1]), int(m.group(1)), m.group(3), gpu, arch, m.group(4) or "")


def gpu_here() -> str | None:
    """The name of this machine's GPU, or None."""
    try:
        import torch
        if torch.cuda.is_available():
            return torch.cuda.get_device_name(0)
    except ImportError:
        pass
    return None


def versions_here() -> str:
    import platform
    try:
        import torch
        return f"torch {torch.__version__}, CUDA {torch.version.cuda}, Python {platform.python_version()}"
    except ImportError:
        return f"Python {platform.python_version()}"


def tilelang_version() -> str:
    try:
        from importlib.metadata import version
        return version("tilelang")
    except Exception:  # not installed
        return "not installed"


def run_program(path: Path, control: str = "", timeout=900, arch="sm_90a") -> Output:
    """Run `python PATH [--control NAME]` in an empty folder; its output, verbatim."""
    import subprocess
    import sys
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        argv = [sys.executable, str(Path(path).resolve())] + (["--control", control] if control else [])
        try:
            p = subprocess.run(argv, cwd=tmp, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               timeout=timeout)
            text, status = p.stdout, p.returncode
        except subprocess.TimeoutExpired as e:
            text = (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
            text, status = text + f"\n(killed after {timeout} s)", 124
    gpu = gpu_here()
    return Output(text.rstrip("\n"), status, tilelang_version(), gpu, arch if gpu is None else "", versions_here())


def captured(rep_id: str, control: str, needs_gpu: bool, stores: list[Path], program_path: Path | None, run: bool,
             arch="sm_90a") -> Output | None:
    """The output of the program (or one control): from the first of `stores` that holds it (copied into the last
    store, where the reports keep theirs), else run here when that can show it (compile-only, or a GPU is here),
    saved into the last store; None (a gap) otherwise. An output that needs a GPU is taken only from a run on one."""
    for store in stores:
        out = read_output(Path(store) / output_name(rep_id, control))
        if out and (out.gpu is not None or not needs_gpu):
            kept = Path(stores[-1]) / output_name(rep_id, control)
            if Path(store) != Path(stores[-1]) and read_output(kept) != out:  # from --outputs: kept with the reports
                kept.parent.mkdir(parents=True, exist_ok=True)
                kept.write_text(out.dumps())
            return out
    if not run or program_path is None:
        return None
    if needs_gpu and gpu_here() is None:
        return None
    out = run_program(program_path, control, arch=arch)
    if stores:
        Path(stores[-1]).mkdir(parents=True, exist_ok=True)
        (Path(stores[-1]) / output_name(rep_id, control)).write_text(out.dumps())
    return out
