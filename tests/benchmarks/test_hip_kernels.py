"""hipcc compiles the HIP output of every suite kernel, for a 64-lane (CDNA) and a 32-lane (RDNA) target, as nvcc
compiles their CUDA output (tests/benchmarks/test_suite_kernels_nvcc.py)."""

import pytest
from builds import built

from npbench_runs.kernels import KERNELS


@pytest.mark.hip
@pytest.mark.parametrize("name", sorted(KERNELS))
def test_hipcc_compiles_generated_code(name):
    built(KERNELS[name].program, f"hip_{name}", "hip")
