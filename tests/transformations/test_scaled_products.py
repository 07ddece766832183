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


N64 = dace.symbol("N64", dtype=dace.int64)


@dace.program
def gesummv_int64_size(
    alpha: dace.float64, beta: dace.float64, A: dace.float64[N64, N64], B: dace.float64[N64, N64], x: dace.float64[N64]
):
    return alpha * A @ x + beta * B @ x  # NPBench's own gesummv: its size a symbol typed int64


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
    # a size symbol the program typed: DaCe's map ranges name it without the type, the sizes still match
    assert _matrix_containers(gesummv_int64_size) == set()
    assert _matrix_containers(scaled_gemm) == {"C_unscaled"}


def test_a_scaled_copy_with_another_use_stays():
    assert _matrix_containers(scaled_copy_used_twice) == {"T"}


CASES = {
    "gesummv_like": (lambda a, b, A, B, x: a * A @ x + b * B @ x),
    "gesummv_int64_size": (lambda a, b, A, B, x: a * A @ x + b * B @ x),
    "scaled_gemm": (lambda a, A, B, C: a * A @ B),
    "scaled_copy_used_twice": (lambda a, A, x, S: (a * A) @ x),
}


def _arguments(program, n: int, seed: int) -> list:
    rng = np.random.default_rng(seed)
    mat, vec = (lambda: rng.standard_normal((n, n))), (lambda: rng.standard_normal(n))
    return {
        "gesummv_like": [1.5, -0.5, mat(), mat(), vec()],
        "gesummv_int64_size": [1.5, -0.5, mat(), mat(), vec()],
        "scaled_gemm": [1.5, mat(), mat(), np.zeros((n, n))],
        "scaled_copy_used_twice": [1.5, mat(), vec(), np.zeros((n, n))],
    }[program.f.__name__]


@pytest.mark.parametrize(
    "program", [gesummv_like, gesummv_int64_size, scaled_gemm, scaled_copy_used_twice], ids=lambda p: p.name
)
def test_results_match_numpy_under_the_race_checker(program):
    args = _arguments(program, 23, 11)
    want = CASES[program.f.__name__](*args)
    got = dace_cpufree.compile(program, backend="emulate", race_check="shuffle")(*args)
    np.testing.assert_allclose(args[-1] if got is None else got, want, rtol=1e-12, atol=1e-12)
    if program is scaled_copy_used_twice:
        np.testing.assert_allclose(args[-1], 1.5 * args[1], rtol=1e-15)


@pytest.mark.gpu
@pytest.mark.parametrize(
    "program", [gesummv_like, gesummv_int64_size, scaled_gemm, scaled_copy_used_twice], ids=lambda p: p.name
)
def test_results_match_numpy_on_gpu(program):
    args = _arguments(program, 517, 12)  # products across several tiles, a partial last one
    want = CASES[program.f.__name__](*[a.copy() if isinstance(a, np.ndarray) else a for a in args])
    got = dace_cpufree.compile(program)(*args)
    np.testing.assert_allclose(args[-1] if got is None else got, want, rtol=1e-11, atol=1e-11)


# ---- the scaling and sum after a product, folded into its call (FoldScalingIntoProduct) ----------------------------

M, K = dace.symbol("M"), dace.symbol("K")


@dace.program
def gemm_form(
    alpha: dace.float64, beta: dace.float64, A: dace.float64[M, K], B: dace.float64[K, N], C: dace.float64[M, N]
):
    C[:] = alpha * A @ B + beta * C


@dace.program
def two_products(
    alpha: dace.float64,
    beta: dace.float64,
    A: dace.float64[M, K],
    B: dace.float64[K, N],
    C: dace.float64[N, K],
    D: dace.float64[M, K],
):
    D[:] = alpha * A @ B @ C + beta * D


@dace.program
def sum_first(beta: dace.float64, A: dace.float64[M, K], B: dace.float64[K, N], C: dace.float64[M, N]):
    C[:] = beta * C + A @ B


@dace.program
def output_is_an_operand(alpha: dace.float64, beta: dace.float64, A: dace.float64[N, N], C: dace.float64[N, N]):
    C[:] = alpha * A @ C + beta * C


@dace.program
def another_summand(
    alpha: dace.float64, beta: dace.float64, A: dace.float64[M, K], B: dace.float64[K, N], C: dace.float64[M, N]
):
    return alpha * A @ B + beta * C


@dace.program
def result_read_by_a_condition(
    alpha: dace.float64, beta: dace.float64, A: dace.float64[M, K], B: dace.float64[K, N], C: dace.float64[M, N]
):
    P = A @ B
    C[:] = alpha * P + beta * C
    if P[0, 0] > 0.0:
        C[0, 0] = 7.0


FOLD_CASES = {
    "gemm_form": (lambda a, b, A, B, C: a * A @ B + b * C),
    "two_products": (lambda a, b, A, B, C, D: a * A @ B @ C + b * D),
    "sum_first": (lambda b, A, B, C: b * C + A @ B),
    "output_is_an_operand": (lambda a, b, A, C: a * A @ C + b * C),
    "another_summand": (lambda a, b, A, B, C: a * A @ B + b * C),
    "result_read_by_a_condition": (
        lambda a, b, A, B, C: np.where(
            (np.arange(C.size).reshape(C.shape) == 0) & ((A @ B)[0, 0] > 0), 7.0, a * A @ B + b * C
        )
    ),
}
FOLDED = [gemm_form, two_products, sum_first]
NOT_FOLDED = [output_is_an_operand, another_summand, result_read_by_a_condition]


