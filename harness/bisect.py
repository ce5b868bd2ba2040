"""Bisect a reproducer across TileLang releases or commits: which one changed its behaviour.

Each release is installed once into its own directory under --envs (a pip --target tree that
shadows the installed TileLang on PYTHONPATH; torch and the rest come from this environment), and
every step runs `harness repro` there as a subprocess: 0 good, 1 bad, 125 skip (the release does
not install or import, or cannot test the case). The endpoints are checked first. Either direction
works: --good older than --bad finds where a bug appeared, --good newer than --bad where it was
fixed. Every step lands in a state file as it ends, so an interrupted bisect resumes there.

Across commits (`Commits`), each first-parent commit between the endpoints is checked out into a
scratch worktree, built into a wheel by the user's command (cached by commit; a commit that does
not build is a skip), and installed like a release.
"""
from __future__ import annotations

import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time
import zipfile
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.version import InvalidVersion, Version

from harness import untrusted
from harness.environment import gpu_count
from harness.result import Result

GOOD, BAD, SKIP = 0, 1, 125
# Linked by TileLang's libraries through relative rpaths (0.1.10: "libz3.so.4.15: cannot open
# shared object file" with z3 elsewhere on the path), so they are installed into each release's tree.
NATIVE = ("apache-tvm-ffi", "z3-solver")
ROOT = Path(__file__).resolve().parent.parent


class BisectError(ValueError):
    """Bad input or a bisect that cannot go on; the message is one line."""


WORDS = {GOOD: "good", BAD: "bad", SKIP: "skip"}

class Pending(BisectError):
    """The next step cannot run on this machine: its release is not at hand (no index, no wheel),
    or the reproducer needs a GPU. The state file keeps every step so far, so the same command
    continues wherever that step can run (one release per machine, say)."""


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


# ----------------------------------------------------------------------------- one step
def _env_of(target: Path) -> dict:
    """The environment of a subprocess that imports the release installed in `target`."""
    return dict(os.environ, PYTHONPATH=os.pathsep.join([str(target), str(ROOT), os.environ.get("PYTHONPATH", "")]),
                TILELANG_CACHE_DIR=str(target / ".kernel-cache"))


