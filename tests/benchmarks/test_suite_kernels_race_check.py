"""The emulation's race checker on every suite kernel: each runs clean in the forward, reverse and shuffled orders
and matches NumPy."""

import copy

import numpy as np
import pytest
from helpers import check_against_numpy

from npbench_runs.kernels import KERNELS

ORDERS = ("forward", "reverse", "shuffle")


def _in_every_order(module):
    """Runs ``module`` (an NPBench kernel of the suite) with the checker in the three orders against NumPy."""
    prog = check_against_numpy(module, "emulate", "test", options={"race_check": "forward"})
    for order in ORDERS[1:]:
        prog.race_order(order, seed=7)
        args = module.initialize(**module.PRESETS["test"])
        ref = copy.deepcopy(args)
        want = module.reference(**ref)
        got = prog(**args)
        for name in module.OUTPUTS:
            value, expected = (got, want) if name == "__return" else (args[name], ref[name])
            np.testing.assert_allclose(value, expected, rtol=module.RTOL, atol=module.ATOL, err_msg=f"{order}: {name}")


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_suite_kernel_has_no_races(name):
    _in_every_order(KERNELS[name])
