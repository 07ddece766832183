"""Steps of many kinds inside block functions (``@mapgridscope``), beside another block function, run on their
function's blocks (reductions whole and along an axis, a scan, an index reduction, in a time loop): checked against
NumPy in the emulation under the race checker (several blocks per function). A matrix product there is refused."""

import dace
import numpy as np
import pytest

import dace_cpufree
from dace_cpufree import mapgridscope

N = dace.symbol("N")
M = dace.symbol("M")


@mapgridscope
def rows_and_stencil(Z: dace.float64[N, M], s: dace.float64[N], A: dace.float64[M], B: dace.float64[M]):
    def rows():
        s[:] = np.sum(Z, axis=1)

    def stencil():
        B[1:-1] = A[:-2] + A[2:]


@dace.program
def axis_sum(Z: dace.float64[N, M], s: dace.float64[N], A: dace.float64[M], B: dace.float64[M]):
    rows_and_stencil(Z, s, A, B)


@mapgridscope
def squares_and_scale(Z: dace.float64[N, M], s: dace.float64[N], A: dace.float64[M], B: dace.float64[M]):
    def rows():
        s[:] = np.sum(Z * Z, axis=1)

    def scale():
        B[:] = 2.0 * A


@dace.program
def squared_axis_sum(Z: dace.float64[N, M], s: dace.float64[N], A: dace.float64[M], B: dace.float64[M]):
    squares_and_scale(Z, s, A, B)


@mapgridscope
def columns_and_total(Z: dace.float64[N, M], s: dace.float64[M], A: dace.float64[M], t: dace.float64[1]):
    def columns():
        s[:] = np.max(Z, axis=0)

    def total():
        t[0] = np.sum(A)


@dace.program
def column_max_and_total(Z: dace.float64[N, M], s: dace.float64[M], A: dace.float64[M], t: dace.float64[1]):
    columns_and_total(Z, s, A, t)


@dace.program
def in_a_time_loop(Z: dace.float64[N, M], s: dace.float64[N], A: dace.float64[M], B: dace.float64[M], T: dace.int64):
    for _ in range(T):
        rows_and_stencil(Z, s, A, B)
        Z[:, :] = Z * 0.5
        A[:] = A + B


def _inputs(seed=0, n=9, m=13):
    rng = np.random.default_rng(seed)
    return rng.random((n, m)), np.zeros(n), rng.random(m), np.zeros(m)


def _rows_and_stencil(Z, s, A, B):  # NumPy's meaning of rows_and_stencil
    s[:] = np.sum(Z, axis=1)
    B[1:-1] = A[:-2] + A[2:]


@pytest.mark.parametrize("program, square", [(axis_sum, False), (squared_axis_sum, True)], ids=["sum", "squares"])
def test_reductions_along_an_axis_beside_another_block_function(program, square):
    Z, s, A, B = _inputs()
    dace_cpufree.compile(program, backend="emulate", race_check=True)(Z, s, A, B)
    np.testing.assert_allclose(s, np.sum(Z * Z if square else Z, axis=1), rtol=1e-12)
    want = 2.0 * A if square else np.concatenate([[0.0], A[:-2] + A[2:], [0.0]])
    np.testing.assert_allclose(B, want, rtol=1e-12)


def test_an_axis_maximum_beside_a_whole_array_sum():
    Z, _, A, _ = _inputs(1)
    s, t = np.zeros(Z.shape[1]), np.zeros(1)
    dace_cpufree.compile(column_max_and_total, backend="emulate", race_check=True)(Z, s, A, t)
    np.testing.assert_allclose(s, Z.max(axis=0), rtol=1e-12)
    np.testing.assert_allclose(t, [A.sum()], rtol=1e-12)


def test_block_functions_with_reductions_in_a_time_loop():
    Z, s, A, B = _inputs(2)
    want = [x.copy() for x in (Z, s, A, B)]
    for _ in range(3):
        _rows_and_stencil(*want)
        want[0][:, :] = want[0] * 0.5
        want[2][:] = want[2] + want[3]
    dace_cpufree.compile(in_a_time_loop, backend="emulate", race_check=True)(Z, s, A, B, 3)
    for got, expected in zip((Z, s, A, B), want):
        np.testing.assert_allclose(got, expected, rtol=1e-12)


@mapgridscope
def scans_and_indices(Z: dace.float64[N, M], c: dace.float64[M], A: dace.float64[M], k: dace.int64[1]):
    def scan():
        c[:] = np.cumsum(A)

    def index():
        k[0] = np.argmin(Z[0])


@dace.program
def cumsum_and_argmin(Z: dace.float64[N, M], c: dace.float64[M], A: dace.float64[M], k: dace.int64[1]):
    scans_and_indices(Z, c, A, k)


@mapgridscope
def product_beside(Z: dace.float64[N, M], y: dace.float64[N], A: dace.float64[M], B: dace.float64[M]):
    def product():
        y[:] = Z @ A

    def scale():
        B[:] = A * 3.0


@dace.program
def product_in_a_block_function(Z: dace.float64[N, M], y: dace.float64[N], A: dace.float64[M], B: dace.float64[M]):
    product_beside(Z, y, A, B)


def test_a_scan_and_an_index_reduction_in_block_functions():
    Z, _, A, _ = _inputs(3)
    c, k = np.zeros_like(A), np.zeros(1, np.int64)
    dace_cpufree.compile(cumsum_and_argmin, backend="emulate", race_check=True)(Z, c, A, k)
    np.testing.assert_allclose(c, np.cumsum(A), rtol=1e-12)
    assert k[0] == np.argmin(Z[0])


def test_a_matrix_product_in_a_block_function_is_refused_with_the_function_named():
    # a product is a tile loop of the whole grid; on a part of it, it is refused at compile time (not an internal error)
    with pytest.raises(dace_cpufree.NotPersistableError, match=r"block function 'product_beside\.product'.*Fix"):
        dace_cpufree.compile(product_in_a_block_function, backend="emulate")
