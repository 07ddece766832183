"""np.cumsum inside the kernel (frontend/scans.py): a three-level scan of grid-wide steps in place of DaCe's host
callback. Results against NumPy under the race checker (sizes below one chunk, across chunks and across the third
level), NumPy's result types, flattening, along an axis, refusals with a fix, and an nvcc build."""

import dace
import numpy as np
import pytest
from builds import BACKENDS
from dace_cpufree.codegen import ir
from dace_cpufree.frontend.scans import CHUNK
from kernel_steps import items

import dace_cpufree
from dace_cpufree.runtime import build

N = dace.symbol("N")
M = dace.symbol("M")


@dace.program
def scaled(A: dace.float64[N], B: dace.float64[N]):
    B[:] = np.cumsum(A) * 2.0


@dace.program
def as_a_method(A: dace.float64[N], B: dace.float64[N]):
    B[:] = A[1:].cumsum()[0] + A.cumsum()


@dace.program
def flattened(A: dace.int32[M, N], B: dace.int64[M * N]):
    B[:] = np.cumsum(A)


@dace.program
def wider(A: dace.float32[N], B: dace.float64[N]):
    B[:] = np.cumsum(A, dtype=np.float64)


@dace.program
def along_axes(A: dace.float64[M, N], B: dace.float64[M, N], C: dace.int64[M, N]):
    B[:] = np.cumsum(A, axis=1)
    C[:] = np.cumsum(A > 0.5, axis=0)


@dace.program
def middle_axis(A: dace.float32[3, N, 4], B: dace.float32[3, N, 4]):
    B[:] = np.cumsum(A, axis=-2)


@dace.program
def no_such_axis(A: dace.float64[M, N], B: dace.float64[M, N]):
    B[:] = np.cumsum(A, axis=2)


def test_the_scan_is_a_kernel_step_not_a_host_callback():
    source = dace_cpufree.kernel_source(scaled)
    assert source.channel is None  # a host callback would need the channel
    # grid steps: a thread per chunk, a thread per chunk of the chunk totals, one thread, a thread per element
    steps = items(source)
    assert all(i.form == ir.Form.ELEMENTS for i in steps)
    assert [i.elements for i in steps[:4]] == ["int_ceil(N, 256)", "int_ceil(int_ceil(N, 256), 256)", "1", "N"]


@pytest.mark.parametrize("n, order", [(1, "shuffle"), (CHUNK + 3, "shuffle"), (CHUNK * CHUNK + 5, None)])
def test_matches_numpy(n, order):
    a = np.random.default_rng(n).random(n)
    b = np.zeros(n)
    dace_cpufree.compile(scaled, backend="emulate", race_check=order)(a, b)
    np.testing.assert_allclose(b, np.cumsum(a) * 2.0, rtol=1e-12)


def test_the_array_method():
    a = np.random.default_rng(5).random(40)
    b = np.zeros_like(a)
    dace_cpufree.compile(as_a_method, backend="emulate", race_check="shuffle")(a, b)
    np.testing.assert_allclose(b, a[1:].cumsum()[0] + a.cumsum(), rtol=1e-12)


def test_numpy_result_types_and_flattening():
    a = np.random.default_rng(1).integers(-5, 5, (7, 9)).astype(np.int32)
    b = np.zeros(63, np.int64)
    dace_cpufree.compile(flattened, backend="emulate", race_check="reverse")(a, b)
    assert np.cumsum(a).dtype == np.int64 and np.array_equal(b, np.cumsum(a))
    f = np.random.default_rng(2).random(500).astype(np.float32)
    d = np.zeros(500)
    dace_cpufree.compile(wider, backend="emulate")(f, d)
    np.testing.assert_allclose(d, np.cumsum(f, dtype=np.float64), rtol=1e-12)


def test_along_an_axis():
    rng = np.random.default_rng(3)
    a = rng.random((5, CHUNK + 7))
    b, c = np.zeros_like(a), np.zeros(a.shape, np.int64)
    dace_cpufree.compile(along_axes, backend="emulate", race_check="shuffle")(a, b, c)
    np.testing.assert_allclose(b, np.cumsum(a, axis=1), rtol=1e-12)
    assert np.array_equal(c, np.cumsum(a > 0.5, axis=0))
    f = rng.random((3, 300, 4)).astype(np.float32)
    g = np.zeros_like(f)
    dace_cpufree.compile(middle_axis, backend="emulate")(f, g)
    np.testing.assert_allclose(g, np.cumsum(f, axis=-2), rtol=1e-5)


def test_an_axis_that_does_not_exist_is_refused_with_a_fix():
    with pytest.raises(dace_cpufree.NotPersistableError, match=r"np\.cumsum\(\.\.\.\).*axis 2 of a 2-D array.*Fix:"):
        dace_cpufree.kernel_source(no_such_axis)


@pytest.mark.compile
@pytest.mark.parametrize("backend", BACKENDS)
def test_builds(backend):
    source = dace_cpufree.kernel_source(scaled, backend=backend)
    assert build(source.code, "cumsum_scaled", backend).stat().st_size > 0


@pytest.mark.gpu
def test_match_numpy_on_gpu():
    rng = np.random.default_rng(4)
    a = rng.random(3_000_001)
    b = np.zeros_like(a)
    dace_cpufree.compile(scaled)(a, b)
    np.testing.assert_allclose(b, np.cumsum(a) * 2.0, rtol=1e-10)
    m = rng.random((300, 1000))
    s, c = np.zeros_like(m), np.zeros(m.shape, np.int64)
    dace_cpufree.compile(along_axes)(m, s, c)
    np.testing.assert_allclose(s, np.cumsum(m, axis=1), rtol=1e-12)
    assert np.array_equal(c, np.cumsum(m > 0.5, axis=0))
