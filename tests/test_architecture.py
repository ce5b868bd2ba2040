"""The architecture is a checked contract: import-linter's layers (pyproject.toml) and ruff."""
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def tool(name):
    path = shutil.which(name, path=str(Path(sys.executable).parent)) or shutil.which(name)
    if path is None:
        pytest.skip(f"{name} is not installed (pip install -e '.[test]')")
    return path


def lint_imports(root):
    return subprocess.run([tool("lint-imports"), "--config", str(root / "pyproject.toml"), "--no-cache"],
                          cwd=root, capture_output=True, text=True, timeout=300, env={"PYTHONPATH": str(root),
                                                                                   "PATH": "/usr/bin:/bin"})


def test_imports_follow_the_layers():
    out = lint_imports(ROOT)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "6 kept, 0 broken" in out.stdout


def copy_with(tmp_path, module, old, new):
    """The harness and its contracts in tmp_path, `old` replaced by `new` once in harness/`module`."""
    shutil.copytree(ROOT / "harness", tmp_path / "harness", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    path = tmp_path / "harness" / module
    assert old in path.read_text()
    path.write_text(path.read_text().replace(old, new, 1))
    return tmp_path


def test_a_backwards_import_breaks_the_contract(tmp_path):
    backwards = "from harness import oracle  # noqa\nfrom dataclasses import"
    out = lint_imports(copy_with(tmp_path, "case.py", "from dataclasses import", backwards))
    assert out.returncode != 0
    assert "Data flows one way BROKEN" in out.stdout and "harness.case -> harness.oracle" in out.stdout


def test_nothing_imports_the_command_line(tmp_path):
    up = "import argparse\n\nfrom harness import cli  # noqa\n"
    out = lint_imports(copy_with(tmp_path, "worker.py", "import argparse\n", up))
    assert out.returncode != 0 and "Nothing imports the command line BROKEN" in out.stdout


def test_nothing_but_the_parser_imports_a_command(tmp_path):
    up = "from harness.commands import run  # noqa\nfrom harness import "
    out = lint_imports(copy_with(tmp_path, "campaign.py", "from harness import ", up))
    assert out.returncode != 0 and "Nothing imports the command line BROKEN" in out.stdout
    assert "harness.campaign -> harness.commands.run" in out.stdout


def test_the_search_of_a_bisect_does_no_io(tmp_path):
    io = "import subprocess  # noqa\nfrom harness.bisect import"
    out = lint_imports(copy_with(tmp_path, "bisect/search.py", "from harness.bisect import", io))
    assert out.returncode != 0 and "The search of a bisect is pure BROKEN" in out.stdout


# Subprocesses of the command line still in the library, and why. A bisect or matrix step runs `harness repro`
# (or `harness run`) with another TileLang release on its path (another environment, so another process).
SHELLS_LEFT = {"bisect/environments.py"}  # a release's own interpreter replays there


def test_the_library_does_not_shell_out_to_its_command_line():
    """A subprocess of harness.cli is a call back up the layers that import-linter cannot see. The command line
    itself (cli.py, commands/) may start a command: `harness serve --detach` starts itself in the background."""
    library = [p for p in (ROOT / "harness").rglob("*.py") if p.name != "cli.py" and "commands" not in p.parts]
    shells = {p.relative_to(ROOT / "harness").as_posix() for p in library if '"harness.cli"' in p.read_text()}
    assert shells <= SHELLS_LEFT, shells - SHELLS_LEFT


def test_ruff():
    out = subprocess.run([tool("ruff"), "check", "--no-cache", str(ROOT)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
