import json
import re

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
    ({"seqlen_q": 0}, "seqlen_q must be in [1, 1048576], got 0"),
    ({"seqlen_q": 10**30}, "seqlen_q must be in [1, 1048576]"),
    ({"batch": 4096, "heads": 64, "kv_heads": 64, "seqlen_q": 65536}, "exceeds 2147483648"),
    ({"window": (3, 1 << 21)}, "window must be (left, right)"),
    ({"dtype": "float32"}, "dtype must be one of"),
    ({"layout": "sbhd"}, "layout must be one of"),
    ({"window": (-2, 0)}, "window must be (left, right)"),
])
def test_validate_names_the_reason(changes, reason):
    with pytest.raises(CaseError, match=re.escape(reason)):
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


def test_missing_fields_are_named():
    with pytest.raises(CaseError, match="missing case field.*batch.*seqlen_q"):
        case_mod.from_dict({"family": "fwd"})


def test_files_older_than_a_field_with_an_off_value_load_with_it_off():
    old = case_mod.to_dict(Case(family="bwd", heads=2, seqlen_q=9))
    for name in ("mask", "mask_broadcast", "bias"):
        del old[name]
    assert case_mod.from_dict(old) == Case(family="bwd", heads=2, seqlen_q=9)
    with pytest.raises(CaseError, match="missing case field.*block_m"):
        case_mod.from_dict({k: v for k, v in old.items() if k != "block_m"})
    with pytest.raises(CaseError, match="unknown case field.*mask_density"):
        case_mod.from_dict({**old, "mask_density": 0.5})


def test_mask_fields_are_checked():
    with pytest.raises(CaseError, match="mask must be one of"):
        Case(mask="dense").validate()
    with pytest.raises(CaseError, match="mask_broadcast must be one of"):
        Case(mask_broadcast="hb").validate()


def test_fields_declare_static_dynamic_and_off():
    assert case_mod.DYNAMIC == ("batch", "seqlen_q", "seqlen_k", "seed", "seqlens", "mask")
    program = case_mod.generate.template("copy")
    every = Case(forms=(("q_load", "loop"),), program=program)
    assert set(case_mod.STATIC) | set(case_mod.DYNAMIC) == set(case_mod.to_dict(every))
    assert case_mod.OFF == {"dtype": "float16", "causal": False, "window": (-1, -1), "sinks": False,
                            "layout": "bhsd", "knobs": (), "forms": (), "program": None, "seed": 0, "mask": "none",
                            "mask_broadcast": "bh", "bias": False}
    c = Case(heads=4, kv_heads=2, causal=True, layout="bshd", seed=9)
    # Lengths, batch and seed share a compiled kernel; any static field does not.
    assert case_mod.static_key(c) == case_mod.static_key(c.replace(batch=3, seqlen_q=77, seqlen_k=5, seed=1))
    others = {"family": "bwd", "variant": "split", "heads": 8, "kv_heads": 1, "head_dim": 128, "head_dim_v": 32,
              "dtype": "bfloat16", "causal": False, "window": (1, 2), "sinks": True, "layout": "bhsd",
              "block_m": 128, "block_n": 32, "num_stages": 2, "threads": 256, "knobs": ("no_tma",),
              "forms": (("q_load", "loop"),), "mask_broadcast": "11", "bias": True, "program": program}
    assert set(others) == set(case_mod.STATIC)
    for name, other in others.items():
        assert case_mod.static_key(c) != case_mod.static_key(c.replace(**{name: other})), name
    assert case_mod.features_on(c) == {"causal": True, "layout": "bshd", "seed": 9}
    assert case_mod.features_on(c, static_only=True) == {"causal": True, "layout": "bshd"}


def test_knobs_are_known_distinct_and_sorted():
    assert Case(knobs=("fast_math", "no_tma")).validate()
    for bad in (("no_such_pass",), ("no_tma", "fast_math"), ("no_tma", "no_tma")):
        with pytest.raises(CaseError, match="knobs must be distinct names"):
            Case(knobs=bad).validate()
    c = Case(knobs=("no_wgmma",))
    assert case_mod.from_json(case_mod.to_json(c)) == c