def _fold_arguments(program, m: int, n: int, k: int, seed: int, beta: float = -0.5) -> list:
    rng = np.random.default_rng(seed)

    def mat(r, c):
        return rng.standard_normal((r, c))

    return {
        "gemm_form": lambda: [1.5, beta, mat(m, k), mat(k, n), mat(m, n)],
        "two_products": lambda: [1.5, beta, mat(m, k), mat(k, n), mat(n, k), mat(m, k)],
        "sum_first": lambda: [beta, mat(m, k), mat(k, n), mat(m, n)],
        "output_is_an_operand": lambda: [1.5, beta, mat(n, n), mat(n, n)],
        "another_summand": lambda: [1.5, beta, mat(m, k), mat(k, n), mat(m, n)],
        "result_read_by_a_condition": lambda: [1.5, beta, mat(m, k), mat(k, n), mat(m, n)],
    }[program.f.__name__]()


def _product_calls(program) -> list:
    from dace_cpufree.transformations.gemm import product_call

    sdfg = dace_cpufree.persistent_sdfg(program)
    calls = [product_call(n) for n, _ in sdfg.all_nodes_recursive() if isinstance(n, dace.nodes.Tasklet)]
    maps = [n for n, _ in sdfg.all_nodes_recursive() if isinstance(n, dace.nodes.MapEntry)]
    return [c for c in calls if c is not None], maps


def test_the_scaling_and_sum_run_in_the_products_call():
    """NumPy's gemm: one call with alpha, beta and C read (NumPy's meaning of beta 0), no map and no transient left;
    2mm: the first product takes alpha, the second beta and D; a sum written first folds too."""
    (call,), maps = _product_calls(gemm_form)
    assert (call.alpha, call.beta, call.numpy_beta, maps) == ("_alpha", "_beta", True, [])
    first, second = _product_calls(two_products)[0]
    assert (first.alpha, first.beta, first.numpy_beta) == ("_alpha", "0", False)
    assert (second.alpha, second.beta, second.numpy_beta) == ("1", "_beta", True)
    assert _product_calls(two_products)[1] == []
    (call,), maps = _product_calls(sum_first)
    assert (call.alpha, call.beta, call.numpy_beta, maps) == ("1", "_beta", True, [])


def test_a_product_reading_its_output_or_another_summand_keeps_its_map():
    for program in NOT_FOLDED:
        (call,), maps = _product_calls(program)
        assert (call.alpha, call.beta, call.numpy_beta) == ("1", "0", False) and maps, program.name


@pytest.mark.parametrize("program", FOLDED + NOT_FOLDED, ids=lambda p: p.name)
def test_folded_products_match_numpy_under_the_race_checker(program):
    args = _fold_arguments(program, 13, 11, 9, 5)
    want = FOLD_CASES[program.f.__name__](*[a.copy() if isinstance(a, np.ndarray) else a for a in args])
    got = dace_cpufree.compile(program, backend="emulate", race_check="shuffle")(*args)
    np.testing.assert_allclose(args[-1] if got is None else got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("program", FOLDED, ids=lambda p: p.name)
def test_a_zero_beta_keeps_numpys_nan(program):
    """beta = 0 still reads C as NumPy does: 0 * NaN is NaN, 0 * inf too (BLAS's convention would drop them)."""
    args = _fold_arguments(program, 13, 11, 9, 6, beta=0.0)
    out = args[-1]
    out[1, 2], out[3, 4], out[5, 0] = np.nan, np.inf, -np.inf
    with np.errstate(invalid="ignore"):  # 0 * inf
        want = FOLD_CASES[program.f.__name__](*[a.copy() if isinstance(a, np.ndarray) else a for a in args])
    assert np.isnan(want).sum() == 3
    dace_cpufree.compile(program, backend="emulate", race_check="shuffle")(*args)
    np.testing.assert_array_equal(np.isnan(out), np.isnan(want))
    np.testing.assert_allclose(out, want, rtol=1e-12, atol=1e-12)


def test_the_output_passed_as_an_operand_too_is_refused():
    """The call writes C while it reads A: where the caller passes one array for both, NumPy's answer (the product
    first, then C) would be lost, so the call is refused before the launch."""
    alpha, beta, A, B, _ = _fold_arguments(gemm_form, 9, 9, 9, 9)
    with pytest.raises(dace_cpufree.ArgumentError, match=r"'C' and 'A' share memory.*Fix: pass a copy \(A\.copy"):
        dace_cpufree.compile(gemm_form, backend="emulate")(alpha, beta, A, B, A)


@pytest.mark.gpu
@pytest.mark.parametrize("beta", [-0.5, 0.0])
@pytest.mark.parametrize("program", FOLDED + NOT_FOLDED, ids=lambda p: p.name)
def test_folded_products_match_numpy_on_gpu(program, beta):
    """Sizes over several tiles with partial edge tiles, and a K long enough to split; NaN in C with beta 0."""
    args = _fold_arguments(program, 517, 389, 1201, 7, beta=beta)
    args[-1][1, 2] = np.nan
    want = FOLD_CASES[program.f.__name__](*[a.copy() if isinstance(a, np.ndarray) else a for a in args])
    got = dace_cpufree.compile(program)(*args)
    np.testing.assert_allclose(args[-1] if got is None else got, want, rtol=1e-11, atol=1e-11)
