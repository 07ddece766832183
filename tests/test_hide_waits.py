"""HideWaits (opt-in, ``DACE_CPUFREE_HIDE_WAITS=K``): the last 1/K of a map followed by waits and copies runs
after them. CPU tests of the SDFG and the generated code; results on GPUs in test_multigpu.py."""

import dace
import pytest
from dace_cpufree.transformations import hide_waits
from kernel_steps import step_order, top_maps

import dace_cpufree
from dace_cpufree import nvshmem
from dace_cpufree.runtime.build import INCLUDE_DIR

N = dace.symbol("N")


@dace.program
def _tail_commutes(
    A: dace.float64[N], B: dace.float64[N], H: dace.float64[2], C: dace.float64[2], flags: dace.uint64[2], T: dace.int64
):
    """The put goes out first, the map runs while it travels, then the wait and a copy of the halo."""
    me, npes = nvshmem.my_pe(), nvshmem.n_pes()
    for t in range(1, T + 1):
        if me > 0:
            nvshmem.Putmem(H[0:1], A[1:2], me - 1, flags[0], t)
        B[1:-1] = 0.5 * (A[:-2] + A[2:])
        if me < npes - 1:
            nvshmem.SignalWait(flags[0], t)
        C[0:2] = H[0:2]


@dace.program
def _copy_reads_the_tail(
    A: dace.float64[N], B: dace.float64[N], H: dace.float64[2], C: dace.float64[4], flags: dace.uint64[2], T: dace.int64
):
    """The copy after the wait reads B's last cells, which the map's tail writes: the map stays whole."""
    me, npes = nvshmem.my_pe(), nvshmem.n_pes()
    for t in range(1, T + 1):
        if me > 0:
            nvshmem.Putmem(H[0:1], A[1:2], me - 1, flags[0], t)
        B[1:-1] = 0.5 * (A[:-2] + A[2:])
        if me < npes - 1:
            nvshmem.SignalWait(flags[0], t)
        C[0:4] = B[N - 5 : N - 1]


@pytest.fixture
def on(monkeypatch):
    monkeypatch.setenv(hide_waits.ENV, "8")


def test_off_by_default(monkeypatch):
    monkeypatch.delenv(hide_waits.ENV, raising=False)
    assert top_maps(dace_cpufree.persistent_sdfg(_tail_commutes, symbols=dict(N=34))) == ["0:32"]


def test_the_tail_runs_after_the_wait_and_the_copy(on):
    """32 cells: the first 28 before the wait, the last 4 (1/8) after the copy of the halo, with no grid sync
    between the copy and the tail (they touch disjoint data)."""
    assert top_maps(dace_cpufree.persistent_sdfg(_tail_commutes, symbols=dict(N=34))) == ["0:28", "28:32"]
    code = dace_cpufree.generate_code(_tail_commutes, shmem_transport="p2p", symbols=dict(N=34))
    order = step_order(code, copies="// copy", barriers=True)
    tail = len(order) - 1 - order[::-1].index("map")
    assert order[tail - 4 : tail + 1] == ["map", "wait", "BAR", "unpack", "map"], order


def test_the_map_stays_whole_when_a_copy_after_the_wait_reads_its_tail(on):
    assert top_maps(dace_cpufree.persistent_sdfg(_copy_reads_the_tail, symbols=dict(N=34))) == ["0:32"]


def test_symbolic_extents_are_left_whole(on):
    assert top_maps(dace_cpufree.persistent_sdfg(_tail_commutes)) == ["0:N - 2"]


def test_a_bad_setting_is_named(monkeypatch):
    monkeypatch.setenv(hide_waits.ENV, "yes")
    with pytest.raises(ValueError, match="DACE_CPUFREE_HIDE_WAITS='yes'"):
        hide_waits.tail_parts()


@pytest.mark.parametrize("form", ["plain", "overlapped"])
def test_jacobi_3d_interior_tail_after_the_unpacking(on, form):
    """62 interior planes at LX = 66: 55 before the waits, 7 after the unpacking, in both half-steps; the
    grid syncs stay where they were (2 per half-step)."""
    from npbench_runs.multigpu import jacobi_3d

    sizes = dict(LX=66, N=258)
    src = dace_cpufree.kernel_source(getattr(jacobi_3d, form), symbols=sizes, shmem_transport="p2p")
    assert src.code.count("cpufree::max_<long long>(0, 55);") == 2
    assert src.code.count("cpufree::max_<long long>(0, 7);") == 2
    order = step_order(src.code, copies="// copy", barriers=True)
    half = order[-12:] if form == "overlapped" else order[-13:]
    assert half[-1] == "map" and half.count("GRID") == 2, half
    assert "unpack" in half[half.index("wait") :] and half[half.index("wait") :].count("GRID") == 0, half


def test_puts_take_the_last_blocks_of_their_lanes():
    """A grid-stride loop gives its remainder to the first threads; the blocks that put are counted from the
    grid's end (cpufree::lane_part, CPUFREE_LANES_FROM_END)."""
    from npbench_runs.multigpu import jacobi_3d

    code = dace_cpufree.generate_code(jacobi_3d.overlapped, symbols=dict(LX=66, N=258), shmem_transport="p2p")
    assert code.count("const unsigned int __part = cpufree::lane_part(blockIdx.x / __lanes, __parts);") == 4
    header = (INCLUDE_DIR / "cpufree" / "runtime.cuh").read_text()
    assert "return CPUFREE_LANES_FROM_END ? parts - 1 - k : k;" in header
