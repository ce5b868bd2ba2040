import os
import sys
from pathlib import Path

import pytest

from harness import kernels

# Worker subprocesses import the fake family by module name: make tests/ importable for them too.
_TESTS = str(Path(__file__).parent)
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [_TESTS, str(Path(__file__).parent.parent),
                                                          os.environ.get("PYTHONPATH")]))
sys.path.insert(0, _TESTS)
# The test doubles, registered as any family of one's own is: here for this process (its pools pass them to
# their workers); a command run as a subprocess is given `harness --register fake=fake_family:FAMILY`.
kernels.register("fake", "fake_family:FAMILY")
kernels.register("ws_unprimed", "ws_unprimed:FAMILY")


@pytest.fixture(autouse=True)
def _no_examples_tree():
    """Each test starts with no outside kernels' examples tree set (harness.kernels.use_examples: a command's
    --examples sets it for the process) and leaves none behind."""
    kernels.use_examples(None)
    yield
    kernels.use_examples(None)
