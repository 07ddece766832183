"""Covariance matrix (Polybench ``covariance``).

data is (N, M): N observations of M variables; float_n = N.
    mean[j]    = sum_i data[i, j] / float_n
    data[i, j] = data[i, j] - mean[j]                       (in place, as in Polybench)
    cov[i, j]  = sum_k data[k, i] data[k, j] / (float_n - 1)  (symmetric, M x M)
"""

import dace
import numpy as np

NAME = "covariance"
CATEGORY = "other"
M = dace.symbol("M")
N = dace.symbol("N")


@dace.program
def program(float_n: dace.float64, data: dace.float64[N, M]):
    mean = np.sum(data, axis=0) / float_n
    data[:] = data - mean
    return np.transpose(data) @ data / (float_n - 1.0)


def reference(float_n, data):
    data -= data.sum(axis=0) / float_n
    full = np.dot(data.T, data) / (float_n - 1.0)
    # mirror the upper triangle, as Polybench does (np.triu also dispatches to CuPy arrays)
    return np.triu(full) + np.triu(full, 1).T


PRESETS = {
    "test": dict(M=6, N=8),
    "small": dict(M=40, N=50),
    "S": dict(M=500, N=600),
    "M": dict(M=1400, N=1800),
    "L": dict(M=3200, N=4000),
    "paper": dict(M=1200, N=1400),
}


def initialize(M, N, datatype=np.float64):
    i = np.arange(N, dtype=datatype)[:, None]
    j = np.arange(M, dtype=datatype)[None, :]
    data = np.ascontiguousarray(i * j / M, dtype=datatype)
    return {"float_n": datatype(N), "data": data}


OUTPUTS = ("__return", "data")
RTOL, ATOL = 1e-10, 1e-12
