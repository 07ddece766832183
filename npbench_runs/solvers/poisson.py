"""Conjugate gradients on the 2-D Poisson problem, matrix-free, distributed by rows over the PEs.

The global problem: ``A u = b`` on an ``N x N`` grid of unknowns with zero Dirichlet boundary, ``A`` the 5-point
Laplacian (``4 u[i, j] - u[i - 1, j] - u[i + 1, j] - u[i, j - 1] - u[i, j + 1]``, symmetric positive definite).
The vectors are stored padded, ``(N + 2) x (N + 2)`` with a zero ring. PE ``k`` of ``P`` owns interior rows
``k N / P + 1 ... (k + 1) N / P`` as an ``LX x NY`` tile (``LX = N / P + 2``, ``NY = N + 2``): its rows plus one
halo row above and below, which hold the neighbours' edge rows (or the zero boundary). ``x`` starts at 0.

- :func:`cg_poisson_2d`: classic CG, halo rows of ``p`` put into the neighbours' rings (``Putmem`` + ``SignalWait``,
  signal: the iteration), two blocking ``Allreduce`` per iteration. ``hist[k]`` is ``||r_{k+1}||``.
- :func:`pipelined_cg_poisson_2d`: Ghysels and Vanroose's pipelined CG (unpreconditioned, their Alg. 3): the two
  dot products ``(r, r)`` and ``(w, r)`` in one non-blocking ``Allreduce``, overlapped with the halo exchange and
  the product ``q = A w``. ``hist[k]`` is ``||r_k||`` (``hist[0] = ||b||``): the norm that iteration reduced.
  Its halos go into buffers of two parities (``t % 2``): a neighbour may put the next iteration's rows before
  this PE has read the current ones (it knows only that this PE *started* the reduction).

Race-freedom of the plain halo of :func:`cg_poisson_2d`: a PE puts into its neighbour's ring in iteration
``t + 1`` only after its ``(r, r)`` reduction of iteration ``t`` completed, which needs the neighbour's
contribution, computed after the neighbour's product ``A p`` of iteration ``t`` read that ring.

Every PE must call with the same tile shape; ``N`` divisible by the PE count.
"""

# ruff: noqa: F821, F841  (DaCe explicit tasklets: connectors are declared with << and >>)

import dace
import numpy as np

from dace_cpufree import nvshmem

from .recurrence import conjugate_gradient

LX, NY, K = (dace.symbol(s) for s in ("LX", "NY", "K"))
#: Flag arrays of each program: one for the halos of ``p`` (CG), one for the first exchange of ``r`` and one for
#: ``w``'s halos by parity (pipelined: apart, so that the guards of the waits with a symbolic parity index are
#: linked to the puts of their own loop only).
FLAGS = {"cg_poisson_2d": (2,), "pipelined_cg_poisson_2d": (2, 4)}


@dace.program
def cg_poisson_2d(b: dace.float64[LX, NY], x: dace.float64[LX, NY], hist: dace.float64[K], flags: dace.uint64[2]):
    me = nvshmem.my_pe()
    npes = nvshmem.n_pes()
    r = np.zeros((LX, NY), dtype=np.float64)
    p = np.zeros((LX, NY), dtype=np.float64)
    q = np.zeros((LX, NY), dtype=np.float64)
    rr = np.zeros((1,), dtype=np.float64)  # (r, r)
    pq = np.zeros((1,), dtype=np.float64)  # (p, A p), accumulated by the product's map
    rn = np.zeros((1,), dtype=np.float64)  # the new (r, r), accumulated by the update's map
    coef = np.zeros((2,), dtype=np.float64)  # alpha, beta
    x[:] = 0.0
    r[1:-1, 1:-1] = b[1:-1, 1:-1]
    p[1:-1, 1:-1] = b[1:-1, 1:-1]
    rr[0] = np.sum(b[1:-1, 1:-1] * b[1:-1, 1:-1])
    nvshmem.Allreduce(rr, "sum")
    for t in range(1, K + 1):
        if me > 0:
            nvshmem.Putmem(p[LX - 1, :], p[1, :], me - 1, flags[1], t)
        if me < npes - 1:
            nvshmem.Putmem(p[0, :], p[LX - 2, :], me + 1, flags[0], t)
        if me > 0:
            nvshmem.SignalWait(flags[0], t)
        if me < npes - 1:
            nvshmem.SignalWait(flags[1], t)
        for i, j in dace.map[1 : LX - 1, 1 : NY - 1]:
            with dace.tasklet:
                c << p[i, j]
                up << p[i - 1, j]
                dn << p[i + 1, j]
                lf << p[i, j - 1]
                rt << p[i, j + 1]
                qo >> q[i, j]
                acc >> pq(1, lambda u, v: u + v)[0]
                av = 4.0 * c - up - dn - lf - rt
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
        for i, j in dace.map[1 : LX - 1, 1 : NY - 1]:
            with dace.tasklet:
                al << coef[0]
                xc << x[i, j]
                rc << r[i, j]
                pc << p[i, j]
                qc << q[i, j]
                xo >> x[i, j]
                ro >> r[i, j]
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
        for i, j in dace.map[1 : LX - 1, 1 : NY - 1]:
            with dace.tasklet:
                be << coef[1]
                rc << r[i, j]
                pc << p[i, j]
                po >> p[i, j]
                po = rc + be * pc


