"""Matrix products on slices inside loops (views), and transients sized by a loop variable."""

import dace
import numpy as np
from kernel_steps import items

import dace_cpufree

N, M, R = (dace.symbol(s) for s in "NMR")


@dace.program
def rank2k_rows(alpha: dace.float64, beta: dace.float64, C: dace.float64[N, N], A: dace.float64[N, M],
                B: dace.float64[N, M]):  # fmt: skip
    for i in range(N):
        C[i, : i + 1] = beta * C[i, : i + 1] + alpha * (A[: i + 1, :] @ B[i, :] + B[: i + 1, :] @ A[i, :])


@dace.program
def scale_lower(beta: dace.float64, C: dace.float64[N, N]):
    for i in range(N):
        C[i, : i + 1] = beta * C[i, : i + 1]


@dace.program
def batched_product(A: dace.float64[R, N, M], C4: dace.float64[M, M]):
    for r in range(R):
        A[r, :, :] = A[r, :, :] @ C4


def test_matrix_vector_products_of_loop_dependent_slices():
    rng = np.random.default_rng(1)
    A, B, C = rng.random((7, 5)), rng.random((7, 5)), rng.random((7, 7))
    want = C.copy()
    for i in range(7):
        want[i, : i + 1] = 0.5 * want[i, : i + 1] + 1.5 * (A[: i + 1] @ B[i] + B[: i + 1] @ A[i])
    got = C.copy()
    dace_cpufree.compile(rank2k_rows, backend="emulate")(alpha=1.5, beta=0.5, C=got, A=A, B=B)
    np.testing.assert_allclose(got, want, rtol=1e-13)


def test_transient_sized_by_the_loop_variable_gets_the_largest_size():
    sizes = {a.name: a.size for a in dace_cpufree.kernel_source(scale_lower).args if a.kind == "workspace"}
    assert sizes == {"beta_times_C_slice": "cpufree::max_<long long>(1, N)"}  # size i + 1 over i in [0, N - 1]
    C = np.random.default_rng(2).random((6, 6))
    want = C.copy()
    for i in range(6):
        want[i, : i + 1] *= 0.5
    dace_cpufree.compile(scale_lower, backend="emulate")(beta=0.5, C=C)
    np.testing.assert_array_equal(C, want)


def test_matrix_product_on_a_view_in_a_loop_is_inlined_and_syncs_on_the_viewed_array():
    src = dace_cpufree.kernel_source(batched_product)
    (product,) = [i for i in items(src) if i.collective]
    assert product.reads == {"A", "C4"}  # the product reads the slice A[r] in place, no copy
    assert [i.label for i in items(src) if i.label.startswith("copy")] == ["copy A_slice_matmul_C4 -> A"]
    assert src.grid_syncs >= 2
    A, C4 = np.random.default_rng(3).random((3, 4, 5)), np.random.default_rng(4).random((5, 5))
    want = A @ C4
    dace_cpufree.compile(batched_product, backend="emulate")(A=A, C4=C4)
    np.testing.assert_allclose(A, want, rtol=1e-13)
