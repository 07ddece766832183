"""``np.linalg.norm`` inside the kernel (``frontend/norms.py``; DaCe has none and would call NumPy on the host):
vectors and matrices of every type against NumPy in the emulation and under the race checker, orders it does not
compute refused with a fix, built by nvcc."""

import dace
import numpy as np
import pytest
from builds import BACKENDS

import dace_cpufree
from dace_cpufree.errors import NotPersistableError
from dace_cpufree.runtime import build

N, M = dace.symbol("N"), dace.symbol("M")


@dace.program
def norms(
    x: dace.float64[N],
    A: dace.float64[N, M],
    z: dace.complex128[N],
    f: dace.float32[N],
    k: dace.int32[N, M],
    out: dace.float64[8],
    single: dace.float32[1],
):
    out[0] = np.linalg.norm(x)
    out[1] = np.linalg.norm(A)
    out[2] = np.linalg.norm(z)
    out[3] = np.linalg.norm(x, 1)
    out[4] = np.linalg.norm(x, np.inf)
    out[5] = np.linalg.norm(A, "fro")
    out[6] = np.linalg.norm(x, ord=-np.inf)
    out[7] = np.linalg.norm(k)
    single[0] = np.linalg.norm(f)


@dace.program
def matrix_inf_norm(A: dace.float64[N, M], out: dace.float64[1]):
    out[0] = np.linalg.norm(A, np.inf)


@dace.program
def row_norms(A: dace.float64[N, M], out: dace.float64[N]):
    out[:] = np.linalg.norm(A, axis=1)


def _inputs(n=13, m=7):
    rng = np.random.default_rng(6)
    x, A = rng.standard_normal(n), rng.standard_normal((n, m))
    z = rng.standard_normal(n) + 1j * rng.standard_normal(n)
    return x, A, z, rng.standard_normal(n).astype(np.float32), rng.integers(-9, 9, (n, m)).astype(np.int32)


def _check(run, n=13, m=7):
    x, A, z, f, k = _inputs(n, m)
    out, single = np.zeros(8), np.zeros(1, np.float32)
    run(x, A, z, f, k, out, single)
    want = [np.linalg.norm(x), np.linalg.norm(A), np.linalg.norm(z), np.linalg.norm(x, 1), np.linalg.norm(x, np.inf),
            np.linalg.norm(A, "fro"), np.linalg.norm(x, -np.inf), np.linalg.norm(k)]  # fmt: skip
    np.testing.assert_allclose(out, want, rtol=1e-13)
    np.testing.assert_allclose(single[0], np.linalg.norm(f), rtol=1e-5)


@pytest.mark.parametrize("race_check", [False, True], ids=["emulate", "race-check"])
def test_norms_match_numpy(race_check):
    _check(dace_cpufree.compile(norms, backend="emulate", race_check=race_check))


@pytest.mark.parametrize(
    "program, problem", [(matrix_inf_norm, r"ord=inf for a 2-D array"), (row_norms, r"axis= or keepdims=")]
)
def test_norms_it_does_not_compute_are_refused_with_the_line_and_a_fix(program, problem):
    where = r"np\.linalg\.norm\(\.\.\.\) at .*test_norms\.py:\d+ "
    with pytest.raises(NotPersistableError, match=rf"{where}.*{problem}.*Fix:"):
        dace_cpufree.kernel_source(program)


@pytest.mark.compile
@pytest.mark.parametrize("backend", BACKENDS)
def test_builds_the_norms(backend):
    source = dace_cpufree.kernel_source(norms, backend=backend)
    assert build(source.code, "frontend_norms", backend).stat().st_size > 0


@pytest.mark.gpu
def test_norms_match_numpy_on_gpu():
    _check(dace_cpufree.compile(norms), 3001, 517)
