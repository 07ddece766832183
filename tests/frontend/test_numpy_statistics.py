"""np.var, np.std, np.average and np.tile inside the kernel (frontend/numpy_statistics.py) in place of DaCe's host
callbacks. Results against NumPy under the race checker (whole arrays and along axes, ddof, keepdims, the array
methods, NumPy's result types, weights, reps of every length), the two-pass variance's accuracy, refusals with a
fix, and a GPU run."""

import dace
import numpy as np
import pytest

import dace_cpufree

N = dace.symbol("N")
M = dace.symbol("M")


@dace.program
def variances(A: dace.float64[M, N], s: dace.float64[6], cols: dace.float64[N], rows: dace.float64[M],
              kept: dace.float64[M, 1]):  # fmt: skip
    s[0] = np.var(A)
    s[1] = np.std(A, ddof=1)
    s[2] = A.var(ddof=2)
    s[3] = A[1:, :].std()
    s[4] = np.var(A[0])
    s[5] = np.std(A, correction=1)  # the Array API's name of ddof
    cols[:] = np.var(A, axis=0)
    rows[:] = A.std(axis=-1, ddof=1)
    kept[:] = np.var(A, 1, keepdims=True)


@dace.program
def result_types(I: dace.int32[N], F: dace.float32[M, N], Z: dace.complex64[N], s: dace.float64[3],
                 f: dace.float32[N], z: dace.float32[1]):  # fmt: skip
    s[0] = np.var(I)
    s[1] = np.std(I, ddof=1)
    s[2] = np.var(I > 0)
    f[:] = np.std(F, axis=0)
    z[:] = np.var(Z)


@dace.program
def three_d(A: dace.float32[3, N, 4], mid: dace.float32[3, 4], first: dace.float32[1, N, 4],
            kept: dace.float32[1, 1, 1]):  # fmt: skip
    mid[:] = np.std(A, axis=-2)
    first[:] = A.var(axis=0, keepdims=True, ddof=1)
    kept[:] = np.average(A, axis=None, keepdims=True)


@dace.program
def averages(A: dace.float64[M, N], w: dace.float64[N], W: dace.float64[M, N], I: dace.int64[N], s: dace.float64[3],
             rows: dace.float64[M], cols: dace.float64[N]):  # fmt: skip
    s[0] = np.average(A)
    s[1] = np.average(A, weights=W)
    s[2] = np.average(I)
    rows[:] = np.average(A, axis=1, weights=w)
    cols[:] = np.average(A, 0) + np.average(A, axis=0, weights=W)


@dace.program
def tiles(A: dace.float64[N], B: dace.int32[M, N], a: dace.float64[3 * N], b: dace.float64[2, 2 * N],
          c: dace.int32[2 * M, 3 * N], d: dace.int32[M, 2 * N], e: dace.int32[2, M, N]):  # fmt: skip
    a[:] = np.tile(A, 3)
    b[:] = np.tile(A, (2, 2))
    c[:] = np.tile(B, (2, 3))
    d[:] = np.tile(B, 2)
    e[:] = np.tile(B, (2, 1, 1)) + np.tile(B, (1, 1))


def _variances(run, A):
    m, n = A.shape
    s, cols, rows, kept = np.zeros(6), np.zeros(n), np.zeros(m), np.zeros((m, 1))
    run(A, s, cols, rows, kept)
    expected = [np.var(A), np.std(A, ddof=1), A.var(ddof=2), A[1:, :].std(), np.var(A[0]), np.std(A, ddof=1)]
    np.testing.assert_allclose(s, expected, rtol=1e-10)
    np.testing.assert_allclose(cols, np.var(A, axis=0), rtol=1e-10)
    np.testing.assert_allclose(rows, A.std(axis=-1, ddof=1), rtol=1e-10)
    np.testing.assert_allclose(kept, np.var(A, 1, keepdims=True), rtol=1e-10)


def test_variances_match_numpy():
    run = dace_cpufree.compile(variances, backend="emulate", race_check="shuffle")
    assert run.source.channel is None  # kernel steps, not host callbacks (which need the channel)
    rng = np.random.default_rng(0)
    _variances(run, rng.random((5, 7)))
    _variances(run, rng.random((3, 900)))  # lines longer than a block
    # a large mean: NumPy's two passes keep the small variance, one pass (E[x^2] - E[x]^2) would lose it
    _variances(run, 1e8 + rng.random((4, 50)))


