"""The seeded-bug benchmark's mutants stay applicable: each names a registered family and one
exact spot in the current kernels, and applying it changes a copy, never the package."""
import importlib.util
import sys
from pathlib import Path

import pytest

from harness import kernels

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("seeded_bugs", ROOT / "benchmarks" / "seeded_bugs.py")
seeded = sys.modules["seeded_bugs"] = importlib.util.module_from_spec(spec)  # dataclasses look it up
spec.loader.exec_module(seeded)


def test_enough_distinct_mutants_across_families():
    names = [m.name for m in seeded.MUTANTS]
    assert len(names) == len(set(names)) >= 15
    assert {m.family for m in seeded.MUTANTS} <= set(kernels.names())
    assert {"fwd", "bwd", "varlen_fwd", "varlen_bwd", "masked_fwd", "masked_bwd"} <= {m.family for m in seeded.MUTANTS}


@pytest.mark.parametrize("m", seeded.MUTANTS, ids=lambda m: m.name)
def test_each_mutant_changes_one_spot_of_a_copy(m, tmp_path):
    original = (ROOT / m.file).read_text()
    assert original.count(m.find) == 1 and m.find != m.replace
    (tmp_path / m.file).parent.mkdir(parents=True)
    (tmp_path / m.file).write_text(original)
    seeded.apply(m, tmp_path)
    mutated = (tmp_path / m.file).read_text()
    assert mutated != original and mutated.count(m.replace) >= 1
    assert (ROOT / m.file).read_text() == original


def test_a_mutant_whose_text_is_gone_is_refused(tmp_path):
    m = seeded.MUTANTS[0]
    (tmp_path / m.file).parent.mkdir(parents=True)
    (tmp_path / m.file).write_text("nothing to mutate here\n")
    with pytest.raises(SystemExit, match="occurs 0 times"):
        seeded.apply(m, tmp_path)
