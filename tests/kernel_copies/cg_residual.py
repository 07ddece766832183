"""Residual-controlled Jacobi solver for a 1-D diagonally dominant Poisson-type system.

System (Dirichlet boundary x[0] = x[N-1] = 0 kept fixed, unknowns x[1..N-2]):
    diag * x[i] - x[i-1] - x[i+1] = b[i]          1 <= i <= N-2
with diag > 2 (strictly diagonally dominant, so Jacobi converges with rate
about 2/diag).

    res = || b - A x ||_2 ;  it = 0
    while res > tol and it < maxit:          # data-dependent loop
        x[1:-1] = (b[1:-1] + x[:-2] + x[2:]) / diag
        res = || b - A x ||_2 ;  it += 1

``res`` and ``it`` are 1-element arrays computed inside the program and read
by the ``while`` condition. The loop is deterministic; the final iteration
count is an output (so a mismatch in the stopping decision is detected).
"""

import dace
import numpy as np

NAME = "cg_residual"
CATEGORY = "iterative"
N = dace.symbol("N")


@dace.program
def program(
    x: dace.float64[N],
    b: dace.float64[N],
    res: dace.float64[1],
    it: dace.int64[1],
    diag: dace.float64,
    tol: dace.float64,
    maxit: dace.int64,
):
    r0 = b[1 : N - 1] - (diag * x[1 : N - 1] - x[0 : N - 2] - x[2:N])
    res[0] = np.sqrt(np.sum(r0 * r0))
    it[0] = 0
    while res[0] > tol and it[0] < maxit:
        xn = (b[1 : N - 1] + x[0 : N - 2] + x[2:N]) / diag
        x[1 : N - 1] = xn
        r = b[1 : N - 1] - (diag * x[1 : N - 1] - x[0 : N - 2] - x[2:N])
        res[0] = np.sqrt(np.sum(r * r))
        it[0] = it[0] + 1


def _residual_norm(x, b, diag):
    n = x.shape[0]
    r = b[1 : n - 1] - (diag * x[1 : n - 1] - x[0 : n - 2] - x[2:n])
    return np.sqrt(np.sum(r * r))


def reference(x, b, res, it, diag, tol, maxit):
    n = x.shape[0]
    res[0] = _residual_norm(x, b, diag)
    it[0] = 0
    while res[0] > tol and it[0] < maxit:
        x_new = (b[1 : n - 1] + x[0 : n - 2] + x[2:n]) / diag  # Jacobi sweep
        x[1 : n - 1] = x_new
        res[0] = _residual_norm(x, b, diag)
        it[0] += 1


# DIAG = 2.01 -> Jacobi contraction factor ~0.995, i.e. a few thousand
# iterations until TOL; MAXIT is the guard in the loop condition.
PRESETS = {
    "test": dict(N=32, MAXIT=20000, TOL=1e-9, DIAG=2.01),
    "small": dict(N=128, MAXIT=20000, TOL=1e-9, DIAG=2.01),
    "S": dict(N=100_000, MAXIT=20000, TOL=1e-9, DIAG=2.01),
    "M": dict(N=1_000_000, MAXIT=20000, TOL=1e-9, DIAG=2.01),
    "L": dict(N=4_000_000, MAXIT=20000, TOL=1e-9, DIAG=2.01),
    "paper": dict(N=2_000_000, MAXIT=20000, TOL=1e-9, DIAG=2.01),
}


def initialize(N, MAXIT, TOL=1e-9, DIAG=2.01, datatype=np.float64):
    k = np.arange(N)
    b = np.ascontiguousarray(1.0 + (k % 7) / 7.0, dtype=datatype)
    b[0] = 0.0
    b[N - 1] = 0.0
    return {
        "x": np.zeros((N,), dtype=datatype),
        "b": b,
        "res": np.zeros((1,), dtype=datatype),
        "it": np.zeros((1,), dtype=np.int64),
        "diag": datatype(DIAG),
        "tol": datatype(TOL),
        "maxit": int(MAXIT),
    }


OUTPUTS = ("x", "res", "it")
RTOL, ATOL = 1e-10, 1e-12
