"""CPU tests: every program runs as generated (host emulation, one thread) and matches NumPy."""

import copy

import numpy as np
import pytest

import dace_cpufree
from npbench_runs.kernels import KERNELS


def check_against_numpy(module, backend: str, preset: str, configure=None, to_device=None, to_host=None):
    args = module.initialize(**module.PRESETS[preset])
    ref = copy.deepcopy(args)
    want_ret = module.reference(**ref)
    prog = dace_cpufree.compile(module.program, backend=backend)
    if configure:
        prog.configure(**configure)
    got = copy.deepcopy(args) if to_device is None else to_device(args)
    got_ret = prog(**got)
    for name in module.OUTPUTS:
        value = got_ret if name == "__return" else got[name]
        value = value if to_host is None else to_host(value)
        want = want_ret if name == "__return" else ref[name]
        np.testing.assert_allclose(value, want, rtol=module.RTOL, atol=module.ATOL, err_msg=f"{module.NAME}: {name}")
    return prog


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_program_matches_numpy_in_emulation(name):
    check_against_numpy(KERNELS[name], "emulate", "test")
