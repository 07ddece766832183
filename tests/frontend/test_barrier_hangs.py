"""Hang reports of block and tile barriers (``debug_waits``): a thread that does not reach its block's barrier in time
is named with its block and the step, and the kernel stops instead of hanging. Structure and results on the
emulation, nvcc builds, the host's report from the channel's words, and on a GPU a thread kept late on purpose."""

from types import SimpleNamespace

import dace
import numpy as np
import pytest
from dace_cpufree.codegen.channel import ChannelFacts
from kernel_copies import shmem_jacobi_3d
from programs import softmax_f64

import dace_cpufree
from dace_cpufree.errors import KernelHang
from dace_cpufree.runtime import build
from dace_cpufree.runtime.channel import ChannelHost
from dace_cpufree.runtime.hang import hang_report

N = dace.symbol("N")


@dace.program
def late_lane(A: dace.float64[N], reps: dace.int64[N], B: dace.float64[N]):
    for i in dace.map[0:N]:
        s = A[i]
        for _k in range(reps[i]):  # as many iterations as the element says: one thread can run far longer
            s = s * 0.5 + 1.0
        A[i] = s
    B[1:] = A[:-1]


def late_lane_reference(A, reps, B):
    for i in range(len(A)):
        for _ in range(reps[i]):
            A[i] = A[i] * 0.5 + 1.0
    B[1:] = A[:-1]


def _inputs(n: int):
    return np.linspace(0.0, 1.0, n), (np.arange(n) % 7).astype(np.int64), np.zeros(n)


@pytest.mark.parametrize("options", [{}, {"debug_waits": 1, "race_check": "shuffle"}], ids=["plain", "debug"])
def test_a_loop_whose_variable_the_body_never_reads_runs_per_element(options):
    A, reps, B = _inputs(200)
    want_A, want_B = A.copy(), B.copy()
    late_lane_reference(want_A, reps, want_B)
    dace_cpufree.compile(late_lane, backend="emulate", **options)(A, reps, B)
    np.testing.assert_allclose(A, want_A)
    np.testing.assert_allclose(B, want_B)


def test_debug_waits_make_the_tile_barriers_between_fused_row_steps_the_channels():
    plain = dace_cpufree.kernel_source(softmax_f64).code
    source = dace_cpufree.kernel_source(softmax_f64, debug_waits=1)
    facts = source.channel
    tiles = [k for k, what in enumerate(facts.sites) if what.startswith("tile barrier before ")]
    assert len(tiles) == plain.count("__tile.sync();") == 5  # softmax: six steps fused row by row
    for k in tiles:
        assert f"cpufree::channel::tile_sync(__tile, {k});" in source.code
        assert k in facts.site_sources  # the program line of the step after it
    assert "__tile.sync();" not in source.code
    # the kernel's block barriers before grid syncs are the channel's (DebugGrid), and the results are unchanged
    assert "cpufree::channel::DebugGrid __grid;" in source.code
    x = np.random.default_rng(0).random((2, 3, 8, 8))
    got = dace_cpufree.compile(softmax_f64, backend="emulate", debug_waits=1, race_check="shuffle")(x.copy())
    want = np.exp(x - x.max(axis=-1, keepdims=True))
    np.testing.assert_allclose(got, want / want.sum(axis=-1, keepdims=True))


def test_debug_waits_make_block_barriers_the_channels():
    options = dict(symbols=dict(LX=34, N=34), shmem_transport="p2p")
    plain = dace_cpufree.kernel_source(shmem_jacobi_3d.plain, **options).code
    source = dace_cpufree.kernel_source(shmem_jacobi_3d.plain, debug_waits=2, **options)
    bars = [k for k, what in enumerate(source.channel.sites) if what.startswith("block barrier before ")]
    assert bars and len(bars) == plain.count("__syncthreads();") - source.code.count("__syncthreads();")
    for k in bars:
        assert f"cpufree::channel::block_sync({k}, __grid.passed);" in source.code
        assert f"cpufree::channel::stopped(__tid, {k}, __grid.passed);" in source.code  # left once it hung


