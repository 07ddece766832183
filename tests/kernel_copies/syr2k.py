"""Symmetric rank-2k update (Polybench ``syr2k``), lower triangle only.

    C[i, j] = beta * C[i, j] + sum_k (alpha * A[j, k] * B[i, k] + alpha * B[j, k] * A[i, k])   for j <= i
The strict upper triangle of C is left unchanged. C: (N, N); A, B: (N, M).
"""

import dace
import numpy as np

NAME = "syr2k"
CATEGORY = "other"
M = dace.symbol("M")
N = dace.symbol("N")


@dace.program
def program(
    alpha: dace.float64, beta: dace.float64, C: dace.float64[N, N], A: dace.float64[N, M], B: dace.float64[N, M]
):
    for i in range(N):
        C[i, : i + 1] = beta * C[i, : i + 1] + alpha * (A[: i + 1, :] @ B[i, :] + B[: i + 1, :] @ A[i, :])


def reference(alpha, beta, C, A, B):
    full = beta * C + alpha * (np.dot(B, A.T) + np.dot(A, B.T))  # full[i, j] uses A[j], B[i] and B[j], A[i]
    lower = np.tril_indices(C.shape[0])
    C[lower] = full[lower]


PRESETS = {
    "test": dict(M=7, N=9),
    "small": dict(M=20, N=30),
    "S": dict(M=35, N=50),
    "M": dict(M=110, N=140),
    "L": dict(M=350, N=400),
    "paper": dict(M=1000, N=1200),
}


def initialize(M, N, datatype=np.float64):
    iN = np.arange(N)[:, None]
    jN = np.arange(N)[None, :]
    jM = np.arange(M)[None, :]
    C = np.ascontiguousarray(((iN * jN + 3) % N) / M, dtype=datatype)
    A = np.ascontiguousarray(((iN * jM + 1) % N) / N, dtype=datatype)
    B = np.ascontiguousarray(((iN * jM + 2) % M) / M, dtype=datatype)
    return {"alpha": datatype(1.5), "beta": datatype(1.2), "C": C, "A": A, "B": B}


OUTPUTS = ("C",)
RTOL, ATOL = 1e-10, 1e-12
