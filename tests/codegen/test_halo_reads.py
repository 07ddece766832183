"""Stencils whose edge cells read the halo buffers themselves (no unpacking): what the compiler makes of them.

Both forms below were measured on 4 H200s: the 2-D one as fast as
the committed overlapped form, the 3-D one far slower on 4 H200s (a neighbour's signal seen ~170 us after it was
sent), so the committed programs keep unpacking. They stay here as inputs for three analyses they exercised:
a nested program called with views (its independent statements are not ordered, so they fuse), the regions
of an item that reads through a view, and the loop's grid syncs decided afresh each round of the fixed point.
"""

import dace
import numpy as np
from dace_cpufree.codegen import ir
from kernel_copies import syr2k
from kernel_copies.shmem_jacobi_2d import _inner
from kernel_copies.shmem_jacobi_3d import _inner_planes
from kernel_steps import items, steps

import dace_cpufree
from dace_cpufree import nvshmem

LX, LY, N, PY = (dace.symbol(s) for s in ("LX", "LY", "N", "PY"))


@dace.program
def _planes(X: dace.float64[LX, N, N], lo: dace.float64[N - 2, N - 2], hi: dace.float64[N - 2, N - 2],
            Y: dace.float64[LX, N, N]):  # fmt: skip
    Y[1, 1:-1, 1:-1] = (1.0 / 7.0) * (X[1, 1:-1, 1:-1] + lo + X[2, 1:-1, 1:-1] + X[1, :-2, 1:-1] + X[1, 2:, 1:-1]
                                      + X[1, 1:-1, :-2] + X[1, 1:-1, 2:])  # fmt: skip
    Y[LX - 2, 1:-1, 1:-1] = (1.0 / 7.0) * (X[LX - 2, 1:-1, 1:-1] + X[LX - 3, 1:-1, 1:-1] + hi
                                           + X[LX - 2, :-2, 1:-1] + X[LX - 2, 2:, 1:-1] + X[LX - 2, 1:-1, :-2]
                                           + X[LX - 2, 1:-1, 2:])  # fmt: skip


@dace.program
def jacobi_3d_halo_reads(A: dace.float64[LX, N, N], B: dace.float64[LX, N, N], flags: dace.uint64[8],
                         TSTEPS: dace.int64):  # fmt: skip
    me, npes = nvshmem.my_pe(), nvshmem.n_pes()
    lo = np.empty((2, N - 2, N - 2), dtype=np.float64)
    hi = np.empty((2, N - 2, N - 2), dtype=np.float64)
    lo[0] = B[0, 1:-1, 1:-1]
    hi[0] = B[LX - 1, 1:-1, 1:-1]
    lo[1] = A[0, 1:-1, 1:-1]
    hi[1] = A[LX - 1, 1:-1, 1:-1]
    for t in range(1, TSTEPS + 1):
        _planes(A, lo[1], hi[1], B)
        if me > 0:
            nvshmem.Putmem(hi[0], B[1, 1:-1, 1:-1], me - 1, flags[1], t)
        if me < npes - 1:
            nvshmem.Putmem(lo[0], B[LX - 2, 1:-1, 1:-1], me + 1, flags[0], t)
        _inner_planes(A, B)
        if me > 0:
            nvshmem.SignalWait(flags[0], t)
        if me < npes - 1:
            nvshmem.SignalWait(flags[1], t)
        _planes(B, lo[0], hi[0], A)
        if me > 0:
            nvshmem.Putmem(hi[1], A[1, 1:-1, 1:-1], me - 1, flags[3], t)
        if me < npes - 1:
            nvshmem.Putmem(lo[1], A[LX - 2, 1:-1, 1:-1], me + 1, flags[2], t)
        _inner_planes(B, A)
        if me > 0:
            nvshmem.SignalWait(flags[2], t)
        if me < npes - 1:
            nvshmem.SignalWait(flags[3], t)


@dace.program
def _columns(X: dace.float64[LX, LY], Y: dace.float64[LX, LY]):
    Y[2:-2, 1] = 0.2 * (X[2:-2, 1] + X[2:-2, 0] + X[2:-2, 2] + X[3:-1, 1] + X[1:-3, 1])
    Y[2:-2, LY - 2] = 0.2 * (X[2:-2, LY - 2] + X[2:-2, LY - 3] + X[2:-2, LY - 1] + X[3:-1, LY - 2] + X[1:-3, LY - 2])


