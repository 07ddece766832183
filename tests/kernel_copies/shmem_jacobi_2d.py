"""Jacobi 2-D distributed over a PX x PY process grid; PE ``me`` sits at row ``me // PY``, column ``me % PY``.

The global NX x N domain (NX = N: NPBench's square ``jacobi_2d``; otherwise for weak scaling on a process grid that
is not square, where every PE keeps the square tile of one GPU) keeps its boundary fixed. Each PE owns an
``LX x LY`` tile: ``(NX - 2) / PX`` by ``(N - 2) / PY`` interior cells plus a one-cell ring that holds
the neighbours' edge cells (or the global boundary). North/south halos are contiguous rows, west/east
halos strided columns. Flags: ``flags[k]`` (B) and ``flags[4 + k]`` (A) for data arriving from the
north, south, west, east (k = 0..3); the signal is the step number.
"""

import dace
import numpy as np

from dace_cpufree import nvshmem

LX, LY, PY = (dace.symbol(s) for s in ("LX", "LY", "PY"))


@dace.program
def plain(A: dace.float64[LX, LY], B: dace.float64[LX, LY], flags: dace.uint64[8], TSTEPS: dace.int64):
    me = nvshmem.my_pe()
    npes = nvshmem.n_pes()
    pi = me // PY
    pj = me % PY
    for t in range(1, TSTEPS + 1):
        B[1:-1, 1:-1] = 0.2 * (A[1:-1, 1:-1] + A[1:-1, :-2] + A[1:-1, 2:] + A[2:, 1:-1] + A[:-2, 1:-1])
        if pi > 0:
            nvshmem.Putmem(B[LX - 1, 1:-1], B[1, 1:-1], me - PY, flags[1], t)
        if pi < npes // PY - 1:
            nvshmem.Putmem(B[0, 1:-1], B[LX - 2, 1:-1], me + PY, flags[0], t)
        if pj > 0:
            nvshmem.Putmem(B[1:-1, LY - 1], B[1:-1, 1], me - 1, flags[3], t)
        if pj < PY - 1:
            nvshmem.Putmem(B[1:-1, 0], B[1:-1, LY - 2], me + 1, flags[2], t)
        if pi > 0:
            nvshmem.SignalWait(flags[0], t)
        if pi < npes // PY - 1:
            nvshmem.SignalWait(flags[1], t)
        if pj > 0:
            nvshmem.SignalWait(flags[2], t)
        if pj < PY - 1:
            nvshmem.SignalWait(flags[3], t)
        A[1:-1, 1:-1] = 0.2 * (B[1:-1, 1:-1] + B[1:-1, :-2] + B[1:-1, 2:] + B[2:, 1:-1] + B[:-2, 1:-1])
        if pi > 0:
            nvshmem.Putmem(A[LX - 1, 1:-1], A[1, 1:-1], me - PY, flags[5], t)
        if pi < npes // PY - 1:
            nvshmem.Putmem(A[0, 1:-1], A[LX - 2, 1:-1], me + PY, flags[4], t)
        if pj > 0:
            nvshmem.Putmem(A[1:-1, LY - 1], A[1:-1, 1], me - 1, flags[7], t)
        if pj < PY - 1:
            nvshmem.Putmem(A[1:-1, 0], A[1:-1, LY - 2], me + 1, flags[6], t)
        if pi > 0:
            nvshmem.SignalWait(flags[4], t)
        if pi < npes // PY - 1:
            nvshmem.SignalWait(flags[5], t)
        if pj > 0:
            nvshmem.SignalWait(flags[6], t)
        if pj < PY - 1:
            nvshmem.SignalWait(flags[7], t)


@dace.program
def _edges(X: dace.float64[LX, LY], Y: dace.float64[LX, LY]):
    """Y's interior edge lines (rows 1 and LX-2, columns 1 and LY-2): the cells that read X's halo ring."""
    Y[1, 1:-1] = 0.2 * (X[1, 1:-1] + X[1, :-2] + X[1, 2:] + X[2, 1:-1] + X[0, 1:-1])
    Y[LX - 2, 1:-1] = 0.2 * (X[LX - 2, 1:-1] + X[LX - 2, :-2] + X[LX - 2, 2:] + X[LX - 1, 1:-1] + X[LX - 3, 1:-1])
    Y[2:-2, 1] = 0.2 * (X[2:-2, 1] + X[2:-2, 0] + X[2:-2, 2] + X[3:-1, 1] + X[1:-3, 1])
    Y[2:-2, LY - 2] = 0.2 * (X[2:-2, LY - 2] + X[2:-2, LY - 3] + X[2:-2, LY - 1] + X[3:-1, LY - 2] + X[1:-3, LY - 2])


@dace.program
def _inner(X: dace.float64[LX, LY], Y: dace.float64[LX, LY]):
    """Y's cells that need no halo: computed while the edge lines travel."""
    Y[2:-2, 2:-2] = 0.2 * (X[2:-2, 2:-2] + X[2:-2, 1:-3] + X[2:-2, 3:-1] + X[3:-1, 2:-2] + X[1:-3, 2:-2])


@dace.program
def overlapped(A: dace.float64[LX, LY], B: dace.float64[LX, LY], flags: dace.uint64[8], TSTEPS: dace.int64):
    """Each half-step: edge lines first, put them into the neighbours' halo buffers, inner cells while
    they travel, wait at the end, unpack. The A -> B half-step uses buffers/flags of parity 0, B -> A
    those of parity 1: a neighbour may send the next half-step's edges before this PE unpacked."""
    me = nvshmem.my_pe()
    npes = nvshmem.n_pes()
    pi = me // PY
    pj = me % PY
    hn = np.zeros((2, LY - 2), dtype=np.float64)
    hs = np.zeros((2, LY - 2), dtype=np.float64)
    hw = np.zeros((2, LX - 2), dtype=np.float64)
    he = np.zeros((2, LX - 2), dtype=np.float64)
    for t in range(1, TSTEPS + 1):
        _edges(A, B)
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
        if pi > 0:
            B[0, 1:-1] = hn[0]
        if pi < npes // PY - 1:
            B[LX - 1, 1:-1] = hs[0]
        if pj > 0:
            B[1:-1, 0] = hw[0]
        if pj < PY - 1:
            B[1:-1, LY - 1] = he[0]
        _edges(B, A)
        if pi > 0:
            nvshmem.Putmem(hs[1], A[1, 1:-1], me - PY, flags[5], t)
        if pi < npes // PY - 1:
            nvshmem.Putmem(hn[1], A[LX - 2, 1:-1], me + PY, flags[4], t)
        if pj > 0:
            nvshmem.Putmem(he[1], A[1:-1, 1], me - 1, flags[7], t)
        if pj < PY - 1:
            nvshmem.Putmem(hw[1], A[1:-1, LY - 2], me + 1, flags[6], t)
        _inner(B, A)
        if pi > 0:
            nvshmem.SignalWait(flags[4], t)
        if pi < npes // PY - 1:
            nvshmem.SignalWait(flags[5], t)
        if pj > 0:
            nvshmem.SignalWait(flags[6], t)
        if pj < PY - 1:
            nvshmem.SignalWait(flags[7], t)
        if pi > 0:
            A[0, 1:-1] = hn[1]
        if pi < npes // PY - 1:
            A[LX - 1, 1:-1] = hs[1]
        if pj > 0:
            A[1:-1, 0] = hw[1]
        if pj < PY - 1:
            A[1:-1, LY - 1] = he[1]
