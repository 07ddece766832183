"""Two independent steps of a time loop that together have fewer elements than the grid has threads run side by side
on blocks of their own; where a step must wait for its blocks' previous iteration, the barrier of its blocks is
declared (the generated code compiled with g++ and nvcc, the result checked against NumPy under the race checker)."""

import dace
import numpy as np
import pytest
from builds import BACKENDS

import dace_cpufree
from dace_cpufree.runtime import build

N, M, K = (dace.symbol(s) for s in "NMK")


@dace.program
def two_small_updates(
    A: dace.int64[K, M], D: dace.int32[K, M], F: dace.float32[K, K, N], G: dace.float32[K, K], T: dace.int64
):
    for _ in range(T):
        A[2:4, 1:M:2] = D[:2, 1:M:2] + 1
        F[2, :-1, N - 3 :] += G[:-1, -3:]


def test_side_by_side_steps_in_a_loop_match_numpy():
    rng = np.random.default_rng(2)
    A, D = rng.integers(0, 5, (5, 6)), rng.integers(0, 5, (5, 6)).astype(np.int32)
    F, G = rng.random((5, 5, 7)).astype(np.float32), rng.random((5, 5)).astype(np.float32)
    want_A, want_F = A.copy(), F.copy()
    for _ in range(3):
        want_A[2:4, 1:6:2] = D[:2, 1:6:2] + 1
        want_F[2, :-1, 4:] += G[:-1, -3:]
    dace_cpufree.compile(two_small_updates, backend="emulate", race_check="shuffle")(A, D, F, G, 3)
    np.testing.assert_array_equal(A, want_A)
    np.testing.assert_allclose(F, want_F, rtol=1e-6)


@pytest.mark.compile
@pytest.mark.parametrize("backend", BACKENDS)
def test_compiles_the_barrier_of_a_side_by_side_step(backend):
    source = dace_cpufree.kernel_source(two_small_updates, backend=backend)
    assert "__device__ cpufree::PartBarrier __cpufree_part_bar" in source.code  # the contract: declared where used
    library = build(source.code, "nvcc_two_small_updates", backend, environments=source.environments)
    assert library.exists() and library.stat().st_size > 0
