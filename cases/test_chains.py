"""Generated programs in CI: each attention chain the generator starts from (harness.programs.templates.TEMPLATES),
as it is written and at a ragged length, compiled for sm_90a without a GPU and judged on one (the interpreter,
bit for bit where exact). Drawn programs run in campaigns: `harness run --families program`."""
import pytest

from harness.case import Case
from harness.programs import generate, templates


def _chain(name: str) -> Case:
    p = generate.template(name)
    n = 2 * p.block + 1  # a ragged last block
    return Case(family="program", program=p, seqlen_q=n, seqlen_k=n).validate()


CHAINS = [pytest.param(_chain(name), id=name) for name in templates.TEMPLATES]


@pytest.mark.compile
@pytest.mark.parametrize("case", CHAINS)
def test_chain_compiles_for_sm90a(case, compile_pool, expect):
    expect(compile_pool.run_one(case), "COMPILED")


@pytest.mark.gpu
@pytest.mark.parametrize("case", CHAINS)
def test_chain_matches_its_meaning(case, gpu_pool, expect):
    expect(gpu_pool.run_one(case), "PASS")
