"""``np.any``, ``np.all`` (whole arrays and along an axis) and the bitwise reductions (``np.bitwise_or.reduce``, ...)
against NumPy: logical and bitwise write-conflict resolutions are reductions of the grid like sums, their bool
results combined atomically in the word that holds them. DaCe's ``np.all`` starts its reduction at 0 (every result
False, upstream DaCe too); the expansion starts it at True."""

import dace
import numpy as np
import pytest
from builds import BACKENDS

import dace_cpufree
from dace_cpufree.runtime import build

N, M = dace.symbol("N"), dace.symbol("M")


@dace.program
def any_all(A: dace.float64[N, M], whole: dace.bool_[2], rows: dace.bool_[N], cols: dace.bool_[M]):
    whole[0] = np.any(A > 0.99)
    whole[1] = np.all(A >= 0.0)
    rows[:] = np.any(A > 0.9, axis=1)
    cols[:] = np.all(A > 0.05, axis=0)


@dace.program
def bitwise(a: dace.int64[N], out: dace.int64[3]):
    out[0] = np.bitwise_or.reduce(a)
    out[1] = np.bitwise_and.reduce(a)
    out[2] = np.bitwise_xor.reduce(a)


def _matrices():
    rng = np.random.default_rng(3)
    plain = rng.random((13, 7))
    one_high = plain.copy()
    one_high[4, 2] = 0.995  # np.any true, one row and one column change
    shifted = plain * 0.9 + 0.06  # no element above 0.99, every column all above 0.05
    negative = plain.copy()
    negative[0, 0] = -1.0  # np.all false
    return [plain, one_high, shifted, negative]


def _check_any_all(run, A):
    whole, rows, cols = np.zeros(2, bool), np.zeros(A.shape[0], bool), np.zeros(A.shape[1], bool)
    run(A, whole, rows, cols)
    assert whole.tolist() == [np.any(A > 0.99), np.all(A >= 0.0)]
    np.testing.assert_array_equal(rows, np.any(A > 0.9, axis=1))
    np.testing.assert_array_equal(cols, np.all(A > 0.05, axis=0))


@pytest.mark.parametrize("race_check", [False, True], ids=["emulate", "race-check"])
def test_any_and_all_match_numpy(race_check):
    run = dace_cpufree.compile(any_all, backend="emulate", race_check=race_check)
    for A in _matrices():
        _check_any_all(run, A)


def test_bitwise_reductions_match_numpy_under_the_race_checker():
    rng = np.random.default_rng(8)
    run = dace_cpufree.compile(bitwise, backend="emulate", race_check=True)
    for a in (rng.integers(0, 1 << 40, 21), rng.integers(1 << 20, 1 << 21, 21) | 0b1011):
        out = np.zeros(3, np.int64)
        run(a, out)
        assert out.tolist() == [np.bitwise_or.reduce(a), np.bitwise_and.reduce(a), np.bitwise_xor.reduce(a)]


@pytest.mark.compile
@pytest.mark.parametrize("program", [any_all, bitwise], ids=lambda p: p.name)
@pytest.mark.parametrize("backend", BACKENDS)
def test_builds_the_logical_and_bitwise_reductions(program, backend):
    source = dace_cpufree.kernel_source(program, backend=backend)
    assert "cpufree::Op::Logical" in source.code or "cpufree::Op::Bitwise" in source.code
    assert build(source.code, f"reductions_{program.name}", backend).stat().st_size > 0


@pytest.mark.gpu
def test_any_and_all_match_numpy_on_gpu():
    run = dace_cpufree.compile(any_all)
    for A in _matrices():
        _check_any_all(run, A)
    big = np.random.default_rng(1).random((3000, 2000))
    _check_any_all(run, big)
