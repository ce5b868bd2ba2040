"""Program forms: their Case field, how they are drawn and covered, minimized, and the differential check."""
from __future__ import annotations

import types

import pytest
import torch
from hypothesis import given, settings

from harness import case as case_mod
from harness import kernels, minimize, pairwise, strategies, worker
from harness.case import FORMS, Case, CaseError


def test_a_case_without_forms_keeps_its_json_and_id():
    assert "forms" not in case_mod.to_json(Case())
    with_forms = Case(forms=(("kv_loop", "serial"), ("q_load", "loop"))).validate()
    assert case_mod.from_json(case_mod.to_json(with_forms)) == with_forms
    assert with_forms.id != Case().id
    assert with_forms.form("kv_loop") == "serial" and with_forms.form("row_max") == "running"


@pytest.mark.parametrize("forms", [(("q_load", "copy"),), (("nothing", "loop"),), (("q_load", "loop"), ("kv_loop", "serial")),
                                   (("q_load", "loop"), ("q_load", "loop"))])
def test_forms_must_name_another_form_of_a_known_block_sorted_once(forms):
    with pytest.raises(CaseError, match="form"):
        Case(forms=forms).validate()


def test_a_file_writes_forms_as_block_form_names_and_reads_them_back_as_pairs():
    c = Case(forms=(("kv_loop", "serial"), ("q_load", "loop")))
    assert case_mod.to_dict(c)["forms"] == ["kv_loop=serial", "q_load=loop"]
    assert case_mod.from_dict(case_mod.to_dict(c)).forms == c.forms
    with pytest.raises(CaseError, match="form 'q_load' is not 'block=form'"):
        case_mod.from_dict({**case_mod.to_dict(c), "forms": ["q_load"]})


def test_a_family_without_a_block_in_forms_does_not_take_it():
    reason = kernels.family("bwd").offer.unsupported(Case(family="bwd", variant="atomic", forms=(("q_load", "loop"),)))
    assert reason and "default form only" in reason


@settings(max_examples=60, deadline=None)
@given(strategies.static_case("fwd"))
def test_drawn_forms_are_valid_and_declared(case):
    case.validate()
    assert all(block in kernels.family("fwd").offer.forms for block, _ in case.forms)


@settings(max_examples=20, deadline=None)
@given(strategies.static_case("bwd"))
def test_a_family_without_forms_draws_none(case):
    assert case.forms == ()


def test_the_covering_array_holds_every_form_of_every_block_with_each_level_pairwise():
    rows = pairwise.covering("fwd", seed=1)
    seen = {(name, value) for c in rows for name, value in pairwise.levels(c).items()}
    for block, forms in FORMS.items():
        assert {(f"form:{block}", f) for f in forms} <= seen
    # each form beside each value of another factor, as for any pair of factors
    for block, forms in FORMS.items():
        for other in ("dtype", "layout", "variant"):
            pairs = {(pairwise.levels(c)[f"form:{block}"], pairwise.levels(c)[other]) for c in rows}
            assert pairs == {(f, v) for f in forms for v in pairwise.factors("fwd")[other]}, (block, other)


def test_the_minimizer_drops_one_form_at_a_time():
    c = Case(forms=(("kv_loop", "serial"), ("q_load", "loop"), ("row_max", "fresh")))
    steps = {s.forms for _, s in minimize._features(c) if s.forms != c.forms}
    assert {(), (("q_load", "loop"), ("row_max", "fresh")), (("kv_loop", "serial"), ("row_max", "fresh")),
            (("kv_loop", "serial"), ("q_load", "loop"))} <= steps


@pytest.fixture(autouse=True)
def _no_code_scan(monkeypatch):
    """The fakes' kernels have no generated code to scan."""
    monkeypatch.setattr(worker, "scan", lambda fam, case, kernel: ([], "digest", ()))


