"""Every registered family (the test double included) is a complete `Family`."""
import dataclasses

import pytest

from harness import case as case_mod
from harness import codegen, kernels, strategies


@pytest.mark.parametrize("name", kernels.names())  # every registered family, the double included
def test_family_satisfies_the_contract(name):
    fam = kernels.family(name)
    assert isinstance(fam, kernels.Family) and fam.name == name
    for f in dataclasses.fields(kernels.Family):
        value = getattr(fam, f.name)
        if f.type.startswith("Callable") and "None" not in f.type:  # optional hooks may be None
            assert callable(value), f.name
    assert fam.variants and fam.head_dims and fam.tiles
    assert all(len(t) == 4 and all(isinstance(x, int) and x > 0 for x in t[:2]) for t in fam.tiles)
    # What it declares names things that exist: features, a lengths strategy, code checks.
    assert set(fam.takes) <= set(case_mod.OPTIONAL) and fam.lengths in strategies.LENGTHS
    assert set(fam.clean) <= {n for n in dir(codegen) if callable(getattr(codegen, n))}
    # The strategies can draw cases of it, and each is valid and supported as drawn.
    for c in strategies.draw(name, 6, seed=0, per_kernel=2):
        assert kernels.check(c) is c and fam.unsupported(c) is None, c
        assert {n for n, kind in fam.tensors(c)} and all(kind in ("forward", "gradient") for _, kind in fam.tensors(c))


def test_registry_rejects_unknown_names():
    assert set(kernels.names()) >= {"fwd", "bwd"}
    with pytest.raises(case_mod.CaseError, match="unknown kernel family 'nope'; known: fwd, bwd"):
        kernels.check(case_mod.Case(family="nope"))


def test_check_names_a_family_without_importing_it(monkeypatch):
    monkeypatch.setitem(kernels._REGISTRY, "elsewhere", "no.such.module:FAMILY")
    c = case_mod.Case(family="elsewhere")
    assert kernels.check(c) is c  # a name is checked against the registry alone


def test_a_feature_a_family_does_not_take_is_unsupported():
    assert kernels.family("fwd").unsupported(case_mod.Case(bias=True)) == (
        "fwd does not take bias; it takes: causal, window, sinks")
    masked = case_mod.Case(family="masked_fwd", variant="pad", causal=True, sinks=True)
    assert kernels.family("masked_fwd").unsupported(masked) == (
        "masked_fwd does not take causal, sinks; it takes: mask, mask_broadcast, bias")


def test_unsupported_says_why():
    fam = kernels.family("fwd")
    c = case_mod.Case()
    assert fam.unsupported(c) is None
    assert "no variant 'split'" in fam.unsupported(c.replace(variant="split"))
    assert "head_dim 72" in fam.unsupported(c.replace(head_dim=72))
    assert "tile config" in fam.unsupported(c.replace(block_m=48))
    assert "shared memory" in fam.unsupported(c.replace(head_dim=256, head_dim_v=256, block_m=128, block_n=128,
                                                        num_stages=1, threads=256))


def test_a_program_a_release_cannot_write_in_its_forms_is_unbuildable_in_the_default_forms_an_error():
    def rejected():
        raise SyntaxError("DiagnosticError: one or more error diagnostics were emitted")

    with pytest.raises(kernels.Unbuildable, match="cannot write the program in forms p_operand=shared: SyntaxError"):
        kernels.written(case_mod.Case(forms=("p_operand=shared",)), rejected)
    with pytest.raises(SyntaxError):
        kernels.written(case_mod.Case(), rejected)
    assert kernels.written(case_mod.Case(forms=("q_load=loop",)), lambda: "prim_func") == "prim_func"
