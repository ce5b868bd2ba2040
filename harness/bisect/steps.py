"""One reproducer's bisect: its steps, kept in a state file as they end, and its report.

The endpoints are checked first. Either direction works: --good older than --bad finds where a bug
appeared, --good newer than --bad where it was fixed. Every step lands in the state file as it
ends (written atomically), so an interrupted bisect resumes there, and a bisect whose next step
cannot run here pauses (Pending) for the same command to go on elsewhere.
"""
from __future__ import annotations

import json
import platform
import time
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

from packaging.version import Version

from harness import untrusted
from harness.bisect import BisectError, Pending, environments
from harness.bisect.search import search
from harness.environment import gpu_count
from harness.status import SKIP, WORDS, Status

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
    """A bisect of `reproducer` from `good` to `bad`, its steps kept in `state_path` (resumed from it)."""
    reproducer: Path
    good: str
    bad: str
    releases: environments.Releases
    state_path: Path
    runs: int = 1
    fresh: bool = False                         # a compile per replay (bugs in which code a compile emits)
    regress: str = "failure"                    # what is bad: any failure, or the recorded signature only
    log: callable = print
    steps: dict = field(default_factory=dict)   # version -> {"status", "evidence", "seconds"}
    order: list = field(default_factory=list)   # what the search walks, saved: a resumed bisect needs no index

    def __post_init__(self):
        state = read_state(self.state_path)
        if state is not None:
            same = (state.get("reproducer"), state.get("good"), state.get("bad"), state.get("runs"),
                    state.get("fresh", False), state.get("regress", "failure")) == \
                (self.reproducer.name, self.good, self.bad, self.runs, self.fresh, self.regress)  # the name: checkouts move
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
                said, evidence = Status.CANNOT_TEST, f"CANNOT TEST: {why}"
            else:
                said, evidence = environments.replay_in(target, self.reproducer, self.runs,
                                                        self.releases.root / "logs" / key, self.fresh)
            # The search reads git bisect run's statuses; what the replay said stays beside them.
            self.steps[key] = {"status": said.step(self.regress), "said": said.value, "evidence": evidence,
                               "seconds": round(time.monotonic() - t0, 1)}
            self._save()
            self.log(f"  {key}: {evidence}")
        return self.steps[key]["status"]

    def _save(self):
        self.state_path.parent.mkdir(parents=True, exist_ok=True)
        state = {"reproducer": self.reproducer.name, "good": self.good, "bad": self.bad, "runs": self.runs,
                 "fresh": self.fresh, "regress": self.regress, "kind": self.releases.kind, "order": self.order,
                 "steps": self.steps}
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
        from harness import reproducer_loading

        if reproducer_loading.load(self.reproducer).needs_gpu and not gpu_count():
            raise Pending("the reproducer is numerical and this machine has no GPU")
        for end in (self.order[0], self.order[-1]):
            if self.releases.at_hand(end):
                self.test(end)
        try:
            lo, hi, skipped = search(self.order, self.test)
        except BisectError as e:
            said = self.steps.get(self.order[0], {}).get("said")
            if self.regress == "failure" and said == Status.FAILS_DIFFERENTLY.value:
                raise BisectError(f"{e}: {self.order[0]} fails with another signature (another bug); "
                                  "--regress signature counts that as good") from None
            raise
        return report(self, self.order, lo, hi, skipped)


def at_commit(reproducer: Path, provider: environments.Commits, ref: str, runs: int, envs: Path, fresh=False,
              regress="failure") -> tuple[int, str]:
    """One step, as `git bisect run` calls it: build `ref` (cached), replay there -> (status, evidence);
    SKIP when it does not build."""
    sha = provider.resolve(ref, "--at")
    target, why = provider.ensure(sha)
    if target is None:
        return SKIP, f"CANNOT TEST: {why}"
    said, evidence = environments.replay_in(target, reproducer, runs, envs / "logs" / sha, fresh)
    return said.step(regress), evidence


def start(reproducer: Path, rep_id: str, good: str, bad: str, provider, state: Path | None, envs: Path, runs: int,
          fresh: bool, regress="failure", log=print) -> Bisect:
    """A bisect ready to run: resumed from its state file (default under `envs`, named by the reproducer
    and the endpoints), else walking the releases or first-parent commits from `good` to `bad`."""
    tag = f"{rep_id}-{good}-{bad}".replace("/", "_")
    state = state or envs / f"bisect-{tag}.json"
    run = Bisect(reproducer, good, bad, provider, state, runs, fresh, regress, log=log)
    if not run.order:  # a resumed bisect walks its saved order: no index needed
        run.order = (provider.order(good, bad) if isinstance(provider, environments.Commits) else
                     [str(v) for v in environments.between(environments.available(provider.wheels), good, bad)])
    return run


def report(b: Bisect, order, lo, hi, skipped) -> str:
    """A ready-to-paste markdown report."""
    from harness import reproducer_loading

    rep = reproducer_loading.load(b.reproducer)
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
           + (f" --runs {b.runs}" if b.runs > 1 else "") + (" --fresh" if b.fresh else "")
           + (f" --regress {b.regress}" if b.regress != "failure" else ""))
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
        + ("(a compile each) " if b.fresh else "") + "with `harness repro` (0 good, 1 bad, 125 skip)"
        + ("; a failure with another signature counted good (--regress signature)." if b.regress == "signature" else "."),
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

