"""Jacobi 2-D five-point stencil (Polybench ``jacobi-2d``).

Per time step:
    B[i,j] = 0.2 * (A[i,j] + A[i,j-1] + A[i,j+1] + A[i+1,j] + A[i-1,j])
    A[i,j] = 0.2 * (B[i,j] + B[i,j-1] + B[i,j+1] + B[i+1,j] + B[i-1,j])
for all interior points 1 <= i, j < N-1; ``TSTEPS`` time steps.
"""

import dace
import numpy as np

NAME = "jacobi_2d"
CATEGORY = "iterative"
N = dace.symbol("N")


@dace.program
def program(A: dace.float64[N, N], B: dace.float64[N, N], TSTEPS: dace.int64):
    for t in range(TSTEPS):  # noqa: B007 - the loop variable names the time loop in the generated code
        B[1 : N - 1, 1 : N - 1] = 0.2 * (
            A[1 : N - 1, 1 : N - 1]
            + A[1 : N - 1, 0 : N - 2]
            + A[1 : N - 1, 2:N]
            + A[2:N, 1 : N - 1]
            + A[0 : N - 2, 1 : N - 1]
        )
        A[1 : N - 1, 1 : N - 1] = 0.2 * (
            B[1 : N - 1, 1 : N - 1]
            + B[1 : N - 1, 0 : N - 2]
            + B[1 : N - 1, 2:N]
            + B[2:N, 1 : N - 1]
            + B[0 : N - 2, 1 : N - 1]
        )


def reference(A, B, TSTEPS):
    n = A.shape[0]
    c = slice(1, n - 1)
    lo = slice(0, n - 2)
    hi = slice(2, n)
    for _ in range(TSTEPS):
        B[c, c] = 0.2 * (A[c, c] + A[c, lo] + A[c, hi] + A[hi, c] + A[lo, c])
        A[c, c] = 0.2 * (B[c, c] + B[c, lo] + B[c, hi] + B[hi, c] + B[lo, c])


PRESETS = {
    "test": dict(N=12, TSTEPS=4),
    "small": dict(N=40, TSTEPS=10),
    "S": dict(N=150, TSTEPS=50),
    "M": dict(N=350, TSTEPS=80),
    "L": dict(N=700, TSTEPS=200),
    "paper": dict(N=2800, TSTEPS=1000),
}


def initialize(N, TSTEPS, datatype=np.float64):
    i = np.arange(N, dtype=datatype)[:, None]
    j = np.arange(N, dtype=datatype)[None, :]
    A = np.ascontiguousarray(i * (j + 2) / N, dtype=datatype)
    B = np.ascontiguousarray(i * (j + 3) / N, dtype=datatype)
    return {"A": A, "B": B, "TSTEPS": int(TSTEPS)}


OUTPUTS = ("A", "B")
RTOL, ATOL = 1e-10, 1e-12
