"""The architecture is a checked contract: import-linter's layers (pyproject.toml) and ruff."""
import ast
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


def test_the_library_does_not_shell_out_to_its_command_line():
    """A subprocess of harness.cli is a call back up the layers that import-linter cannot see. The command line
    itself (cli.py, commands/) may start a command: `harness serve --detach` starts itself in the background.
    A step in another TileLang's environment runs a library entry point there (harness.bisect.inside)."""
    library = [p for p in (ROOT / "harness").rglob("*.py") if p.name != "cli.py" and "commands" not in p.parts]
    shells = {p.relative_to(ROOT / "harness").as_posix() for p in library if '"harness.cli"' in p.read_text()}
    assert shells == set()


ENVIRON_WRITERS = {"setdefault", "update", "pop", "popitem", "clear", "__setitem__", "__delitem__"}


def environ_writes(text: str) -> list[int]:
    """The lines of Python source `text` that change this process's environment: os.environ[...] assigned or
    deleted, os.environ's mutating methods, os.putenv and os.unsetenv."""
    def of_os(node, names):
        return isinstance(node, ast.Attribute) and node.attr in names and isinstance(node.value, ast.Name) \
            and node.value.id == "os"

    def environ(node):
        return of_os(node, ("environ",))

    lines = []
    for node in ast.walk(ast.parse(text)):
        targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else \
            [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else []
        if any(isinstance(t, ast.Subscript) and environ(t.value) for t in targets):
            lines.append(node.lineno)
        elif isinstance(node, ast.Call) and (of_os(node.func, ("putenv", "unsetenv")) or isinstance(node.func, ast.Attribute)
                                             and environ(node.func.value) and node.func.attr in ENVIRON_WRITERS):
            lines.append(node.lineno)
    return lines


def test_the_library_writes_no_environment_variable():
    """What a worker needs travels as its arguments (the families, the examples tree, the guard bands: harness.pool),
    never as a variable one module writes into os.environ for another to read. A child's environment is built as
    a copy (dict(os.environ, ...)). Nothing is allowed: no module is listed."""
    writes = {f"{p.relative_to(ROOT).as_posix()}:{line}" for p in (ROOT / "harness").rglob("*.py")
              for line in environ_writes(p.read_text())}
    assert writes == set(), sorted(writes)


def test_every_kind_of_environment_write_is_seen():
    text = """import os
os.environ["A"] = "1"
os.environ["A"] += "2"
del os.environ["A"]
os.environ.setdefault("B", "1")
os.environ.update(C="1")
os.environ.pop("C")
os.putenv("D", "1")
env = dict(os.environ, E="1")
env.setdefault("F", "1")
env["G"] = os.environ.get("G", "")
"""
    assert environ_writes(text) == [2, 3, 4, 5, 6, 7, 8]


def test_ruff():
    out = subprocess.run([tool("ruff"), "check", "--no-cache", str(ROOT)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
