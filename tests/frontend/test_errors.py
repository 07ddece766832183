"""Bad input gets a clear error naming the problem and the fix."""

import numpy as np
import pytest

import dace_cpufree
from npbench_runs.kernels import KERNELS


def test_wrong_dtype_names_argument_and_expected_dtype():
    prog = dace_cpufree.compile(KERNELS["jacobi_2d"].program, backend="emulate")
    A = np.zeros((8, 8), dtype=np.float32)
    with pytest.raises(dace_cpufree.ArgumentError, match=r"'A' has dtype float32, expected float64"):
        prog(A, np.zeros((8, 8)), 2)


def test_wrong_shape_names_argument_and_expected_shape():
    prog = dace_cpufree.compile(KERNELS["jacobi_2d"].program, backend="emulate")
    with pytest.raises(dace_cpufree.ArgumentError, match=r"'B' has shape \(8, 9\), expected \(8, 8\)"):
        prog(np.zeros((8, 8)), np.zeros((8, 9)), 2)


def test_missing_argument():
    prog = dace_cpufree.compile(KERNELS["jacobi_2d"].program, backend="emulate")
    with pytest.raises(dace_cpufree.ArgumentError, match="missing argument"):
        prog(np.zeros((8, 8)), np.zeros((8, 8)))


def test_unknown_backend():
    with pytest.raises(dace_cpufree.CpufreeError, match="unknown backend"):
        dace_cpufree.generate_code(KERNELS["jacobi_2d"].program, backend="opencl")


def test_not_a_program():
    with pytest.raises(dace_cpufree.CpufreeError, match=r"@dace.program"):
        dace_cpufree.persistent_sdfg(lambda x: x)
