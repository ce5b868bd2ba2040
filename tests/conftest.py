import os
import sys
from pathlib import Path

# Worker subprocesses import the fake family by module name: make tests/ importable for them too.
_TESTS = str(Path(__file__).parent)
os.environ["HARNESS_EXTRA_FAMILIES"] = "fake=fake_family:FAMILY,ws_unprimed=ws_unprimed:FAMILY"
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [_TESTS, str(Path(__file__).parent.parent),
                                                          os.environ.get("PYTHONPATH")]))
sys.path.insert(0, _TESTS)
