"""The compiler suite's plumbing: worker pools, known bugs, and recording new ones.

A failure whose signature matches a reproducer in reproducers/ is a known bug: the example
counts as seen (listed in the terminal summary), and the search goes on for new bugs. Any other
failure fails the test; when it is the compiler's (not a HARNESS_ERROR), the result Hypothesis
replays last (its minimal example) is written to --record-dir as a reproducer, deduplicated by
signature.
"""
from collections import Counter
from pathlib import Path

import pytest

from harness import oracle, record
from harness.pool import Pool, Timeouts
from harness.report import explain

ROOT = Path(__file__).resolve().parent.parent


def pytest_addoption(parser):
    parser.addoption("--record-dir", default=str(ROOT / "reproducers"),
                     help="where failing property tests record reproducers (default: reproducers/)")


@pytest.fixture(scope="session")
def gpu_pool(tmp_path_factory):
    with Pool(1, "auto", tmp_path_factory.mktemp("gpu-workers"), Timeouts(compile=600, run=60)) as pool:
        yield pool


@pytest.fixture(scope="session")
def compile_pool(tmp_path_factory):
    with Pool(1, "sm_90a", tmp_path_factory.mktemp("compile-workers"), Timeouts(compile=600)) as pool:
        yield pool


@pytest.fixture(scope="session")
def known_bugs(request):
    return record.known_signatures(request.config.getoption("--record-dir"))


@pytest.fixture
def expect(request, known_bugs):
    """expect(result, verdict): the verdict of correct behaviour, or a known bug, or a failure."""
    def check(result, verdict):
        if result["verdict"] == verdict:
            return
        known = known_bugs.get(oracle.signature(result))
        if known is not None:
            request.node.known_hits = getattr(request.node, "known_hits", Counter())
            request.node.known_hits[Path(known).stem] += 1
            return
        request.node.harness_failure = result
        pytest.fail(explain(result), pytrace=False)
    return check


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.when == "call":  # user_properties reach the xdist controller and JUnit XML
        report.user_properties += [("known_bug", f"{rid} x{n}") for rid, n in getattr(item, "known_hits", {}).items()]
    result = getattr(item, "harness_failure", None)
    if report.when == "call" and report.failed and result is not None and result["verdict"] in oracle.FAILURES:
        from harness.environment import environment
        path = record.write(result, environment(), item.config.getoption("--record-dir"))
        report.sections.append(("reproducer", f"recorded {path}"))
        report.user_properties.append(("reproducer", str(path)))  # JUnit XML names it


def pytest_terminal_summary(terminalreporter):
    hits = [(r.nodeid, v) for reports in terminalreporter.stats.values() for r in reports
            for k, v in getattr(r, "user_properties", []) if k == "known_bug"]
    if hits:
        terminalreporter.section("known bugs hit (recorded reproducers)")
        for nodeid, hit in hits:
            terminalreporter.write_line(f"{hit}  in {nodeid}")
