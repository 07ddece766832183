"""Bad input gets a clear error naming the problem and the fix."""

import numpy as np
import pytest

import dace_cpufree
from npbench_runs.kernels import KERNELS


@pytest.fixture(scope="module")
def jacobi():
    return dace_cpufree.compile(KERNELS["jacobi_2d"].program, backend="emulate")


def test_wrong_dtype_names_argument_and_expected_dtype(jacobi):
    A = np.zeros((8, 8), dtype=np.float32)
    with pytest.raises(dace_cpufree.ArgumentError, match=r"'A' has dtype float32, expected float64") as err:
        jacobi(A, np.zeros((8, 8)), 2)
    # the program writes A: the fix converts it and says where the result then is
    assert "Fix: pass A.astype(np.float64) (a copy: read the result the program writes from it)" in str(err.value)


def test_wrong_shape_names_argument_expected_shape_and_where_the_size_came_from(jacobi):
    with pytest.raises(dace_cpufree.ArgumentError, match=r"'B' has shape \(8, 9\), expected \(8, 8\)") as err:
        jacobi(np.zeros((8, 8)), np.zeros((8, 9)), 2)
    assert "(declared (N, N): N = 8 read off 'A')" in str(err.value)
    assert "Fix: pass arrays whose sizes agree" in str(err.value)


def test_a_strided_view_is_refused_with_its_strides_and_the_copy_to_pass(jacobi):
    A = np.zeros((8, 16))[:, ::2]
    with pytest.raises(dace_cpufree.ArgumentError, match=r"'A' must be a C-contiguous NumPy or CuPy array") as err:
        jacobi(A, np.zeros((8, 8)), 2)
    text = str(err.value)
    assert "(strides (128, 16) for shape (8, 8))" in text
    assert "Fix: pass np.ascontiguousarray(A), and copy the result back into A afterwards" in text


def test_a_device_array_in_the_host_emulation_is_refused_with_the_fix(jacobi):
    class DeviceArray:  # what the binding reads of a CuPy array
        shape, dtype, strides = (8, 8), np.dtype(np.float64), (64, 8)
        __cuda_array_interface__ = {"shape": (8, 8), "typestr": "<f8", "data": (0x7000, False), "version": 3}

    with pytest.raises(dace_cpufree.ArgumentError, match=r"'A' is a device array.*Fix: pass cupy.asnumpy\(A\)"):
        jacobi(DeviceArray(), np.zeros((8, 8)), 2)


def test_missing_argument(jacobi):
    with pytest.raises(dace_cpufree.ArgumentError, match=r"missing argument\(s\) TSTEPS\. Fix: .*\(A, B, TSTEPS\)"):
        jacobi(np.zeros((8, 8)), np.zeros((8, 8)))


def test_too_many_or_doubled_arguments(jacobi):
    A, B = np.zeros((8, 8)), np.zeros((8, 8))
    with pytest.raises(dace_cpufree.ArgumentError, match=r"takes 3 arguments \(A, B, TSTEPS\), got 4\. Fix:"):
        jacobi(A, B, 2, 3)
    with pytest.raises(dace_cpufree.ArgumentError, match=r"argument 'A' given twice .*Fix: give it once"):
        jacobi(A, B, 2, A=A)


def test_wrong_rank_names_both_ranks_and_the_fix(jacobi):
    with pytest.raises(dace_cpufree.ArgumentError, match=r"'A' has 1 dimensions, the program expects 2.*Fix:"):
        jacobi(np.zeros(64), np.zeros((8, 8)), 2)


def test_unknown_backend():
    with pytest.raises(dace_cpufree.CpufreeError, match="unknown backend"):
        dace_cpufree.generate_code(KERNELS["jacobi_2d"].program, backend="opencl")


def test_not_a_program():
    with pytest.raises(dace_cpufree.CpufreeError, match=r"@dace.program"):
        dace_cpufree.persistent_sdfg(lambda x: x)
