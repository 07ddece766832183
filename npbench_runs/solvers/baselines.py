"""Host-driven CG in CuPy: what a user writes without a persistent kernel (a Python loop of CuPy calls).

Each iteration launches the product's and the updates' kernels from the host and reads the two dot products back
(``float(...)``: a device synchronisation each), the same recurrences as :mod:`.poisson`'s ``cg_poisson_2d`` and
:mod:`.csr`'s ``cg_csr``.
"""

from __future__ import annotations


def cg_stencil(b, iters: int):
    """CG on the 5-point Poisson problem, the stencil written with CuPy slices. ``b``: the padded right-hand
    side on the GPU. Returns ``(x, hist)`` (``hist[k] = ||r_{k+1}||``, a NumPy array)."""
    import cupy as cp
    import numpy as np

    x, r, p = cp.zeros_like(b), b.copy(), b.copy()
    q = cp.zeros_like(b)
    hist = np.zeros(iters)
    inner = (slice(1, -1), slice(1, -1))
    rr = float(cp.vdot(r[inner], r[inner]))
    for k in range(iters):
        q[inner] = 4.0 * p[inner] - p[:-2, 1:-1] - p[2:, 1:-1] - p[1:-1, :-2] - p[1:-1, 2:]
        alpha = rr / float(cp.vdot(p[inner], q[inner]))
        x += alpha * p
        r -= alpha * q
        rn = float(cp.vdot(r[inner], r[inner]))
        hist[k] = np.sqrt(rn)
        p = r + (rn / rr) * p
        rr = rn
    return x, hist


def cg_sparse(indptr, indices, data, b, iters: int):
    """CG with a ``cupyx.scipy.sparse.csr_matrix`` (cuSPARSE's product). Returns ``(x, hist)``."""
    import cupy as cp
    import numpy as np
    from cupyx.scipy import sparse

    n = len(indptr) - 1
    a = sparse.csr_matrix((cp.asarray(data), cp.asarray(indices), cp.asarray(indptr)), shape=(n, n))
    b = cp.asarray(b)
    x, r, p = cp.zeros_like(b), b.copy(), b.copy()
    hist = np.zeros(iters)
    rr = float(r @ r)
    for k in range(iters):
        q = a @ p
        alpha = rr / float(p @ q)
        x += alpha * p
        r -= alpha * q
        rn = float(r @ r)
        hist[k] = np.sqrt(rn)
        p = r + (rn / rr) * p
        rr = rn
    return x, hist
