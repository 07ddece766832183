"""NumPy's result types where DaCe's frontend gives others (upstream DaCe alike; docs/dace-limitations.md).

Python's ``/`` gives a float also of two integers; C's truncates. DaCe's ``np.mean`` of an integer array divides
its integer sum by the count in a Python tasklet writing a transient of the array's type (the mean was truncated):
the transient is retyped float64 before simplification, and a Python tasklet that assigns a floating-point output
divides as Python does (``py_div``). DaCe's ``np.sum`` of a bool array reduces into a bool (the count was 1): its
output transient is retyped int64."""

import dace
import numpy as np
import pytest
from builds import BACKENDS
from dace_cpufree.transformations.numpy_types import retype_bool_sums, retype_true_divisions

import dace_cpufree
from dace_cpufree.errors import NotPersistableError
from dace_cpufree.runtime import build

N, M = dace.symbol("N"), dace.symbol("M")


@dace.program
def integer_means(a: dace.int64[N], A: dace.int32[N, M], whole: dace.float64[1], rows: dace.float64[N]):
    whole[0] = np.mean(a)
    rows[:] = np.mean(A, axis=1)


@dace.program
def quotients(a: dace.int64[N], x: dace.float64[N], y: dace.float64[N], k: dace.int64[N]):
    for i in dace.map[0:N]:
        with dace.tasklet:
            p << a[i]  # noqa: F821
            q >> y[i]  # noqa: F821
            r >> k[i]  # noqa: F821
            q = p / 4  # noqa: F821, F841  (a float output: Python's quotient)
            r = p / 4 * 4  # noqa: F821, F841  (an integer output: Python's quotient times 4, truncated)
    x[:] = a / 3


@dace.program
def bool_and_small_reductions(A: dace.float64[N], share: dace.float64[1], flags: dace.bool_[2], small: dace.int16[2]):
    share[0] = np.mean(A > 0.5)
    flags[0] = np.max(A > 2.0)
    flags[1] = np.min(A > -1.0)
    small[0] = np.min(A.astype(np.int16) - np.int16(3))
    small[1] = np.max(A.astype(np.int16) - np.int16(3))


@dace.program
def counts(A: dace.float64[N, M], total: dace.int64[1], share: dace.float64[1], per_row: dace.int64[N]):
    total[0] = np.sum(A > 0.5)
    share[0] = np.sum(A > 0.5) / (N * M)
    per_row[:] = np.sum(A > 0.25, axis=1)


@dace.program
def mean_in_a_map(a: dace.float64[N], e: dace.float64[N]):
    m = np.mean(a)
    for i in dace.map[0:N]:
        e[i] = a[i] - m


@dace.program
def mean_in_a_map_rewritten(a: dace.float64[N], e: dace.float64[N]):
    m = np.mean(a) + 0.0
    for i in dace.map[0:N]:
        e[i] = a[i] - m


@dace.program
def mean_in_a_condition(a: dace.float64[N], e: dace.float64[N]):
    m = np.mean(a)
    if m > 4.0:
        e[:] = a
    else:
        e[:] = -a


@dace.program
def sum_in_a_map(a: dace.float64[N], e: dace.float64[N], mean: dace.float64[1]):
    s = np.sum(a)
    mean[0] = s / N  # the program's own division of the sum: the map reads the sum, as written
    for i in dace.map[0:N]:
        e[i] = a[i] - s


@dace.program
def promoted_from_integer_means(
    a: dace.int64[N],
    scaled: dace.float64[N],
    centred: dace.float64[N],
    stats: dace.float64[3],
    shifted: dace.float64[N],
):
    scaled[:] = (a - np.mean(a)) * 2  # the difference was truncated before the product
    m = np.mean(a)
    shifted[:] = -m + a
    stats[0] = np.mean(a) * 2 + 1  # was an integer
    stats[1] = np.sum((a - np.mean(a)) ** 2)
    stats[2] = np.sum(a - np.mean(a)) + 0.5  # the sum of a float array, reduced into an integer
    centred[:] = a - np.mean(a)


@dace.program
def integer_targets_of_integer_means(
    a: dace.int64[N], into_int: dace.int64[N], cast: dace.int64[N], both: dace.int64[N]
):
    into_int[:] = a - np.mean(a)  # NumPy casts on assignment: truncated
    cast[:] = (a - np.mean(a)).astype(np.int64) * 3
    d = (a - np.mean(a)) * 2
    both[:] = d  # d is a float: truncated here, as NumPy's assignment does...
    into_int[:] = into_int + d * 0  # ...and read as a float (the sum keeps into_int's values)


