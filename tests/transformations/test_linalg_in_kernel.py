"""np.linalg.cholesky, solve and inv inside the kernel (transformations/linalg.py): DaCe's LAPACK library nodes
expanded into grid-wide steps. Results against NumPy under the race checker (pivoting, complex Hermitian matrices,
vector and matrix right-hand sides, sizes compiled in), refusals with a fix, an nvcc build, and the GPU."""

import dace
import numpy as np
import pytest
from builds import BACKENDS
from kernel_steps import loops

import dace_cpufree
from dace_cpufree.errors import NotPersistableError
from dace_cpufree.runtime import build

N = dace.symbol("N")
M = dace.symbol("M")


@dace.program
def cholesky_plus(A: dace.float64[N, N]):
    A[:] = np.linalg.cholesky(A) + 1.0  # NPBench's cholesky2 has this shape: the factor used in an expression


@dace.program
def cholesky_hermitian(A: dace.complex128[N, N], L: dace.complex128[N, N]):
    L[:] = np.linalg.cholesky(A)


@dace.program
def solve_matrix(A: dace.complex128[N, N], B: dace.complex128[N, M], X: dace.complex128[N, M]):
    X[:] = np.linalg.solve(A, B)


@dace.program
def solve_vector(A: dace.float64[N, N], b: dace.float64[N], x: dace.float64[N]):
    x[:] = np.linalg.solve(A, b)


@dace.program
def inverse(A: dace.float32[N, N], X: dace.float32[N, N]):
    X[:] = np.linalg.inv(A)


@dace.program
def integer_matrix(A: dace.int64[N, N], L: dace.int64[N, N]):
    L[:] = np.linalg.cholesky(A)


def _spd(n: int, rng) -> np.ndarray:
    r = rng.random((n, n))
    return r @ r.T + n * np.eye(n)


def test_no_host_library_is_left_in_the_kernel():
    source = dace_cpufree.kernel_source(solve_matrix)
    assert source.environments == ()  # no library (cuSOLVER, LAPACK) for the builder to link
    # one loop over the columns for the factorisation, one for the back substitution
    assert len(loops(source)) == 2


def test_cholesky_matches_numpy_under_the_race_checker():
    rng = np.random.default_rng(0)
    s = _spd(24, rng)
    a = s.copy()
    dace_cpufree.compile(cholesky_plus, backend="emulate", race_check="shuffle")(a)
    np.testing.assert_allclose(a, np.linalg.cholesky(s) + 1.0, rtol=1e-12, atol=1e-12)
    c = rng.random((17, 17)) + 1j * rng.random((17, 17))
    h = c @ c.conj().T + 17 * np.eye(17)
    low = np.zeros_like(h)
    dace_cpufree.compile(cholesky_hermitian, backend="emulate", race_check="reverse")(h.copy(), low)
    np.testing.assert_allclose(low, np.linalg.cholesky(h), rtol=1e-12, atol=1e-12)


def test_solve_pivots_like_numpy():
    rng = np.random.default_rng(1)
    n = 20
    a = rng.random((n, n)) + 1j * rng.random((n, n))
    a[0, 0] = a[5, 5] = 0.0  # zero pivots without row exchanges
    b = rng.random((n, 3)) + 1j * rng.random((n, 3))
    x = np.zeros_like(b)
    dace_cpufree.compile(solve_matrix, backend="emulate", race_check="shuffle")(a.copy(), b.copy(), x)
    np.testing.assert_allclose(x, np.linalg.solve(a, b), rtol=1e-10, atol=1e-12)


def test_vector_right_hand_side_with_sizes_compiled_in():
    rng = np.random.default_rng(2)
    a, b = rng.random((16, 16)), rng.random(16)
    a[0, 0] = 0.0
    x = np.zeros(16)
    dace_cpufree.compile(solve_vector, backend="emulate", symbols={"N": 16})(a.copy(), b.copy(), x)
    np.testing.assert_allclose(x, np.linalg.solve(a, b), rtol=1e-10, atol=1e-12)


def test_inverse_in_single_precision():
    a = (np.random.default_rng(3).random((12, 12)) + 3 * np.eye(12)).astype(np.float32)
    x = np.zeros_like(a)
    dace_cpufree.compile(inverse, backend="emulate")(a.copy(), x)
    np.testing.assert_allclose(x, np.linalg.inv(a), rtol=1e-4, atol=1e-5)


def test_an_unsupported_type_is_refused_with_a_fix():
    where = r"np\.linalg\.cholesky at .*test_linalg_in_kernel\.py:\d+: "  # the user's line
    with pytest.raises(NotPersistableError, match=where + r".*int64.*Fix:"):
        dace_cpufree.kernel_source(integer_matrix)


@pytest.mark.compile
@pytest.mark.parametrize("backend", BACKENDS)
def test_builds(backend):
    source = dace_cpufree.kernel_source(solve_matrix, backend=backend)
    assert build(source.code, "linalg_solve_matrix", backend).stat().st_size > 0


@pytest.mark.gpu
def test_match_numpy_on_gpu():
    rng = np.random.default_rng(4)
    s = _spd(300, rng)
    a = s.copy()
    dace_cpufree.compile(cholesky_plus)(a)
    np.testing.assert_allclose(a, np.linalg.cholesky(s) + 1.0, rtol=1e-10, atol=1e-10)
    m = rng.random((200, 200)) + 1j * rng.random((200, 200))
    b = rng.random((200, 50)) + 1j * rng.random((200, 50))
    x = np.zeros_like(b)
    dace_cpufree.compile(solve_matrix)(m.copy(), b.copy(), x)
    np.testing.assert_allclose(x, np.linalg.solve(m, b), rtol=1e-8, atol=1e-10)
