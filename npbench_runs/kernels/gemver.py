"""Vector multiplication and matrix addition (Polybench ``gemver``):
A = A + u1 v1^T + u2 v2^T
x = x + beta * A^T y + z
w = w + alpha * A x
"""

import dace
import numpy as np

NAME = "gemver"
CATEGORY = "blas"
N = dace.symbol("N")


@dace.program
def program(
    alpha: dace.float64,
    beta: dace.float64,
    A: dace.float64[N, N],
    u1: dace.float64[N],
    v1: dace.float64[N],
    u2: dace.float64[N],
    v2: dace.float64[N],
    w: dace.float64[N],
    x: dace.float64[N],
    y: dace.float64[N],
    z: dace.float64[N],
):
    A += u1[:, np.newaxis] * v1[np.newaxis, :] + u2[:, np.newaxis] * v2[np.newaxis, :]
    x += beta * y @ A + z
    w += alpha * A @ x


def reference(alpha, beta, A, u1, v1, u2, v2, w, x, y, z):
    n = A.shape[0]
    for i in range(n):  # rank-2 update, row by row
        A[i, :] += u1[i] * v1 + u2[i] * v2
    x += beta * np.dot(A.T, y)
    x += z
    w += alpha * np.dot(A, x)


PRESETS = {
    "test": dict(N=16),
    "small": dict(N=64),
    "S": dict(N=1000),
    "M": dict(N=3000),
    "L": dict(N=10000),
    "paper": dict(N=8000),
}


def initialize(N, datatype=np.float64):
    k = np.arange(N)
    fn = datatype(N)
    kp1 = (k + 1) / fn
    A = np.ascontiguousarray((k[:, None] * k[None, :] % N) / N, dtype=datatype)
    return {
        "alpha": datatype(1.5),
        "beta": datatype(1.2),
        "A": A,
        "u1": np.ascontiguousarray(k, dtype=datatype),
        "v1": np.ascontiguousarray(kp1 / 4.0, dtype=datatype),
        "u2": np.ascontiguousarray(kp1 / 2.0, dtype=datatype),
        "v2": np.ascontiguousarray(kp1 / 6.0, dtype=datatype),
        "w": np.zeros((N,), dtype=datatype),
        "x": np.zeros((N,), dtype=datatype),
        "y": np.ascontiguousarray(kp1 / 8.0, dtype=datatype),
        "z": np.ascontiguousarray(kp1 / 9.0, dtype=datatype),
    }


OUTPUTS = ("A", "w", "x")
RTOL, ATOL = 1e-10, 1e-12
