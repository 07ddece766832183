"""Jacobi 1-D stencil (Polybench ``jacobi-1d``).

Per time step two three-point averaging sweeps over the interior:
    B[i] = 0.33333 * (A[i-1] + A[i] + A[i+1])   for 1 <= i < N-1
    A[i] = 0.33333 * (B[i-1] + B[i] + B[i+1])   for 1 <= i < N-1
Polybench runs ``TSTEPS`` time steps (t = 0 .. TSTEPS-1).
"""

import dace
import numpy as np

NAME = "jacobi_1d"
CATEGORY = "iterative"
N = dace.symbol("N")


@dace.program
def program(A: dace.float64[N], B: dace.float64[N], TSTEPS: dace.int64):
    for t in range(TSTEPS):  # noqa: B007 - the loop variable names the time loop in the generated code
        B[1 : N - 1] = 0.33333 * (A[0 : N - 2] + A[1 : N - 1] + A[2:N])
        A[1 : N - 1] = 0.33333 * (B[0 : N - 2] + B[1 : N - 1] + B[2:N])


def reference(A, B, TSTEPS):
    n = A.shape[0]
    for _ in range(TSTEPS):
        B[1 : n - 1] = 0.33333 * (A[0 : n - 2] + A[1 : n - 1] + A[2:n])
        A[1 : n - 1] = 0.33333 * (B[0 : n - 2] + B[1 : n - 1] + B[2:n])


PRESETS = {
    "test": dict(N=30, TSTEPS=5),
    "small": dict(N=120, TSTEPS=20),
    "S": dict(N=3200, TSTEPS=800),
    "M": dict(N=12000, TSTEPS=3000),
    "L": dict(N=34000, TSTEPS=8500),
    "paper": dict(N=32000, TSTEPS=4000),
}


def initialize(N, TSTEPS, datatype=np.float64):
    i = np.arange(N, dtype=datatype)
    A = np.ascontiguousarray((i + 2) / N, dtype=datatype)
    B = np.ascontiguousarray((i + 3) / N, dtype=datatype)
    return {"A": A, "B": B, "TSTEPS": int(TSTEPS)}


OUTPUTS = ("A", "B")
RTOL, ATOL = 1e-10, 1e-12
