"""Complex numbers (complex64/complex128): std::complex in the emulation, cuda::std::complex on the device; sums
reduce each part with warp shuffles and atomics. Checked against NumPy under the race checker and built by nvcc."""

import dace
import numpy as np
import pytest
from builds import BACKENDS

import dace_cpufree
from dace_cpufree.runtime import build

N = dace.symbol("N")


@dace.program
def complex_ops(z: dace.complex128[N], w: dace.complex128[N], total: dace.complex128[1], mag: dace.float64[N]):
    w[:] = np.exp(z) * z + 2.0 * np.conj(z) - 1j
    total[0] = np.sum(z * z)
    mag[:] = np.abs(z) + np.real(z) * np.imag(z)


@dace.program
def escape(c: dace.complex128[N], out: dace.int64[N]):
    for i in dace.map[0:N]:
        z = c[i]
        k = 0
        while np.abs(z) < 2.0:
            z = z * z + c[i]
            k = k + 1
            if k >= 50:
                break
        out[i] = k


def _inputs(n=97, seed=4):
    rng = np.random.default_rng(seed)
    z = rng.standard_normal(n) + 1j * rng.standard_normal(n)
    return z, np.zeros(n, np.complex128), np.zeros(1, np.complex128), np.zeros(n)


def _escape_ref(c):
    out = np.zeros(len(c), np.int64)
    for i, ci in enumerate(c):
        z, k = ci, 0
        while abs(z) < 2.0:
            z, k = z * z + ci, k + 1
            if k >= 50:
                break
        out[i] = k
    return out


@pytest.mark.parametrize("order", ["forward", "shuffle"])
def test_complex_arithmetic_and_sums_match_numpy_under_the_race_checker(order):
    z, w, total, mag = _inputs()
    dace_cpufree.compile(complex_ops, backend="emulate", race_check=order)(z, w, total, mag)
    np.testing.assert_allclose(w, np.exp(z) * z + 2.0 * np.conj(z) - 1j, rtol=1e-13)
    np.testing.assert_allclose(total[0], np.sum(z * z), rtol=1e-12)
    np.testing.assert_allclose(mag, np.abs(z) + z.real * z.imag, rtol=1e-13)


def test_a_complex_escape_loop_per_element_matches_numpy():
    c = (np.linspace(-2, 0.5, 40)[:, None] + 1j * np.linspace(-1, 1, 5)[None, :]).ravel()
    out = np.zeros(len(c), np.int64)
    dace_cpufree.compile(escape, backend="emulate", race_check=True)(c, out)
    np.testing.assert_array_equal(out, _escape_ref(c))


@pytest.mark.compile
@pytest.mark.parametrize("program", [complex_ops, escape], ids=lambda p: p.name)
@pytest.mark.parametrize("backend", BACKENDS)
def test_builds_complex_code(program, backend):
    source = dace_cpufree.kernel_source(program, backend=backend)
    assert build(source.code, f"complex_{program.f.__name__}", backend).stat().st_size > 0


@pytest.mark.gpu
def test_complex_matches_numpy_on_gpu():
    z, w, total, mag = _inputs(5000)
    dace_cpufree.compile(complex_ops)(z, w, total, mag)
    np.testing.assert_allclose(w, np.exp(z) * z + 2.0 * np.conj(z) - 1j, rtol=1e-12)
    np.testing.assert_allclose(total[0], np.sum(z * z), rtol=1e-10)
    np.testing.assert_allclose(mag, np.abs(z) + z.real * z.imag, rtol=1e-12)