@dace.program
def casts_and_slices(
    a32: dace.int32[N], a8: dace.uint8[N], a: dace.int64[N], out: dace.float64[4], part: dace.float64[3]
):
    out[0] = np.mean(a32) * 2 + 1  # the frontend casts the int32 mean: dace.int64(__in1) * 2
    out[1] = np.mean(a > 3) * 2  # a bool mean, cast likewise
    d8 = (a8 - np.mean(a8)) * 2  # uint8: dace.uint64 casts
    out[2] = d8[0]
    out[3] = d8[1]
    d = a - np.mean(a)
    part[:] = d[1:4]  # a view of d


@dace.program
def argmax_of_an_integer_mean_result(a: dace.int64[N], at: dace.int64[1]):
    at[0] = np.argmax(np.abs(a - np.mean(a)))  # the pair's value field stays int64: refused


@dace.program
def integer_array_made_then_assigned(a: dace.int64[N], out: dace.float64[N]):
    d = np.empty(N, np.int64)
    d[:] = a - np.mean(a)  # NumPy: d stays int64 (truncated); np.copy of the float would not: refused
    out[:] = d * 2


@dace.program
def rebound_scalars(a: dace.int64[N], x: dace.float64[N], out: dace.float64[3]):
    s = a[0] * 0
    s = s + np.mean(a)  # s rebound from an integer to a float: one container in DaCe, retyped
    out[0] = s * 2
    t = 0
    for i in range(N):
        t = t + x[i]  # Python's t is a float from the first addition (upstream DaCe: the truncated sum)
    out[1] = t
    u = t * 2  # typed from the integer t by the frontend
    out[2] = u


@dace.program
def comparisons_and_own_casts(
    a: dace.int64[N], v: dace.float64[N], cnt: dace.int64[1], low: dace.bool_[N], o: dace.int64[N]
):
    cnt[0] = np.sum(a > np.mean(a))  # a comparison with a float is a bool: counted as an integer
    low[:] = (a > np.mean(a)) & (a < 5)
    for i in dace.map[0:N]:
        with dace.tasklet:
            x << v[i]  # noqa: F821
            y >> o[i]  # noqa: F821
            y = dace.int64(x) * 2  # noqa: F821, F841  (the program's own cast: kept)


@dace.program
def complex_float32_and_written_arrays(
    c: dace.complex128[N],
    b: dace.int64[N],
    x32: dace.float32[N],
    x: dace.float64[N],
    z: dace.complex128[3],
    f: dace.float32[1],
    d_out: dace.float64[N],
    whole: dace.int64[N],
):
    s = 0
    for i in range(N):
        s = s + c[i]  # s rebound to a complex: what is computed from it is complex too
    z[0] = s
    z[1] = s * 2
    z[2] = s + np.mean(b)
    t = 0
    for i in range(N):
        t = t + x32[i]  # a float32, as NumPy's int + float32
    f[0] = t
    d = b - np.mean(b)
    d[0] = 3  # an assignment into the float array d
    d_out[:] = d
    w = np.zeros(N, np.int64)
    w[0] = t  # the program's integer array: truncated, as NumPy's assignment
    whole[:] = w


@dace.program
def results_read_in_a_map(a: dace.int64[N], x: dace.float64[N], e: dace.float64[N], c: dace.float64[N]):
    m = np.mean(a) * 2  # retyped float64 outside and in the map body
    k = np.sum(x > 0.5)  # retyped int64 outside and in the map body
    for i in dace.map[0:N]:
        e[i] = a[i] - m
        c[i] = x[i] * k


def _inputs():
    rng = np.random.default_rng(2)
    return rng.integers(-50, 50, 11), rng.integers(-9, 9, (11, 6)).astype(np.int32)


@pytest.mark.parametrize("race_check", [False, True], ids=["emulate", "race-check"])
def test_means_of_integer_arrays_keep_their_fraction(race_check):
    a, A = _inputs()
    whole, rows = np.zeros(1), np.zeros(11)
    dace_cpufree.compile(integer_means, backend="emulate", race_check=race_check)(a, A, whole, rows)
    np.testing.assert_allclose(whole[0], np.mean(a), rtol=1e-15)
    np.testing.assert_allclose(rows, np.mean(A, axis=1), rtol=1e-15)
    assert whole[0] != int(whole[0])  # the inputs' mean has a fraction


