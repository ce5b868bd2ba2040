"""The compiler suite's plumbing: worker pools, known bugs, and recording new ones.

Each Hypothesis example is a suite of cases (strategies.suites: several kernels, several lengths
each) run at once through a session pool of default_size() workers, so compiles run in parallel
as in `harness run`; a failing suite shrinks to one case.

A failure whose signature matches a reproducer in reproducers/ is a known bug: the example
counts as seen (listed in the terminal summary), and the search goes on for new bugs. Any other
failure fails the test; when it is the compiler's (not a HARNESS_ERROR), the result Hypothesis
replays last (its minimal example) is written to --record-dir as a reproducer, deduplicated by
signature.
"""
import os
import shutil
import tempfile
import time
from collections import Counter
from pathlib import Path

import pytest

from harness import case as case_mod
from harness import reproducer_building, reproducer_files
from harness.environment import gpu_count
from harness.pool import Pool, Timeouts, default_size
from harness.result import Result

ROOT = Path(__file__).resolve().parent.parent


def pytest_addoption(parser):
    parser.addoption("--record-dir", default=str(ROOT / "reproducers"),
                     help="where failing property tests record reproducers (default: reproducers/)")
    parser.addoption("--cases-log", default=None,
                     help="append every case the property tests run to this JSON-lines file "
                          "(`harness run --cases-from` runs the same cases)")
    parser.addoption("--time-box", type=float, default=None, metavar="SECONDS",
                     help="skip the tests that would start after SECONDS of this session (a CI job's "
                          "time box: the tests that ran are reported, the rest show as skipped)")


class _Logged:
    """A pool that first appends the cases it is given to a cases file."""

    def __init__(self, pool, path):
        self.pool, self.path = pool, path

    def run(self, cases, *args, **kwargs):
        with open(self.path, "a") as f:
            f.write("".join(case_mod.to_json(c) + "\n" for c in cases))
        return self.pool.run(cases, *args, **kwargs)

    def run_one(self, case) -> Result:
        return next(iter(self.run([case])))


_log_dirs = []  # the pools' worker logs: removed at the end unless a test failed


def _new_pool(name: str) -> Pool:
    log_dir = tempfile.mkdtemp(prefix=f"harness-{name}-")
    _log_dirs.append(log_dir)
    if name == "gpu_pool":
        return Pool(default_size(), "auto", log_dir, Timeouts(compile=600, run=60), gpus=list(range(gpu_count())) or None)
    return Pool(default_size(), "sm_90a", log_dir, Timeouts(compile=600))


_started = {}  # fixture name -> the pool pytest_configure started for it


def pytest_configure(config):
    """Start the pool this machine's tests use (the GPU's, else the compile-only one) as this
    conftest loads: its workers import torch and TileLang while the tests are collected, instead
    of after, in the first test. Unused, it is closed at the end. xdist's controller runs no test."""
    controller = getattr(config.option, "numprocesses", None) and "PYTEST_XDIST_WORKER" not in os.environ
    if controller or config.option.collectonly:
        return
    name = "gpu_pool" if gpu_count() else "compile_pool"
    _started[name] = _new_pool(name)
    _started[name].start(_started[name].n)


def pytest_collection_finish(session):
    """A row test's kernel is known once collected: the pool builds every selected row's kernel
    ahead, in parallel, while the tests run one after another, each then finding its kernel built
    (and its worker warm). Under xdist each process collects every test but runs a few: none."""
    if "PYTEST_XDIST_WORKER" in os.environ:
        return
    rows = {}
    for item in session.items:
        params = getattr(item, "callspec", None) and item.callspec.params
        if params and "row" in params and not item.get_closest_marker("skip"):
            rows.setdefault(params["pool"], []).append(params["row"])
    for name, cases in rows.items():
        if name in _started:
            _started[name].prepare(cases)


_began = time.monotonic()


def pytest_runtest_setup(item):
    box = item.config.getoption("--time-box")
    if box is not None and time.monotonic() - _began > box:
        pytest.skip(f"--time-box {box:g} s reached")


def pytest_sessionfinish(session, exitstatus):
    for pool in _started.values():
        pool.close()
    if exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
        for path in _log_dirs:
            shutil.rmtree(path, ignore_errors=True)
        _log_dirs.clear()


def _pool(request, name):
    with _started.pop(name, None) or _new_pool(name) as pool:
        log = request.config.getoption("--cases-log")
        yield _Logged(pool, log) if log else pool


@pytest.fixture(scope="session")
def gpu_pool(request):
    yield from _pool(request, "gpu_pool")


@pytest.fixture(scope="session")
def compile_pool(request):
    yield from _pool(request, "compile_pool")


@pytest.fixture(scope="session")
def known_bugs(request):
    return reproducer_files.known_signatures(request.config.getoption("--record-dir"))


@pytest.fixture
def expect(request, known_bugs, tilelang_error):
    """expect(results, verdict): every result (one Result, or an example's suite of them) has the
    verdict of correct behaviour or a known bug's signature; else the first other one fails, or
    the test skips if TileLang does not import here (conftest.py's probe)."""
    def check(results, verdict):
        results = [results] if isinstance(results, Result) else sorted(results, key=lambda r: r.case_id)
        for result in results:
            if result.verdict == verdict:
                continue
            known = known_bugs.get(result.signature)
            if known is not None:
                request.node.known_hits = getattr(request.node, "known_hits", Counter())
                request.node.known_hits[Path(known).stem] += 1
                continue
            reason = tilelang_error()
            if reason:
                pytest.skip(reason)
            request.node.harness_failure = result
            from harness.report import explain  # pandas: not before the pool starts (pytest_configure)
            pytest.fail(explain(result), pytrace=False)
        return results
    return check


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.when == "call":  # user_properties reach the xdist controller and JUnit XML
        report.user_properties += [("known_bug", f"{rid} x{n}") for rid, n in getattr(item, "known_hits", {}).items()]
    result = getattr(item, "harness_failure", None)
    if report.when == "call" and report.failed and result is not None and result.failed:
        from harness.environment import environment
        path = reproducer_building.write(result, environment(), item.config.getoption("--record-dir"))
        report.sections.append(("reproducer", f"recorded {path}"))
        report.user_properties.append(("reproducer", str(path)))  # JUnit XML names it


def pytest_terminal_summary(terminalreporter):
    hits = [(r.nodeid, v) for reports in terminalreporter.stats.values() for r in reports
            for k, v in getattr(r, "user_properties", []) if k == "known_bug"]
    if hits:
        terminalreporter.section("known bugs hit (recorded reproducers)")
        for nodeid, hit in hits:
            terminalreporter.write_line(f"{hit}  in {nodeid}")
    if _log_dirs:
        terminalreporter.write_line(f"worker logs kept: {', '.join(_log_dirs)}")
