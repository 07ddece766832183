"""Call-time checks: every wrong argument is an ArgumentError naming the parameter, what it expects and the fix."""

import dace
import numpy as np
import pytest

import dace_cpufree
from dace_cpufree import ArgumentError

N = dace.symbol("N")


@dace.program
def scale(x: dace.float64[N], y: dace.float64[N], alpha: dace.float64, reps: dace.int64):
    for _ in range(reps):
        y[:] = alpha * x + y


@pytest.fixture(scope="module")
def run():
    return dace_cpufree.compile(scale, backend="emulate")


def test_a_correct_call_still_runs(run):
    x, y = np.arange(5.0), np.ones(5)
    run(x, y, 2.0, 3)
    np.testing.assert_allclose(y, 1 + 6 * np.arange(5.0))


def test_an_integer_for_a_float_scalar_is_accepted(run):
    y = np.zeros(3)
    run(np.ones(3), y, 2, np.int32(1))
    np.testing.assert_allclose(y, 2.0)


def test_zero_dimensional_arrays_are_scalars(run):
    y = np.zeros(3)
    run(np.ones(3), y, np.array(2.0), np.array(2))
    np.testing.assert_allclose(y, 4.0)


def test_a_float_for_an_integer_scalar_names_the_parameter(run):
    with pytest.raises(ArgumentError, match=r"'reps' is 2\.5 .*int64.*Fix: pass an integer"):
        run(np.ones(3), np.zeros(3), 1.0, 2.5)


def test_a_string_for_a_scalar_names_the_parameter(run):
    with pytest.raises(ArgumentError, match=r"'alpha' is 'two'"):
        run(np.ones(3), np.zeros(3), "two", 1)


def test_an_unknown_keyword_beside_a_missing_parameter_is_refused(run):
    with pytest.raises(ArgumentError, match=r"missing argument\(s\) reps \('beta' is no parameter\).*Fix"):
        run(np.ones(3), np.zeros(3), 1.0, beta=2.0)


def test_an_unused_integer_keyword_is_ignored_with_a_warning(run):
    """NPBench passes every size of a benchmark, also one the program does not declare (stockham_fft's N)."""
    y = np.zeros(3)
    with pytest.warns(UserWarning, match="keyword 'Q' is neither a parameter nor a size symbol"):
        run(np.ones(3), y, 1.0, 1, Q=7)


def test_a_size_symbol_may_be_given_as_a_keyword(run):
    y = np.zeros(4)
    run(np.ones(4), y, 1.0, 1, N=4)
    np.testing.assert_allclose(y, 1.0)


def test_a_list_for_an_array_says_how_to_pass_it(run):
    with pytest.raises(ArgumentError, match=r"'x' is a list.*Fix: pass np\.asarray"):
        run([1.0, 2.0], np.zeros(2), 1.0, 1)


def test_a_read_only_array_for_a_written_parameter_is_refused(run):
    y = np.zeros(3)
    y.setflags(write=False)
    with pytest.raises(ArgumentError, match=r"'y' is read-only.*Fix"):
        run(np.ones(3), y, 1.0, 1)


def test_a_read_only_array_for_a_read_parameter_is_fine(run):
    x = np.ones(3)
    x.setflags(write=False)
    y = np.zeros(3)
    run(x, y, 1.0, 1)
    np.testing.assert_allclose(y, 1.0)


def test_an_n_by_1_array_for_a_vector_is_accepted_and_written_through(run):
    """NPBench's nbody passes (N, 1) arrays for float64[N] parameters; upstream DaCe accepts them."""
    x, y = np.arange(4.0).reshape(4, 1), np.ones((4, 1))
    run(x, y, 1.0, 2)
    np.testing.assert_allclose(y[:, 0], 1 + 2 * np.arange(4.0))


def test_an_input_sharing_memory_with_a_written_array_is_refused(run):
    """The kernel takes its arrays as distinct: ``y`` written while ``x`` (the same memory) is read would not give
    NumPy's answer in general, so the call is refused before the launch, by both the common and the general path."""
    y = np.ones(4)
    with pytest.raises(ArgumentError, match=r"'y' and 'x' share memory.*writes 'y'.*Fix: pass a copy \(x\.copy\(\)\)"):
        run(y, y, 1.0, 1)
    with pytest.raises(ArgumentError, match=r"'y' and 'x' share memory"):
        run(x=y, y=y, alpha=1.0, reps=1, N=4)
    np.testing.assert_array_equal(y, 1.0)  # not run
    buf = np.zeros(7)
    with pytest.raises(ArgumentError, match=r"'y' and 'x' share memory"):
        run(buf[:4], buf[3:], 1.0, 1)  # overlapping views (one element)


@dace.program
def product_of(a: dace.float64[N], b: dace.float64[N], out: dace.float64[N]):
    out[:] = a * b


def test_arrays_that_only_border_or_are_both_read_are_accepted(run):
    buf = np.zeros(8)
    buf[:4] = 1.0
    run(buf[:4], buf[4:], 2.0, 1)  # adjacent halves of one buffer
    np.testing.assert_allclose(buf, [1, 1, 1, 1, 2, 2, 2, 2])
    a, out = np.arange(4.0), np.zeros(4)
    dace_cpufree.compile(product_of, backend="emulate")(a, a, out)  # one array for both read-only parameters
    np.testing.assert_allclose(out, a * a)


def test_a_strided_view_is_refused_for_its_layout_not_as_shared_memory(run):
    """Interleaved views of one buffer cover the same byte range without sharing an element: the call is refused
    because the kernel takes C-contiguous arrays, and says so."""
    buf = np.zeros(8)
    with pytest.raises(ArgumentError, match=r"'[xy]' must be a C-contiguous NumPy"):
        run(buf[::2], buf[1::2], 1.0, 1)