def test_numpy_result_types():
    rng = np.random.default_rng(1)
    i = rng.integers(-50, 50, 40).astype(np.int32)
    f = rng.random((6, 40)).astype(np.float32)
    z = (rng.random(40) + 1j * rng.random(40)).astype(np.complex64)
    s, fs, zs = np.zeros(3), np.zeros(40, np.float32), np.zeros(1, np.float32)
    run = dace_cpufree.compile(result_types, backend="emulate", race_check="shuffle")
    assert run.source.channel is None
    run(i, f, z, s, fs, zs)
    assert np.var(i).dtype == np.float64 and np.std(f, axis=0).dtype == np.float32 and np.var(z).dtype == np.float32
    np.testing.assert_allclose(s, [np.var(i), np.std(i, ddof=1), np.var(i > 0)], rtol=1e-12)
    np.testing.assert_allclose(fs, np.std(f, axis=0), rtol=1e-5)
    np.testing.assert_allclose(zs, [np.var(z)], rtol=1e-5)


def test_three_dimensions_negative_axes_and_keepdims():
    a = np.random.default_rng(2).random((3, 30, 4)).astype(np.float32)
    mid, first, kept = np.zeros((3, 4), np.float32), np.zeros((1, 30, 4), np.float32), np.zeros((1, 1, 1), np.float32)
    run = dace_cpufree.compile(three_d, backend="emulate", race_check="shuffle")
    assert run.source.channel is None
    run(a, mid, first, kept)
    np.testing.assert_allclose(mid, np.std(a, axis=-2), rtol=1e-5)
    np.testing.assert_allclose(first, a.var(axis=0, keepdims=True, ddof=1), rtol=1e-5)
    np.testing.assert_allclose(kept, np.average(a, axis=None, keepdims=True), rtol=1e-5)


def test_averages_match_numpy():
    rng = np.random.default_rng(3)
    a, w, W, i = rng.random((6, 11)), rng.random(11), rng.random((6, 11)), rng.integers(0, 10, 11)
    s, rows, cols = np.zeros(3), np.zeros(6), np.zeros(11)
    dace_cpufree.compile(averages, backend="emulate", race_check="shuffle")(a, w, W, i, s, rows, cols)
    np.testing.assert_allclose(s, [np.average(a), np.average(a, weights=W), np.average(i)], rtol=1e-12)
    np.testing.assert_allclose(rows, np.average(a, axis=1, weights=w), rtol=1e-12)
    np.testing.assert_allclose(cols, np.average(a, 0) + np.average(a, axis=0, weights=W), rtol=1e-12)


def _tiles(run, n: int, m: int):
    rng = np.random.default_rng(n)
    a1, b2 = rng.random(n), rng.integers(-9, 9, (m, n)).astype(np.int32)
    a, b = np.zeros(3 * n), np.zeros((2, 2 * n))
    c, d, e = np.zeros((2 * m, 3 * n), np.int32), np.zeros((m, 2 * n), np.int32), np.zeros((2, m, n), np.int32)
    run(a1, b2, a, b, c, d, e)
    assert np.array_equal(a, np.tile(a1, 3)) and np.array_equal(b, np.tile(a1, (2, 2)))
    assert np.array_equal(c, np.tile(b2, (2, 3))) and np.array_equal(d, np.tile(b2, 2))
    assert np.array_equal(e, np.tile(b2, (2, 1, 1)) + np.tile(b2, (1, 1)))


def test_tiles_match_numpy():
    _tiles(dace_cpufree.compile(tiles, backend="emulate", race_check="shuffle"), 7, 5)
    _tiles(dace_cpufree.compile(tiles, backend="emulate"), 300, 2)  # the plain emulation, one thread


@pytest.mark.parametrize("program", [averages, tiles])
def test_the_cuda_source_has_kernel_steps_not_host_callbacks(program):
    source = dace_cpufree.kernel_source(program)
    assert source.channel is None  # a host callback would need the channel
    assert source.code.count("__global__") == 1  # one persistent kernel


