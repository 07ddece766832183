"""Matrix transpose and vector multiplication (Polybench ``atax``): y = A^T (A x).

A has shape (M, N), x has length N; returns y of length N.
"""

import dace
import numpy as np

NAME = "atax"
CATEGORY = "blas"
M = dace.symbol("M")
N = dace.symbol("N")


@dace.program
def program(A: dace.float64[M, N], x: dace.float64[N]):
    return (A @ x) @ A


def reference(A, x):
    tmp = np.dot(A, x)
    return np.dot(A.T, tmp)


PRESETS = {
    "test": dict(M=12, N=15),
    "small": dict(M=40, N=50),
    "S": dict(M=4000, N=5000),
    "M": dict(M=10000, N=12500),
    "L": dict(M=20000, N=25000),
    "paper": dict(M=18000, N=22000),
}


def initialize(M, N, datatype=np.float64):
    i = np.arange(M)[:, None]
    j = np.arange(N)[None, :]
    x = np.ascontiguousarray(1.0 + np.arange(N) / N, dtype=datatype)
    A = np.ascontiguousarray(((i + j) % N) / (5 * M), dtype=datatype)
    return {"A": A, "x": x}


OUTPUTS = ("__return",)
RTOL, ATOL = 1e-10, 1e-12
