"""Where outside kernels come from: the `examples/` of a TileLang source tree, named at run time.

Nothing of TileLang's examples lives in this repository. `harness run --examples PATH` (a checkout,
an unpacked source package, or its examples/ folder; by default the one $HARNESS_EXAMPLES names) sets
the tree for the process (harness.kernels.use_examples), and its pools pass it to their workers as an
argument; `harness examples fetch` downloads the installed release's source package from the package
index (0.1.7 to 0.1.14 have one) and unpacks its examples/.

A tree belongs to a release: its VERSION file (beside examples/) must be the installed TileLang's,
except where a release published no examples (NEWEST_EXAMPLES: 0.1.15 takes 0.1.14's). The adapters
name each example by its current path; an older tree keeps some under another name (MOVED) or lacks
them (ADDED): there, their cases are UNSUPPORTED with the reason (`lacks`), not the run refused.
"""
from __future__ import annotations

import hashlib
import importlib.util
import io
import json
import sys
import tarfile
import urllib.request
from pathlib import Path

from packaging.version import InvalidVersion, Version

from harness import kernels
from harness.case import CaseError

INDEX = "https://pypi.org/simple/tilelang/"
# Releases with no source package, nor a tag in the stored checkout: the newest examples that run on them.
NEWEST_EXAMPLES = {"0.1.15": "0.1.14"}
# Example files by the release that first shipped them (read off TileLang's tags): older trees lack them.
ADDED = {"attention_sink/example_gqa_sink_fwd_varlen.py": "0.1.7.post2",
         "attention_sink/example_gqa_sink_bwd_varlen.py": "0.1.7.post2",
         **{f"flash_attention_sm100/{name}.py": "0.1.9"
            for name in ("mha_fwd_bshd", "gqa_fwd_bshd", "mha_bwd_bshd", "gqa_bwd_bshd")}}
# Example files renamed in a release: {path now: (that release, the path before it)}.
MOVED = {"flash_attention/example_mha_bwd_bshd.py": ("0.1.7", "flash_attention/example_mha_bwd.py")}


class ExamplesError(CaseError):
    """An examples tree that is missing, of another release, or lacks a module: one line, exit 2."""


def root() -> Path:
    """The examples/ directory of the tree this process uses (harness.kernels.use_examples)."""
    where = kernels.examples()
    if where is None:
        raise ExamplesError(f"outside kernels need TileLang's examples: pass --examples PATH (or set {kernels.EXAMPLES_ENV})")
    path = where / "examples" if (where / "examples").is_dir() else where
    if not path.is_dir():
        raise ExamplesError(f"examples path {where} is not a directory")
    return path


def version(examples: Path) -> str | None:
    """The release an examples tree belongs to (its VERSION file), or None when it has none."""
    for candidate in (examples.parent / "VERSION", examples / "VERSION"):
        if candidate.is_file():
            return candidate.read_text().strip().split("+")[0]
    return None


def check_release(examples: Path, installed: str) -> str:
    """The examples' release, if it fits the installed TileLang; else ExamplesError."""
    found = version(examples)
    if found is None:
        raise ExamplesError(f"{examples}: no VERSION file beside examples/, so its release is unknown")
    if found not in (installed, NEWEST_EXAMPLES.get(installed)):
        raise ExamplesError(f"{examples} holds TileLang {found}'s examples, but TileLang {installed} is installed "
                            f"(`harness examples fetch --version {installed}`)")
    return found


def older(release: str, than: str) -> bool:
    """Whether TileLang `release` came before `than` (False for a version string that does not parse)."""
    try:
        return Version(release) < Version(than)
    except InvalidVersion:
        return False


def before(than: str) -> str | None:
    """The examples tree's release when it came before `than`, else None (also for a tree without VERSION)."""
    release = version(root())
    return release if release and older(release, than) else None


def lacks(relative: str) -> str | None:
    """Why the tree has no `relative` when its release predates that example (ADDED), else None."""
    added = ADDED.get(relative)
    release = added and before(added)
    if release and not (root() / relative).is_file():
        return f"TileLang {release}'s examples have no {relative} (added in {added})"
    return None


def use(path: str, installed: str) -> str:
    """Point this process and its workers at the examples under `path`; returns their release."""
    kernels.use_examples(Path(path).resolve())
    return check_release(root(), installed)


def use_file(path: str) -> Path:
    """Point this process and its workers at the directory of a user's kernel file (no release to
    check: it is theirs); returns the file."""
    file = Path(path).resolve()
    if not file.is_file():
        raise ExamplesError(f"kernel file {path} does not exist")
    kernels.use_examples(file.parent)
    return file


def module_path(relative: str) -> Path:
    """Where the tree keeps the example the adapters call `relative` (under its old name in a release
    before a MOVED one). ExamplesError when it is missing, except from a release that predates it
    (`lacks`): that adapter's cases are UNSUPPORTED, the run goes on."""
    moved = MOVED.get(relative)
    path = root() / (moved[1] if moved and before(moved[0]) else relative)
    if not path.is_file() and lacks(relative) is None:
        raise ExamplesError(f"{root()} has no {path.relative_to(root())} (another release's examples?)")
    return path


def _file(relative: str) -> Path:
    path = module_path(relative)
    if not path.is_file():
        raise ExamplesError(lacks(relative))
    return path


def digest(relative: str) -> str:
    """sha256 (16 hex digits) of one example file: a reproducer names the program it ran."""
    return hashlib.sha256(_file(relative).read_bytes()).hexdigest()[:16]


_loaded: dict[Path, object] = {}


def load(relative: str):
    """Import one example file (its directory first on sys.path: examples import their siblings)."""
    path = _file(relative)
    if path not in _loaded:
        if str(path.parent) not in sys.path:
            sys.path.insert(0, str(path.parent))
        name = "tilelang_example_" + hashlib.sha1(str(path).encode()).hexdigest()[:10]
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # TileLang reads a kernel's source through inspect: it needs the module
        spec.loader.exec_module(module)
        _loaded[path] = module
    return _loaded[path]


def fetch(release: str, dest: Path) -> Path:
    """Download tilelang==`release`'s source package and unpack its examples/ and VERSION under
    dest/tilelang-<release>/; returns that directory. ExamplesError when the index has none."""
    target = dest / f"tilelang-{release}"
    if (target / "examples").is_dir():
        return target
    request = urllib.request.Request(INDEX, headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    with urllib.request.urlopen(request, timeout=60) as r:
        files = json.load(r)["files"]
    wanted = f"tilelang-{release}.tar.gz"
    url = next((f["url"] for f in files if f["filename"] == wanted), None)
    if not any(f"-{release}-" in f["filename"] or f["filename"] == wanted for f in files):
        raise ExamplesError(f"tilelang has no release {release} on the package index")
    if url is None:
        raise ExamplesError(f"the package index has no source package of tilelang {release} "
                            f"(a checkout at its tag is needed: --examples PATH)")
    with urllib.request.urlopen(url, timeout=600) as r:
        data = r.read()
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        members = [m for m in tar.getmembers()
                   if m.name.split("/")[1:2] in (["examples"], ["VERSION"]) and (m.isfile() or m.isdir())]
        tar.extractall(dest, members=members, filter="data")
    if not (target / "examples").is_dir():
        raise ExamplesError(f"{wanted} has no examples/")
    return target
