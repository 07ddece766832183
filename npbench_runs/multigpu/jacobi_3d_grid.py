"""Jacobi 3-D (7-point) on a PX x PY x PZ process grid: 6 neighbours, one halo face on each side of a block.

The global ``NX x NY x N`` domain (``NY`` defaults to ``N``) keeps its boundary fixed. The process grid is chosen
on the host from the PE count (:func:`process_grid`: the most cubic factorisation, its largest factor on the leading
axis, so 2 PEs are 2x1x1, 4 are 2x2x1, 8 are 2x2x2) and reaches the program as two symbols, ``PY`` and ``PZ``; ``PX`` is
``n_pes() // (PY * PZ)``. PE ``me`` sits at ``(me // (PY PZ), (me // PZ) % PY, me % PZ)`` (row-major, the
last axis fastest). It owns an ``LX x LY x LZ`` block: ``(NX - 2) / PX`` by ``(NY - 2) / PY`` by
``(N - 2) / PZ`` interior cells plus one halo layer on each of its 6 faces (the 7-point stencil reads no edge
or corner of the halo, so only the faces' interiors are exchanged).

Faces and memory: a face across the leading axis (``A[1, 1:-1, 1:-1]``) is a plane of dense rows; a face
across the middle axis (``A[1:-1, 1, 1:-1]``) is dense rows ``LY * LZ`` apart; a face across the last axis
(``A[1:-1, 1:-1, 1]``) has no two neighbouring elements adjacent in memory (element stride ``LZ``). ``Putmem``
takes all three as they are (:mod:`dace_cpufree.frontend.putmem`: direct stores deal any layout out over the
blocks of a lane; NVSHMEM's proxy transport puts dense rows with one warp put per row and strided rows with
``iput``; ROC_SHMEM with element puts), so the faces are put straight from the block without packing them
into contiguous buffers first: a packing map would add a pass over each face and a grid sync before the put,
which the put's own copy loop already does.

Flags: ``flags[f]`` (A -> B half-step) and ``flags[6 + f]`` (B -> A) for the face arriving from direction
``f``: 0/1 the lower/upper neighbour along the leading axis, 2/3 along the middle axis, 4/5 along the last
axis. The signal is the step number.

Forms: ``plain`` puts the faces straight into the neighbours' halo layers after the sweep (the compiler's
``SplitForEarlyPuts`` may split the sweep into edge cells, puts, interior); ``overlapped`` computes the block's
outer shell first, puts its faces into the neighbours' halo buffers (contiguous, by half-step parity), computes
the inner cells while they travel, waits, and unpacks the buffers into the halo layers.
"""

import dace
import numpy as np

from dace_cpufree import nvshmem

LX, LY, LZ, PY, PZ = (dace.symbol(s) for s in ("LX", "LY", "LZ", "PY", "PZ"))
NEIGHBOURS = 6
FLAGS = 12
EXCHANGES_PER_STEP = 2  # halo exchanges per time step (one per half-step)
C = 1.0 / 7.0