@dace.program
def pipelined_cg_poisson_2d(
    b: dace.float64[LX, NY],
    x: dace.float64[LX, NY],
    hist: dace.float64[K],
    flags: dace.uint64[2],
    hflags: dace.uint64[4],
):
    me = nvshmem.my_pe()
    npes = nvshmem.n_pes()
    r = np.zeros((LX, NY), dtype=np.float64)
    w = np.zeros((LX, NY), dtype=np.float64)
    q = np.zeros((LX, NY), dtype=np.float64)
    z = np.zeros((LX, NY), dtype=np.float64)
    s = np.zeros((LX, NY), dtype=np.float64)
    p = np.zeros((LX, NY), dtype=np.float64)
    hn = np.zeros((2, NY), dtype=np.float64)  # w's row above this tile, by parity (zero on the first PE)
    hs = np.zeros((2, NY), dtype=np.float64)  # w's row below (zero on the last PE)
    red = np.zeros((2,), dtype=np.float64)  # gamma = (r, r), delta = (w, r), accumulated by the update's map
    coef = np.zeros((4,), dtype=np.float64)  # alpha, beta, the previous gamma, the previous alpha
    x[:] = 0.0
    r[1:-1, 1:-1] = b[1:-1, 1:-1]
    if me > 0:
        nvshmem.Putmem(r[LX - 1, :], r[1, :], me - 1, flags[1], 1)
    if me < npes - 1:
        nvshmem.Putmem(r[0, :], r[LX - 2, :], me + 1, flags[0], 1)
    if me > 0:
        nvshmem.SignalWait(flags[0], 1)
    if me < npes - 1:
        nvshmem.SignalWait(flags[1], 1)
    w[1:-1, 1:-1] = 4.0 * r[1:-1, 1:-1] - r[:-2, 1:-1] - r[2:, 1:-1] - r[1:-1, :-2] - r[1:-1, 2:]
    red[0] = np.sum(r[1:-1, 1:-1] * r[1:-1, 1:-1])
    red[1] = np.sum(w[1:-1, 1:-1] * r[1:-1, 1:-1])
    for t in range(1, K + 1):
        nvshmem.Allreduce(red, "sum", nonblocking=True)
        if me > 0:
            nvshmem.Putmem(hs[t % 2], w[1, :], me - 1, hflags[2 + t % 2], t)
        if me < npes - 1:
            nvshmem.Putmem(hn[t % 2], w[LX - 2, :], me + 1, hflags[t % 2], t)
        if me > 0:
            nvshmem.SignalWait(hflags[t % 2], t)
        if me < npes - 1:
            nvshmem.SignalWait(hflags[2 + t % 2], t)
        for i, j in dace.map[1 : LX - 1, 1 : NY - 1]:
            with dace.tasklet:
                c << w[i, j]
                wu << w[i - 1, j]
                wd << w[i + 1, j]
                lf << w[i, j - 1]
                rt << w[i, j + 1]
                bu << hn[t % 2, j]
                bd << hs[t % 2, j]
                qo >> q[i, j]
                up = bu if i == 1 else wu
                dn = bd if i == LX - 2 else wd
                qo = 4.0 * c - up - dn - lf - rt
        nvshmem.AllreduceWait(red)
        with dace.tasklet:
            g << red[0]
            d << red[1]
            c_in << coef[0:4]
            h >> hist[t - 1]
            c_out >> coef[0:4]
            ro >> red[0:2]
            h = sqrt(g)
            be = 0.0 if t == 1 else g / c_in[2]
            al = g / d if t == 1 else g / (d - be * g / c_in[3])
            c_out[0] = al
            c_out[1] = be
            c_out[2] = g
            c_out[3] = al
            ro[0] = 0.0
            ro[1] = 0.0
        for i, j in dace.map[1 : LX - 1, 1 : NY - 1]:
            with dace.tasklet:
                al << coef[0]
                be << coef[1]
                qc << q[i, j]
                wc << w[i, j]
                rc << r[i, j]
                zc << z[i, j]
                sc << s[i, j]
                pc << p[i, j]
                xc << x[i, j]
                zo >> z[i, j]
                so >> s[i, j]
                po >> p[i, j]
                xo >> x[i, j]
                ro >> r[i, j]
                wo >> w[i, j]
                gamma >> red(1, lambda u, v: u + v)[0]
                delta >> red(1, lambda u, v: u + v)[1]
                zn = qc + be * zc
                sn = wc + be * sc
                pn = rc + be * pc
                rn = rc - al * sn
                wn = wc - al * zn
                zo = zn
                so = sn
                po = pn
                xo = xc + al * pn
                ro = rn
                wo = wn
                gamma = rn * rn
                delta = wn * rn


