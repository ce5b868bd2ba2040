"""Every reproducer replays: one test per file under reproducers/, named by its group and id, failing while its bug
is present. Without a GPU a compile error still replays (compiled for sm_90a); anything else skips.

pytest collects tests/ and cases/ by itself, not this: run it by path, one reproducer by its id, or a group by name:

    python -m pytest reproducers/test_reproducers.py -k 3264ffa39b5d
    python -m pytest reproducers/test_reproducers.py -k compiler
"""
from pathlib import Path

import pytest

from harness import reproducer_files
from harness.replay import replay_test

PATHS = reproducer_files.paths(Path(__file__).resolve().parent)


@pytest.mark.parametrize("path", PATHS, ids=[f"{p.parent.name}-{p.stem}" for p in PATHS])
def test_reproducer(path, tmp_path):
    replay_test(path, tmp_path)
