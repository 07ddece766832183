"""``@mapgridscope``: block functions on disjoint sets of thread blocks (frontend/gridscope.py,
transformations/block_scopes.py, the parts in codegen). Structure and facts, the emulation under the race checker
with several blocks, nvcc builds, every misuse error, and the GPU results against NumPy."""

import gridscope_programs as g
import numpy as np
import pytest
from builds import BACKENDS

import dace_cpufree
from dace_cpufree.runtime import build


def _part_steps(source):
    return [(label, strategy, sync) for label, strategy, sync in source.steps if "block function" in strategy]


def test_explicit_ranges_become_two_parts_with_no_sync_between_them():
    source = dace_cpufree.kernel_source(g.copy_in_parts)
    (scope,) = source.block_scopes
    assert [p.name for p in scope] == ["split_copy__head", "split_copy__tail"]
    assert [p.index for p in scope] == [0, 1] and all(p.count == 2 and not p.inferred for p in scope)
    assert "N" in scope[0].elems and "N" in scope[1].elems
    parts = _part_steps(source)
    assert len(parts) == 2 and not any(sync for _, _, sync in parts)  # side by side, no grid sync
    after = [s for s in source.steps if "block function" not in s[1]]
    assert after and after[0][2]  # the step that reads both parts' writes syncs once
    assert source.grid_syncs == 1 and source.part_syncs == 0
    assert not any(p.automatic for p in scope)  # split once at kernel start, by the declared ranges


def test_inferred_split_and_barriers_inside_a_block_function():
    source = dace_cpufree.kernel_source(g.jacobi_1d_periodic)
    (scope,) = source.block_scopes
    assert [p.name.split("__")[1] for p in scope] == ["left", "right", "interior"]
    assert all(p.inferred for p in scope)
    assert scope[0].elems.isdigit() and scope[1].elems.isdigit() and "N" in scope[2].elems  # 1 block each
    assert scope[0].requires  # B[1] against B[N - 2]: decided at launch
    parts = _part_steps(source)
    assert not any(sync for _, _, sync in parts[1:])  # the scope needs no grid sync inside
    # the edge cells' steps (one-element copies and scalar tasklets) run on their function's first thread, in
    # program order: no barrier between them
    edges = [strategy for _, strategy, _ in parts if "relax.left" in strategy or "relax.right" in strategy]
    assert edges and all(strategy.startswith("leader thread") for strategy in edges)
    assert source.part_syncs == 0


