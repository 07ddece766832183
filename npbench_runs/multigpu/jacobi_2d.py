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
NX, N = dace.symbol("NX"), dace.symbol("N")  # the global domain of `single`
NEIGHBOURS = 4
FLAGS = 8
EXCHANGES_PER_STEP = 2  # halo exchanges per time step (one per half-step)


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


#: the arrays ``single`` is distributed by (``compile(single, distribute=DISTRIBUTE)``, the form "distributed")
DISTRIBUTE = {"A": 0, "B": 0}


@dace.program
def single(A: dace.float64[NX, N], B: dace.float64[NX, N], TSTEPS: dace.int64):
    """The single-GPU program on the global domain (NPBench's jacobi_2d), which the automatic decomposition splits
    along its rows: the form "distributed"."""
    for _ in range(TSTEPS):
        B[1:-1, 1:-1] = 0.2 * (A[1:-1, 1:-1] + A[1:-1, :-2] + A[1:-1, 2:] + A[2:, 1:-1] + A[:-2, 1:-1])
        A[1:-1, 1:-1] = 0.2 * (B[1:-1, 1:-1] + B[1:-1, :-2] + B[1:-1, 2:] + B[2:, 1:-1] + B[:-2, 1:-1])


def reference(A: np.ndarray, B: np.ndarray, steps: int) -> None:
    """NumPy on the global domain (NPBench's jacobi_2d)."""
    for _ in range(steps):
        B[1:-1, 1:-1] = 0.2 * (A[1:-1, 1:-1] + A[1:-1, :-2] + A[1:-1, 2:] + A[2:, 1:-1] + A[:-2, 1:-1])
        A[1:-1, 1:-1] = 0.2 * (B[1:-1, 1:-1] + B[1:-1, :-2] + B[1:-1, 2:] + B[2:, 1:-1] + B[:-2, 1:-1])


def initialize(n: int, nx: int | None = None):
    """NPBench's initial A and B on the global NX x N domain (``nx`` rows, default ``n``)."""
    nx = nx or n
    i, j = np.meshgrid(np.arange(nx, dtype=np.float64), np.arange(n, dtype=np.float64), indexing="ij")
    return (i * (j + 2) + 2) / n, (i * (j + 3) + 3) / n


def process_grid(npes: int) -> tuple[int, int]:
    """The most square PX x PY factorisation of ``npes`` (PX <= PY)."""
    px = int(np.sqrt(npes))
    while npes % px:
        px -= 1
    return px, npes // px


def tile(glob: np.ndarray, pe: int, npes: int) -> np.ndarray:
    """PE ``pe``'s tile of a global array, with its one-cell ring."""
    px, py = process_grid(npes)
    nx, ny = (glob.shape[0] - 2) // px, (glob.shape[1] - 2) // py
    i, j = pe // py, pe % py
    return np.ascontiguousarray(glob[i * nx : i * nx + nx + 2, j * ny : j * ny + ny + 2])


def place(glob: np.ndarray, local: np.ndarray, pe: int, npes: int) -> None:
    """Writes the interior of PE ``pe``'s tile back into the global array."""
    px, py = process_grid(npes)
    nx, ny = local.shape[0] - 2, local.shape[1] - 2
    i, j = pe // py, pe % py
    glob[1 + i * nx : 1 + (i + 1) * nx, 1 + j * ny : 1 + (j + 1) * ny] = local[1:-1, 1:-1]


def check_size(n: int, npes: int, nx: int | None = None) -> None:
    nx = nx or n
    px, py = process_grid(npes)
    if (nx - 2) % px or (n - 2) % py or min((nx - 2) // px, (n - 2) // py) < 4:
        raise ValueError(
            f"NX - 2 = {nx - 2} and N - 2 = {n - 2} must be divisible by the {px} x {py} process grid's {px} and "
            f"{py}, >= 4 cells a side."
        )


def local_shape(n: int, npes: int, nx: int | None = None) -> tuple[int, int]:
    """Shape of each PE's tile (interior plus ring) of the NX x N domain (``nx`` default ``n``)."""
    nx = nx or n
    px, py = process_grid(npes)
    return (nx - 2) // px + 2, (n - 2) // py + 2


def symbols(npes: int, shape: tuple | None = None) -> dict:
    """Symbols of the programs for ``npes`` PEs; with the tile ``shape``, its sizes too (compiled in)."""
    out = {"PY": process_grid(npes)[1]}
    if shape is not None:
        out.update(LX=int(shape[0]), LY=int(shape[1]))
    return out
