"""Matrix-vector product and transpose (Polybench ``mvt``):
x1 = x1 + A y_1,   x2 = x2 + A^T y_2
"""

import dace
import numpy as np

NAME = "mvt"
CATEGORY = "blas"
N = dace.symbol("N")


@dace.program
def program(
    x1: dace.float64[N], x2: dace.float64[N], y_1: dace.float64[N], y_2: dace.float64[N], A: dace.float64[N, N]
):
    x1 += A @ y_1
    x2 += y_2 @ A


def reference(x1, x2, y_1, y_2, A):
    x1 += np.dot(A, y_1)
    x2 += np.dot(A.T, y_2)


PRESETS = {
    "test": dict(N=16),
    "small": dict(N=64),
    "S": dict(N=5500),
    "M": dict(N=11000),
    "L": dict(N=22000),
    "paper": dict(N=16000),
}


def initialize(N, datatype=np.float64):
    k = np.arange(N)
    i = k[:, None]
    j = k[None, :]
    x1 = np.ascontiguousarray((k % N) / N, dtype=datatype)
    x2 = np.ascontiguousarray(((k + 1) % N) / N, dtype=datatype)
    y_1 = np.ascontiguousarray(((k + 3) % N) / N, dtype=datatype)
    y_2 = np.ascontiguousarray(((k + 4) % N) / N, dtype=datatype)
    A = np.ascontiguousarray((i * j % N) / N, dtype=datatype)
    return {"x1": x1, "x2": x2, "y_1": y_1, "y_2": y_2, "A": A}


OUTPUTS = ("x1", "x2")
RTOL, ATOL = 1e-10, 1e-12
