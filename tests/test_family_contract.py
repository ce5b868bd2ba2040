"""Every registered family (the test double included) is a complete `Family`."""
import dataclasses

import pytest

from harness import case as case_mod
from harness import codegen, kernels, strategies


@pytest.mark.parametrize("name", kernels.names())  # every registered family, the double included
def test_family_satisfies_the_contract(name):
    fam = kernels.family(name)
    assert isinstance(fam, kernels.Family) and fam.name == name
    for part in (fam.offer, fam.runner, fam.judge):
        for f in dataclasses.fields(part):
            value = getattr(part, f.name)
            if f.type.startswith("Callable") and "None" not in f.type:  # optional hooks may be None
                assert callable(value), f.name
    assert fam.offer.variants and fam.offer.head_dims and fam.offer.tiles
    assert all(len(t) == 4 and all(isinstance(x, int) and x > 0 for x in t[:2]) for t in fam.offer.tiles)
    # What it declares names things that exist: features, a lengths strategy, code checks.
    assert set(fam.offer.takes) <= set(case_mod.OPTIONAL) and fam.offer.lengths in strategies.LENGTHS
    assert set(fam.judge.clean) <= {n for n in dir(codegen) if callable(getattr(codegen, n))}
    # The strategies can draw cases of it, and each is valid and supported as drawn.
    for c in strategies.draw(name, 6, seed=0, per_kernel=2):
        assert kernels.check(c) is c and fam.offer.unsupported(c) is None, c
        named = fam.judge.tensors(c)
        assert named and all(kind in ("forward", "gradient") for _, kind in named)


def test_registry_rejects_unknown_names():
    assert set(kernels.names()) >= {"fwd", "bwd"}
    with pytest.raises(case_mod.CaseError, match="unknown kernel family 'nope'; known: fwd, bwd"):
        kernels.check(case_mod.Case(family="nope"))


def test_check_names_a_family_without_importing_it(monkeypatch):
    monkeypatch.setitem(kernels._REGISTRY, "elsewhere", "no.such.module:FAMILY")
    c = case_mod.Case(family="elsewhere")
    assert kernels.check(c) is c  # a name is checked against the registry alone


def test_a_feature_a_family_does_not_take_is_unsupported():
    assert kernels.family("fwd").offer.unsupported(case_mod.Case(bias=True)) == (
        "fwd does not take bias; it takes: causal, window, sinks")
    masked = case_mod.Case(family="masked_fwd", variant="pad", causal=True, sinks=True)
    assert kernels.family("masked_fwd").offer.unsupported(masked) == (
        "masked_fwd does not take causal, sinks; it takes: mask, mask_broadcast, bias")


def test_unsupported_says_why():
    fam = kernels.family("fwd")
    c = case_mod.Case()
    assert fam.offer.unsupported(c) is None
    assert "no variant 'split'" in fam.offer.unsupported(c.replace(variant="split"))
    assert "head_dim 72" in fam.offer.unsupported(c.replace(head_dim=72))
    assert "tile config" in fam.offer.unsupported(c.replace(block_m=48))
    assert "shared memory" in fam.offer.unsupported(c.replace(head_dim=256, head_dim_v=256, block_m=128, block_n=128,
                                                        num_stages=1, threads=256))


def test_a_program_a_release_cannot_write_in_its_forms_is_unbuildable_in_the_default_forms_an_error():
    def rejected():
        raise SyntaxError("DiagnosticError: one or more error diagnostics were emitted")

    with pytest.raises(kernels.Unbuildable, match="cannot write the program in forms p_operand=shared: SyntaxError"):
        kernels.written(case_mod.Case(forms=(("p_operand", "shared"),)), rejected)
    with pytest.raises(SyntaxError):
        kernels.written(case_mod.Case(), rejected)
    assert kernels.written(case_mod.Case(forms=(("q_load", "loop"),)), lambda: "prim_func") == "prim_func"


# ----------------------------------------------------------------------------- checked when registered
def _registered(monkeypatch, name, **changes):
    """The fake family with `changes` to its offer, as module attribute fake_family.<NAME>, registered as `name` for
    one test."""
    import fake_family
    fam = fake_family.FAMILY
    monkeypatch.setattr(fake_family, name.upper(),
                        dataclasses.replace(fam, name=name, offer=dataclasses.replace(fam.offer, **changes)), raising=False)
    monkeypatch.setattr(kernels, "_EXTRA", dict(kernels._EXTRA))
    kernels.register(name, f"fake_family:{name.upper()}")
    return name


@pytest.mark.parametrize("name, changes, says", [
    ("bad_lengths", {"lengths": "rng"}, "family 'bad_lengths': lengths='rng' is not one of dense, masked, packed"),
    ("bad_takes", {"takes": ("causal", "sink")}, "family 'bad_takes': takes='sink' is not one of causal, window, sinks"),
    ("bad_dtypes", {"dtypes": ()}, "family 'bad_dtypes': feature 'dtype' has no levels (Offer.dtypes declares no value"),
    ("bad_layouts", {"layouts": ()}, "family 'bad_layouts': feature 'layout' has no levels (Offer.layouts"),
    ("bad_tiles", {"tiles": ()}, "family 'bad_tiles': tiles=() declares none"),
])
def test_a_family_that_declares_what_cannot_be_drawn_is_refused_when_loaded(name, changes, says, monkeypatch):
    with pytest.raises(kernels.FamilyError) as info:
        kernels.family(_registered(monkeypatch, name, **changes))
    assert str(info.value).startswith(says) and "\n" not in str(info.value), info.value
    assert isinstance(info.value, ValueError)


def test_lengths_name_the_strategies_that_draw_them():
    assert set(kernels.LENGTHS) == set(strategies.LENGTHS)


@pytest.mark.parametrize("text, says", [
    ("fake_family:FAMILY", "extra family 'fake_family:FAMILY': expected name=module:attribute"),
    ("mine=fake_family", "family 'mine': where='fake_family' is not module:attribute"),
    ("=fake_family:FAMILY", "family '': name must be letters, digits and '_'"),
    ("my-kernel=fake_family:FAMILY", "family 'my-kernel': name must be letters, digits and '_'"),
    ("fwd=fake_family:FAMILY", "family 'fwd': name is one of the harness's own families"),
])
def test_a_malformed_extra_family_is_one_line_naming_it(text, says):
    with pytest.raises(kernels.FamilyError) as info:
        kernels.spec(text)
    assert str(info.value).startswith(says) and "\n" not in str(info.value), info.value


def test_a_registered_family_reaches_the_workers_as_an_argument(tmp_path):
    """Not through the environment: the pool starts each worker with the families registered here."""
    import os

    from harness.pool import Pool
    assert not any("FAMILIES" in k for k in os.environ)
    pool = Pool(1, "sm_90a", tmp_path)  # starts no worker until asked
    assert "--family=fake=fake_family:FAMILY" in pool.command
    assert "--family=x=m:A" in Pool(1, "sm_90a", tmp_path, families={"x": "m:A"}).command