def test_the_mean_transients_are_retyped_before_simplification():
    sdfg = integer_means.to_sdfg(simplify=False)
    retyped = retype_true_divisions(sdfg)
    assert len(retyped) == 2 and all(sdfg.arrays[name].dtype == dace.float64 for name in retyped)


def test_a_tasklet_divides_as_python_into_a_float_and_truncates_into_an_integer():
    a, _ = _inputs()
    x, y, k = np.zeros(11), np.zeros(11), np.zeros(11, np.int64)
    dace_cpufree.compile(quotients, backend="emulate")(a, x, y, k)
    np.testing.assert_allclose(y, a / 4, rtol=1e-15)
    np.testing.assert_array_equal(k, np.trunc(a / 4 * 4).astype(np.int64))
    assert (k == a).all()  # C's (a / 4) * 4 would round each down to a multiple of 4
    np.testing.assert_allclose(x, a / 3, rtol=1e-15)


@pytest.mark.parametrize("race_check", [False, True], ids=["emulate", "race-check"])
def test_sums_of_booleans_count_them(race_check):
    A = np.random.default_rng(4).random((12, 9))
    total, share, per_row = np.zeros(1, np.int64), np.zeros(1), np.zeros(12, np.int64)
    dace_cpufree.compile(counts, backend="emulate", race_check=race_check)(A, total, share, per_row)
    assert total[0] == np.sum(A > 0.5) > 1
    np.testing.assert_allclose(share[0], np.sum(A > 0.5) / A.size, rtol=1e-15)
    np.testing.assert_array_equal(per_row, np.sum(A > 0.25, axis=1))
    sdfg = counts.to_sdfg(simplify=False)
    assert len(retype_bool_sums(sdfg)) == 3


@pytest.mark.parametrize("race_check", [False, True], ids=["emulate", "race-check"])
def test_means_of_booleans_and_min_max_of_bools_and_shorts_match_numpy(race_check):
    A = np.linspace(0, 4, 11)
    share, flags, small = np.zeros(1), np.zeros(2, bool), np.zeros(2, np.int16)
    dace_cpufree.compile(bool_and_small_reductions, backend="emulate", race_check=race_check)(A, share, flags, small)
    np.testing.assert_allclose(share[0], np.mean(A > 0.5), rtol=1e-15)
    assert flags.tolist() == [np.max(A > 2.0), np.min(A > -1.0)] == [True, True]
    assert small.tolist() == [-3, 1]


def test_a_mean_read_inside_a_map_is_refused_with_the_line_and_fix():
    """DaCe's frontend binds a np.mean result read inside a dace.map body or in a condition to the sum (e = a - 25 for
    NumPy's a - 3.57, upstream DaCe on the CPU alike): refused, naming the line and the rewrite, which then matches
    NumPy; a sum the program divides itself and reads in a map is accepted."""
    with pytest.raises(NotPersistableError, match=r"'m' \(a np.mean result\).*test_numpy_types.py:\d+.*Fix: .*\+ 0.0"):
        dace_cpufree.compile(mean_in_a_map, backend="emulate")
    with pytest.raises(NotPersistableError, match=r"'m' \(a np.mean result\) is read in a condition"):
        dace_cpufree.compile(mean_in_a_condition, backend="emulate")  # `if m > 4.0` compared the sum, 25
    a, e = np.array([1.0, 2, 4, 7, 9, -3, 5]), np.zeros(7)
    dace_cpufree.compile(mean_in_a_map_rewritten, backend="emulate")(a, e)
    np.testing.assert_allclose(e, a - np.mean(a), rtol=1e-14)
    mean = np.zeros(1)
    dace_cpufree.compile(sum_in_a_map, backend="emulate")(a, e, mean)
    np.testing.assert_allclose(e, a - np.sum(a), rtol=1e-14)
    np.testing.assert_allclose(mean[0], np.mean(a), rtol=1e-14)


