"""3-D heat equation, explicit scheme (Polybench ``heat-3d``).

Each time step consists of two half-steps (A -> B, then B -> A) over the
interior 1 <= i, j, k < N-1:
    B[i,j,k] = 0.125 * (A[i+1,j,k] - 2 A[i,j,k] + A[i-1,j,k])
             + 0.125 * (A[i,j+1,k] - 2 A[i,j,k] + A[i,j-1,k])
             + 0.125 * (A[i,j,k+1] - 2 A[i,j,k] + A[i,j,k-1])
             + A[i,j,k]
and the same with A and B swapped.  Polybench runs t = 1 .. TSTEPS.
"""

import dace
import numpy as np

NAME = "heat_3d"
CATEGORY = "iterative"
N = dace.symbol("N")


@dace.program
def program(A: dace.float64[N, N, N], B: dace.float64[N, N, N], TSTEPS: dace.int64):
    for t in range(TSTEPS):  # noqa: B007 - the loop variable names the time loop in the generated code
        B[1 : N - 1, 1 : N - 1, 1 : N - 1] = (
            0.125
            * (
                A[2:N, 1 : N - 1, 1 : N - 1]
                - 2.0 * A[1 : N - 1, 1 : N - 1, 1 : N - 1]
                + A[0 : N - 2, 1 : N - 1, 1 : N - 1]
            )
            + 0.125
            * (
                A[1 : N - 1, 2:N, 1 : N - 1]
                - 2.0 * A[1 : N - 1, 1 : N - 1, 1 : N - 1]
                + A[1 : N - 1, 0 : N - 2, 1 : N - 1]
            )
            + 0.125
            * (
                A[1 : N - 1, 1 : N - 1, 2:N]
                - 2.0 * A[1 : N - 1, 1 : N - 1, 1 : N - 1]
                + A[1 : N - 1, 1 : N - 1, 0 : N - 2]
            )
            + A[1 : N - 1, 1 : N - 1, 1 : N - 1]
        )
        A[1 : N - 1, 1 : N - 1, 1 : N - 1] = (
            0.125
            * (
                B[2:N, 1 : N - 1, 1 : N - 1]
                - 2.0 * B[1 : N - 1, 1 : N - 1, 1 : N - 1]
                + B[0 : N - 2, 1 : N - 1, 1 : N - 1]
            )
            + 0.125
            * (
                B[1 : N - 1, 2:N, 1 : N - 1]
                - 2.0 * B[1 : N - 1, 1 : N - 1, 1 : N - 1]
                + B[1 : N - 1, 0 : N - 2, 1 : N - 1]
            )
            + 0.125
            * (
                B[1 : N - 1, 1 : N - 1, 2:N]
                - 2.0 * B[1 : N - 1, 1 : N - 1, 1 : N - 1]
                + B[1 : N - 1, 1 : N - 1, 0 : N - 2]
            )
            + B[1 : N - 1, 1 : N - 1, 1 : N - 1]
        )


def _half_step(src, dst):
    n = src.shape[0]
    c = slice(1, n - 1)
    lo = slice(0, n - 2)
    hi = slice(2, n)
    ctr = src[c, c, c]
    dst[c, c, c] = (
        0.125 * (src[hi, c, c] - 2.0 * ctr + src[lo, c, c])
        + 0.125 * (src[c, hi, c] - 2.0 * ctr + src[c, lo, c])
        + 0.125 * (src[c, c, hi] - 2.0 * ctr + src[c, c, lo])
        + ctr
    )


def reference(A, B, TSTEPS):
    for _ in range(TSTEPS):
        _half_step(A, B)
        _half_step(B, A)


PRESETS = {
    "test": dict(N=10, TSTEPS=4),
    "small": dict(N=20, TSTEPS=10),
    "S": dict(N=25, TSTEPS=25),
    "M": dict(N=40, TSTEPS=50),
    "L": dict(N=70, TSTEPS=100),
    "paper": dict(N=120, TSTEPS=500),
}


def initialize(N, TSTEPS, datatype=np.float64):
    i = np.arange(N, dtype=datatype)[:, None, None]
    j = np.arange(N, dtype=datatype)[None, :, None]
    k = np.arange(N, dtype=datatype)[None, None, :]
    A = np.ascontiguousarray((i + j + (N - k)) * 10 / N, dtype=datatype)
    B = A.copy()
    return {"A": A, "B": B, "TSTEPS": int(TSTEPS)}


OUTPUTS = ("A", "B")
RTOL, ATOL = 1e-10, 1e-12