@dace.program
def jacobi_2d_row_halo_reads(A: dace.float64[LX, LY], B: dace.float64[LX, LY], flags: dace.uint64[8],
                             TSTEPS: dace.int64):  # fmt: skip
    """North/south halo rows read from their buffers, west/east columns unpacked into the ring (the second
    half-step without communication: enough for the analysis)."""
    me, npes = nvshmem.my_pe(), nvshmem.n_pes()
    pi, pj = me // PY, me % PY
    hn = np.empty((2, LY - 2), dtype=np.float64)
    hs = np.empty((2, LY - 2), dtype=np.float64)
    hw = np.zeros((2, LX - 2), dtype=np.float64)
    he = np.zeros((2, LX - 2), dtype=np.float64)
    hn[0] = B[0, 1:-1]
    hs[0] = B[LX - 1, 1:-1]
    hn[1] = A[0, 1:-1]
    hs[1] = A[LX - 1, 1:-1]
    for t in range(1, TSTEPS + 1):
        B[1, 1:-1] = 0.2 * (A[1, 1:-1] + A[1, :-2] + A[1, 2:] + A[2, 1:-1] + hn[1])
        B[LX - 2, 1:-1] = 0.2 * (A[LX - 2, 1:-1] + A[LX - 2, :-2] + A[LX - 2, 2:] + hs[1] + A[LX - 3, 1:-1])
        _columns(A, B)
        if pi > 0:
            nvshmem.Putmem(hs[0], B[1, 1:-1], me - PY, flags[1], t)
        if pi < npes // PY - 1:
            nvshmem.Putmem(hn[0], B[LX - 2, 1:-1], me + PY, flags[0], t)
        if pj > 0:
            nvshmem.Putmem(he[0], B[1:-1, 1], me - 1, flags[3], t)
        if pj < PY - 1:
            nvshmem.Putmem(hw[0], B[1:-1, LY - 2], me + 1, flags[2], t)
        _inner(A, B)
        if pi > 0:
            nvshmem.SignalWait(flags[0], t)
        if pi < npes // PY - 1:
            nvshmem.SignalWait(flags[1], t)
        if pj > 0:
            nvshmem.SignalWait(flags[2], t)
        if pj < PY - 1:
            nvshmem.SignalWait(flags[3], t)
        if pj > 0:
            B[1:-1, 0] = hw[0]
        if pj < PY - 1:
            B[1:-1, LY - 1] = he[0]
        A[1, 1:-1] = 0.2 * (B[1, 1:-1] + B[1, :-2] + B[1, 2:] + B[2, 1:-1] + hn[0])
        A[LX - 2, 1:-1] = 0.2 * (B[LX - 2, 1:-1] + B[LX - 2, :-2] + B[LX - 2, 2:] + hs[0] + B[LX - 3, 1:-1])
        _columns(B, A)
        _inner(B, A)


def _loop(program, **options) -> list[str]:
    """The steps of the time loop (what comes before it left out)."""
    top = dace_cpufree.kernel_source(program, **options).kernel_ir.children
    k = next(k for k, node in enumerate(top) if isinstance(node, ir.Loop))
    return steps(ir.Seq(top[k:]), copies="copy", barriers=True)


def test_edge_planes_read_through_views_fuse_into_one_map():
    """The nested call's two plane statements (``Y[1]`` and ``Y[LX - 2]``, apart once the call's sizes are
    numbers) are left unordered when its states are merged, so they fuse into one map after the inlining; the
    analysis keeps B's regions next to the view's whole buffer: per half-step a grid sync, the edge map, a grid
    sync, the puts, the interior, the waits, and nothing unpacked."""
    half = ["GRID", "map", "GRID", "put", "put", "map", "wait", "wait"]
    assert _loop(jacobi_3d_halo_reads, symbols=dict(LX=34, N=34), shmem_transport="p2p") == half + half


def test_loop_syncs_are_decided_by_the_last_round():
    """The first round of the loop's fixed point sees only what comes before the loop (the buffer copies and the
    PE barrier), which the row map's read of ``hn`` conflicts with; the back edge then puts a sync before the
    column map, which already orders the rows. Decided afresh each round: no sync between the two edge maps."""
    found = _loop(jacobi_2d_row_halo_reads, symbols=dict(LX=66, LY=34, PY=2), shmem_transport="p2p")
    first = ["GRID", "map", "map", "GRID", "put", "put", "put", "put", "map", "wait", "wait", "wait", "wait", "BAR"]
    assert found == first + ["unpack", "unpack", "GRID", "map", "map", "map"]


def test_independent_calls_in_a_nested_chain_fuse():
    """syr2k's two products on slices: their initialisations, in states of one nested SDFG that share no data,
    fuse into one map (one tile barrier fewer per row)."""
    labels = [i.label for i in items(dace_cpufree.kernel_source(syr2k.program))]
    assert "rows gemv_init_map + _GEMV__map + _GEMV__map + _Add__map" in labels
