"""The conjugate-gradient recurrences that every reference and host-driven baseline here follows, written once.

``x0 = 0``, ``r0 = p0 = b``; per iteration ``q = A p``, ``alpha = (r, r) / (p, q)``, ``x += alpha p``,
``r -= alpha q``, ``hist[k] = ||r||``, ``p = r + ((r, r)_new / (r, r)_old) p``: the recurrences of the programs
``cg_poisson_2d`` and ``cg_csr``. The array module is the caller's (NumPy for references, CuPy for baselines).
"""

from __future__ import annotations

import numpy as np


def conjugate_gradient(apply, dot, b, iters: int):
    """``(x, hist)`` after ``iters`` iterations. ``apply(p)``: the product ``A p``; ``dot(u, v)``: a Python float
    (for CuPy arrays a device-to-host read, as a user's loop has it)."""
    x, r, p = b.copy(), b.copy(), b.copy()
    x[...] = 0
    rr, hist = dot(r, r), np.zeros(iters)
    for k in range(iters):
        q = apply(p)
        alpha = rr / dot(p, q)
        x += alpha * p
        r -= alpha * q
        rn = dot(r, r)
        hist[k] = np.sqrt(rn)
        p = r + (rn / rr) * p
        rr = rn
    return x, hist