def _laplacian(u: np.ndarray) -> np.ndarray:
    out = np.zeros_like(u)
    out[1:-1, 1:-1] = 4.0 * u[1:-1, 1:-1] - u[:-2, 1:-1] - u[2:, 1:-1] - u[1:-1, :-2] - u[1:-1, 2:]
    return out


def interior_dot(a: np.ndarray, b: np.ndarray) -> float:
    """The dot product over the interior of padded arrays (any number of dimensions)."""
    inner = (slice(1, -1),) * a.ndim
    return float(np.sum(a[inner] * b[inner]))


def reference_cg(b: np.ndarray, iters: int) -> tuple[np.ndarray, np.ndarray]:
    """NumPy on the global padded grid, the same recurrences as :func:`cg_poisson_2d`: ``(x, hist)``."""
    return conjugate_gradient(_laplacian, interior_dot, b, iters)


def reference_pipelined_cg(b: np.ndarray, iters: int) -> tuple[np.ndarray, np.ndarray]:
    """NumPy on the global padded grid, the recurrences of :func:`pipelined_cg_poisson_2d`: ``(x, hist)``."""
    x, r = np.zeros_like(b), b.copy()
    w = _laplacian(r)
    z, s, p = np.zeros_like(b), np.zeros_like(b), np.zeros_like(b)
    hist, gamma_old, alpha_old = np.zeros(iters), 0.0, 0.0
    for k in range(iters):
        gamma, delta = interior_dot(r, r), interior_dot(w, r)
        q = _laplacian(w)
        hist[k] = np.sqrt(gamma)
        beta = 0.0 if k == 0 else gamma / gamma_old
        alpha = gamma / delta if k == 0 else gamma / (delta - beta * gamma / alpha_old)
        z, s, p = q + beta * z, w + beta * s, r + beta * p
        x, r, w = x + alpha * p, r - alpha * s, w - alpha * z
        gamma_old, alpha_old = gamma, alpha
    return x, hist


def initialize(n: int) -> np.ndarray:
    """The right-hand side on the padded ``(n + 2) x (n + 2)`` grid (zero ring): smooth plus a point source."""
    i, j = np.meshgrid(np.arange(n + 2, dtype=np.float64), np.arange(n + 2, dtype=np.float64), indexing="ij")
    b = np.sin(np.pi * i / (n + 1)) * np.sin(2.0 * np.pi * j / (n + 1)) + (i * (j + 1) % 7) / 7.0
    b[0, :] = b[-1, :] = b[:, 0] = b[:, -1] = 0.0
    return b


def local_shape(n: int, npes: int) -> tuple[int, int]:
    """``(LX, NY)`` of each PE's tile."""
    if n % npes or n // npes < 2:
        raise ValueError(f"N = {n} must be divisible by the {npes} PEs, at least 2 rows each.")
    return n // npes + 2, n + 2


def tile(glob: np.ndarray, pe: int, npes: int) -> np.ndarray:
    """PE ``pe``'s rows (planes of a 3-D array) of a global padded array, with a halo row on each side."""
    rows = (glob.shape[0] - 2) // npes
    return np.ascontiguousarray(glob[pe * rows : pe * rows + rows + 2, :])


def place(glob: np.ndarray, local: np.ndarray, pe: int, npes: int) -> None:
    """Writes the interior rows (planes) of PE ``pe``'s tile back into the global array."""
    rows = local.shape[0] - 2
    glob[1 + pe * rows : 1 + (pe + 1) * rows, :] = local[1:-1, :]


def arguments(program: str, n: int, iters: int, pe: int = 0, npes: int = 1) -> tuple:
    """``(b, x, hist, flags...)`` of PE ``pe`` for ``program``."""
    b = tile(initialize(n), pe, npes)
    return (b, np.zeros_like(b), np.zeros(iters), *(np.zeros(k, dtype=np.uint64) for k in FLAGS[program]))
