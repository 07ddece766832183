"""Scalar, vector and matrix multiplication (Polybench ``gesummv``):
y = alpha * A x + beta * B x     (returned)
"""

import dace
import numpy as np

NAME = "gesummv"
CATEGORY = "blas"
N = dace.symbol("N")


@dace.program
def program(alpha: dace.float64, beta: dace.float64, A: dace.float64[N, N], B: dace.float64[N, N], x: dace.float64[N]):
    return alpha * A @ x + beta * B @ x


def reference(alpha, beta, A, B, x):
    tmp = np.dot(A, x)
    y = np.dot(B, x)
    return alpha * tmp + beta * y


PRESETS = {
    "test": dict(N=16),
    "small": dict(N=64),
    "S": dict(N=2000),
    "M": dict(N=4000),
    "L": dict(N=14000),
    "paper": dict(N=11200),
}


def initialize(N, datatype=np.float64):
    k = np.arange(N)
    i = k[:, None]
    j = k[None, :]
    A = np.ascontiguousarray(((i * j + 1) % N) / N, dtype=datatype)
    B = np.ascontiguousarray(((i * j + 2) % N) / N, dtype=datatype)
    x = np.ascontiguousarray((k % N) / N, dtype=datatype)
    return {"alpha": datatype(1.5), "beta": datatype(1.2), "A": A, "B": B, "x": x}


OUTPUTS = ("__return",)
RTOL, ATOL = 1e-10, 1e-12