def test_dependent_steps_inside_a_block_function_meet_at_its_barrier():
    source = dace_cpufree.kernel_source(g.smooth_halves)
    (scope,) = source.block_scopes
    assert source.part_syncs == 1 and source.grid_syncs == 0
    for order in ("reverse", "shuffle"):
        run = dace_cpufree.compile(g.smooth_halves, backend="emulate", race_check=order)
        n = 40
        A = np.random.default_rng(3).random(n)
        B, C = np.zeros(n), np.zeros(n)
        run(A, B, C, N=n)
        ref_b = np.concatenate([2.0 * A[: n // 2], A[n // 2 :]])
        np.testing.assert_allclose(B, ref_b)
        np.testing.assert_allclose(C[1 : n // 2], ref_b[: n // 2 - 1] + ref_b[1 : n // 2])


@pytest.mark.parametrize("order", ["forward", "reverse", "shuffle"])
def test_block_functions_are_race_free_and_match_numpy(order):
    n = 50
    run = dace_cpufree.compile(g.copy_in_parts, backend="emulate", race_check=order)
    A = np.random.default_rng(1).random(n)
    B, C = np.zeros(n), np.zeros(n)
    run(A, B, C, N=n)
    ref_b = np.concatenate([A[: n // 3], 2.0 * A[n // 3 :]])
    np.testing.assert_allclose(B, ref_b)
    np.testing.assert_allclose(C[1:], ref_b[:-1] + ref_b[1:])
    run = dace_cpufree.compile(g.jacobi_1d_periodic, backend="emulate", race_check=order)
    A = np.random.default_rng(2).random(n)
    ref = g.jacobi_1d_reference(A, 7)
    run(A, A.copy(), T=7, N=n)
    np.testing.assert_allclose(A, ref)


def test_sizes_that_make_block_functions_overlap_are_refused_before_the_launch():
    run = dace_cpufree.compile(g.jacobi_1d_periodic, backend="emulate")
    A = np.ones(3)
    with pytest.raises(dace_cpufree.ArgumentError, match="block functions of 'relax' would touch the same"):
        run(A, A.copy(), T=1, N=3)


@pytest.mark.parametrize(
    "program, match",
    [
        (g.call_overlapping, r"'first' .* and 'second' .* declare overlapping ranges \[0:N // 2 \+ 1\]"),
        (g.call_outside, r"'everything' of 'outside' .*\) declares range \[0:N \+ 1\], outside 'B'"),
        (g.call_dependent, r"'consume' .* reads 'B', which block function 'produce' .* writes.*Fix: move"),
        (g.scope_in_a_map, r"'split_copy.head' is called inside a map.*Fix: call the grid function outside"),
    ],
)
def test_misuse_is_an_error_naming_the_function_and_the_fix(program, match):
    with pytest.raises(dace_cpufree.NotPersistableError, match=match):
        dace_cpufree.kernel_source(program)


def test_a_grid_function_is_not_called_from_python():
    with pytest.raises(dace_cpufree.NotPersistableError, match="called from Python"):
        g.split_copy(np.zeros(3), np.zeros(3))


def test_a_block_function_with_parameters_or_other_decorators_is_refused():
    def with_params(A: g.dace.float64[g.N]):
        def f(i):
            A[i] = 0.0

    def decorated(A: g.dace.float64[g.N]):
        @staticmethod
        def f():
            A[0] = 0.0

    with pytest.raises(dace_cpufree.NotPersistableError, match="has parameters"):
        dace_cpufree.mapgridscope(with_params)
    with pytest.raises(dace_cpufree.NotPersistableError, match="Fix: use '@blocks"):
        dace_cpufree.mapgridscope(decorated)


@pytest.mark.compile
@pytest.mark.parametrize("program", ["copy_in_parts", "jacobi_1d_periodic"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_builds_block_scopes(program, backend):
    source = dace_cpufree.kernel_source(getattr(g, program), backend=backend)
    assert build(source.code, f"gridscope_{program}", backend).stat().st_size > 0


@pytest.mark.compile
def test_nvcc_builds_block_functions_that_communicate():
    source = dace_cpufree.kernel_source(g.jacobi_1d_overlapped)
    library = build(source.code, "gridscope_overlapped", "cuda", shmem=True, full_blocks=source.direct_stores)
    assert library.stat().st_size > 0
    assert [p.name.split("__")[1] for p in source.block_scopes[0]] == ["left", "right", "interior"]


@pytest.mark.gpu
@pytest.mark.parametrize("n", [1000, 1 << 20])
def test_split_copy_matches_numpy_on_gpu(n):
    run = dace_cpufree.compile(g.copy_in_parts)
    A = np.random.default_rng(3).random(n)
    B, C = np.zeros(n), np.zeros(n)
    run(A, B, C, N=n)
    ref_b = np.concatenate([A[: n // 3], 2.0 * A[n // 3 :]])
    np.testing.assert_allclose(B, ref_b)
    np.testing.assert_allclose(C[1:], ref_b[:-1] + ref_b[1:])


@pytest.mark.gpu
@pytest.mark.parametrize("program", ["jacobi_1d_periodic", "jacobi_1d_overlapped"])
def test_jacobi_1d_with_block_functions_matches_numpy_on_gpu(program):
    n, steps = 1 << 16, 50
    A = np.random.default_rng(4).random(n)
    ref = g.jacobi_1d_reference(A, steps)
    run = dace_cpufree.compile(getattr(g, program))
    if program == "jacobi_1d_periodic":
        run(A, A.copy(), T=steps, N=n)
    else:  # one PE: its puts land in its own halo cells
        run(A, A.copy(), np.zeros(2, np.uint64), T=steps, N=n)
    np.testing.assert_allclose(A, ref, rtol=1e-12)


# ---- independent steps side by side, without a grid function ----


def test_independent_small_steps_share_the_grid_unless_turned_off():
    source = dace_cpufree.kernel_source(g.periodic_rows)
    auto = [p for scope in source.block_scopes for p in scope if p.automatic]
    assert len(auto) == 2 and {p.count for p in auto} == {2} and auto[0].scope == auto[1].scope
    steps = [s for s in source.steps if "side by side" in s[1]]
    assert len(steps) == 2 and steps[0][2] and not steps[1][2]  # one sync before the pair, none between them
    plain = dace_cpufree.kernel_source(g.periodic_rows, concurrent_steps=False)
    assert not plain.block_scopes
    assert plain.grid_syncs == source.grid_syncs


def _check_periodic_rows(run, n: int, steps: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    A, B = rng.random((n, n)), rng.random((n, n))
    ref_a, ref_b = g.periodic_rows_reference(A, B, steps)
    run(A, B, T=steps, N=n)
    np.testing.assert_allclose(A, ref_a)
    np.testing.assert_allclose(B, ref_b)


@pytest.mark.parametrize("order", ["forward", "reverse", "shuffle"])
@pytest.mark.parametrize("n", [5, 9])  # 5: the rows have fewer elements than the 12 threads (split), 9: more
def test_independent_steps_side_by_side_are_race_free(order, n):
    _check_periodic_rows(dace_cpufree.compile(g.periodic_rows, backend="emulate", race_check=order), n, 4, seed=5)


@pytest.mark.gpu
@pytest.mark.parametrize("concurrent", [True, False])
def test_independent_steps_side_by_side_match_numpy_on_gpu(concurrent):
    _check_periodic_rows(dace_cpufree.compile(g.periodic_rows, concurrent_steps=concurrent), 1000, 20, seed=6)
