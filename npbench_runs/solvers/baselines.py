"""Host-driven CG in CuPy: what a user writes without a persistent kernel (a Python loop of CuPy calls).

Each iteration launches the product's and the updates' kernels from the host and reads the two dot products back
(``float(...)``: a device synchronisation each), the same recurrences as :mod:`.poisson`'s ``cg_poisson_2d`` and
:mod:`.csr`'s ``cg_csr``.
"""

from __future__ import annotations

from .recurrence import conjugate_gradient


def cg_stencil(b, iters: int):
    """CG on the 5-point Poisson problem, the stencil written with CuPy slices. ``b``: the padded right-hand
    side on the GPU. Returns ``(x, hist)`` (``hist[k] = ||r_{k+1}||``, a NumPy array)."""
    import cupy as cp

    q = cp.zeros_like(b)
    inner = (slice(1, -1), slice(1, -1))

    def laplacian(p):
        q[inner] = 4.0 * p[inner] - p[:-2, 1:-1] - p[2:, 1:-1] - p[1:-1, :-2] - p[1:-1, 2:]
        return q

    return conjugate_gradient(laplacian, lambda u, v: float(cp.vdot(u[inner], v[inner])), b, iters)


def cg_sparse(indptr, indices, data, b, iters: int):
    """CG with a ``cupyx.scipy.sparse.csr_matrix`` (cuSPARSE's product). Returns ``(x, hist)``."""
    import cupy as cp
    from cupyx.scipy import sparse

    n = len(indptr) - 1
    a = sparse.csr_matrix((cp.asarray(data), cp.asarray(indices), cp.asarray(indptr)), shape=(n, n))
    return conjugate_gradient(lambda p: a @ p, lambda u, v: float(u @ v), cp.asarray(b), iters)
