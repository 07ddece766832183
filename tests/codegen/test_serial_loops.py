"""Sequential loops of scalar work run on one thread (codegen/serial.py): their grid syncs per iteration are gone,
the symbols they set reach every thread after the loop; loops with grid work and channel builds keep the ordinary
lowering. Results against NumPy under the race checker, an nvcc build and a GPU run."""

import dace
import numpy as np
import pytest
from builds import BACKENDS

import dace_cpufree
from dace_cpufree.runtime import build

N = dace.symbol("N")


@dace.program
def keep_positive(x: dace.float64[N], idx: dace.int64[N], out: dace.float64[N], n_kept: dace.int64[1]):
    """Stream compaction as NPBench's mandelbrot2 writes it: a counter advanced under a data-dependent branch."""
    keep = np.ndarray((N,), dtype=np.bool_)
    keep[:] = x > 0.0
    count = 0
    for j in range(N):
        if keep[j]:
            x[count] = x[j]
            idx[count] = idx[j]
            count += 1
    out[:count] = 2.0 * x[:count]
    n_kept[0] = count


@dace.program
def clipped_recurrence(x: dace.float64[N], y: dace.float64[N]):
    """Each iteration branches on what the previous one wrote (a condition of every thread on the leader's data)."""
    y[0] = x[0]
    for i in range(1, N):
        if y[i - 1] > 0.0:
            y[i] = 0.5 * y[i - 1] + x[i]
        else:
            y[i] = x[i]


@dace.program
def rows_in_a_loop(a: dace.float64[N, N]):
    for i in range(1, N):
        a[i, :] = a[i, :] + a[i - 1, :]


def _serial_steps(program, **options) -> list:
    return [s for s in dace_cpufree.kernel_source(program, **options).steps if s[1] == "one thread"]


def test_a_compaction_loop_is_one_step_of_one_thread():
    steps = _serial_steps(keep_positive)
    assert len(steps) == 1 and steps[0][0].startswith("serial loop"), steps
    syncs = dace_cpufree.kernel_source(keep_positive).grid_syncs
    assert syncs <= 4, syncs  # before the loop, after it (the counter), around the last copies


def test_loops_with_grid_work_keep_the_ordinary_lowering():
    assert _serial_steps(rows_in_a_loop) == []


def test_with_the_channel_loops_stay_cancel_points():
    assert _serial_steps(keep_positive, channel=True) == []


def _compaction_reference(x, idx):
    kept = x > 0.0
    n = int(kept.sum())
    xs, ids = x.copy(), idx.copy()
    xs[:n], ids[:n] = x[kept], idx[kept]
    out = np.zeros_like(x)
    out[:n] = 2.0 * xs[:n]
    return xs, ids, out, n


@pytest.mark.parametrize("order", ["forward", "reverse", "shuffle"])
def test_compaction_matches_numpy_under_the_race_checker(order):
    rng = np.random.default_rng(5)
    x, idx = rng.standard_normal(203), np.arange(203, dtype=np.int64)
    out, n_kept = np.zeros(203), np.zeros(1, np.int64)
    want = _compaction_reference(x, idx)
    dace_cpufree.compile(keep_positive, backend="emulate", race_check=order)(x, idx, out, n_kept)
    np.testing.assert_array_equal(x, want[0])
    np.testing.assert_array_equal(idx, want[1])
    np.testing.assert_array_equal(out, want[2])
    assert n_kept[0] == want[3]


def _clipped(x):
    y = np.zeros_like(x)
    y[0] = x[0]
    for i in range(1, len(x)):
        y[i] = 0.5 * y[i - 1] + x[i] if y[i - 1] > 0.0 else x[i]
    return y


@pytest.mark.parametrize("channel", [False, True])
def test_recurrence_matches_numpy(channel):
    x, y = np.random.default_rng(6).standard_normal(300), np.zeros(300)
    dace_cpufree.compile(clipped_recurrence, backend="emulate", race_check=not channel, channel=channel)(x, y)
    np.testing.assert_allclose(y, _clipped(x), rtol=1e-14)
    source = dace_cpufree.kernel_source(clipped_recurrence)
    # one sync at most: after the loop, where the symbols it set reach every thread
    assert len(_serial_steps(clipped_recurrence)) == 1 and source.grid_syncs <= 1, (source.steps, source.grid_syncs)


@pytest.mark.compile
@pytest.mark.parametrize("backend", BACKENDS)
def test_builds(backend):
    source = dace_cpufree.kernel_source(keep_positive, backend=backend)
    assert build(source.code, "serial_keep_positive", backend).stat().st_size > 0


@pytest.mark.gpu
def test_compaction_and_recurrence_match_on_gpu():
    rng = np.random.default_rng(7)
    n = 100_003
    x, idx = rng.standard_normal(n), np.arange(n, dtype=np.int64)
    out, n_kept = np.zeros(n), np.zeros(1, np.int64)
    want = _compaction_reference(x, idx)
    dace_cpufree.compile(keep_positive)(x, idx, out, n_kept)
    np.testing.assert_array_equal(x, want[0])
    np.testing.assert_array_equal(idx, want[1])
    np.testing.assert_array_equal(out, want[2])
    assert n_kept[0] == want[3]
    x, y = rng.standard_normal(20_000), np.zeros(20_000)
    dace_cpufree.compile(clipped_recurrence)(x, y)
    np.testing.assert_allclose(y, _clipped(x), rtol=1e-14)
