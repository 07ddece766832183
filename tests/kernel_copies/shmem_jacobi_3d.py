"""Jacobi 3-D (7-point) split along its first axis: 2 neighbours, halos are contiguous planes.

The global N x N x N domain keeps its boundary fixed. PE ``me`` owns ``(N - 2) / n_pes`` interior
planes plus one halo plane on each side (``LX`` planes in all); the planes are contiguous in memory,
so each halo is a single ``putmem_signal``. Flags: ``flags[0]``/``flags[1]`` (B) and ``flags[2]``/
``flags[3]`` (A) for data from the lower/upper neighbour; the signal is the step number.
"""

import dace
import numpy as np

from dace_cpufree import nvshmem

LX, N = dace.symbol("LX"), dace.symbol("N")


@dace.program
def plain(A: dace.float64[LX, N, N], B: dace.float64[LX, N, N], flags: dace.uint64[8], TSTEPS: dace.int64):
    me = nvshmem.my_pe()
    npes = nvshmem.n_pes()
    for t in range(1, TSTEPS + 1):
        B[1:-1, 1:-1, 1:-1] = (1.0 / 7.0) * (
            A[1:-1, 1:-1, 1:-1]
            + A[:-2, 1:-1, 1:-1]
            + A[2:, 1:-1, 1:-1]
            + A[1:-1, :-2, 1:-1]
            + A[1:-1, 2:, 1:-1]
            + A[1:-1, 1:-1, :-2]
            + A[1:-1, 1:-1, 2:]
        )
        if me > 0:
            nvshmem.Putmem(B[LX - 1, 1:-1, 1:-1], B[1, 1:-1, 1:-1], me - 1, flags[1], t)
        if me < npes - 1:
            nvshmem.Putmem(B[0, 1:-1, 1:-1], B[LX - 2, 1:-1, 1:-1], me + 1, flags[0], t)
        if me > 0:
            nvshmem.SignalWait(flags[0], t)
        if me < npes - 1:
            nvshmem.SignalWait(flags[1], t)
        A[1:-1, 1:-1, 1:-1] = (1.0 / 7.0) * (
            B[1:-1, 1:-1, 1:-1]
            + B[:-2, 1:-1, 1:-1]
            + B[2:, 1:-1, 1:-1]
            + B[1:-1, :-2, 1:-1]
            + B[1:-1, 2:, 1:-1]
            + B[1:-1, 1:-1, :-2]
            + B[1:-1, 1:-1, 2:]
        )
        if me > 0:
            nvshmem.Putmem(A[LX - 1, 1:-1, 1:-1], A[1, 1:-1, 1:-1], me - 1, flags[3], t)
        if me < npes - 1:
            nvshmem.Putmem(A[0, 1:-1, 1:-1], A[LX - 2, 1:-1, 1:-1], me + 1, flags[2], t)
        if me > 0:
            nvshmem.SignalWait(flags[2], t)
        if me < npes - 1:
            nvshmem.SignalWait(flags[3], t)


@dace.program
def _edge_planes(X: dace.float64[LX, N, N], Y: dace.float64[LX, N, N]):
    """Y's first and last interior planes: the cells that read X's halo planes."""
    Y[1, 1:-1, 1:-1] = (1.0 / 7.0) * (
        X[1, 1:-1, 1:-1] + X[0, 1:-1, 1:-1] + X[2, 1:-1, 1:-1] + X[1, :-2, 1:-1] + X[1, 2:, 1:-1]
        + X[1, 1:-1, :-2] + X[1, 1:-1, 2:]
    )  # fmt: skip
    Y[LX - 2, 1:-1, 1:-1] = (1.0 / 7.0) * (
        X[LX - 2, 1:-1, 1:-1] + X[LX - 3, 1:-1, 1:-1] + X[LX - 1, 1:-1, 1:-1] + X[LX - 2, :-2, 1:-1]
        + X[LX - 2, 2:, 1:-1] + X[LX - 2, 1:-1, :-2] + X[LX - 2, 1:-1, 2:]
    )  # fmt: skip


@dace.program
def _inner_planes(X: dace.float64[LX, N, N], Y: dace.float64[LX, N, N]):
    """Y's planes that need no halo: computed while the edge planes travel."""
    Y[2:-2, 1:-1, 1:-1] = (1.0 / 7.0) * (
        X[2:-2, 1:-1, 1:-1] + X[1:-3, 1:-1, 1:-1] + X[3:-1, 1:-1, 1:-1] + X[2:-2, :-2, 1:-1]
        + X[2:-2, 2:, 1:-1] + X[2:-2, 1:-1, :-2] + X[2:-2, 1:-1, 2:]
    )  # fmt: skip


@dace.program
def overlapped(A: dace.float64[LX, N, N], B: dace.float64[LX, N, N], flags: dace.uint64[8], TSTEPS: dace.int64):
    """Edge planes first, put into the neighbours' halo buffers, inner planes while they travel, wait
    at the end of the half-step, unpack. Buffers and flags by parity (A -> B: 0, B -> A: 1)."""
    me = nvshmem.my_pe()
    npes = nvshmem.n_pes()
    lo_buf = np.zeros((2, N - 2, N - 2), dtype=np.float64)
    hi_buf = np.zeros((2, N - 2, N - 2), dtype=np.float64)
    for t in range(1, TSTEPS + 1):
        _edge_planes(A, B)
        if me > 0:
            nvshmem.Putmem(hi_buf[0], B[1, 1:-1, 1:-1], me - 1, flags[1], t)
        if me < npes - 1:
            nvshmem.Putmem(lo_buf[0], B[LX - 2, 1:-1, 1:-1], me + 1, flags[0], t)
        _inner_planes(A, B)
        if me > 0:
            nvshmem.SignalWait(flags[0], t)
        if me < npes - 1:
            nvshmem.SignalWait(flags[1], t)
        if me > 0:
            B[0, 1:-1, 1:-1] = lo_buf[0]
        if me < npes - 1:
            B[LX - 1, 1:-1, 1:-1] = hi_buf[0]
        _edge_planes(B, A)
        if me > 0:
            nvshmem.Putmem(hi_buf[1], A[1, 1:-1, 1:-1], me - 1, flags[3], t)
        if me < npes - 1:
            nvshmem.Putmem(lo_buf[1], A[LX - 2, 1:-1, 1:-1], me + 1, flags[2], t)
        _inner_planes(B, A)
        if me > 0:
            nvshmem.SignalWait(flags[2], t)
        if me < npes - 1:
            nvshmem.SignalWait(flags[3], t)
        if me > 0:
            A[0, 1:-1, 1:-1] = lo_buf[1]
        if me < npes - 1:
            A[LX - 1, 1:-1, 1:-1] = hi_buf[1]
