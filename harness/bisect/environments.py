"""Where each step of a bisect or the release matrix runs: one environment per TileLang release or commit.

Each release is installed once into its own directory under --envs (a pip --target tree that
shadows the installed TileLang on PYTHONPATH; torch and the rest come from this environment).
Across commits (`Commits`), each first-parent commit between the endpoints is checked out into a
scratch worktree, built into a wheel by the user's command (cached by commit; a commit that does
not build is a skip), and installed like a release. A replay or a campaign runs there in a subprocess
(harness.bisect.inside, one typed request and answer), since another TileLang cannot be imported into this one.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.version import InvalidVersion, Version

from harness.bisect import BisectError, Pending
from harness.bisect.inside import CampaignRequest, Ran, Replayed, ReplayRequest, request_line
from harness.status import Status

# Linked by TileLang's libraries through relative rpaths (0.1.10: "libz3.so.4.15: cannot open
# shared object file" with z3 elsewhere on the path), so they are installed into each release's tree.
NATIVE = ("apache-tvm-ffi", "z3-solver")
ROOT = Path(__file__).resolve().parents[2]  # the checkout: a step's subprocess imports this harness
INSIDE = [sys.executable, "-m", "harness.bisect.inside"]


# ----------------------------------------------------------------------------- versions
def available(wheels: Path | None = None) -> list[Version]:
    """TileLang releases: the wheels in `wheels` (offline), else the package index pip is set up for."""
    if wheels is not None:
        found = {m.group(1) for m in (re.match(r"tilelang-([^-]+)-", p.name) for p in Path(wheels).glob("*.whl")) if m}
        if not found:
            raise BisectError(f"--wheels {wheels} holds no TileLang wheel (tilelang-<release>-*.whl)")
    else:
        out = subprocess.run([sys.executable, "-m", "pip", "index", "versions", "tilelang"],
                             capture_output=True, text=True, timeout=300)
        line = next((line for line in out.stdout.splitlines() if line.startswith("Available versions:")), "")
        found = {v.strip() for v in line.split(":", 1)[-1].split(",") if v.strip()}
        if not found:
            raise BisectError(f"cannot list TileLang releases from the package index: {out.stderr.strip()[-200:]}")
    return sorted(Version(v) for v in found)


def between(versions: list[Version], good: str, bad: str) -> list[Version]:
    """The releases from `good` to `bad`, both included, in the order the search walks them."""
    ends = []
    for name, text in (("--good", good), ("--bad", bad)):
        try:
            v = Version(text)
        except InvalidVersion:
            raise BisectError(f"{name} {text!r} is not a version") from None
        if v not in versions:
            raise BisectError(f"{name} {text} is not a TileLang release; known: {', '.join(map(str, versions))}")
        ends.append(v)
    g, b = ends
    if g == b:
        raise BisectError("--good and --bad name the same release")
    inside = [v for v in versions if min(g, b) <= v <= max(g, b)]
    return inside if g < b else inside[::-1]


# ----------------------------------------------------------------------------- environments
def requirements(wheel: Path) -> list[str]:
    """What a release needs beyond this environment, pinned as it was built: an open range
    (">=X" with no upper bound) would install today's ABI-incompatible apache-tvm-ffi, so it takes
    its floor. A requirement this environment already meets is left to it, except the native
    libraries TileLang links by a path relative to its own (NATIVE): those go beside it."""
    with zipfile.ZipFile(wheel) as z:
        meta = z.read(next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))).decode()
    out = []
    for line in meta.splitlines():
        if not line.startswith("Requires-Dist:"):
            continue
        req = Requirement(line.split(":", 1)[1].strip())
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        try:
            have = metadata.version(req.name)
        except metadata.PackageNotFoundError:
            have = None
        if have is not None and req.specifier.contains(have, prereleases=True) and req.name not in NATIVE:
            continue
        floors = [s.version for s in req.specifier if s.operator == ">="]
        open_range = floors and not any(s.operator in ("<", "<=", "==") for s in req.specifier)  # ~=0.1.0 is open too
        out.append(f"{req.name}=={floors[0]}" if open_range else f"{req.name}{req.specifier}")
    return out


@dataclass
class Releases:
    """One install directory per release under `root`; `wheels` makes it offline."""
    root: Path
    wheels: Path | None = None
    installs: list[str] = field(default_factory=list)   # releases installed by this process
    kind = "release"

    def path(self, version) -> Path:
        return self.root / f"tilelang-{version}"

    def site(self, version) -> Path:
        """The directory to put on PYTHONPATH for this release."""
        return self.path(version)

    def at_hand(self, version) -> bool:
        return (self.site(version) / ".complete").exists()

    def get(self, version) -> tuple[Path | None, str]:
        """ensure(), with a release that cannot be had here as a reason, not an error."""
        try:
            return self.ensure(version)
        except Pending as e:
            return None, str(e)

    def ensure(self, version) -> tuple[Path | None, str]:
        """(directory, "") with the release installed, or (None, why it does not install);
        Pending when it cannot be had here at all."""
        target = self.path(version)
        if (target / ".complete").exists():
            return target, ""
        if target.exists():  # a partial install (killed): start over
            shutil.rmtree(target)
        download = self.root / "wheels"
        pip = [sys.executable, "-m", "pip", "-q"]
        source = ["--no-index", "--find-links", str(self.wheels)] if self.wheels else []
        got = subprocess.run(pip + ["download", "--no-deps", "-d", str(download), *source, f"tilelang=={version}"],
                             capture_output=True, text=True, timeout=1800)
        wheel = next(iter(sorted(download.glob(f"tilelang-{version}-*.whl"))), None)
        if got.returncode or wheel is None:
            raise Pending(f"tilelang {version} is not in {self.root} and cannot be downloaded here "
                          f"({_last(got.stderr)}); give --wheels, or unpack it into {target} with a .complete file")
        why = install(wheel, target, source)
        if why:
            return None, f"tilelang {version} does not install: {why}"
        self.installs.append(str(version))
        return target, ""


def install(wheel: Path, target: Path, source=()) -> str:
    """pip-install `wheel` and what it needs (requirements()) into `target`; "" or why not."""
    cmd = [sys.executable, "-m", "pip", "-q", "install", "--no-deps", "--target", str(target), *source, str(wheel),
           *requirements(wheel)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    if done.returncode:
        return _last(done.stderr)
    (target / ".complete").write_text(" ".join(cmd[3:]) + "\n")
    return ""


@dataclass
class Commits:
    """One build and install per commit of `repo` under `root`. `build` is a shell command run in
    a checkout of the commit (submodules are the command's business: e.g. `git submodule update
    --init --recursive && pip wheel . -w $HARNESS_WHEEL_DIR`); it must leave a tilelang wheel in
    $HARNESS_WHEEL_DIR; its output goes to `root`/commits/<sha>/build.log. CCACHE_DIR is kept under
    `root`, so neighbouring commits rebuild little (scripts/build_tilelang_commit.sh is such a command)."""
    root: Path
    repo: Path
    build: str
    installs: list[str] = field(default_factory=list)
    kind = "commit"

    def order(self, good: str, bad: str) -> list[str]:
        """First-parent commits from `good` to `bad`, both included, in search order."""
        g, b = self.resolve(good, "--good"), self.resolve(bad, "--bad")
        if self._git("merge-base", "--is-ancestor", g, b, check=False).returncode == 0:
            older, newer, forward = g, b, True
        elif self._git("merge-base", "--is-ancestor", b, g, check=False).returncode == 0:
            older, newer, forward = b, g, False
        else:
            raise BisectError(f"--good {good} and --bad {bad} are not on one line of history")
        inside = self._git("rev-list", "--first-parent", "--reverse", f"{older}..{newer}").stdout.split()
        walk = [older, *inside]
        return walk if forward else walk[::-1]

    def path(self, sha) -> Path:
        return self.root / "commits" / str(sha)

    def site(self, sha) -> Path:
        """The directory to put on PYTHONPATH for this commit (beside its wheel and build log)."""
        return self.path(sha) / "site"

    def at_hand(self, sha) -> bool:
        return (self.site(sha) / ".complete").exists()

    def ensure(self, sha) -> tuple[Path | None, str]:
        target = self.site(sha)
        if (target / ".complete").exists():
            return target, ""
        failed = self.path(sha) / "build-failed.txt"
        if failed.exists():
            return None, failed.read_text().strip()
        wheels = self.path(sha) / "wheel"
        if not any(wheels.glob("tilelang-*.whl")):
            why = self._build(sha, wheels)
            if why:
                failed.write_text(why + "\n")
                return None, why
        if target.exists():
            shutil.rmtree(target)
        why = install(next(wheels.glob("tilelang-*.whl")), target)
        if why:
            return None, f"commit {sha[:12]} does not install: {why}"
        self.installs.append(sha[:12])
        return target, ""

    def _build(self, sha, wheels: Path) -> str:
        wheels.mkdir(parents=True, exist_ok=True)
        tree = self.root / "worktree"
        self._git("worktree", "remove", "--force", str(tree), check=False)
        self._git("worktree", "add", "--detach", str(tree), sha)
        env = dict(os.environ, HARNESS_WHEEL_DIR=str(wheels), CCACHE_DIR=str(self.root / "ccache"))
        log = self.path(sha) / "build.log"  # written as the build goes: a cold TileLang build takes over an hour
        try:
            with log.open("w") as out:
                p = subprocess.run(self.build, shell=True, cwd=tree, env=env, stdout=out, stderr=subprocess.STDOUT,
                                   timeout=6 * 3600)
        finally:
            self._git("worktree", "remove", "--force", str(tree), check=False)
        if p.returncode:
            return f"commit {sha[:12]} does not build (status {p.returncode}): {_last(log.read_text())} (log: {log})"
        if not any(wheels.glob("tilelang-*.whl")):
            return f"commit {sha[:12]}: the build command left no tilelang wheel in $HARNESS_WHEEL_DIR"
        return ""

    def resolve(self, rev, name) -> str:
        p = self._git("rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}", check=False)
        if p.returncode:
            raise BisectError(f"{name} {rev} is not a commit of {self.repo}")
        return p.stdout.strip()

    def _git(self, *args, check=True):
        return subprocess.run(["git", "-C", str(self.repo), *args], capture_output=True, text=True, check=check)


def _last(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip() and not line.startswith("WARNING")]
    return (lines or [""])[-1][:300]


# ----------------------------------------------------------------------------- what runs there
def _env_of(target: Path) -> dict:
    """The environment of a subprocess that imports the release installed in `target`."""
    return dict(os.environ, PYTHONPATH=os.pathsep.join([str(target), str(ROOT), os.environ.get("PYTHONPATH", "")]),
                TILELANG_CACHE_DIR=str(target / ".kernel-cache"))


def _inside(target: Path, request, timeout=None) -> tuple[dict | None, subprocess.CompletedProcess]:
    """`request` answered by harness.bisect.inside with the release in `target`: (its answer, None if it gave
    none, and the process)."""
    p = subprocess.run(INSIDE, input=request_line(request), capture_output=True, text=True, env=_env_of(target),
                       timeout=timeout)
    try:
        answer = json.loads(p.stdout)
    except ValueError:  # json.JSONDecodeError is a ValueError
        answer = None
    return (answer if isinstance(answer, dict) else None), p


def replay_in(target: Path, reproducer: Path, runs: int, logs: Path, fresh=False, examples: Path | None = None
              ) -> tuple[Status, str]:
    """The reproducer replayed with the release in `target` (`fresh`: a compile per run; `examples`: its outside
    kernel's examples tree): (its status, its evidence in one line)."""
    request = ReplayRequest(str(reproducer), runs, str(logs), fresh, examples and str(examples))
    answer, p = _inside(target, request, timeout=3600)
    if answer is None:
        raise BisectError(f"the replay in {target.name} gave no JSON answer (exit {p.returncode}): {_last(p.stderr)}")
    if "error" in answer:
        raise BisectError(f"the replay in {target.name} cannot run: {answer['error']}")
    replayed = Replayed.from_dict(answer)
    return replayed.status, replayed.evidence


def campaign_in(target: Path, cases: Path, out: Path, examples: Path | None = None) -> str:
    """The campaign of the cases in `cases` (results in `out`) with the release in `target` (and `examples`, its
    examples tree, for outside kernels): its verdict counts in one line."""
    answer, p = _inside(target, CampaignRequest(str(cases), str(out), examples and str(examples)))
    if answer is None:
        return f"cannot test (exit {p.returncode}): {_last(p.stderr)}"
    if "error" in answer:
        return f"cannot test: {answer['error']}"
    ran = Ran.from_dict(answer)
    if ran.exit not in (0, 1):  # 4 the harness's own error, 125 TileLang does not import: no verdicts
        return f"cannot test (exit {ran.exit}): {_last(p.stderr)}"
    return ", ".join(f"{v} {n}" for v, n in sorted(ran.verdicts.items()))
