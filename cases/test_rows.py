"""The fast path: one test per kernel of every family's covering array (harness.pairwise, seed 0),
Hypothesis drawing that kernel's lengths.

    pytest cases -m "rows and gpu"                 # without a GPU: -m "rows and compile"

The session pool (cores - 1 workers) builds every selected row's kernel ahead, in parallel, as
`harness run` spreads kernels over its workers, while the tests run one after another: a test finds
its kernel built and every example reuses it. Under pytest-xdist (-n) each process instead builds
the kernel of the test it runs, one at a time. A failing example shrinks its lengths (the static fields are the row's:
`harness minimize` shrinks those). Deselected unless `-m` names `rows`: a CPU run compiles every
row of every family, hundreds of kernels.
"""
import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness import kernels, pairwise, strategies

# Row i of every family, then row i + 1: a session cut short (--time-box) has tried every family.
_COVERING = {family: pairwise.covering(family, 0) for family in kernels.FAMILIES}
ROWS = [pytest.param(rows[i], id=f"row-{family}-{i}")
        for i in range(max(map(len, _COVERING.values())))
        for family, rows in _COVERING.items() if i < len(rows)]


# On a GPU every output is judged; without one the kernel compiles for sm_90a.
MODES = [pytest.param("gpu_pool", "PASS", marks=pytest.mark.gpu, id="gpu"),
         pytest.param("compile_pool", "COMPILED", marks=pytest.mark.compile, id="compile")]


@pytest.mark.rows
@pytest.mark.parametrize("pool, verdict", MODES)
@pytest.mark.parametrize("row", ROWS)
@given(data=st.data())
def test_row(row, pool, verdict, data, request, expect):
    expect(request.getfixturevalue(pool).run_one(data.draw(strategies.lengths_of(row))), verdict)
