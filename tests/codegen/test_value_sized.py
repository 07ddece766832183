"""Transients sized by values the kernel computes (a CSR row's slice ``vals[start:stop]`` with ``start``, ``stop``
read from an array; a prefix ``Z[:length]`` whose length the program changes): the host allocates them once at a
bound taken from the arrays their elements are copied from or to, and the kernel uses the run-time size."""

import dace
import numpy as np
import pytest
from builds import BACKENDS

import dace_cpufree
from dace_cpufree.runtime import build

M, NNZ, N = (dace.symbol(s, dtype=dace.int64) for s in ("M", "NNZ", "N"))


@dace.program
def csr_matvec(ptr: dace.int64[M + 1], cols: dace.int64[NNZ], vals: dace.float64[NNZ], x: dace.float64[N]):
    y = np.empty(M, dace.float64)
    for i in range(M):
        start = ptr[i]
        stop = ptr[i + 1]
        y[i] = vals[start:stop] @ x[cols[start:stop]]
    return y


@dace.program
def shrinking_prefix(z: dace.float64[N], out: dace.float64[N], steps: dace.int64):
    length = N
    k = 0
    while length > 1 and k < steps:
        z[:length] = z[:length] * 0.5 + 1.0
        out[k] = np.sum(z[:length])
        length = length // 2
        k = k + 1


def _csr(m=13, n=11, seed=4):
    rng = np.random.default_rng(seed)
    dense = rng.random((m, n)) * (rng.random((m, n)) < 0.3)
    dense[5] = 0.0  # an empty row
    ptr = np.concatenate([[0], np.cumsum((dense != 0).sum(axis=1))]).astype(np.int64)
    cols = np.nonzero(dense)[1].astype(np.int64)
    return ptr, cols, dense[dense != 0], rng.random(n), dense


def _prefix_reference(z, steps):
    z, out, length = z.copy(), np.zeros_like(z), len(z)
    k = 0
    while length > 1 and k < steps:
        z[:length] = z[:length] * 0.5 + 1.0
        out[k] = np.sum(z[:length])
        length, k = length // 2, k + 1
    return z, out


def test_workspace_bounded_by_the_arrays_copied_from():
    """The gathered row ``x[cols[start:stop]]`` is as long as the slice of ``vals``, a part of an NNZ array."""
    source = dace_cpufree.kernel_source(csr_matvec)
    sizes = [a.size for a in source.args if a.kind == "workspace"]
    assert "NNZ" in sizes and not any("start" in size or "stop" in size for size in sizes), sizes
    assert "NNZ" in {a.name for a in source.args if a.kind == "symbol"}  # inferred from the arrays' shapes


@pytest.mark.parametrize("order", ["forward", "reverse", "shuffle"])
def test_csr_rows_match_numpy_under_the_race_checker(order):
    ptr, cols, vals, x, dense = _csr()
    run = dace_cpufree.compile(csr_matvec, backend="emulate", race_check=order)
    np.testing.assert_allclose(run(ptr, cols, vals, x, M=len(ptr) - 1), dense @ x, rtol=1e-12)


@pytest.mark.parametrize("order", ["forward", "reverse", "shuffle"])
def test_shrinking_prefix_matches_numpy_under_the_race_checker(order):
    z = np.linspace(0.0, 1.0, 40)
    want_z, want_out = _prefix_reference(z, 4)
    run = dace_cpufree.compile(shrinking_prefix, backend="emulate", race_check=order)
    got_z, got_out = z.copy(), np.zeros_like(z)
    run(got_z, got_out, 4)
    np.testing.assert_allclose(got_z, want_z, rtol=1e-12)
    np.testing.assert_allclose(got_out, want_out, rtol=1e-12)


@pytest.mark.compile
@pytest.mark.parametrize("program", [csr_matvec, shrinking_prefix], ids=["csr_matvec", "shrinking_prefix"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_builds(program, backend):
    source = dace_cpufree.kernel_source(program, backend=backend)
    assert build(source.code, f"value_sized_{program.name}", backend).stat().st_size > 0


@pytest.mark.gpu
def test_match_numpy_on_gpu():
    ptr, cols, vals, x, dense = _csr(m=300, n=200)
    got = dace_cpufree.compile(csr_matvec)(ptr, cols, vals, x, M=len(ptr) - 1)
    np.testing.assert_allclose(got, dense @ x, rtol=1e-12)
    z = np.linspace(0.0, 1.0, 5000)
    want_z, want_out = _prefix_reference(z, 6)
    got_z, got_out = z.copy(), np.zeros_like(z)
    dace_cpufree.compile(shrinking_prefix)(got_z, got_out, 6)
    np.testing.assert_allclose(got_z, want_z, rtol=1e-12)
    np.testing.assert_allclose(got_out, want_out, rtol=1e-12)