@pytest.mark.parametrize("race_check", [False, True], ids=["emulate", "race-check"])
def test_arithmetic_on_integer_means_is_promoted_as_numpy_does(race_check):
    """NumPy promotes integer arithmetic with a mean to float64; DaCe's frontend typed the results from the integer
    mean (np.mean(a) * 2 + 1 gave 9 for 10.71, (a - np.mean(a)) * 2 was truncated before the product). Results kept
    in integer arrays (an assignment into one, astype) stay NumPy's integers."""
    a = np.array([1, 2, 4, 7, 9, 3, 8], np.int64)
    scaled, centred, stats, shifted = np.zeros(7), np.zeros(7), np.zeros(3), np.zeros(7)
    run = dace_cpufree.compile(promoted_from_integer_means, backend="emulate", race_check=race_check)
    run(a, scaled, centred, stats, shifted)
    np.testing.assert_allclose(scaled, (a - a.mean()) * 2, rtol=1e-14)
    np.testing.assert_allclose(centred, a - a.mean(), rtol=1e-14)
    np.testing.assert_allclose(shifted, -a.mean() + a, rtol=1e-14)
    ref = [a.mean() * 2 + 1, np.sum((a - a.mean()) ** 2), np.sum(a - a.mean()) + 0.5]
    np.testing.assert_allclose(stats, ref, rtol=1e-12, atol=1e-12)
    assert stats[0] != int(stats[0]) and (scaled != np.trunc(scaled)).any()

    into_int, cast, both = np.zeros(7, np.int64), np.zeros(7, np.int64), np.zeros(7, np.int64)
    run = dace_cpufree.compile(integer_targets_of_integer_means, backend="emulate", race_check=race_check)
    run(a, into_int, cast, both)
    np.testing.assert_array_equal(into_int, (a - a.mean()).astype(np.int64))
    np.testing.assert_array_equal(cast, (a - a.mean()).astype(np.int64) * 3)
    np.testing.assert_array_equal(both, ((a - a.mean()) * 2).astype(np.int64))


@pytest.mark.parametrize("race_check", [False, True], ids=["emulate", "race-check"])
def test_integer_casts_and_views_of_integer_means_match_numpy(race_check):
    """The frontend's casts to the integer type in tasklet code (int32, bool and uint8 means) become float64 casts;
    a view of a retyped array is retyped with it."""
    a = np.array([1, 2, 4, 7, 9, 3, 8])
    a32, a8 = a.astype(np.int32), np.array([1, 200, 4, 7, 9, 3, 8], np.uint8)
    out, part = np.zeros(4), np.zeros(3)
    dace_cpufree.compile(casts_and_slices, backend="emulate", race_check=race_check)(a32, a8, a, out, part)
    d8 = (a8 - np.mean(a8)) * 2
    np.testing.assert_allclose(out, [np.mean(a32) * 2 + 1, np.mean(a > 3) * 2, d8[0], d8[1]], rtol=1e-14)
    np.testing.assert_allclose(part, (a - a.mean())[1:4], rtol=1e-14)


def test_an_argmax_of_integer_mean_results_is_refused():
    """np.argmax reduces (value, index) pairs whose value field the frontend typed from the integer mean: 2.9 and 2.1
    would compare as 2 and 2."""
    with pytest.raises(NotPersistableError, match=r"argmax or argmin reduces them in pairs.*Fix: "):
        dace_cpufree.compile(argmax_of_an_integer_mean_result, backend="emulate")


def test_an_integer_array_made_then_assigned_a_float_mean_result_is_refused():
    """NumPy keeps np.empty(n, np.int64)'s type, not np.copy's; the SDFG does not tell which made the array."""
    with pytest.raises(NotPersistableError, match=r"assigned to 'd', an integer array the program made.*Fix: .*astype"):
        dace_cpufree.compile(integer_array_made_then_assigned, backend="emulate")


@pytest.mark.parametrize("race_check", [False, True], ids=["emulate", "race-check"])
def test_scalar_variables_rebound_to_floats_take_their_type(race_check):
    """s = 0, then s = s + x[i]: one integer container in DaCe's frontend (upstream DaCe gives 3.0 for NumPy's 3.75
    here); Python rebinds s to a float, and so does the retyping, with what is computed from it."""
    a, x = np.array([1, 2, 4, 7, 9, 3, 8]), np.array([0.5, 1.25, 2.0, 0.125, 0.25, 0.5, 1.5])
    out = np.zeros(3)
    dace_cpufree.compile(rebound_scalars, backend="emulate", race_check=race_check)(a, x, out)
    np.testing.assert_allclose(out, [a.mean() * 2, x.sum(), x.sum() * 2], rtol=1e-14)


