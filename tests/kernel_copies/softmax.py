"""Softmax over the last axis of a 4-D float32 tensor (NPBench ``softmax``).

out[n,h,i,j] = exp(x[n,h,i,j] - max_k x[n,h,i,k]) / sum_k exp(x[n,h,i,k] - max_k x[n,h,i,k])
"""

import dace
import numpy as np

NAME = "softmax"
CATEGORY = "other"
N = dace.symbol("N")
H = dace.symbol("H")
SM = dace.symbol("SM")


@dace.program
def program(x: dace.float32[N, H, SM, SM]):
    tmp_max = np.max(x, axis=-1)
    tmp_out = np.exp(x - tmp_max[:, :, :, np.newaxis])
    tmp_sum = np.sum(tmp_out, axis=-1)
    return tmp_out / tmp_sum[:, :, :, np.newaxis]


def reference(x):
    row_max = x.max(axis=-1, keepdims=True)
    e = np.exp(x - row_max)
    return e / e.sum(axis=-1, keepdims=True)


PRESETS = {
    "test": dict(N=2, H=2, SM=16),
    "small": dict(N=4, H=4, SM=32),
    "S": dict(N=16, H=16, SM=128),
    "M": dict(N=32, H=8, SM=256),
    "L": dict(N=64, H=16, SM=448),
    "paper": dict(N=64, H=16, SM=512),
}


def initialize(N, H, SM, datatype=np.float32):
    rng = np.random.default_rng(42)
    x = rng.random((N, H, SM, SM), dtype=np.float32).astype(datatype, copy=False)
    return {"x": np.ascontiguousarray(x)}


OUTPUTS = ("__return",)
RTOL, ATOL = 1e-5, 1e-7
