"""An assignment converts to the target's type as NumPy's does: a reduction of an integer or float32 array assigned to
a float64 array (DaCe's frontend copies it, and its simplification made the copy a view of the other type); and a
reduction assigned to the array it reads computes before it writes."""

import dace
import numpy as np
import pytest

import dace_cpufree

N, M = (dace.symbol(s) for s in "NM")


@dace.program
def reductions_into_other_types(A: dace.int64[N, M], F: dace.float32[N, M], C: dace.float64[M], D: dace.float64[M]):
    C[:] = np.sum(A, axis=0)
    D[:] = np.max(F, axis=0)


@dace.program
def reduction_of_its_own_target(A: dace.float64[N, N], y: dace.float64[N]):
    y[:-1] = np.max(A[:-1, :-1] + np.sqrt(y[1:]), axis=1)


def test_a_reduction_assigned_to_the_array_it_reads_computes_first():
    rng = np.random.default_rng(9)
    A, y = rng.random((40, 40)), rng.random(40)
    want = y.copy()
    want[:-1] = np.max(A[:-1, :-1] + np.sqrt(y[1:]), axis=1)
    for order in ("forward", "reverse", "shuffle"):
        got = y.copy()
        dace_cpufree.compile(reduction_of_its_own_target, backend="emulate", race_check=order)(A, got)
        np.testing.assert_allclose(got, want, rtol=1e-14)


@dace.program
def reduction_into_columns(A: dace.float64[N, N, N], B: dace.float64[N, N]):
    B[:, 1:] = np.sum(A[:, :, : N - 1], axis=0)


def test_a_reduction_into_a_strided_region_keeps_the_regions_strides():
    A = np.arange(64.0).reshape(4, 4, 4)
    B, want = np.zeros((4, 4)), np.zeros((4, 4))
    want[:, 1:] = np.sum(A[:, :, :3], axis=0)
    dace_cpufree.compile(reduction_into_columns, backend="emulate", race_check="shuffle")(A, B)
    np.testing.assert_array_equal(B, want)


def _inputs():
    rng = np.random.default_rng(6)
    return rng.integers(-9, 9, (7, 5)), rng.random((7, 5)).astype(np.float32)


def test_reductions_convert_on_assignment():
    A, F = _inputs()
    C, D = np.zeros(5), np.zeros(5)
    dace_cpufree.compile(reductions_into_other_types, backend="emulate", race_check="shuffle")(A, F, C, D)
    np.testing.assert_array_equal(C, np.sum(A, axis=0).astype(np.float64))
    np.testing.assert_array_equal(D, np.max(F, axis=0).astype(np.float64))


@pytest.mark.gpu
def test_reductions_convert_on_assignment_on_the_gpu():
    A, F = _inputs()
    C, D = np.zeros(5), np.zeros(5)
    dace_cpufree.compile(reductions_into_other_types)(A, F, C, D)
    np.testing.assert_array_equal(C, np.sum(A, axis=0).astype(np.float64))
    np.testing.assert_array_equal(D, np.max(F, axis=0).astype(np.float64))
