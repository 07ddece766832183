"""CPU tests: nvcc compiles the generated code of every suite kernel (fails, never skips, in CI)."""

import pytest
from suite_kernels import kernel_params

import dace_cpufree
from dace_cpufree.runtime import build
from npbench_runs.kernels import KERNELS


@pytest.mark.compile
@pytest.mark.parametrize("name", kernel_params())
def test_nvcc_compiles_generated_code(name):
    source = dace_cpufree.kernel_source(KERNELS[name].program)
    library = build(source.code, f"nvcc_{name}", "cuda", environments=source.environments)
    assert library.exists() and library.stat().st_size > 0