def replay_in(target: Path, reproducer: Path, runs: int, logs: Path, fresh=False, examples: Path | None = None
              ) -> tuple[int, str]:
    """`harness repro` with the release in `target` (`fresh`: a compile per run; `examples`: its outside
    kernel's examples tree): (status, its evidence in one line)."""
    env = _env_of(target)
    cmd = [sys.executable, "-m", "harness.cli", "repro", str(reproducer), "--runs", str(runs), "--logs", str(logs),
           "--json", *(["--fresh"] if fresh else []), *(["--examples", str(examples)] if examples else [])]
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=3600)
    if p.returncode not in (GOOD, BAD, SKIP):
        raise BisectError(f"harness repro exited {p.returncode} in {target.name}: {_last(p.stderr)}")
    try:
        out = json.loads(p.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        raise BisectError(f"harness repro in {target.name} printed no JSON result: {_last(p.stderr)}") from None
    return p.returncode, out["verdict"] + (f" | {out['now'][0]}" if out["now"] else "")


# ----------------------------------------------------------------------------- the search
def search(order: list, test) -> tuple[int, int, list[int]]:
    """(index of the last good, index of the first bad, skipped indexes between them).
    `test(version) -> status`; order[0] must test good and order[-1] bad (checked first)."""
    first, last = test(order[0]), test(order[-1])
    if first != GOOD:
        raise BisectError(f"--good {order[0]} is not good here (status {first})")
    if last != BAD:
        raise BisectError(f"--bad {order[-1]} is not bad here (status {last})")
    lo, hi, skipped = 0, len(order) - 1, set()
    while True:
        untested = [i for i in range(lo + 1, hi) if i not in skipped]
        if not untested:
            return lo, hi, [i for i in sorted(skipped) if lo < i < hi]
        i = min(untested, key=lambda i: (abs(i - (lo + hi) / 2), i))
        status = test(order[i])
        if status == GOOD:
            lo = i
        elif status == BAD:
            hi = i
        else:
            skipped.add(i)


_JSON_TYPES = {list: "array", str: "string", int: "number", float: "number", bool: "boolean", type(None): "null"}


def read_state(path: Path) -> dict | None:
    """A bisect state file's contents (None when there is none yet); BisectError when `path` is
    not one: a directory, not UTF-8 JSON, not an object with its steps."""
    if not path.exists():
        return None
    try:
        state = untrusted.loads(path.read_bytes().decode("utf-8"))
    except IsADirectoryError:
        raise BisectError(f"state {path} is a directory, not a bisect state file") from None
    except OSError as e:
        raise BisectError(f"state {path}: cannot read: {e.strerror or e}") from None
    except ValueError as e:  # JSONDecodeError, UnicodeDecodeError, too large or deep
        raise BisectError(f"state {path} is not a bisect state file: not UTF-8 JSON ({e})") from None
    if not isinstance(state, dict):
        raise BisectError(f"state {path} is not a bisect state file: a JSON "
                          f"{_JSON_TYPES.get(type(state), type(state).__name__)}, not an object")
    steps, order = state.get("steps"), state.get("order", [])
    if not (isinstance(steps, dict) and all(isinstance(s, dict) and s.get("status") in WORDS for s in steps.values())
            and isinstance(order, list)):
        raise BisectError(f"state {path} is not a bisect state file: no steps, or steps without a status")
    return state


@dataclass
class Bisect:
    reproducer: Path
    good: str
    bad: str
    releases: Releases
    state_path: Path
    runs: int = 1
    fresh: bool = False                         # a compile per replay (bugs in which code a compile emits)
    log: callable = print
    steps: dict = field(default_factory=dict)   # version -> {"status", "evidence", "seconds"}
    order: list = field(default_factory=list)   # what the search walks, saved: a resumed bisect needs no index

    def __post_init__(self):
        state = read_state(self.state_path)
        if state is not None:
            same = (state.get("reproducer"), state.get("good"), state.get("bad"), state.get("runs"),
                    state.get("fresh", False)) == \
                (self.reproducer.name, self.good, self.bad, self.runs, self.fresh)  # the file name: checkouts move
            if not same:
                raise BisectError(f"{self.state_path} holds another bisect: {state.get('reproducer')} "
                                  f"{state.get('good')}..{state.get('bad')}; remove it or pass another --state")
            self.steps, self.order = state["steps"], state.get("order", [])
            if self.steps:
                self.log(f"resuming: {len(self.steps)} step(s) already in {self.state_path}")

    def test(self, version) -> int:
        key = str(version)
        if key not in self.steps:
            t0 = time.monotonic()
            target, why = self.releases.ensure(version)
            if target is None:
                status, evidence = SKIP, f"CANNOT TEST: {why}"
            else:
                status, evidence = replay_in(target, self.reproducer, self.runs, self.releases.root / "logs" / key,
                                             self.fresh)
            self.steps[key] = {"status": status, "evidence": evidence, "seconds": round(time.monotonic() - t0, 1)}
            self._save()
            self.log(f"  {key}: {evidence}")
        return self.steps[key]["status"]

    def _save(self):
        self.state_path.parent.mkdir(parents=True, exist_ok=True)
        state = {"reproducer": self.reproducer.name, "good": self.good, "bad": self.bad, "runs": self.runs,
                 "fresh": self.fresh, "order": self.order, "steps": self.steps}
        tmp = self.state_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=2) + "\n")
        tmp.replace(self.state_path)  # a kill mid-write leaves the previous state, never half of one

    def run(self, order: list | None = None) -> str:
        """Search `order` (from the good endpoint to the bad one; the saved one when resuming) and
        return the report. Endpoints whose releases are at hand are tested first, in either order."""
        if not self.order:
            self.order = [str(v) for v in order]
        self._save()
        self.log(f"{len(self.order)} {self.releases.kind}s from {self.order[0]} to {self.order[-1]}")
        from harness import record

        if record.load(self.reproducer).needs_gpu and not gpu_count():
            raise Pending("the reproducer is numerical and this machine has no GPU")
        for end in (self.order[0], self.order[-1]):
            if self.releases.at_hand(end):
                self.test(end)
        lo, hi, skipped = search(self.order, self.test)
        return report(self, self.order, lo, hi, skipped)


