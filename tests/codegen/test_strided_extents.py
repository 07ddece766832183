"""Slices with a start and a step (``x[1:M:3]``) have ``ceiling((M - 1) / 3)`` elements; the count is printed as an
integer rounding of the whole numerator, not term by term (``M / 3 - 1 / 3`` in C is one short for M = 5 or 8), and
compiles for the device."""

import re

import dace
import numpy as np
import pytest
from builds import BACKENDS

import dace_cpufree
from dace_cpufree.runtime import build

M = dace.symbol("M")


@dace.program
def strided_sums(x: dace.float64[M], y: dace.float64[M], out: dace.float64[2]):
    out[0] = np.sum(x[1:M:3])
    out[1] = np.sum(x[2::4])
    y[1:M:3] = x[1:M:3] * 2.0


@pytest.mark.parametrize("m", [5, 8, 9])
def test_strided_slices_cover_every_element(m):
    x = np.arange(1.0, m + 1)
    y, out = np.zeros(m), np.zeros(2)
    dace_cpufree.compile(strided_sums, backend="emulate", race_check="shuffle")(x, y, out)
    np.testing.assert_array_equal(out, [x[1:m:3].sum(), x[2::4].sum()])
    want = np.zeros(m)
    want[1:m:3] = x[1:m:3] * 2.0
    np.testing.assert_array_equal(y, want)


@pytest.mark.compile
@pytest.mark.parametrize("backend", BACKENDS)
def test_compiles_strided_extents(backend):
    source = dace_cpufree.kernel_source(strided_sums, backend=backend)
    assert not re.search(r"(?<![_\w])ceil\(", source.code.split("__global__", 1)[1])  # int_ceil only
    library = build(source.code, "nvcc_strided_sums", backend, environments=source.environments)
    assert library.exists() and library.stat().st_size > 0
