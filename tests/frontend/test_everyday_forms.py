"""Everyday NumPy that DaCe's frontend refuses, as a user writes it: reversed slices, reductions of boolean
selections, masked assignments that read through the same mask, ``np.array`` of scalars. Each program is checked
against NumPy under the race checker and on a GPU; what cannot run is refused with the user's line and a fix, and a
failure inside DaCe's frontend is reported the same way."""

import inspect

import dace
import numpy as np
import pytest

import dace_cpufree

N = dace.symbol("N")
M = dace.symbol("M")


@dace.program
def reversed_slices(A: dace.float64[N, M], v: dace.float64[N], B: dace.float64[N, M], C: dace.float64[N - 2]):
    B[:, :] = A[::-1, ::-1] + A[:, ::-1]
    C[:] = A[N - 2 : 0 : -1, 0] * v[-2:0:-1]
    for _ in range(2):
        v[:] = v[::-1] * 0.5 + v


@dace.program
def reversed_literal_bounds(A: dace.float64[N], B: dace.float64[4], C: dace.float64[3], D: dace.float64[N - 1]):
    B[:] = A[-1:-5:-1]
    C[:] = A[2::-1]
    D[:] = A[:0:-1]


@dace.program
def masked_reductions(x: dace.float64[N], out: dace.float64[6]):
    out[0] = x[x > 0.5].sum()
    out[1] = np.max(x[(x > 0.2) & (x < 0.8)])
    out[2] = x[x < 0.5].mean()
    out[3] = x[~(x < 0.5)].min()
    out[4] = np.min(x[np.logical_and(x > 0.9, x < 1.1)])
    out[5] = np.sum(
        x[x > 0.3]  # a call over two lines keeps the lines after it where they were
    )


@dace.program
def masked_integers(x: dace.int64[N], out: dace.int64[2]):
    out[0] = x[x > 5].sum()
    out[1] = x[x % 2 == 0].max()


@dace.program
def masked_assignment(x: dace.float64[N], y: dace.float64[N]):
    y[x > 0.5] = np.sqrt(x[x > 0.5]) + 1.0


@dace.program
def array_of_scalars(a: dace.float64, b: dace.float64, k: dace.int32, B: dace.float64[3], C: dace.int64[3]):
    B[:] = np.array([a, b, a * b])
    C[:] = np.array([N, k, 2])


@dace.program
def scaled_window(W: dace.float64[M]):
    W[:] = W * 2.0 + 1.0