@pytest.mark.compile
def test_nvcc_compiles_the_debug_barriers():
    for name, program in (("late_lane", late_lane), ("softmax", softmax_f64)):
        source = dace_cpufree.kernel_source(program, debug_waits=1)
        assert build(source.code, f"debug_barriers_{name}", "cuda").exists()


class _Words(SimpleNamespace):
    """The channel's words as the runtime reads them, without a kernel."""

    site_text = ChannelHost.site_text
    site_source = ChannelHost.site_source

    def hang_word(self, name):
        return self.values.get(name, 0)


def _host(values):
    facts = ChannelFacts(ring=4, debug_waits=2.0)
    facts.site("grid sync before map_x")
    facts.site_steps[0] = "map_x"
    facts.site("tile barrier before map _Sub__map in rows a + b")
    facts.site_sources[1] = "prog.py:12"
    return _Words(facts=facts, values=values, program="prog", step_sources={"map_x": "prog.py:7"})


def test_a_block_barrier_report_names_the_thread_the_block_and_the_step():
    words = {"SITE": 1, "KIND": 6, "BLOCK": 3, "ARRIVED": 127, "GRID": 128, "MISSING": 17, "SYNCS": 4}
    error = hang_report(_host(words))
    assert isinstance(error, KernelHang)
    assert (error.block, error.thread, error.threads, error.source) == (3, 17, 1, "prog.py:7")
    text = str(error)
    for part in ("thread 17 did not arrive", "127 of the 128 threads of block 3", "2.5 s", "grid sync before map_x",
                 "(after 4 grid syncs)", "Fix:"):  # fmt: skip
        assert part in text, text


def test_a_tile_barrier_report_names_the_lane_and_its_tile():
    words = {"SITE": 2, "KIND": 5, "BLOCK": 0, "ARRIVED": 63, "GRID": 64, "MISSING": 70, "MISSING_SITE": 64}
    words["SYNCS"] = -1
    error = hang_report(_host(words))
    assert (error.thread, error.source) == (70, "prog.py:12")
    text = str(error)
    for part in ("thread 70 did not arrive", "threads 64-127 of block 0 (a tile)", "2.25 s", "tile barrier before"):
        assert part in text, text
    assert "grid syncs)" not in text  # not known inside a step: not claimed


# ---- on a GPU ---------------------------------------------------------------------------------------------------
@pytest.mark.gpu
def test_gpu_a_thread_kept_late_is_named_then_a_correct_run():
    n, late = 1 << 14, 5000
    run = dace_cpufree.compile(late_lane, debug_waits=0.2)

    def correct_run():
        A, reps, B = _inputs(n)
        want_A, want_B = A.copy(), B.copy()
        late_lane_reference(want_A, reps, want_B)
        run(A, reps, B)
        np.testing.assert_allclose(A, want_A)
        np.testing.assert_allclose(B, want_B)

    correct_run()
    grid, block = run.launch_config
    assert grid * block >= n  # one element a thread: element `late` is thread late % block of block late // block
    A, reps, B = _inputs(n)
    reps[late] = 1 << 28  # a second or more of dependent multiply-adds for one thread: past the timeout
    with pytest.raises(KernelHang) as info:
        run(A, reps, B)
    err = info.value
    # the late thread keeps the rest of its warp away (their paths join after its loop): the first absent thread
    # and how many, which include it
    assert err.block == late // block and err.thread <= late % block < err.thread + err.threads < block, str(err)
    assert err.site.startswith("grid sync before ") and f"the first thread {err.thread}" in str(err)
    correct_run()  # the same build runs correctly next


def test_a_late_thread_that_keeps_its_warp_away_is_reported_with_the_count():
    words = {"SITE": 1, "KIND": 6, "BLOCK": 4, "ARRIVED": 992, "GRID": 1024, "MISSING": 896, "SYNCS": 0}
    error = hang_report(_host(words))
    assert (error.thread, error.threads) == (896, 32)
    assert "32 threads did not arrive, the first thread 896" in str(error)
