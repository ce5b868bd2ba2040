"""A reproducer's title is one line a person scans in INDEX.md (reproducer_model.TITLE_MAX); the rest is its description."""
import dataclasses
import json
from pathlib import Path

import pytest

from harness import reproducer_building, reproducer_files, reproducer_loading, reproducer_model
from harness.result import Result
from tests.test_record import CASE, ENV, failure

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("path", reproducer_files.paths(ROOT / "reproducers"), ids=lambda p: p.stem)
def test_every_recorded_title_is_one_short_line(path):
    title = reproducer_loading.load(path).title
    assert title.strip() and "\n" not in title and len(title) <= reproducer_model.TITLE_MAX, f"{len(title)}: {title}"


def test_a_made_title_of_a_long_message_stays_short():
    words = "the layout of the fragment does not match what the gemm operand needs " * 8
    long = Result.of(CASE, "MISMATCH", "judge", words, tensor="O", region="tail_q_tile " * 30)
    made = reproducer_building.build(long, ENV)
    assert len(made.title) <= reproducer_model.TITLE_MAX and "\n" not in made.title
    # Cut between words: the rest starts the description, the case's shape follows it.
    assert made.title.startswith("fwd/default: MISMATCH O tail_q_tile") and made.title.endswith("tail_q_tile")
    assert made.description.startswith("tail_q_tile ") and made.description.endswith("tile=64x64/1/128")
    hand = reproducer_building.build(failure(), ENV, title=words)
    assert len(hand.title) <= reproducer_model.TITLE_MAX and hand.title.endswith(" fragment")
    assert (hand.title + " " + hand.description).startswith(" ".join(words.split()))


def test_a_description_round_trips_and_an_older_record_without_one_loads(tmp_path):
    built = reproducer_building.build(failure(), ENV)
    rep = dataclasses.replace(built, description="found compile-only; the shape is the campaign's")
    path = reproducer_files.save(rep, tmp_path)
    assert reproducer_loading.load(path) == rep
    older = json.loads(path.read_text())
    del older["description"]
    assert reproducer_loading.from_dict(older).description == ""


def test_the_index_says_where_a_regression_came_in_and_where_a_fix_did():
    from harness import reproducer_index

    rep = reproducer_building.build(failure(), ENV)
    def matrix(**said):
        return dataclasses.replace(rep, releases={v.replace("_", "."): reproducer_model.Release(r) for v, r in said.items()})
    regression = matrix(**{"0_1_12": "not reproduced", "0_1_13": "reproduced", "0_1_15": "reproduced"})
    assert reproducer_index._changed_in(regression) == "broken by 0.1.13"
    fixed = matrix(**{"0_1_12": "reproduced", "0_1_15": "reproduced", "0_1_16": "not reproduced"})  # recorded on 0.1.15
    assert reproducer_index._changed_in(fixed) == "fixed by 0.1.16"
    assert reproducer_index._changed_in(matrix(**{"0_1_14": "fails differently", "0_1_15": "reproduced"})) == ""
