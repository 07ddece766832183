"""NPBench ``go_fast`` (the Numba 5-minute-guide example).

trace = sum_i tanh(a[i, i])
out[i, j] = a[i, j] + trace
"""

import dace
import numpy as np

NAME = "go_fast"
CATEGORY = "other"
N = dace.symbol("N")


@dace.program
def program(a: dace.float64[N, N]):
    trace = 0.0
    for i in range(N):
        trace = trace + np.tanh(a[i, i])
    return a + trace


def reference(a):
    trace = np.tanh(np.diagonal(a)).sum()
    return a + trace


PRESETS = {
    "test": dict(N=12),
    "small": dict(N=64),
    "S": dict(N=2000),
    "M": dict(N=6000),
    "L": dict(N=20000),
    "paper": dict(N=12500),
}


def initialize(N, datatype=np.float64):
    rng = np.random.default_rng(42)
    a = rng.random((N, N), dtype=np.float64).astype(datatype, copy=False)
    return {"a": np.ascontiguousarray(a)}


OUTPUTS = ("__return",)
RTOL, ATOL = 1e-10, 1e-12