def at_commit(reproducer: Path, provider: Commits, ref: str, runs: int, envs: Path, fresh=False) -> tuple[int, str]:
    """One step, as `git bisect run` calls it: build `ref` (cached), replay there -> (status, evidence);
    SKIP when it does not build."""
    sha = provider.resolve(ref, "--at")
    target, why = provider.ensure(sha)
    if target is None:
        return SKIP, f"CANNOT TEST: {why}"
    return replay_in(target, reproducer, runs, envs / "logs" / sha, fresh)


def start(reproducer: Path, rep_id: str, good: str, bad: str, provider, state: Path | None, envs: Path, runs: int,
          fresh: bool, log=print) -> Bisect:
    """A bisect ready to run: resumed from its state file (default under `envs`, named by the reproducer
    and the endpoints), else walking the releases or first-parent commits from `good` to `bad`."""
    tag = f"{rep_id}-{good}-{bad}".replace("/", "_")
    state = state or envs / f"bisect-{tag}.json"
    run = Bisect(reproducer, good, bad, provider, state, runs, fresh, log=log)
    if not run.order:  # a resumed bisect walks its saved order: no index needed
        run.order = (provider.order(good, bad) if isinstance(provider, Commits) else
                     [str(v) for v in between(available(provider.wheels), good, bad)])
    return run


def report(b: Bisect, order, lo, hi, skipped) -> str:
    """A ready-to-paste markdown report."""
    from harness import record

    rep = record.load(b.reproducer)
    kind = b.releases.kind
    appeared = _older(b, order[0], order[-1])  # order runs from the good end to the bad one
    first_bad, last_good = order[hi], order[lo]
    if appeared:
        headline = f"**Regression: first bad {kind} {first_bad}, last good {last_good}.**"
    else:
        headline = f"**Fixed in {last_good}; the last {kind} with the bug is {first_bad}.**"
    if skipped:
        headline += (f" Untestable {kind}s between them ({', '.join(str(order[i]) for i in skipped)}) "
                     "leave the change somewhere in that range.")
    rows = [f"| {kind} | result | evidence | seconds |", "|---|---|---|---|"]
    for v in order:
        step = b.steps.get(str(v))
        if step:
            rows.append(f"| {v} | {WORDS[step['status']]} | {step['evidence'].replace('|', '/')} | {step['seconds']} |")
    where = (f" --repo {b.releases.repo} --build '{b.releases.build}'" if kind == "commit" else "")
    cmd = (f"harness bisect {b.reproducer} --good {b.good} --bad {b.bad} --envs {b.releases.root}{where}"
           + (f" --runs {b.runs}" if b.runs > 1 else "") + (" --fresh" if b.fresh else ""))
    return "\n".join([
        f"## Bisect of reproducer {rep.id} across TileLang {kind}s",
        "",
        f"{rep.title}",
        "",
        headline,
        "",
        f"Recorded signature: `{list(rep.signature)}`",
        "",
        *rows,
        "",
        f"Steps tested: {len(b.steps)} of {len(order)} {kind}s; each replayed {b.runs} time(s) "
        + ("(a compile each) " if b.fresh else "") + "with `harness repro` (0 good, 1 bad, 125 skip).",
        f"Environment: Python {platform.python_version()}, {platform.machine()}, torch "
        f"{_version('torch')}; {kind}s installed under {b.releases.root}.",
        "",
        "Rerun:",
        "",
        f"    {cmd}",
        f"    PYTHONPATH={b.releases.site(first_bad)} harness repro {b.reproducer}",
        "",
    ])


def _older(b, first, last) -> bool:
    """Whether the walk goes forward in time (a regression) rather than back (a fix)."""
    if b.releases.kind == "commit":
        return b.releases._git("merge-base", "--is-ancestor", str(first), str(last), check=False).returncode == 0
    return Version(str(first)) < Version(str(last))


