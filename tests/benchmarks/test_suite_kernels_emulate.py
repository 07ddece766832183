"""CPU tests: every suite kernel runs as generated (host emulation, one thread) and matches NumPy."""

import pytest
from helpers import check_against_numpy
from suite_kernels import kernel_params

from npbench_runs.kernels import KERNELS


@pytest.mark.parametrize("name", kernel_params())
def test_program_matches_numpy_in_emulation(name):
    check_against_numpy(KERNELS[name], "emulate", "test")
