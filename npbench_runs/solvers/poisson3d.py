"""Conjugate gradients on the 3-D Poisson problem, matrix-free, distributed in slabs of planes over the PEs.

The global problem: ``A u = b`` on an ``N x N x N`` grid of unknowns with zero Dirichlet boundary, ``A`` the
7-point Laplacian (``6 u - `` its six neighbours), stored padded ``(N + 2)^3`` with a zero shell. PE ``k`` of ``P``
owns planes ``k N / P + 1 ... (k + 1) N / P`` as an ``LX x NY x NZ`` slab (``LX = N / P + 2``): its planes plus
one halo plane on each side, which hold the neighbours' edge planes (or the zero boundary). The recurrences,
``hist`` and the race-freedom argument of the halo are those of :func:`.poisson.cg_poisson_2d`, with planes for
rows: the halo planes of ``p`` are put into the neighbours' halos (``Putmem`` + ``SignalWait``, signal: the
iteration), and the two dot products of an iteration are reduced with a blocking ``Allreduce`` each.
"""

# ruff: noqa: F821, F841  (DaCe explicit tasklets: connectors are declared with << and >>)

import dace
import numpy as np

from dace_cpufree import nvshmem

from .poisson import interior_dot, local_shape, place, tile  # noqa: F401 (place: the slabs' inverse of tile)
from .recurrence import conjugate_gradient

LX, NY, NZ, K = (dace.symbol(s) for s in ("LX", "NY", "NZ", "K"))
Slab = dace.float64[LX, NY, NZ]


@dace.program
def cg_poisson_3d(b: Slab, x: Slab, hist: dace.float64[K], flags: dace.uint64[2]):
    me = nvshmem.my_pe()
    npes = nvshmem.n_pes()
    r = np.zeros((LX, NY, NZ), dtype=np.float64)
    p = np.zeros((LX, NY, NZ), dtype=np.float64)
    q = np.zeros((LX, NY, NZ), dtype=np.float64)
    rr = np.zeros((1,), dtype=np.float64)  # (r, r)
    pq = np.zeros((1,), dtype=np.float64)  # (p, A p), accumulated by the product's map
    rn = np.zeros((1,), dtype=np.float64)  # the new (r, r), accumulated by the update's map
    coef = np.zeros((2,), dtype=np.float64)  # alpha, beta
    x[:] = 0.0
    r[1:-1, 1:-1, 1:-1] = b[1:-1, 1:-1, 1:-1]
    p[1:-1, 1:-1, 1:-1] = b[1:-1, 1:-1, 1:-1]
    rr[0] = np.sum(b[1:-1, 1:-1, 1:-1] * b[1:-1, 1:-1, 1:-1])
    nvshmem.Allreduce(rr, "sum")
    for t in range(1, K + 1):
        if me > 0:
            nvshmem.Putmem(p[LX - 1, :, :], p[1, :, :], me - 1, flags[1], t)
        if me < npes - 1:
            nvshmem.Putmem(p[0, :, :], p[LX - 2, :, :], me + 1, flags[0], t)
        if me > 0:
            nvshmem.SignalWait(flags[0], t)
        if me < npes - 1:
            nvshmem.SignalWait(flags[1], t)
        for i, j, k in dace.map[1 : LX - 1, 1 : NY - 1, 1 : NZ - 1]:
            with dace.tasklet:
                c << p[i, j, k]
                xm << p[i - 1, j, k]
                xp << p[i + 1, j, k]
                ym << p[i, j - 1, k]
                yp << p[i, j + 1, k]
                zm << p[i, j, k - 1]
                zp << p[i, j, k + 1]
                qo >> q[i, j, k]
                acc >> pq(1, lambda u, v: u + v)[0]
                av = 6.0 * c - xm - xp - ym - yp - zm - zp
                qo = av
                acc = c * av
        nvshmem.Allreduce(pq, "sum")
        with dace.tasklet:
            a << rr[0]
            d << pq[0]
            al >> coef[0]
            rz >> rn[0]
            al = a / d
            rz = 0.0
        for i, j, k in dace.map[1 : LX - 1, 1 : NY - 1, 1 : NZ - 1]:
            with dace.tasklet:
                al << coef[0]
                xc << x[i, j, k]
                rc << r[i, j, k]
                pc << p[i, j, k]
                qc << q[i, j, k]
                xo >> x[i, j, k]
                ro >> r[i, j, k]
                acc >> rn(1, lambda u, v: u + v)[0]
                xo = xc + al * pc
                rv = rc - al * qc
                ro = rv
                acc = rv * rv
        nvshmem.Allreduce(rn, "sum")
        with dace.tasklet:
            a << rn[0]
            o << rr[0]
            h >> hist[t - 1]
            be >> coef[1]
            ro >> rr[0]
            pz >> pq[0]
            h = sqrt(a)
            be = a / o
            ro = a
            pz = 0.0
        for i, j, k in dace.map[1 : LX - 1, 1 : NY - 1, 1 : NZ - 1]:
            with dace.tasklet:
                be << coef[1]
                rc << r[i, j, k]
                pc << p[i, j, k]
                po >> p[i, j, k]
                po = rc + be * pc


def _laplacian(u: np.ndarray) -> np.ndarray:
    out = np.zeros_like(u)
    c = u[1:-1, 1:-1, 1:-1]
    out[1:-1, 1:-1, 1:-1] = (
        6.0 * c
        - u[:-2, 1:-1, 1:-1]
        - u[2:, 1:-1, 1:-1]
        - u[1:-1, :-2, 1:-1]
        - u[1:-1, 2:, 1:-1]
        - u[1:-1, 1:-1, :-2]
        - u[1:-1, 1:-1, 2:]
    )
    return out


def reference_cg(b: np.ndarray, iters: int) -> tuple[np.ndarray, np.ndarray]:
    """NumPy on the global padded grid, the same recurrences as :func:`cg_poisson_3d`: ``(x, hist)``."""
    return conjugate_gradient(_laplacian, interior_dot, b, iters)


def initialize(n: int) -> np.ndarray:
    """The right-hand side on the padded ``(n + 2)^3`` grid (zero shell): smooth plus a pattern."""
    i, j, k = np.meshgrid(*(np.arange(n + 2, dtype=np.float64),) * 3, indexing="ij")
    b = np.sin(np.pi * i / (n + 1)) * np.sin(2.0 * np.pi * j / (n + 1)) * np.cos(np.pi * k / (n + 1))
    b += ((i + 2 * j + 3 * k) % 5) / 5.0
    b[0], b[-1], b[:, 0], b[:, -1], b[:, :, 0], b[:, :, -1] = 0.0, 0.0, 0.0, 0.0, 0.0, 0.0
    return b


def arguments(n: int, iters: int, pe: int = 0, npes: int = 1) -> tuple:
    """``(b, x, hist, flags)`` of PE ``pe``."""
    local_shape(n, npes)  # N divisible by the PEs, at least 2 planes each
    b = tile(initialize(n), pe, npes)
    return b, np.zeros_like(b), np.zeros(iters), np.zeros(2, dtype=np.uint64)
