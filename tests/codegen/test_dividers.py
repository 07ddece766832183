"""Divisors prepared once in the kernel's prologue (``cpufree::Divider``): which map extents get one
(``KernelSource.dividers``), and that the programs still compute what NumPy computes."""

import dace
import numpy as np
import pytest

import dace_cpufree

N = dace.symbol("N")
M = dace.symbol("M")


@dace.program
def stencil_steps(A: dace.float64[N, M], B: dace.float64[N, M], T: dace.int64):
    for _ in range(T):
        B[1:-1, 1:-1] = 0.2 * (A[1:-1, 1:-1] + A[:-2, 1:-1] + A[2:, 1:-1] + A[1:-1, :-2] + A[1:-1, 2:])
        A[1:-1, 1:-1] = 0.2 * (B[1:-1, 1:-1] + B[:-2, 1:-1] + B[2:, 1:-1] + B[1:-1, :-2] + B[1:-1, 2:])


@dace.program
def lower_blocks(A: dace.float64[N, N]):
    for i in range(1, N):
        A[i:, :i] = A[i:, :i] + 1.0  # a map whose last extent is the loop variable


@dace.program
def constant_sizes(A: dace.float64[6, 10], B: dace.float64[6, 10]):
    B[1:-1, 1:-1] = A[1:-1, :-2] + A[1:-1, 2:]


def test_symbolic_extents_get_one_divider_each():
    source = dace_cpufree.kernel_source(stencil_steps)
    # both steps divide by the inner extent, M - 2: one divider serves them
    assert source.dividers == ("M - 2",)


def test_extent_of_a_loop_variable_keeps_its_division():
    source = dace_cpufree.kernel_source(lower_blocks)
    assert source.dividers == ()


@dace.program
def one_pass(A: dace.float64[N, M], B: dace.float64[N, M]):
    B[1:-1, 1:-1] = A[1:-1, :-2] + A[1:-1, 2:]


def test_maps_outside_loops_keep_their_division():
    # a step that runs once pays the division once: no register is held for it from the prologue on
    assert dace_cpufree.kernel_source(one_pass).dividers == ()


def test_constant_extents_need_no_divider():
    assert dace_cpufree.kernel_source(constant_sizes).dividers == ()


@pytest.mark.parametrize("shape", [(7, 5), (12, 33)])
def test_stencil_with_dividers_matches_numpy_in_the_emulation(shape):
    rng = np.random.default_rng(4)
    a, b = rng.random(shape), rng.random(shape)
    wa, wb = a.copy(), b.copy()
    stencil_steps.f(wa, wb, 3)
    dace_cpufree.compile(stencil_steps, backend="emulate")(a, b, 3)
    np.testing.assert_allclose(a, wa, rtol=1e-14)
    np.testing.assert_allclose(b, wb, rtol=1e-14)


def test_loop_variable_extents_match_numpy_in_the_emulation():
    a = np.random.default_rng(5).random((9, 9))
    want = a.copy()
    for i in range(1, 9):
        want[i:, :i] += 1.0
    dace_cpufree.compile(lower_blocks, backend="emulate")(a)
    np.testing.assert_allclose(a, want, rtol=1e-14)
