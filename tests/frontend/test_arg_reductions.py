"""np.argmax / np.argmin inside the kernel (transformations/arg_reductions.py): DaCe's (value, index) struct
reduction split into an extreme-key reduction and a first-index reduction. Structure, results against NumPy (ties,
NaN, signed zeros, infinities, integers, axes) under the race checker, nvcc builds, and the GPU."""

import dace
import numpy as np
import pytest
from builds import BACKENDS
from dace_cpufree.codegen.ir import Form
from kernel_steps import forms

import dace_cpufree
from dace_cpufree.runtime import build

N = dace.symbol("N")
M = dace.symbol("M")


@dace.program
def whole(A: dace.float64[N], out: dace.int64[2]):
    out[0] = np.argmax(A)
    out[1] = np.argmin(A)


@dace.program
def axes(A: dace.float32[M, N], rows: dace.int64[M], cols: dace.int64[N]):
    rows[:] = np.argmin(A, axis=1)
    cols[:] = np.argmax(A, axis=0)


@dace.program
def integers(A: dace.int64[N], out: dace.int64[2]):
    out[0] = np.argmax(A)
    out[1] = np.argmin(A)


@dace.program
def used_in_the_kernel(A: dace.float64[N], B: dace.float64[N]):
    B[:] = A - A[np.argmax(A)]  # the index read back inside the kernel, as a subscript


def _vectors():
    rng = np.random.default_rng(7)
    a = rng.random(1000)
    a[[17, 250, 900]] = 5.0  # ties: the first
    a[[5, 99]] = -3.0
    yield "ties", a
    b = a.copy()
    b[[60, 70]] = np.nan  # NaN: the first NaN for both
    yield "nan", b
    c = np.zeros(50)
    c[[3, 9]] = -0.0  # -0.0 == 0.0: the first zero
    c[20] = -np.inf
    c[30] = np.inf
    yield "zeros_and_infinities", c
    yield "one_element", np.array([2.5])


def test_the_struct_reduction_becomes_two_integer_reductions():
    source = dace_cpufree.kernel_source(whole)
    assert forms(source).count(Form.GRID_REDUCTION) == 4  # each of the two: a key, then an index
    code = source.code
    assert "_val_and_idx" not in code  # text under test: no struct value is left for nvcc
    assert code.count("cpufree::arg_key<true>") == 2 and code.count("cpufree::arg_key<false>") == 2


@pytest.mark.parametrize("order", [None, "reverse", "shuffle"])
def test_whole_arrays_match_numpy(order):
    run = dace_cpufree.compile(whole, backend="emulate", race_check=order)
    for name, a in _vectors():
        out = np.zeros(2, np.int64)
        run(a, out)
        assert list(out) == [np.argmax(a), np.argmin(a)], name


@pytest.mark.parametrize("order", [None, "shuffle"])
def test_axes_and_integers_match_numpy(order):
    rng = np.random.default_rng(3)
    A = rng.integers(0, 4, (23, 40)).astype(np.float32)  # many ties
    A[3, 7] = np.nan
    rows, cols = np.zeros(23, np.int64), np.zeros(40, np.int64)
    dace_cpufree.compile(axes, backend="emulate", race_check=order)(A, rows, cols)
    np.testing.assert_array_equal(rows, np.argmin(A, axis=1))
    np.testing.assert_array_equal(cols, np.argmax(A, axis=0))
    ints = rng.integers(-(2**62), 2**62, 500)
    ints[[11, 400]] = ints.max()
    out = np.zeros(2, np.int64)
    dace_cpufree.compile(integers, backend="emulate", race_check=order)(ints, out)
    assert list(out) == [np.argmax(ints), np.argmin(ints)]


def test_the_index_used_inside_the_kernel():
    a = np.random.default_rng(4).random(200)
    b = np.zeros_like(a)
    dace_cpufree.compile(used_in_the_kernel, backend="emulate", race_check="shuffle")(a, b)
    np.testing.assert_allclose(b, a - a.max())


@pytest.mark.compile
@pytest.mark.parametrize("program", [whole, axes], ids=["whole", "axes"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_builds(program, backend):
    source = dace_cpufree.kernel_source(program, backend=backend)
    assert build(source.code, f"arg_reductions_{program.name}", backend).stat().st_size > 0


@pytest.mark.gpu
def test_match_numpy_on_gpu():
    run = dace_cpufree.compile(whole)
    for name, a in _vectors():
        out = np.zeros(2, np.int64)
        run(a, out)
        assert list(out) == [np.argmax(a), np.argmin(a)], name
    big = np.random.default_rng(8).random(3_000_000)
    big[[123456, 2_999_000]] = 2.0
    out = np.zeros(2, np.int64)
    run(big, out)
    assert list(out) == [123456, np.argmin(big)]
    rng = np.random.default_rng(3)
    A = rng.integers(0, 4, (300, 500)).astype(np.float32)
    rows, cols = np.zeros(300, np.int64), np.zeros(500, np.int64)
    dace_cpufree.compile(axes)(A, rows, cols)
    np.testing.assert_array_equal(rows, np.argmin(A, axis=1))
    np.testing.assert_array_equal(cols, np.argmax(A, axis=0))
