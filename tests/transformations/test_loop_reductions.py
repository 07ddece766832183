"""Accumulation loops (``s = s + f(a[i])``) become grid-wide reductions (transformations/loop_reductions.py); loops
whose iterations depend on each other otherwise stay loops. Results against NumPy under the race checker."""

import dace
import numpy as np
import pytest
from dace_cpufree.codegen import ir
from kernel_steps import forms

import dace_cpufree
from dace_cpufree.errors import NotPersistableError

N = dace.symbol("N")


@dace.program
def tanh_trace(a: dace.float64[N, N]):
    trace = 0.0
    for i in range(N):
        trace = trace + np.tanh(a[i, i])
    return a + trace


@dace.program
def product_of_scaled(x: dace.float64[N], out: dace.float64[1]):
    p = 1.0
    for i in range(N):
        p = p * (1.0 + 0.01 * x[i])
    out[0] = p


@dace.program
def largest_square(x: dace.float64[N], out: dace.float64[1]):
    m = -1.0e300
    for i in range(N):
        m = max(m, x[i] * x[i])
    out[0] = m


@dace.program
def row_sums_in_a_loop(a: dace.float64[N, N], out: dace.float64[N]):
    for j in range(N):
        s = 0.0
        for i in range(N):
            s = s + np.exp(a[i, j])
        out[j] = s


@dace.program
def damped(x: dace.float64[N], out: dace.float64[1]):
    s = 0.0
    for i in range(N):
        s = 0.5 * s + x[i]  # not a fold: the previous value is scaled
    out[0] = s


@dace.program
def index_read_after(x: dace.float64[N], out: dace.float64[2]):
    s = 0.0
    for i in range(N):
        s = s + x[i]
    out[0] = s
    out[1] = x[i]  # Python: x[N - 1]; the compiled loop leaves i at N


@dace.program
def two_loops_one_name(x: dace.float64[N], out: dace.float64[2]):
    s = 0.0
    for i in range(N):
        s = s + x[i]
    t = 1.0
    for i in range(N):
        t = max(t, x[i])
    out[0] = s
    out[1] = t


def _forms(program) -> list:
    return forms(dace_cpufree.kernel_source(program))


@pytest.mark.parametrize("program", [tanh_trace, product_of_scaled, largest_square], ids=lambda p: p.name)
def test_folds_become_grid_reductions(program):
    assert ir.Form.GRID_REDUCTION in _forms(program), _forms(program)


def test_two_loops_of_one_variable_name_both_fold():
    assert _forms(two_loops_one_name).count(ir.Form.GRID_REDUCTION) == 2


def test_loops_that_are_not_folds_stay_loops():
    reductions = {ir.Form.GRID_REDUCTION, ir.Form.THREAD_PER_OUTPUT, ir.Form.WARP_PER_OUTPUT, ir.Form.TILE_REDUCTION}
    assert not reductions & set(_forms(damped))


def _damped(x):
    s = 0.0
    for v in x:
        s = 0.5 * s + v
    return s


def test_reading_the_loop_variable_after_the_loop_is_refused_with_the_line():
    with pytest.raises(NotPersistableError, match=r"loop variable .i. is read after its loop at .*test_loop_red"):
        dace_cpufree.kernel_source(index_read_after)


REFERENCES = {  # NumPy, given the inputs: the expected last argument (or return value)
    "tanh_trace": lambda a: a + np.tanh(np.diagonal(a)).sum(),
    "product_of_scaled": lambda x, out: np.array([np.prod(1.0 + 0.01 * x)]),
    "largest_square": lambda x, out: np.array([np.max(x * x)]),
    "row_sums_in_a_loop": lambda a, out: np.exp(a).sum(axis=0),
    "damped": lambda x, out: np.array([_damped(x)]),
    "two_loops_one_name": lambda x, out: np.array([x.sum(), max(1.0, x.max())]),
}


@pytest.mark.parametrize("order", ["forward", "shuffle"])
@pytest.mark.parametrize(
    "program",
    [tanh_trace, product_of_scaled, largest_square, row_sums_in_a_loop, damped, two_loops_one_name],
    ids=lambda p: p.name,
)
def test_results_match_numpy_under_the_race_checker(program, order):
    rng = np.random.default_rng(3)
    n = 37
    if program in (tanh_trace, row_sums_in_a_loop):
        args = [rng.standard_normal((n, n)), np.zeros(n)][: 1 if program is tanh_trace else 2]
    else:
        args = [rng.standard_normal(n), np.zeros(2 if program is two_loops_one_name else 1)]
    want = REFERENCES[program.f.__name__](*[a.copy() for a in args])
    ret = dace_cpufree.compile(program, backend="emulate", race_check=order)(*args)
    np.testing.assert_allclose(ret if ret is not None else args[-1], want, rtol=1e-12, atol=1e-12)


@pytest.mark.gpu
def test_trace_matches_numpy_on_gpu():
    rng = np.random.default_rng(4)
    a = rng.standard_normal((2000, 2000))
    got = dace_cpufree.compile(tanh_trace)(a.copy())
    np.testing.assert_allclose(got, REFERENCES["tanh_trace"](a), rtol=1e-12, atol=1e-12)
