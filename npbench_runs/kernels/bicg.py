"""BiCG sub-kernel (Polybench ``bicg``): s = A^T r and q = A p.

A has shape (N, M), p length M, r length N; outputs s (length M) and q
(length N) are written into the argument arrays (as in Polybench) instead of
returning a tuple.
"""

import dace
import numpy as np

NAME = "bicg"
CATEGORY = "blas"
M = dace.symbol("M")
N = dace.symbol("N")


@dace.program
def program(A: dace.float64[N, M], p: dace.float64[M], r: dace.float64[N], s: dace.float64[M], q: dace.float64[N]):
    s[:] = r @ A
    q[:] = A @ p


def reference(A, p, r, s, q):
    s[:] = np.dot(A.T, r)
    q[:] = np.dot(A, p)


PRESETS = {
    "test": dict(M=12, N=15),
    "small": dict(M=40, N=50),
    "S": dict(M=4000, N=5000),
    "M": dict(M=10000, N=12500),
    "L": dict(M=20000, N=25000),
    "paper": dict(M=18000, N=22000),
}


def initialize(M, N, datatype=np.float64):
    i = np.arange(N)[:, None]
    j = np.arange(M)[None, :]
    A = np.ascontiguousarray((i * (j + 1) % N) / N, dtype=datatype)
    p = np.ascontiguousarray((np.arange(M) % M) / M, dtype=datatype)
    r = np.ascontiguousarray((np.arange(N) % N) / N, dtype=datatype)
    s = np.zeros((M,), dtype=datatype)
    q = np.zeros((N,), dtype=datatype)
    return {"A": A, "p": p, "r": r, "s": s, "q": q}


OUTPUTS = ("s", "q")
RTOL, ATOL = 1e-10, 1e-12
