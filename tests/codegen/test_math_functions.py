"""Tasklet math agrees with NumPy: every function DaCe's unparser emits, run by the host emulation on negative
and positive values, and the CUDA text compiled by nvcc.

The emulation is what CI checks results with, so it must never disagree with the GPU: ``abs`` of a double once
compiled to C's ``int abs(int)`` there, and ``np.mod``, ``//``, ``np.sign``, ``np.reciprocal``, ``np.heaviside``
and mixed-type ``np.maximum`` did not compile at all, nor did ``min``, ``max`` or ``abs`` in an index.
"""

import math_programs as mp
import numpy as np
import pytest
from builds import BACKENDS

import dace_cpufree
from dace_cpufree.runtime import build


def _inputs(n=11, dtype=np.float64, itype=np.int64):
    rng = np.random.default_rng(7)
    a = (rng.standard_normal(n) * 5).astype(dtype)
    b = (rng.standard_normal(n) * 2).astype(dtype)
    b[b == 0] = 1
    a[0], a[1] = 0.0, -0.0
    i = np.arange(-(n // 2), n - n // 2).astype(itype)
    return a, b, i


@pytest.mark.parametrize("program", mp.PROGRAMS, ids=lambda p: p.name)
def test_function_matches_numpy_in_the_emulation(program):
    a, b, i = _inputs()
    want, got = np.zeros_like(a), np.zeros_like(a)
    with np.errstate(all="ignore"):
        program.f(a.copy(), b.copy(), i.copy(), want)
    dace_cpufree.compile(program, backend="emulate")(a.copy(), b.copy(), i.copy(), got)
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=0, equal_nan=True)


def test_single_precision_matches_numpy_in_the_emulation():
    a, b, i = _inputs(dtype=np.float32, itype=np.int32)
    want, got = np.zeros_like(a), np.zeros_like(a)
    mp.single_precision.f(a.copy(), b.copy(), i.copy(), want)
    dace_cpufree.compile(mp.single_precision, backend="emulate")(a.copy(), b.copy(), i.copy(), got)
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_small_integer_types_match_numpy_in_the_emulation():
    a = np.arange(-6, 6).astype(np.int16)
    b = np.arange(0, 12).astype(np.uint16)
    want, got = np.zeros(12, np.int64), np.zeros(12, np.int64)
    mp.small_integers.f(a.copy(), b.copy(), want)
    dace_cpufree.compile(mp.small_integers, backend="emulate")(a.copy(), b.copy(), got)
    np.testing.assert_array_equal(got, want)


def test_many_functions_in_one_kernel_match_numpy_in_the_emulation():
    a, b, i = _inputs()
    want, got = (np.zeros_like(a), np.zeros_like(i)), (np.zeros_like(a), np.zeros_like(i))
    mp.many.f(a.copy(), b.copy(), i.copy(), *want)
    dace_cpufree.compile(mp.many, backend="emulate")(a.copy(), b.copy(), i.copy(), *got)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-13)
    np.testing.assert_array_equal(got[1], want[1])


def test_min_max_and_abs_in_indices_match_numpy_in_the_emulation():
    a = np.random.default_rng(3).standard_normal(11)
    got = np.zeros_like(a)
    dace_cpufree.compile(mp.clamped_indices, backend="emulate")(a, got)
    np.testing.assert_array_equal(got, mp.clamped_indices_reference(a))


@pytest.mark.compile
@pytest.mark.parametrize(
    "program", [mp.many, mp.ufuncs, mp.single_precision, mp.small_integers, mp.clamped_indices], ids=lambda p: p.name
)
@pytest.mark.parametrize("backend", BACKENDS)
def test_compiles_the_math(program, backend):
    source = dace_cpufree.kernel_source(program, backend=backend)
    assert build(source.code, f"math_{program.name}", backend).stat().st_size > 0


@pytest.mark.gpu
@pytest.mark.parametrize("program", mp.PROGRAMS, ids=lambda p: p.name)
def test_function_matches_numpy_on_gpu(program):
    a, b, i = _inputs(n=1000)
    want, got = np.zeros_like(a), np.zeros_like(a)
    with np.errstate(all="ignore"):
        program.f(a.copy(), b.copy(), i.copy(), want)
    dace_cpufree.compile(program, backend="cuda")(a.copy(), b.copy(), i.copy(), got)
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=0, equal_nan=True)


@pytest.mark.gpu
def test_min_max_and_abs_in_indices_match_numpy_on_gpu():
    a = np.random.default_rng(3).standard_normal(1000)
    got = np.zeros_like(a)
    dace_cpufree.compile(mp.clamped_indices, backend="cuda")(a, got)
    np.testing.assert_allclose(got, mp.clamped_indices_reference(a), rtol=1e-13)  # nvcc contracts to fma
