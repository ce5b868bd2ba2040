import json

import pytest

from harness import case as case_mod
from harness.case import Case, CaseError


def test_json_round_trip():
    c = Case(heads=8, kv_heads=2, seqlen_q=127, seqlen_k=5, causal=True, window=(3, -1), sinks=True,
             layout="bshd", dtype="bfloat16", seed=7)
    assert case_mod.from_json(case_mod.to_json(c)) == c
    assert case_mod.from_json(case_mod.to_json(c)).id == c.id


@pytest.mark.parametrize("changes, reason", [
    ({"heads": 6, "kv_heads": 4}, "heads (6) must be a multiple of kv_heads (4)"),
    ({"seqlen_q": 0}, "seqlen_q must be >= 1"),
    ({"dtype": "float32"}, "dtype must be one of"),
    ({"layout": "sbhd"}, "layout must be one of"),
    ({"window": (-2, 0)}, "window must be (left, right)"),
    ({"family": "nope"}, "family must be one of"),
])
def test_validate_names_the_reason(changes, reason):
    with pytest.raises(CaseError, match=reason.replace("(", r"\(").replace(")", r"\)")):
        Case(**changes).validate()


def test_unknown_key_is_rejected():
    d = case_mod.to_dict(Case())
    d["seqlen"] = 3
    with pytest.raises(CaseError, match="unknown case field.*seqlen"):
        case_mod.from_dict(d)


@pytest.mark.parametrize("field, value", [("seqlen_q", "7"), ("causal", 1), ("seqlen_k", 3.0),
                                          ("window", [1]), ("window", [1, "2"]), ("dtype", None)])
def test_wrong_type_is_rejected(field, value):
    d = case_mod.to_dict(Case())
    d[field] = value
    with pytest.raises(CaseError, match=f"'{field}'"):
        case_mod.from_dict(d)


def test_bad_json_text():
    with pytest.raises(CaseError, match="not valid JSON"):
        case_mod.from_json('{"family": "fwd", ')
    with pytest.raises(CaseError, match="must be a JSON object"):
        case_mod.from_json(json.dumps([1, 2]))


@pytest.mark.parametrize("causal, window, bounds", [
    (False, (-1, -1), (-1, -1)), (True, (-1, -1), (-1, 0)), (True, (5, 3), (5, 0)), (True, (2, -1), (2, 0)),
    (False, (0, 0), (0, 0)),
])
def test_causal_intersects_window(causal, window, bounds):
    assert Case(causal=causal, window=window).bounds == bounds
