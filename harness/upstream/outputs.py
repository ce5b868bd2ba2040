"""A report's captured output: each program (or control) run in an empty folder, its output kept verbatim in
DIR/upstream/outputs/ with an end line saying where it ran, and read back."""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

OUTPUTS = "outputs"    # DIR/upstream/outputs/<id>[.<control>].txt: each run's output, verbatim, and an end line
_END = re.compile(r"^# exit (-?\d+) on (.+?), TileLang ([^\s,]+)(?:, (.+))?$")
PROGRAM_NAME = "repro.py"  # what a report calls its program


@dataclass
class Output:
    """What a program printed (stdout and stderr, verbatim), its exit status, and where it ran."""
    text: str
    status: int
    where: str        # the GPU's name, or "no GPU (compile-only, <arch>)"
    tilelang: str
    versions: str = ""  # "torch X, CUDA Y, Python Z" of the interpreter that ran it

    @property
    def on_gpu(self) -> bool:
        return not self.where.startswith("no GPU")

    def dumps(self) -> str:
        return self.text.rstrip("\n") + ("\n" if self.text.strip() else "") + \
            f"# exit {self.status} on {self.where}, TileLang {self.tilelang}" + \
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
    return Output("\n".join(lines[:-1]), int(m.group(1)), m.group(2), m.group(3), m.group(4) or "")


def where_here(arch="sm_90a") -> str:
    try:
        import torch
        if torch.cuda.is_available():
            return torch.cuda.get_device_name(0)
    except ImportError:
        pass
    return f"no GPU (compile-only, {arch})"


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
    return Output(text.rstrip("\n"), status, where_here(arch), tilelang_version(), versions_here())


def captured(rep_id: str, control: str, gpu: bool, stores: list[Path], program_path: Path | None, run: bool,
             arch="sm_90a") -> Output | None:
    """The output of the program (or one control): from the first of `stores` that holds it (copied into the last
    store, where the reports keep theirs), else run here when that can show it (compile-only, or a GPU is here),
    saved into the last store; None (a gap) otherwise. An output that needs a GPU is taken only from a run on one."""
    for store in stores:
        out = read_output(Path(store) / output_name(rep_id, control))
        if out and (out.on_gpu or not gpu):
            kept = Path(stores[-1]) / output_name(rep_id, control)
            if Path(store) != Path(stores[-1]) and read_output(kept) != out:  # from --outputs: kept with the reports
                kept.parent.mkdir(parents=True, exist_ok=True)
                kept.write_text(out.dumps())
            return out
    if not run or program_path is None:
        return None
    if gpu and where_here(arch).startswith("no GPU"):
        return None
    out = run_program(program_path, control, arch=arch)
    if stores:
        Path(stores[-1]).mkdir(parents=True, exist_ok=True)
        (Path(stores[-1]) / output_name(rep_id, control)).write_text(out.dumps())
    return out
