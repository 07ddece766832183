"""Conjugate gradients with a CSR matrix (``indptr``, ``indices``, ``data``), in one persistent kernel.

The product ``q = A p`` is a map over rows ``i`` and row slots ``j < W`` (``W``: the longest row), each slot an
explicit tasklet that reads its nonzero ``indptr[i] + j`` when there is one (a conditional *expression*: a
data-dependent loop over ``indptr[i] ... indptr[i + 1]`` inside a parallel loop cannot be part of a persistent
kernel); the thread scheduler gives each row a tile that reduces its slots. Dot products go through
``nvshmem.Allreduce``, so the same program is the row-partitioned form; it needs the whole of ``p`` on every PE,
which takes an all-gather that is not written yet: run it on one PE (the rows of the PE are all rows).
``x`` starts at 0; ``hist[k]`` is ``||r_{k+1}||``.
"""

# ruff: noqa: F821, F841  (DaCe explicit tasklets: connectors are declared with << and >>)

import dace
import numpy as np

from dace_cpufree import nvshmem

from . import poisson
from .recurrence import conjugate_gradient

NR, NNZ, W, K = (dace.symbol(s) for s in ("NR", "NNZ", "W", "K"))


@dace.program
def cg_csr(indptr: dace.int64[NR + 1], indices: dace.int64[NNZ], data: dace.float64[NNZ], b: dace.float64[NR],
           x: dace.float64[NR], hist: dace.float64[K]):  # fmt: skip
    r = np.zeros((NR,), dtype=np.float64)
    p = np.zeros((NR,), dtype=np.float64)
    q = np.zeros((NR,), dtype=np.float64)  # A p, accumulated over the row slots (zeroed after each use)
    rr = np.zeros((1,), dtype=np.float64)  # (r, r)
    pq = np.zeros((1,), dtype=np.float64)  # (p, A p), accumulated by its map
    rn = np.zeros((1,), dtype=np.float64)  # the new (r, r), accumulated by the update's map
    coef = np.zeros((2,), dtype=np.float64)  # alpha, beta
    x[:] = 0.0
    r[:] = b
    p[:] = b
    rr[0] = np.sum(b * b)
    nvshmem.Allreduce(rr, "sum")
    for t in range(K):
        for i, j in dace.map[0:NR, 0:W]:
            with dace.tasklet:
                lo << indptr[i]
                hi << indptr[i + 1]
                a << data[:]
                col << indices[:]
                v << p[:]
                out >> q(1, lambda u, y: u + y)[i]
                out = a[lo + j] * v[col[lo + j]] if lo + j < hi else 0.0
        for i in dace.map[0:NR]:
            with dace.tasklet:
                pc << p[i]
                qc << q[i]
                acc >> pq(1, lambda u, y: u + y)[0]
                acc = pc * qc
        nvshmem.Allreduce(pq, "sum")
        with dace.tasklet:
            a << rr[0]
            d << pq[0]
            al >> coef[0]
            rz >> rn[0]
            al = a / d
            rz = 0.0
        for i in dace.map[0:NR]:
            with dace.tasklet:
                al << coef[0]
                xc << x[i]
                rc << r[i]
                pc << p[i]
                qc << q[i]
                xo >> x[i]
                ro >> r[i]
                acc >> rn(1, lambda u, y: u + y)[0]
                xo = xc + al * pc
                rv = rc - al * qc
                ro = rv
                acc = rv * rv
        nvshmem.Allreduce(rn, "sum")
        with dace.tasklet:
            a << rn[0]
            o << rr[0]
            h >> hist[t]
            be >> coef[1]
            ro >> rr[0]
            pz >> pq[0]
            h = sqrt(a)
            be = a / o
            ro = a
            pz = 0.0
        for i in dace.map[0:NR]:
            with dace.tasklet:
                be << coef[1]
                rc << r[i]
                pc << p[i]
                po >> p[i]
                qo >> q[i]
                po = rc + be * pc
                qo = 0.0


def spmv_reference(indptr: np.ndarray, indices: np.ndarray, data: np.ndarray, v: np.ndarray) -> np.ndarray:
    """``A v`` for a CSR matrix, NumPy only."""
    rows = np.repeat(np.arange(len(indptr) - 1), np.diff(indptr))
    return np.bincount(rows, weights=data * v[indices], minlength=len(indptr) - 1)


def reference(indptr, indices, data, b: np.ndarray, iters: int) -> tuple[np.ndarray, np.ndarray]:
    """NumPy, the recurrences of :func:`cg_csr`: ``(x, hist)``."""
    return conjugate_gradient(lambda p: spmv_reference(indptr, indices, data, p), lambda u, v: float(u @ v), b, iters)


def poisson_csr(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The ``n^2 x n^2`` 5-point Laplacian (zero Dirichlet boundary) in CSR form, rows in row-major grid order,
    each row's columns ascending: ``(indptr, indices, data)``."""
    idx = np.arange(n * n, dtype=np.int64).reshape(n, n)
    cols = np.full((n, n, 5), -1, dtype=np.int64)
    vals = np.zeros((n, n, 5))
    cols[1:, :, 0], vals[1:, :, 0] = idx[:-1, :], -1.0  # the row above
    cols[:, 1:, 1], vals[:, 1:, 1] = idx[:, :-1], -1.0  # left
    cols[:, :, 2], vals[:, :, 2] = idx, 4.0
    cols[:, :-1, 3], vals[:, :-1, 3] = idx[:, 1:], -1.0  # right
    cols[:-1, :, 4], vals[:-1, :, 4] = idx[1:, :], -1.0  # the row below
    mask = cols >= 0
    indptr = np.concatenate([[0], np.cumsum(mask.reshape(n * n, 5).sum(axis=1))]).astype(np.int64)
    return indptr, cols[mask], vals[mask]


def initialize(n: int) -> tuple:
    """``(indptr, indices, data, b)``: the Poisson matrix on an ``n x n`` grid and :mod:`.poisson`'s right-hand side
    (so that both programs solve the same problem)."""
    indptr, indices, data = poisson_csr(n)
    return indptr, indices, data, np.ascontiguousarray(poisson.initialize(n)[1:-1, 1:-1].ravel())


def symbols(indptr: np.ndarray) -> dict:
    """``W`` (the longest row), which the program takes as a symbol."""
    return {"W": int(np.max(np.diff(indptr)))}