@dace.program
def var_out(A: dace.float64[N], B: dace.float64[1]):
    np.var(A, out=B)


@dace.program
def std_dtype(A: dace.float32[N], B: dace.float64[1]):
    B[:] = np.std(A, dtype=np.float64)


@dace.program
def var_where(A: dace.float64[N], B: dace.float64[1]):
    B[:] = np.var(A, where=A > 0)


@dace.program
def var_two_axes(A: dace.float64[M, N], B: dace.float64[1]):
    B[:] = np.var(A, axis=(0, 1))


@dace.program
def var_no_such_axis(A: dace.float64[M, N], B: dace.float64[N]):
    B[:] = A.var(axis=2)


@dace.program
def std_variable_ddof(A: dace.float64[N], B: dace.float64[1], k: dace.int64):
    B[:] = np.std(A, ddof=k)


@dace.program
def std_ddof_and_correction(A: dace.float64[N], B: dace.float64[1]):
    B[:] = np.std(A, ddof=1, correction=1)


@dace.program
def average_returned(A: dace.float64[N], w: dace.float64[N], B: dace.float64[1]):
    B[:] = np.average(A, weights=w, returned=True)


@dace.program
def average_weights_shape(A: dace.float64[M, N], w: dace.float64[M], B: dace.float64[M]):
    B[:] = np.average(A, axis=1, weights=w)


@dace.program
def tile_variable_reps(A: dace.float64[N], B: dace.float64[3 * N], k: dace.int64):
    B[:] = np.tile(A, k)


@dace.program
def tile_symbolic_reps(A: dace.float64[N], B: dace.float64[N * N]):
    B[:] = np.tile(A, N)


@pytest.mark.parametrize(
    "program, message",
    [
        (var_out, r"np\.var\(\.\.\.\).* with out= is not supported.*Fix: assign the result"),
        (std_dtype, r"np\.std\(\.\.\.\).* with dtype= .*Fix: cast the input first"),
        (var_where, r"np\.var\(\.\.\.\).* with where= .*Fix: select the elements"),
        (var_two_axes, r"np\.var\(\.\.\.\).* with axis=\(0, 1\) .*Fix: pass one constant axis"),
        (var_no_such_axis, r"np\.var\(\.\.\.\).* axis 2 of a 2-D array does not exist.*Fix:"),
        (std_variable_ddof, r"np\.std\(\.\.\.\).* ddof=.*not a constant integer.*Fix: pass a constant"),
        (std_ddof_and_correction, r"np\.std\(\.\.\.\).* with both ddof= and correction= .*Fix: pass one of them"),
        (average_returned, r"np\.average\(\.\.\.\).* with returned= .*Fix: compute the sum of the weights"),
        (average_weights_shape, r"np\.average\(\.\.\.\).* 1-D weights of length M differ.*Fix: size the weights"),
        (tile_variable_reps, r"np\.tile\(\.\.\.\).* with reps=.*Fix: pass a positive constant integer"),
        (tile_symbolic_reps, r"np\.tile\(\.\.\.\).* with reps=\(N,\).*Fix:"),
    ],
)
def test_unsupported_forms_are_refused_with_a_fix(program, message):
    with pytest.raises(dace_cpufree.NotPersistableError, match=message) as err:
        dace_cpufree.kernel_source(program)
    assert "test_numpy_statistics.py:" in str(err.value)  # the user's line


@pytest.mark.gpu
def test_match_numpy_on_gpu():
    rng = np.random.default_rng(4)
    _variances(dace_cpufree.compile(variances), 1e3 + rng.random((300, 2000)))
    a, w, W, i = rng.random((500, 700)), rng.random(700), rng.random((500, 700)), rng.integers(0, 10, 700)
    s, rows, cols = np.zeros(3), np.zeros(500), np.zeros(700)
    dace_cpufree.compile(averages)(a, w, W, i, s, rows, cols)
    np.testing.assert_allclose(s, [np.average(a), np.average(a, weights=W), np.average(i)], rtol=1e-10)
    np.testing.assert_allclose(rows, np.average(a, axis=1, weights=w), rtol=1e-10)
    _tiles(dace_cpufree.compile(tiles), 100_000, 30)