@dace.program
def plain(A: dace.float64[LX, LY, LZ], B: dace.float64[LX, LY, LZ], flags: dace.uint64[12], TSTEPS: dace.int64):
    me = nvshmem.my_pe()
    npes = nvshmem.n_pes()
    pi = me // (PY * PZ)
    pj = (me // PZ) % PY
    pk = me % PZ
    for t in range(1, TSTEPS + 1):
        B[1:-1, 1:-1, 1:-1] = C * (
            A[1:-1, 1:-1, 1:-1]
            + A[:-2, 1:-1, 1:-1]
            + A[2:, 1:-1, 1:-1]
            + A[1:-1, :-2, 1:-1]
            + A[1:-1, 2:, 1:-1]
            + A[1:-1, 1:-1, :-2]
            + A[1:-1, 1:-1, 2:]
        )
        # each face of the interior goes into the facing halo layer of the neighbour on that side
        if pi > 0:
            nvshmem.Putmem(B[LX - 1, 1:-1, 1:-1], B[1, 1:-1, 1:-1], me - PY * PZ, flags[1], t)
        if pi < npes // (PY * PZ) - 1:
            nvshmem.Putmem(B[0, 1:-1, 1:-1], B[LX - 2, 1:-1, 1:-1], me + PY * PZ, flags[0], t)
        if pj > 0:
            nvshmem.Putmem(B[1:-1, LY - 1, 1:-1], B[1:-1, 1, 1:-1], me - PZ, flags[3], t)
        if pj < PY - 1:
            nvshmem.Putmem(B[1:-1, 0, 1:-1], B[1:-1, LY - 2, 1:-1], me + PZ, flags[2], t)
        if pk > 0:
            nvshmem.Putmem(B[1:-1, 1:-1, LZ - 1], B[1:-1, 1:-1, 1], me - 1, flags[5], t)
        if pk < PZ - 1:
            nvshmem.Putmem(B[1:-1, 1:-1, 0], B[1:-1, 1:-1, LZ - 2], me + 1, flags[4], t)
        if pi > 0:
            nvshmem.SignalWait(flags[0], t)
        if pi < npes // (PY * PZ) - 1:
            nvshmem.SignalWait(flags[1], t)
        if pj > 0:
            nvshmem.SignalWait(flags[2], t)
        if pj < PY - 1:
            nvshmem.SignalWait(flags[3], t)
        if pk > 0:
            nvshmem.SignalWait(flags[4], t)
        if pk < PZ - 1:
            nvshmem.SignalWait(flags[5], t)
        A[1:-1, 1:-1, 1:-1] = C * (
            B[1:-1, 1:-1, 1:-1]
            + B[:-2, 1:-1, 1:-1]
            + B[2:, 1:-1, 1:-1]
            + B[1:-1, :-2, 1:-1]
            + B[1:-1, 2:, 1:-1]
            + B[1:-1, 1:-1, :-2]
            + B[1:-1, 1:-1, 2:]
        )
        if pi > 0:
            nvshmem.Putmem(A[LX - 1, 1:-1, 1:-1], A[1, 1:-1, 1:-1], me - PY * PZ, flags[7], t)
        if pi < npes // (PY * PZ) - 1:
            nvshmem.Putmem(A[0, 1:-1, 1:-1], A[LX - 2, 1:-1, 1:-1], me + PY * PZ, flags[6], t)
        if pj > 0:
            nvshmem.Putmem(A[1:-1, LY - 1, 1:-1], A[1:-1, 1, 1:-1], me - PZ, flags[9], t)
        if pj < PY - 1:
            nvshmem.Putmem(A[1:-1, 0, 1:-1], A[1:-1, LY - 2, 1:-1], me + PZ, flags[8], t)
        if pk > 0:
            nvshmem.Putmem(A[1:-1, 1:-1, LZ - 1], A[1:-1, 1:-1, 1], me - 1, flags[11], t)
        if pk < PZ - 1:
            nvshmem.Putmem(A[1:-1, 1:-1, 0], A[1:-1, 1:-1, LZ - 2], me + 1, flags[10], t)
        if pi > 0:
            nvshmem.SignalWait(flags[6], t)
        if pi < npes // (PY * PZ) - 1:
            nvshmem.SignalWait(flags[7], t)
        if pj > 0:
            nvshmem.SignalWait(flags[8], t)
        if pj < PY - 1:
            nvshmem.SignalWait(flags[9], t)
        if pk > 0:
            nvshmem.SignalWait(flags[10], t)
        if pk < PZ - 1:
            nvshmem.SignalWait(flags[11], t)


@dace.program
def _shell(X: dace.float64[LX, LY, LZ], Y: dace.float64[LX, LY, LZ]):
    """Y's outer shell of interior cells (the cells that read X's halo), as six disjoint pieces: the two
    leading-axis faces whole, the middle-axis faces without the rows those hold, the last-axis faces without
    either."""
    Y[1, 1:-1, 1:-1] = C * (
        X[1, 1:-1, 1:-1] + X[0, 1:-1, 1:-1] + X[2, 1:-1, 1:-1] + X[1, :-2, 1:-1] + X[1, 2:, 1:-1]
        + X[1, 1:-1, :-2] + X[1, 1:-1, 2:]
    )  # fmt: skip
    Y[LX - 2, 1:-1, 1:-1] = C * (
        X[LX - 2, 1:-1, 1:-1] + X[LX - 3, 1:-1, 1:-1] + X[LX - 1, 1:-1, 1:-1] + X[LX - 2, :-2, 1:-1]
        + X[LX - 2, 2:, 1:-1] + X[LX - 2, 1:-1, :-2] + X[LX - 2, 1:-1, 2:]
    )  # fmt: skip
    Y[2:-2, 1, 1:-1] = C * (
        X[2:-2, 1, 1:-1] + X[1:-3, 1, 1:-1] + X[3:-1, 1, 1:-1] + X[2:-2, 0, 1:-1] + X[2:-2, 2, 1:-1]
        + X[2:-2, 1, :-2] + X[2:-2, 1, 2:]
    )  # fmt: skip
    Y[2:-2, LY - 2, 1:-1] = C * (
        X[2:-2, LY - 2, 1:-1] + X[1:-3, LY - 2, 1:-1] + X[3:-1, LY - 2, 1:-1] + X[2:-2, LY - 3, 1:-1]
        + X[2:-2, LY - 1, 1:-1] + X[2:-2, LY - 2, :-2] + X[2:-2, LY - 2, 2:]
    )  # fmt: skip
    Y[2:-2, 2:-2, 1] = C * (
        X[2:-2, 2:-2, 1] + X[1:-3, 2:-2, 1] + X[3:-1, 2:-2, 1] + X[2:-2, 1:-3, 1] + X[2:-2, 3:-1, 1]
        + X[2:-2, 2:-2, 0] + X[2:-2, 2:-2, 2]
    )  # fmt: skip
    Y[2:-2, 2:-2, LZ - 2] = C * (
        X[2:-2, 2:-2, LZ - 2] + X[1:-3, 2:-2, LZ - 2] + X[3:-1, 2:-2, LZ - 2] + X[2:-2, 1:-3, LZ - 2]
        + X[2:-2, 3:-1, LZ - 2] + X[2:-2, 2:-2, LZ - 3] + X[2:-2, 2:-2, LZ - 1]
    )  # fmt: skip


@dace.program
def _core(X: dace.float64[LX, LY, LZ], Y: dace.float64[LX, LY, LZ]):
    """Y's cells that read no halo: computed while the faces travel."""
    Y[2:-2, 2:-2, 2:-2] = C * (
        X[2:-2, 2:-2, 2:-2] + X[1:-3, 2:-2, 2:-2] + X[3:-1, 2:-2, 2:-2] + X[2:-2, 1:-3, 2:-2]
        + X[2:-2, 3:-1, 2:-2] + X[2:-2, 2:-2, 1:-3] + X[2:-2, 2:-2, 3:-1]
    )  # fmt: skip


@dace.program
def overlapped(A: dace.float64[LX, LY, LZ], B: dace.float64[LX, LY, LZ], flags: dace.uint64[12], TSTEPS: dace.int64):
    """Shell first, its faces put into the neighbours' halo buffers, core while they travel, waits at the end
    of the half-step, then the buffers unpacked into the halo layers. ``hx_lo[p]`` holds the face from the
    lower neighbour along the leading axis in half-step parity ``p`` (A -> B: 0, B -> A: 1; a neighbour may
    send the next half-step's faces before this PE has unpacked), and so on for ``hx_hi``, ``hy_*``, ``hz_*``."""
    me = nvshmem.my_pe()
    npes = nvshmem.n_pes()
    pi = me // (PY * PZ)
    pj = (me // PZ) % PY
    pk = me % PZ
    hx_lo = np.zeros((2, LY - 2, LZ - 2), dtype=np.float64)
    hx_hi = np.zeros((2, LY - 2, LZ - 2), dtype=np.float64)
    hy_lo = np.zeros((2, LX - 2, LZ - 2), dtype=np.float64)
    hy_hi = np.zeros((2, LX - 2, LZ - 2), dtype=np.float64)
    hz_lo = np.zeros((2, LX - 2, LY - 2), dtype=np.float64)
    hz_hi = np.zeros((2, LX - 2, LY - 2), dtype=np.float64)
    for t in range(1, TSTEPS + 1):
        _shell(A, B)
        if pi > 0:
            nvshmem.Putmem(hx_hi[0], B[1, 1:-1, 1:-1], me - PY * PZ, flags[1], t)
        if pi < npes // (PY * PZ) - 1:
            nvshmem.Putmem(hx_lo[0], B[LX - 2, 1:-1, 1:-1], me + PY * PZ, flags[0], t)
        if pj > 0:
            nvshmem.Putmem(hy_hi[0], B[1:-1, 1, 1:-1], me - PZ, flags[3], t)
        if pj < PY - 1:
            nvshmem.Putmem(hy_lo[0], B[1:-1, LY - 2, 1:-1], me + PZ, flags[2], t)
        if pk > 0:
            nvshmem.Putmem(hz_hi[0], B[1:-1, 1:-1, 1], me - 1, flags[5], t)
        if pk < PZ - 1:
            nvshmem.Putmem(hz_lo[0], B[1:-1, 1:-1, LZ - 2], me + 1, flags[4], t)
        _core(A, B)
        if pi > 0:
            nvshmem.SignalWait(flags[0], t)
        if pi < npes // (PY * PZ) - 1:
            nvshmem.SignalWait(flags[1], t)
        if pj > 0:
            nvshmem.SignalWait(flags[2], t)
        if pj < PY - 1:
            nvshmem.SignalWait(flags[3], t)
        if pk > 0:
            nvshmem.SignalWait(flags[4], t)
        if pk < PZ - 1:
            nvshmem.SignalWait(flags[5], t)
        if pi > 0:
            B[0, 1:-1, 1:-1] = hx_lo[0]
        if pi < npes // (PY * PZ) - 1:
            B[LX - 1, 1:-1, 1:-1] = hx_hi[0]
        if pj > 0:
            B[1:-1, 0, 1:-1] = hy_lo[0]
        if pj < PY - 1:
            B[1:-1, LY - 1, 1:-1] = hy_hi[0]
        if pk > 0:
            B[1:-1, 1:-1, 0] = hz_lo[0]
        if pk < PZ - 1:
            B[1:-1, 1:-1, LZ - 1] = hz_hi[0]
        _shell(B, A)
        if pi > 0:
            nvshmem.Putmem(hx_hi[1], A[1, 1:-1, 1:-1], me - PY * PZ, flags[7], t)
        if pi < npes // (PY * PZ) - 1:
            nvshmem.Putmem(hx_lo[1], A[LX - 2, 1:-1, 1:-1], me + PY * PZ, flags[6], t)
        if pj > 0:
            nvshmem.Putmem(hy_hi[1], A[1:-1, 1, 1:-1], me - PZ, flags[9], t)
        if pj < PY - 1:
            nvshmem.Putmem(hy_lo[1], A[1:-1, LY - 2, 1:-1], me + PZ, flags[8], t)
        if pk > 0:
            nvshmem.Putmem(hz_hi[1], A[1:-1, 1:-1, 1], me - 1, flags[11], t)
        if pk < PZ - 1:
            nvshmem.Putmem(hz_lo[1], A[1:-1, 1:-1, LZ - 2], me + 1, flags[10], t)
        _core(B, A)
        if pi > 0:
            nvshmem.SignalWait(flags[6], t)
        if pi < npes // (PY * PZ) - 1:
            nvshmem.SignalWait(flags[7], t)
        if pj > 0:
            nvshmem.SignalWait(flags[8], t)
        if pj < PY - 1:
            nvshmem.SignalWait(flags[9], t)
        if pk > 0:
            nvshmem.SignalWait(flags[10], t)
        if pk < PZ - 1:
            nvshmem.SignalWait(flags[11], t)
        if pi > 0:
            A[0, 1:-1, 1:-1] = hx_lo[1]
        if pi < npes // (PY * PZ) - 1:
            A[LX - 1, 1:-1, 1:-1] = hx_hi[1]
        if pj > 0:
            A[1:-1, 0, 1:-1] = hy_lo[1]
        if pj < PY - 1:
            A[1:-1, LY - 1, 1:-1] = hy_hi[1]
        if pk > 0:
            A[1:-1, 1:-1, 0] = hz_lo[1]
        if pk < PZ - 1:
            A[1:-1, 1:-1, LZ - 1] = hz_hi[1]


def reference(A: np.ndarray, B: np.ndarray, steps: int) -> None:
    """NumPy on the global domain: each step B <- J(A), then A <- J(B), J the 7-point average of the interior."""
    inner = (slice(1, -1),) * 3
    for _ in range(steps):
        for src, dst in ((A, B), (B, A)):
            acc = src[inner].copy()
            for axis in range(3):
                for shift in (slice(None, -2), slice(2, None)):
                    index = list(inner)
                    index[axis] = shift
                    acc += src[tuple(index)]
            dst[inner] = C * acc


def initialize(n: int, nx: int | None = None, ny: int | None = None):
    """The global ``nx x ny x n`` domain (``nx`` and ``ny`` default to ``n``). The values differ along every axis
    and on every face of the boundary, so a face put into the wrong halo, or transposed, changes the result."""
    shape = (nx or n, ny or n, n)
    i, j, k = np.meshgrid(*(np.arange(s, dtype=np.float64) for s in shape), indexing="ij")
    A = (i + 2.0 * j + 3.0 * k) / (6.0 * n) + np.sin(0.3 * i + 0.7 * j * k / n)
    B = (3.0 * i + j + 2.0 * k) / (6.0 * n) + np.cos(0.5 * k - 0.2 * i * j / n)
    return A, B


def process_grid(npes: int) -> tuple[int, int, int]:
    """``(PX, PY, PZ)`` with ``PX * PY * PZ == npes``: the most cubic factorisation (the smallest largest
    factor, then the smallest middle one), ordered ``PX >= PY >= PZ`` so that the leading axis, whose faces are
    contiguous planes, is split most and the last axis, whose faces are strided elements, least."""
    best = None
    for px in range(1, npes + 1):
        if npes % px:
            continue
        for py in range(1, px + 1):
            if (npes // px) % py:
                continue
            pz = npes // (px * py)
            if pz <= py:
                key = (px, py)
                if best is None or key < best[0]:
                    best = (key, (px, py, pz))
    return best[1]


def coords(pe: int, npes: int) -> tuple[int, int, int]:
    """PE ``pe``'s place in the process grid (row-major, the last axis fastest; as in the programs)."""
    _, py, pz = process_grid(npes)
    return pe // (py * pz), (pe // pz) % py, pe % pz


def _extents(glob_shape, npes: int) -> tuple[int, int, int]:
    """Interior cells per block along each axis."""
    return tuple((s - 2) // p for s, p in zip(glob_shape, process_grid(npes)))


def tile(glob: np.ndarray, pe: int, npes: int) -> np.ndarray:
    """PE ``pe``'s block of a global array, with its halo layers (filled with its neighbours' cells or the
    global boundary): a copy, also where it is the whole array (one PE)."""
    ext = _extents(glob.shape, npes)
    index = tuple(slice(c * e, c * e + e + 2) for c, e in zip(coords(pe, npes), ext))
    return np.array(glob[index], order="C", copy=True)


def place(glob: np.ndarray, local: np.ndarray, pe: int, npes: int) -> None:
    """Writes the interior of PE ``pe``'s block back into the global array."""
    ext = tuple(s - 2 for s in local.shape)
    index = tuple(slice(1 + c * e, 1 + (c + 1) * e) for c, e in zip(coords(pe, npes), ext))
    glob[index] = local[1:-1, 1:-1, 1:-1]


def check_size(n: int, npes: int, nx: int | None = None, ny: int | None = None) -> None:
    grid = process_grid(npes)
    sides = (nx or n, ny or n, n)
    if any((s - 2) % p or (s - 2) // p < 4 for s, p in zip(sides, grid)):
        raise ValueError(
            f"the interior {'x'.join(str(s - 2) for s in sides)} must be divisible by the "
            f"{'x'.join(map(str, grid))} process grid, with >= 4 cells per block along every axis."
        )


def local_shape(n: int, npes: int, nx: int | None = None, ny: int | None = None) -> tuple[int, int, int]:
    """Shape of each PE's block (interior plus the halo layers)."""
    return tuple(e + 2 for e in _extents((nx or n, ny or n, n), npes))


def symbols(npes: int, shape: tuple | None = None) -> dict:
    """Symbols of the programs for ``npes`` PEs (the process grid's ``PY``, ``PZ``); with the block ``shape``,
    its sizes too (compiled in)."""
    _, py, pz = process_grid(npes)
    out = {"PY": py, "PZ": pz}
    if shape is not None:
        out.update(LX=int(shape[0]), LY=int(shape[1]), LZ=int(shape[2]))
    return out


def one_pe(program, shape: tuple) -> dace.SDFG:
    """The SDFG of ``program`` as one PE runs it (grid 1x1x1, block ``shape`` compiled in): ``my_pe() = 0``,
    ``n_pes() = 1``, every put and wait in a branch that no PE of a 1x1x1 grid takes, so gone. What
    ``dace_cpufree.compile(one_pe(...), backend="emulate")`` runs on the host."""
    from dace_cpufree.transformations import PrepareCommunication

    sdfg = program.to_sdfg(simplify=True)
    fixed = symbols(1, shape)
    sdfg.replace_dict(fixed)
    for name in fixed:
        if name in sdfg.symbols:
            sdfg.remove_symbol(name)
    PrepareCommunication("emulate").apply_pass(sdfg, {})
    return sdfg
