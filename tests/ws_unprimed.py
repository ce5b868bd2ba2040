"""Test double: the ws forward with only its first ring slot primed (never registered in the
package; tests/conftest.py registers it as `ws_unprimed`, kernels.register).

With num_stages > 1 the producer's first wait on slot 1 needs an arrival that only the consumer's
second iteration would make, after it waited for slot 1's data: a block that runs two or more key
blocks deadlocks on a GPU, and codegen.barriers.mbarrier_protocol sees it without one. With one stage the
only slot is primed and the kernel is correct.
"""
import dataclasses

from harness.kernels import ws_family


def build(case, target):
    return ws_family.build(case, target, primed=1)


FAMILY = dataclasses.replace(ws_family.FAMILY, name="ws_unprimed",
                             runner=dataclasses.replace(ws_family.FAMILY.runner, build=build))