def test_the_default_kernel_is_cached_scanned_for_the_default_case_itself():
    fam = _fake(lambda forms: {"O": torch.tensor([1.0])})
    cache = {}
    worker.unlike_control(fam, Case(forms=(("q_load", "loop"),)), "cpu", cache, {}, {"O": torch.tensor([1.0])})
    assert cache[kernels.kernel_key(Case())] == ((), [], "digest", ())


def _fake(outputs_of):
    """A family whose kernel is its case's forms and whose run returns outputs_of(forms)."""
    return types.SimpleNamespace(
        runner=types.SimpleNamespace(build=lambda case, target: case.forms, run=lambda kernel, case, inputs: outputs_of(kernel)),
        judge=types.SimpleNamespace(canonical=lambda case, outputs: outputs, twins=False))


def test_forms_that_agree_bit_for_bit_pass():
    fam = _fake(lambda forms: {"O": torch.tensor([1.0, 2.0])})
    assert worker.unlike_control(fam, Case(forms=(("q_load", "loop"),)), "cpu", {}, {}, {"O": torch.tensor([1.0, 2.0])}) is None


def test_a_one_ulp_difference_is_a_mismatch_naming_the_tensor_and_region():
    fam = _fake(lambda forms: {"O": torch.tensor([1.0, 2.0], dtype=torch.float16)})
    mine = {"O": torch.tensor([1.0, 2.0], dtype=torch.float16).nextafter(torch.tensor(3.0, dtype=torch.float16))}
    r = worker.unlike_control(fam, Case(forms=(("q_load", "loop"),)), "cpu", {}, {}, mine)
    assert (r.verdict, r.tensor, r.region) == ("MISMATCH", "O", "forms")
    assert "in 2 elements" in r.message and "first at [0]" in r.message


def test_a_default_kernel_whose_own_runs_differ_proves_nothing():
    runs = iter([torch.tensor([1.0]), torch.tensor([1.5])])
    fam = _fake(lambda forms: {"O": next(runs)})
    assert worker.unlike_control(fam, Case(forms=(("q_load", "loop"),)), "cpu", {}, {}, {"O": torch.tensor([2.0])}) is None


def test_a_default_kernel_that_does_not_compile_proves_nothing():
    def broken(case, target):
        raise RuntimeError("no")
    fam = types.SimpleNamespace(runner=types.SimpleNamespace(build=broken, run=None),
                                judge=types.SimpleNamespace(canonical=None, twins=False))
    assert worker.unlike_control(fam, Case(forms=(("q_load", "loop"),)), "cpu", {}, {}, {"O": torch.tensor([2.0])}) is None


def test_a_forms_case_on_a_gpu_builds_its_default_kernel_with_its_own(monkeypatch):
    """Built in the compile stage (under the compile timeout, counted in seconds["control"]), a build-only job
    too; compiling for another target builds no control (nothing runs to compare)."""
    built = []
    fam = types.SimpleNamespace(
        offer=types.SimpleNamespace(unsupported=lambda case: None),
        runner=types.SimpleNamespace(lacks=lambda case: None, arch=None, needs=(), compiled=(),
                                     build=lambda case, target: built.append(case.forms) or case.forms),
        judge=types.SimpleNamespace(twins=False))
    monkeypatch.setattr(kernels, "family", lambda name: fam)
    cache = {}
    r = worker.run_case(Case(forms=(("q_load", "loop"),)), "auto", cache, build_only=True)
    assert r.verdict == "COMPILED" and built == [(("q_load", "loop"),), ()] and "control" in r.seconds
    assert cache[kernels.kernel_key(Case())] == ((), [], "digest", ())
    built.clear()
    r = worker.run_case(Case(forms=(("kv_load", "loop"),)), "sm_90a", {})
    assert built == [(("kv_load", "loop"),)] and "control" not in (r.seconds or {})


def test_the_pool_schedules_a_forms_case_with_its_default_kernel():
    from harness.pool import control_key
    assert control_key(Case(forms=(("q_load", "loop"),))) == kernels.kernel_key(Case())
    assert control_key(Case()) is None
