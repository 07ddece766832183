"""Masked assignment (``A[A <= t] = v``): DaCe writes it as a tasklet with a dynamic, pointer-typed output that
its code assigns as a value; the generated code stores through a reference to the element (it did not compile:
NPBench's correlation)."""

import dace
import numpy as np
import pytest
from builds import BACKENDS

import dace_cpufree
from dace_cpufree.runtime import build

N = dace.symbol("N")


@dace.program
def clamp_small(x: dace.float64[N], out: dace.float64[N]):
    out[:] = np.sqrt(x)
    out[out <= 0.5] = 1.0


def test_masked_assignment_matches_numpy_in_the_emulation():
    x = np.linspace(0, 1, 17)
    want, got = np.zeros(17), np.zeros(17)
    clamp_small.f(x, want)
    dace_cpufree.compile(clamp_small, backend="emulate")(x, got)
    np.testing.assert_array_equal(got, want)


@pytest.mark.compile
@pytest.mark.parametrize("backend", BACKENDS)
def test_compiles_masked_assignment(backend):
    source = dace_cpufree.kernel_source(clamp_small, backend=backend)
    assert build(source.code, "masked_assignment", backend).stat().st_size > 0


@pytest.mark.gpu
def test_masked_assignment_matches_numpy_on_gpu():
    x = np.linspace(0, 1, 5000)
    want, got = np.zeros(5000), np.zeros(5000)
    clamp_small.f(x, want)
    dace_cpufree.compile(clamp_small, backend="cuda")(x, got)
    np.testing.assert_array_equal(got, want)
