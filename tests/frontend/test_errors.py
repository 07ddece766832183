"""Bad input gets a clear error naming the problem and the fix."""

import dace
import numpy as np
import pytest
from kernel_copies import jacobi_2d

import dace_cpufree
from dace_cpufree.runtime.arguments import device_layout


@pytest.fixture(scope="module")
def jacobi():
    return dace_cpufree.compile(jacobi_2d.program, backend="emulate")


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
        dace_cpufree.generate_code(jacobi_2d.program, backend="opencl")


def test_not_a_program():
    with pytest.raises(dace_cpufree.CpufreeError, match=r"@dace.program"):
        dace_cpufree.persistent_sdfg(lambda x: x)


def test_a_size_given_as_a_keyword_is_named_as_the_origin_and_in_the_fix(jacobi):
    with pytest.raises(dace_cpufree.ArgumentError, match=r"'A' has shape \(8, 8\), expected \(9, 9\)") as err:
        jacobi(np.zeros((8, 8)), np.zeros((8, 8)), 2, N=9)
    assert "(declared (N, N): N = 9 given)" in str(err.value)
    assert "or correct the keyword(s) N, which disagree with the arrays" in str(err.value)


N = dace.symbol("N")


@dace.program
def _axpy(a: dace.float64, x: dace.float64[N], y: dace.float64[N]):
    y[:] = a * x + y


@pytest.fixture(scope="module")
def axpy():
    return dace_cpufree.compile(_axpy, backend="emulate")


def test_an_array_the_program_only_reads_gets_no_copy_back_advice(axpy):
    with pytest.raises(dace_cpufree.ArgumentError, match=r"'x' has dtype float32") as err:
        axpy(2.0, np.ones(8, dtype=np.float32), np.ones(8))
    assert "Fix: pass x.astype(np.float64), or declare the parameter as float32." in str(err.value)
    with pytest.raises(dace_cpufree.ArgumentError, match=r"'x' must be a C-contiguous") as err:
        axpy(2.0, np.ones(16)[::2], np.ones(8))
    assert str(err.value).endswith("Fix: pass np.ascontiguousarray(x).")
    with pytest.raises(dace_cpufree.ArgumentError, match=r"'y' has shape \(9,\), expected \(8,\) \(declared \(N,\)"):
        axpy(2.0, np.ones(8), np.ones(9))


class _ForeignDeviceArray:
    """Another library's device array as the binding meets it: a ``__cuda_array_interface__``, a ``dtype`` that is
    no NumPy dtype (PyTorch's), no ``flags``."""

    def __init__(self, shape, strides=None):
        self.shape, self.dtype = tuple(shape), "torch.float64"
        self.__cuda_array_interface__ = {
            "shape": self.shape,
            "typestr": "<f8",
            "data": (0x7000, False),
            "strides": strides,
            "version": 3,
        }


def test_another_librarys_device_array_is_read_through_its_interface(jacobi):
    with pytest.raises(dace_cpufree.ArgumentError, match=r"'A' is a device array.*Fix: pass cupy.asnumpy\(A\)"):
        jacobi(_ForeignDeviceArray((8, 8)), np.zeros((8, 8)), 2)


@pytest.mark.parametrize(
    "shape, strides, contiguous",
    [
        ((4, 5), None, True),  # no strides: C-contiguous by the interface's rule
        ((4, 5), (40, 8), True),
        ((4, 5), (8, 32), False),  # a transpose's
        ((4, 5), (80, 16), False),  # every other column
        ((4, 1), (8, 999), True),  # a dimension of one element may have any stride
        ((0, 5), (8, 8), True),  # no elements
    ],
)
def test_device_layout_reads_dtype_and_contiguity_off_the_interface(shape, strides, contiguous):
    dtype, is_contiguous = device_layout(_ForeignDeviceArray(shape, strides))
    assert dtype == np.float64 and is_contiguous is contiguous
