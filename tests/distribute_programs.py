"""Single-GPU programs written for the automatic decomposition (``compile(..., distribute={...})``): stencils of halo
widths 1 and 2, a one-sided stencil, a 2-D stencil to split along its strided axis, a conjugate gradient in plain
NumPy, and programs it must refuse. Each ``@dace.program``'s ``.f`` is its NumPy reference."""

import dace
import numpy as np

N, M = dace.symbol("N"), dace.symbol("M")


@dace.program
def jacobi_1d(A: dace.float64[N], B: dace.float64[N], T: dace.int64):
    for _ in range(T):
        B[1:-1] = 0.33333 * (A[:-2] + A[1:-1] + A[2:])
        A[1:-1] = 0.33333 * (B[:-2] + B[1:-1] + B[2:])


@dace.program
def fourth_order(A: dace.float64[N], B: dace.float64[N], T: dace.int64):
    """A 4th-order second derivative: reads two elements on each side (halo 2)."""
    for _ in range(T):
        B[2:-2] = A[2:-2] + 0.01 * (-A[4:] + 16.0 * A[3:-1] - 30.0 * A[2:-2] + 16.0 * A[1:-3] - A[:-4])
        A[2:-2] = B[2:-2] + 0.01 * (-B[4:] + 16.0 * B[3:-1] - 30.0 * B[2:-2] + 16.0 * B[1:-3] - B[:-4])


@dace.program
def upwind(u: dace.float64[N, M], v: dace.float64[N, M], T: dace.int64):
    """One-sided stencils: ``u`` reads ``v`` below it, ``v`` reads ``u`` above it (halos 1/0 and 0/1); the edge rows
    keep what the first and last PE set."""
    for t in range(T):
        u[0, :] = t
        u[1:, :] += 0.5 * (v[1:, :] - v[:-1, :])
        v[:-1, :] -= 0.25 * (u[1:, :] - u[:-1, :])


@dace.program
def jacobi_2d(A: dace.float64[N, M], B: dace.float64[N, M], T: dace.int64):
    for _ in range(T):
        B[1:-1, 1:-1] = 0.2 * (A[1:-1, 1:-1] + A[1:-1, :-2] + A[1:-1, 2:] + A[2:, 1:-1] + A[:-2, 1:-1])
        A[1:-1, 1:-1] = 0.2 * (B[1:-1, 1:-1] + B[1:-1, :-2] + B[1:-1, 2:] + B[2:, 1:-1] + B[:-2, 1:-1])


@dace.program
def cg(x: dace.float64[N], b: dace.float64[N], r: dace.float64[N], p: dace.float64[N], q: dace.float64[N],
       res: dace.float64[1], iters: dace.int64):
    """Conjugate gradient for the 1-D Poisson matrix (2 on the diagonal, -1 beside it; x fixed at both ends)."""
    q[1:-1] = 2.0 * x[1:-1] - x[:-2] - x[2:]
    r[1:-1] = b[1:-1] - q[1:-1]
    p[:] = r[:]
    rs = np.sum(r * r)
    for _ in range(iters):
        q[1:-1] = 2.0 * p[1:-1] - p[:-2] - p[2:]
        alpha = rs / np.dot(p, q)
        x[:] += alpha * p
        r[:] -= alpha * q
        rs_new = np.sum(r * r)
        p[:] = r + (rs_new / rs) * p
        rs = rs_new
    res[0] = np.sqrt(rs)


@dace.program
def norms(A: dace.float64[N], out: dace.float64[3]):
    """Reductions of a split array and of a shifted difference of it (which reads a halo that nothing exchanges: the
    call's scatter fills it)."""
    out[0] = np.max(np.abs(A))
    out[1] = np.linalg.norm(A)
    out[2] = np.min(A[1:] - A[:-1])


@dace.program
def total(A: dace.float64[N]):
    return np.sum(A[1:] * A[:-1])


@dace.program
def accumulate(A: dace.float64[N], s: dace.float64[2]):
    """Accumulates into the earlier values of ``s`` (a write-conflict resolution, not a fresh result)."""
    for i in dace.map[0:N]:
        s[0] += A[i]
        s[1] += A[i] * A[i]


@dace.program
def in_place(u: dace.float64[N], T: dace.int64):
    """An in-place stencil: the next step's halo puts could land while a neighbour still reads its halo."""
    for _ in range(T):
        u[1:-1] = u[1:-1] + 0.1 * (u[:-2] - 2.0 * u[1:-1] + u[2:])


@dace.program
def reversed_index(A: dace.float64[N], B: dace.float64[N]):
    for i in dace.map[0:N]:
        B[i] = A[N - 1 - i]


@dace.program
def indirect_index(A: dace.float64[N], B: dace.float64[N], idx: dace.int64[N]):
    for i in dace.map[0:N]:
        B[i] = A[idx[i]]


@dace.program
def product(A: dace.float64[N, N], x: dace.float64[N], y: dace.float64[N]):
    y[:] = A @ x


@dace.program
def unsplit_output(A: dace.float64[N], B: dace.float64[N]):
    B[1:-1] = A[:-2] + A[2:]


@dace.program
def longer_temporary(A: dace.float64[N + 2], B: dace.float64[N]):
    """A temporary one element longer than the split ``B``: its ends lie outside ``B``'s blocks (refused)."""
    t = A[0 : N + 1] + A[1 : N + 2]
    B[:] = t[1:] - t[:-1]
