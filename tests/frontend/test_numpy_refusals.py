"""NumPy functions with no device implementation yet: refused at compile time with the user's line and a fix that
compiles, and the fix's result checked against NumPy under the race checker. (np.argmax/np.argmin run inside the
kernel: tests/frontend/test_arg_reductions.py; np.cumsum: tests/frontend/test_cumsum.py.)"""

import inspect

import dace
import numpy as np
import pytest

import dace_cpufree

N = dace.symbol("N")


@dace.program
def argmax_as_suggested(A: dace.float64[N], out: dace.int64[1]):
    m = np.max(A)
    out[0] = np.min(np.where(A == m, np.arange(N), np.full(N, N, dtype=np.int64)))


@dace.program
def cumprod(A: dace.float64[N], B: dace.float64[N]):
    B[:] = np.cumprod(A)


@dace.program
def cumprod_as_suggested(A: dace.float64[N], B: dace.float64[N]):
    B[0] = A[0]
    for i in range(1, N):
        B[i] = B[i - 1] * A[i]


def _line(program, offset: int) -> str:
    return f"test_numpy_refusals.py:{inspect.getsourcelines(program.f)[1] + offset}"


def test_cumprod_is_refused_at_the_users_line_with_the_loop():
    with pytest.raises(dace_cpufree.NotPersistableError) as err:
        dace_cpufree.kernel_source(cumprod)
    text = str(err.value)
    assert "np.cumprod(...)" in text and _line(cumprod, 2) in text
    assert "Fix: write the scan as a loop" in text


@pytest.mark.parametrize("order", ["forward", "shuffle"])
def test_the_suggested_forms_match_numpy(order):
    A = np.random.default_rng(5).random(300)
    A[[40, 200]] = 7.0  # ties: NumPy returns the first
    out = np.zeros(1, np.int64)
    dace_cpufree.compile(argmax_as_suggested, backend="emulate", race_check=order)(A, out)
    assert out[0] == np.argmax(A) == 40
    A = 1.0 + A / 300  # a product that stays finite
    B = np.zeros_like(A)
    dace_cpufree.compile(cumprod_as_suggested, backend="emulate", race_check=order)(A, B)
    np.testing.assert_allclose(B, np.cumprod(A), rtol=1e-12)