@dace.program
def rows_windows_and_indices(
    A: dace.float64[3, N], V: dace.float64[N], idx: dace.int64[N], picked: dace.float64[3], n: dace.int64, k: dace.int64
):
    x, y, z = A  # tuple unpacking of rows
    V[:] = x + y * z
    for i in dace.map[0:N]:
        idx[i] = np.argmin(A[:, i])  # argmin inside a dace.map
    V[n // 2 - k : n // 2 + k] = V[n // 2 - k : n // 2 + k] * 2.0  # bounds with floor division of scalars
    for t in range(3):
        j = np.argmax(np.abs(x - y))  # argmax of an expression in a loop, used as an index
        picked[t] = x[j]
        x[j] = 0.0
    for i in range(2):
        scaled_window(V[i * k : (i + 1) * k])  # a nested program on a window sized by a scalar


@dace.program
def strided_updates(x: dace.float64[N], y: dace.float64[N], A: dace.float32[M, N], B: dace.float32[M, N]):
    x[::2] += y[::2]
    A[:, 1:N:2] += np.sqrt(B[:, 1::2])
    A[1::2, :] *= 2.0  # an update over two lines keeps the lines after it where they were
    x[1:N:3] -= y[1:N:3] * 0.5


@dace.program
def products(A: dace.float64[N, M], I: dace.int32[N], out: dace.float64[M], o2: dace.float64[1], o3: dace.int64[1]):
    out[:] = np.prod(A, axis=0)
    o2[0] = np.prod(A[1:3, :])
    o3[0] = np.prod(I)


def _inputs():
    rng = np.random.default_rng(7)
    A = rng.random((9, 6))
    return A, rng.random(9)


def _reference_reversed(A, v):
    v = v.copy()
    B = A[::-1, ::-1] + A[:, ::-1]
    C = A[7:0:-1, 0] * v[-2:0:-1]
    for _ in range(2):
        v = v[::-1] * 0.5 + v
    return B, C, v


@pytest.mark.parametrize("order", ["forward", "shuffle"])
def test_reversed_slices_match_numpy(order):
    A, v = _inputs()
    B, C, w = np.zeros_like(A), np.zeros(7), v.copy()
    dace_cpufree.compile(reversed_slices, backend="emulate", race_check=order)(A, w, B, C)
    want_B, want_C, want_v = _reference_reversed(A, v)
    np.testing.assert_allclose(B, want_B, rtol=1e-14)
    np.testing.assert_allclose(C, want_C, rtol=1e-14)
    np.testing.assert_allclose(w, want_v, rtol=1e-14)
    a = v.copy()
    B4, C3, D = np.zeros(4), np.zeros(3), np.zeros(8)
    dace_cpufree.compile(reversed_literal_bounds, backend="emulate", race_check=order)(a, B4, C3, D)
    np.testing.assert_array_equal(B4, a[-1:-5:-1])
    np.testing.assert_array_equal(C3, a[2::-1])
    np.testing.assert_array_equal(D, a[:0:-1])


def test_masked_reductions_and_assignment_match_numpy():
    x = np.random.default_rng(3).random(300) * 1.2
    out = np.zeros(6)
    dace_cpufree.compile(masked_reductions, backend="emulate", race_check="shuffle")(x, out)
    want = [
        x[x > 0.5].sum(),
        np.max(x[(x > 0.2) & (x < 0.8)]),
        x[x < 0.5].mean(),
        x[~(x < 0.5)].min(),
        np.min(x[np.logical_and(x > 0.9, x < 1.1)]),
        np.sum(x[x > 0.3]),
    ]
    np.testing.assert_allclose(out, want, rtol=1e-12)
    xi = np.random.default_rng(4).integers(0, 12, 200)
    outi = np.zeros(2, np.int64)
    dace_cpufree.compile(masked_integers, backend="emulate", race_check="shuffle")(xi, outi)
    np.testing.assert_array_equal(outi, [xi[xi > 5].sum(), xi[xi % 2 == 0].max()])
    y, want_y = np.zeros(300), np.zeros(300)
    want_y[x > 0.5] = np.sqrt(x[x > 0.5]) + 1.0
    dace_cpufree.compile(masked_assignment, backend="emulate", race_check="shuffle")(x, y)
    np.testing.assert_allclose(y, want_y, rtol=1e-14)


def test_array_of_scalars_matches_numpy():
    B, C = np.zeros(3), np.zeros(3, np.int64)
    dace_cpufree.compile(array_of_scalars, backend="emulate", race_check="shuffle")(1.5, 2.5, np.int32(9), B, C, N=5)
    np.testing.assert_array_equal(B, np.array([1.5, 2.5, 3.75]))
    np.testing.assert_array_equal(C, np.array([5, 9, 2]))


def test_rows_windows_and_indices_match_numpy():
    """Forms a user reported failing that now run: checked so that they stay so."""
    A = np.random.default_rng(11).random((3, 12))
    V, idx, picked = np.zeros(12), np.zeros(12, np.int64), np.zeros(3)
    n, k = 10, 3
    want_A = A.copy()
    x, y, z = want_A
    want_V = x + y * z
    want_V[n // 2 - k : n // 2 + k] *= 2.0
    want_idx = np.argmin(want_A, axis=0)
    want_picked = np.zeros(3)
    for t in range(3):
        j = np.argmax(np.abs(x - y))
        want_picked[t] = x[j]
        x[j] = 0.0
    for i in range(2):
        want_V[i * k : (i + 1) * k] = want_V[i * k : (i + 1) * k] * 2.0 + 1.0
    dace_cpufree.compile(rows_windows_and_indices, backend="emulate", race_check="shuffle")(A, V, idx, picked, n, k)
    np.testing.assert_allclose(V, want_V, rtol=1e-14)
    np.testing.assert_array_equal(idx, want_idx)
    np.testing.assert_array_equal(picked, want_picked)
    np.testing.assert_array_equal(A, want_A)


@pytest.mark.parametrize("n", [8, 9])
def test_strided_updates_match_numpy(n):
    rng = np.random.default_rng(n)
    x, y = rng.random(n), rng.random(n)
    A, B = rng.random((5, n)).astype(np.float32), rng.random((5, n)).astype(np.float32)
    want_x, want_A = x.copy(), A.copy()
    want_x[::2] += y[::2]
    want_A[:, 1:n:2] += np.sqrt(B[:, 1::2])
    want_A[1::2, :] *= 2.0
    want_x[1:n:3] -= y[1:n:3] * 0.5
    dace_cpufree.compile(strided_updates, backend="emulate", race_check="shuffle")(x, y, A, B)
    np.testing.assert_allclose(x, want_x, rtol=1e-14)
    np.testing.assert_allclose(A, want_A, rtol=1e-6)


def test_np_prod_matches_numpy():
    rng = np.random.default_rng(5)
    A, I = 0.5 + rng.random((6, 4)), rng.integers(1, 4, 6).astype(np.int32)
    out, o2, o3 = np.zeros(4), np.zeros(1), np.zeros(1, np.int64)
    dace_cpufree.compile(products, backend="emulate", race_check="shuffle")(A, I, out, o2, o3)
    np.testing.assert_allclose(out, np.prod(A, axis=0), rtol=1e-14)
    np.testing.assert_allclose(o2, np.prod(A[1:3]), rtol=1e-14)
    assert o3[0] == np.prod(I)


def test_the_rewritten_program_keeps_the_users_lines():
    """The rewrite leaves every line where it was: the kernel's steps name the user's file and lines."""
    source = dace_cpufree.kernel_source(masked_reductions)
    first = inspect.getsourcelines(masked_reductions.f)[1]
    lines = {int(where.rsplit(":", 1)[1]) for where in source.step_sources.values() if "test_everyday_forms" in where}
    assert lines and lines <= set(range(first, first + 11)), lines


@dace.program
def selection_kept(x: dace.float64[N], y: dace.float64[N]):
    z = x[x > 0.5]
    y[0] = z[0]


@dace.program
def reversed_write(A: dace.float64[N], B: dace.float64[N]):
    B[::-1] = A


@dace.program
def every_other_reversed(A: dace.float64[N], B: dace.float64[N]):
    B[: N // 2] = A[::-2]


@dace.program
def rows_by_mask(A: dace.float64[N, M], out: dace.float64[1]):
    out[0] = A[A[:, 0] > 0.5].sum()


@dace.program
def scalar_bounds_then_map(A: dace.float64[N], V: dace.float64[N], n: dace.int64, k: dace.int64):
    V[n // 2 - k : n // 2 + k] = V[n // 2 - k : n // 2 + k] * 2.0
    for i in dace.map[0:N]:
        A[i] = A[i] + 1


@dace.program
def nested_scalar_lists(a: dace.float64, b: dace.float64, B: dace.float64[2, 2]):
    B[:] = np.array([[a, b], [b, a]])


def _line(program, offset: int) -> str:
    return f"test_everyday_forms.py:{inspect.getsourcelines(program.f)[1] + offset}"


@pytest.mark.parametrize(
    "program, offset, words",
    [
        (selection_kept, 2, ["x[x > 0.5]", "length", "depends on the data", "np.where(x > 0.5, x, 0)"]),
        (reversed_write, 2, ["B[::-1]", "step -1", "Fix: ", "`B[:] = value[::-1]`"]),
        (every_other_reversed, 2, ["Negative strides", "`r = x[::-1]` then `r[::2]`"]),
        (rows_by_mask, 2, ["mask's shape", "Fix: "]),
        (scalar_bounds_then_map, 3, ["__sym_", "size symbols", "move the slice after the map"]),
        (nested_scalar_lists, 2, ["DaCe cannot parse", "np.array([[a, b], [b, a]])", "Fix: "]),
    ],
)
def test_what_cannot_run_is_refused_at_the_users_line(program, offset, words):
    with pytest.raises(dace_cpufree.NotPersistableError) as err:
        dace_cpufree.kernel_source(program)
    text = str(err.value)
    assert _line(program, offset) in text, text
    for word in words:
        assert word in text, text


@pytest.mark.gpu
def test_everyday_forms_on_the_gpu():
    A, v = _inputs()
    B, C, w = np.zeros_like(A), np.zeros(7), v.copy()
    dace_cpufree.compile(reversed_slices)(A, w, B, C)
    want_B, want_C, want_v = _reference_reversed(A, v)
    np.testing.assert_allclose(B, want_B, rtol=1e-14)
    np.testing.assert_allclose(C, want_C, rtol=1e-14)
    np.testing.assert_allclose(w, want_v, rtol=1e-14)
    x = np.random.default_rng(3).random(100_000) * 1.2
    out = np.zeros(6)
    dace_cpufree.compile(masked_reductions)(x, out)
    assert np.isclose(out[0], x[x > 0.5].sum(), rtol=1e-10) and out[1] == np.max(x[(x > 0.2) & (x < 0.8)])
    assert np.isclose(out[2], x[x < 0.5].mean(), rtol=1e-10) and out[3] == x[~(x < 0.5)].min()
    y, want_y = np.zeros_like(x), np.zeros_like(x)
    want_y[x > 0.5] = np.sqrt(x[x > 0.5]) + 1.0
    dace_cpufree.compile(masked_assignment)(x, y)
    np.testing.assert_allclose(y, want_y, rtol=1e-14)
    B3, C3 = np.zeros(3), np.zeros(3, np.int64)
    dace_cpufree.compile(array_of_scalars)(1.5, 2.5, np.int32(9), B3, C3, N=5)
    np.testing.assert_array_equal(B3, [1.5, 2.5, 3.75])
    np.testing.assert_array_equal(C3, [5, 9, 2])