@pytest.mark.parametrize("race_check", [False, True], ids=["emulate", "race-check"])
def test_comparisons_stay_bools_and_a_programs_own_casts_stay(race_check):
    a, v = np.array([1, 2, 4, 7, 9, 3, 8]), np.linspace(-2.5, 3.5, 7)
    cnt, low, o = np.zeros(1, np.int64), np.zeros(7, bool), np.zeros(7, np.int64)
    dace_cpufree.compile(comparisons_and_own_casts, backend="emulate", race_check=race_check)(a, v, cnt, low, o)
    assert cnt[0] == np.sum(a > a.mean()) and low.tolist() == ((a > a.mean()) & (a < 5)).tolist()
    np.testing.assert_array_equal(o, v.astype(np.int64) * 2)  # not int(2 v)


@pytest.mark.parametrize("race_check", [False, True], ids=["emulate", "race-check"])
def test_complex_and_float32_values_and_writes_into_arrays_follow_numpy(race_check):
    rng = np.random.default_rng(9)
    x = rng.random(7)
    c, b, x32 = x + 1j * x[::-1], np.array([1, 2, 4, 7, 9, 3, 8]), x.astype(np.float32)
    z, f, d_out, whole = np.zeros(3, complex), np.zeros(1, np.float32), np.zeros(7), np.zeros(7, np.int64)
    run = dace_cpufree.compile(complex_float32_and_written_arrays, backend="emulate", race_check=race_check)
    run(c, b, x32, x, z, f, d_out, whole)
    np.testing.assert_allclose(z, [c.sum(), c.sum() * 2, c.sum() + b.mean()], rtol=1e-14)
    np.testing.assert_allclose(f[0], x32.sum(dtype=np.float32), rtol=1e-6)
    np.testing.assert_allclose(d_out, np.concatenate([[3.0], (b - b.mean())[1:]]), rtol=1e-14)
    np.testing.assert_array_equal(whole, [int(x32.sum(dtype=np.float32))] + [0] * 6)


@pytest.mark.parametrize("race_check", [False, True], ids=["emulate", "race-check"])
def test_retyped_results_read_inside_a_map_agree_with_the_map_body(race_check):
    """A map body is a nested SDFG with descriptors of its own for what it reads: a retyped container's are retyped
    with it (a bool sum read in a map failed validation, bool against int64; 2 * an integer mean was truncated)."""
    a, x = np.array([1, 2, 4, 7, 9, 3, 8]), np.linspace(0, 1, 7)
    e, c = np.zeros(7), np.zeros(7)
    dace_cpufree.compile(results_read_in_a_map, backend="emulate", race_check=race_check)(a, x, e, c)
    np.testing.assert_allclose(e, a - np.mean(a) * 2, rtol=1e-14)
    np.testing.assert_allclose(c, x * np.sum(x > 0.5), rtol=1e-14)


@pytest.mark.compile
@pytest.mark.parametrize("backend", BACKENDS)
def test_builds_the_python_quotients(backend):
    source = dace_cpufree.kernel_source(integer_means, backend=backend)
    assert "py_div(" in source.code
    assert build(source.code, "true_division_means", backend).stat().st_size > 0


@pytest.mark.gpu
def test_means_of_integer_arrays_keep_their_fraction_on_gpu():
    a, A = _inputs()
    whole, rows = np.zeros(1), np.zeros(11)
    dace_cpufree.compile(integer_means)(a, A, whole, rows)
    np.testing.assert_allclose(whole[0], np.mean(a), rtol=1e-14)
    np.testing.assert_allclose(rows, np.mean(A, axis=1), rtol=1e-14)


@pytest.mark.gpu
def test_arithmetic_on_integer_means_is_promoted_on_gpu():
    a = np.random.default_rng(8).integers(-40, 40, 1001)
    scaled, centred, stats, shifted = np.zeros(1001), np.zeros(1001), np.zeros(3), np.zeros(1001)
    dace_cpufree.compile(promoted_from_integer_means)(a, scaled, centred, stats, shifted)
    np.testing.assert_allclose(scaled, (a - a.mean()) * 2, rtol=1e-12)
    np.testing.assert_allclose(shifted, -a.mean() + a, rtol=1e-12)
    ref = [a.mean() * 2 + 1, np.sum((a - a.mean()) ** 2), np.sum(a - a.mean()) + 0.5]
    np.testing.assert_allclose(stats, ref, rtol=1e-10, atol=1e-9)
