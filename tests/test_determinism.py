"""harness determinism: the same cases compiled under several PYTHONHASHSEEDs, code compared."""
import json

import pytest

from harness import campaign, cli
from harness.case import Case


def test_a_kernel_whose_code_depends_on_the_hash_seed_is_listed(tmp_path, capsys):
    cases = tmp_path / "cases.jsonl"
    # heads 14: the fake kernel emits a barrier or not by hash("epilogue") % 2 (1 for seed 0, 0 for seed 2)
    campaign.write_cases(cases, [Case(family="fake", heads=14), Case(family="fake", heads=1)])
    out = tmp_path / "out"
    argv = ["determinism", "--cases-from", str(cases), "--hash-seeds", "0,2", "--out", str(out), "--workers", "1"]
    assert cli.main(argv) == 1
    text = capsys.readouterr().out
    assert text.startswith("2 kernels compiled under PYTHONHASHSEED 0, 2: 1 with code that depends on the seed")
    row = [line for line in text.splitlines() if line.startswith("| fake |")]
    assert len(row) == 1 and Case(family="fake", heads=14).id in row[0]
    assert (out / "determinism.md").read_text() + "\n" == text  # print() adds one newline
    # Each seed compiled from its own empty cache, and each run's results carry the code digest.
    for seed in (0, 2):
        results = [json.loads(line) for line in (out / f"seed-{seed}" / "results.jsonl").read_text().splitlines()]
        assert all(r["verdict"] == "COMPILED" and len(r["code"]) == 16 for r in results)
    assert cli.main([*argv[:4], "0,3", *argv[5:]]) == 0  # seed 3 hashes like seed 0


def test_one_seed_is_not_a_comparison(tmp_path, capsys):
    cases = tmp_path / "cases.jsonl"
    campaign.write_cases(cases, [Case(family="fake", heads=1)])
    with pytest.raises(SystemExit) as e:
        cli.main(["determinism", "--cases-from", str(cases), "--hash-seeds", "7,7"])
    assert e.value.code == 2
    assert capsys.readouterr().err == ("harness determinism: argument --hash-seeds: needs two different seeds or "
                                       "more, got '7,7'\n")