def _version(name) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "none"


# ----------------------------------------------------------------------------- the release matrix
def examples_tree(examples: Path, version) -> Path | None:
    """The examples tree under `examples` that runs on TileLang `version` (its own, or the newest there is
    for a release without them), as `harness examples fetch --to examples` leaves it; None if there is none."""
    from harness.outside import source

    for release in (str(version), source.NEWEST_EXAMPLES.get(str(version))):
        if release and (examples / f"tilelang-{release}").is_dir():
            return examples / f"tilelang-{release}"
    return None


def matrix(reproducers: list[Path], versions: list, releases: Releases, runs=1, log=print, jobs=1, fresh=False,
           examples: Path | None = None) -> str:
    """Every reproducer replayed on every release (`jobs` at a time; an outside kernel's with that release's
    tree under `examples`): a markdown table of REPRODUCED / not reproduced / fails differently (another
    signature) / cannot test."""
    from concurrent.futures import ThreadPoolExecutor

    from harness import kernels, record

    words = {GOOD: "not reproduced", BAD: "**REPRODUCED**", SKIP: "cannot test"}
    reps = [record.load(p) for p in reproducers]
    outside = {p for p, rep in zip(reproducers, reps) if kernels.family(rep.case.family).module}
    rows = ["| reproducer | " + " | ".join(map(str, versions)) + " |", "|---|" + "---|" * len(versions)]
    cells = {}
    for v in versions:
        target, why = releases.get(v)

        def cell(path, v=v, target=target, why=why):
            tree = examples_tree(examples, v) if path in outside else None
            return (SKIP, why) if target is None else replay_in(target, path, runs, releases.root / "logs" / f"matrix-{v}",
                                                                fresh, tree)

        with ThreadPoolExecutor(jobs) as pool:
            for rep, out in zip(reps, pool.map(cell, reproducers)):
                cells[rep.id, v] = out
                log(f"  {v} {rep.id}: {out[1]}")
    def word(status, evidence):  # a failure with another signature is another bug (known or new), not this one
        return "fails differently" if status == BAD and "signature differs" in evidence else words[status]

    for rep in reps:
        rows.append(f"| {rep.id} | " + " | ".join(word(*cells[rep.id, v]) for v in versions) + " |")
    return "\n".join(rows) + "\n"


def campaign_in(target: Path, cases: Path, out: Path, examples: Path | None = None) -> str:
    """`harness run --cases-from` with the release in `target` (and `examples`, its examples tree, for
    outside kernels): its verdict counts in one line."""
    p = subprocess.run([sys.executable, "-m", "harness.cli", "run", "--cases-from", str(cases), "--out", str(out),
                        "--reproducers", str(out / "reproducers"), *(["--examples", str(examples)] if examples else [])],
                       capture_output=True, text=True, env=_env_of(target))
    if p.returncode not in (0, 1):  # 2 bad input, 125 TileLang does not import: no verdicts
        return f"cannot test (exit {p.returncode}): {_last(p.stderr)}"
    done = out / "results.jsonl"
    verdicts = [Result.from_dict(untrusted.loads(line)).verdict for line in done.read_text().splitlines() if line.strip()]
    return ", ".join(f"{v} {verdicts.count(v)}" for v in sorted(set(verdicts)))


def cases_matrix(cases: Path, versions: list, releases: Releases, out: Path, log=print, examples: Path | None = None) -> str:
    """A campaign's cases run on every release (compile-only without a GPU; outside kernels with that
    release's tree under `examples`): verdict counts per release."""
    rows = ["| release | verdicts |", "|---|---|"]
    for v in versions:
        target, why = releases.get(v)
        tree = examples and examples_tree(examples, v)
        cell = campaign_in(target, cases, out / f"tilelang-{v}", tree) if target is not None else f"cannot test: {why}"
        log(f"  {v}: {cell}")
        rows.append(f"| {v} | {cell} |")
    return "\n".join(rows) + "\n"
