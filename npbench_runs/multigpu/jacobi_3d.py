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
NX = dace.symbol("NX")  # the global split axis of `single`
FLAGS = 8
EXCHANGES_PER_STEP = 2  # halo exchanges per time step (one per half-step)


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


#: the arrays ``single`` is distributed by (``compile(single, distribute=DISTRIBUTE)``, the form "distributed")
DISTRIBUTE = {"A": 0, "B": 0}


@dace.program
def single(A: dace.float64[NX, N, N], B: dace.float64[NX, N, N], TSTEPS: dace.int64):
    """The single-GPU program on the global domain, which the automatic decomposition splits along its first axis:
    the form "distributed"."""
    for _ in range(TSTEPS):
        B[1:-1, 1:-1, 1:-1] = (1.0 / 7.0) * (
            A[1:-1, 1:-1, 1:-1]
            + A[:-2, 1:-1, 1:-1]
            + A[2:, 1:-1, 1:-1]
            + A[1:-1, :-2, 1:-1]
            + A[1:-1, 2:, 1:-1]
            + A[1:-1, 1:-1, :-2]
            + A[1:-1, 1:-1, 2:]
        )
        A[1:-1, 1:-1, 1:-1] = (1.0 / 7.0) * (
            B[1:-1, 1:-1, 1:-1]
            + B[:-2, 1:-1, 1:-1]
            + B[2:, 1:-1, 1:-1]
            + B[1:-1, :-2, 1:-1]
            + B[1:-1, 2:, 1:-1]
            + B[1:-1, 1:-1, :-2]
            + B[1:-1, 1:-1, 2:]
        )


def reference(A: np.ndarray, B: np.ndarray, steps: int) -> None:
    """NumPy on the global domain."""
    for _ in range(steps):
        for X, Y in ((A, B), (B, A)):
            Y[1:-1, 1:-1, 1:-1] = (1.0 / 7.0) * (
                X[1:-1, 1:-1, 1:-1]
                + X[:-2, 1:-1, 1:-1]
                + X[2:, 1:-1, 1:-1]
                + X[1:-1, :-2, 1:-1]
                + X[1:-1, 2:, 1:-1]
                + X[1:-1, 1:-1, :-2]
                + X[1:-1, 1:-1, 2:]
            )


def initialize(n: int, nx: int | None = None):
    """The global ``nx x n x n`` domain (``nx`` defaults to ``n``; weak scaling grows the split axis)."""
    axes = (np.arange(nx or n, dtype=np.float64),) + (np.arange(n, dtype=np.float64),) * 2
    i, j, k = np.meshgrid(*axes, indexing="ij")
    return (i + j + (n - k)) * 10 / n, (i + j + (n - k)) * 10 / n + 1.0


def tile(glob: np.ndarray, pe: int, npes: int) -> np.ndarray:
    nx = (glob.shape[0] - 2) // npes
    return np.ascontiguousarray(glob[pe * nx : pe * nx + nx + 2])


def place(glob: np.ndarray, local: np.ndarray, pe: int, npes: int) -> None:
    nx = local.shape[0] - 2
    glob[1 + pe * nx : 1 + (pe + 1) * nx, 1:-1, 1:-1] = local[1:-1, 1:-1, 1:-1]


def check_size(n: int, npes: int, nx: int | None = None) -> None:
    nx = nx or n
    if (nx - 2) % npes or (nx - 2) // npes < 4:
        raise ValueError(f"NX - 2 = {nx - 2} must be divisible by {npes} PEs with >= 4 planes each.")


def local_shape(n: int, npes: int, nx: int | None = None) -> tuple[int, int, int]:
    """Shape of each PE's slab (interior planes plus the two halo planes)."""
    return ((nx or n) - 2) // npes + 2, n, n


def symbols(npes: int, shape: tuple | None = None) -> dict:
    """Symbols of the programs; with the slab ``shape``, its sizes (compiled in)."""
    return {} if shape is None else {"LX": int(shape[0]), "N": int(shape[1])}
