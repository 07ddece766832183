"""``(s * A) @ x`` computed as ``s * (A @ x)`` (transformations/scaled_products.py): the scaled copy of the matrix is
not written; where the scaled operand has another use, nothing changes. Results against NumPy under the race
checker."""

import dace
import numpy as np
import pytest
from dace_cpufree.transformations.scaled_products import ScaleAfterProduct

import dace_cpufree

N = dace.symbol("N")


@dace.program
def gesummv_like(
    alpha: dace.float64, beta: dace.float64, A: dace.float64[N, N], B: dace.float64[N, N], x: dace.float64[N]
):
    return alpha * A @ x + beta * B @ x


@dace.program
def scaled_gemm(alpha: dace.float64, A: dace.float64[N, N], B: dace.float64[N, N], C: dace.float64[N, N]):
    C[:] = alpha * A @ B


@dace.program
def scaled_copy_used_twice(alpha: dace.float64, A: dace.float64[N, N], x: dace.float64[N], S: dace.float64[N, N]):
    T = alpha * A
    S[:] = T
    return T @ x


def _matrix_containers(program) -> set[str]:
    sdfg = program.to_sdfg(simplify=True)
    ScaleAfterProduct().apply_pass(sdfg, {})
    return {name for name, desc in sdfg.arrays.items() if desc.transient and len(desc.shape) == 2}


def test_the_scaled_matrix_is_not_written():
    """DaCe's SDFG has the transient ``alpha_times_A``; after the pass only the product's unscaled result (a vector
    for gesummv, the matrix C for the product of matrices) is left."""
    assert "alpha_times_A" in {n for n, d in scaled_gemm.to_sdfg(simplify=True).arrays.items() if d.transient}
    assert _matrix_containers(gesummv_like) == set()
    assert _matrix_containers(scaled_gemm) == {"C_unscaled"}


def test_a_scaled_copy_with_another_use_stays():
    assert _matrix_containers(scaled_copy_used_twice) == {"T"}


CASES = {
    "gesummv_like": (lambda a, b, A, B, x: a * A @ x + b * B @ x),
    "scaled_gemm": (lambda a, A, B, C: a * A @ B),
    "scaled_copy_used_twice": (lambda a, A, x, S: (a * A) @ x),
}


def _arguments(program, n: int, seed: int) -> list:
    rng = np.random.default_rng(seed)
    mat, vec = (lambda: rng.standard_normal((n, n))), (lambda: rng.standard_normal(n))
    return {
        "gesummv_like": [1.5, -0.5, mat(), mat(), vec()],
        "scaled_gemm": [1.5, mat(), mat(), np.zeros((n, n))],
        "scaled_copy_used_twice": [1.5, mat(), vec(), np.zeros((n, n))],
    }[program.f.__name__]


@pytest.mark.parametrize("program", [gesummv_like, scaled_gemm, scaled_copy_used_twice], ids=lambda p: p.name)
def test_results_match_numpy_under_the_race_checker(program):
    args = _arguments(program, 23, 11)
    want = CASES[program.f.__name__](*args)
    got = dace_cpufree.compile(program, backend="emulate", race_check="shuffle")(*args)
    np.testing.assert_allclose(args[-1] if got is None else got, want, rtol=1e-12, atol=1e-12)
    if program is scaled_copy_used_twice:
        np.testing.assert_allclose(args[-1], 1.5 * args[1], rtol=1e-15)


@pytest.mark.gpu
@pytest.mark.parametrize("program", [gesummv_like, scaled_gemm, scaled_copy_used_twice], ids=lambda p: p.name)
def test_results_match_numpy_on_gpu(program):
    args = _arguments(program, 517, 12)  # products across several tiles, a partial last one
    want = CASES[program.f.__name__](*[a.copy() if isinstance(a, np.ndarray) else a for a in args])
    got = dace_cpufree.compile(program)(*args)
    np.testing.assert_allclose(args[-1] if got is None else got, want, rtol=1e-11, atol=1e-11)
