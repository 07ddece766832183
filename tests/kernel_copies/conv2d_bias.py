"""2-D convolution with bias, NHWC layout, stride 1, 'valid' padding (NPBench ``conv2d_bias``), float32.

    out[n, i, j, o] = bias[o] + sum_{p < K, q < K, c < C_in} input[n, i + p, j + q, c] * weights[p, q, c, o]
for 0 <= i < H - K + 1, 0 <= j < W - K + 1. The program accumulates one (p, q, c) term of the
sum per step over the whole output tensor.
"""

import dace
import numpy as np

NAME = "conv2d_bias"
CATEGORY = "other"
N = dace.symbol("N")
H = dace.symbol("H")
W = dace.symbol("W")
C_in = dace.symbol("C_in")
C_out = dace.symbol("C_out")
K = dace.symbol("K")


@dace.program
def program(input: dace.float32[N, H, W, C_in], weights: dace.float32[K, K, C_in, C_out], bias: dace.float32[C_out]):
    out = np.ndarray((N, H - K + 1, W - K + 1, C_out), dtype=np.float32)
    out[:] = bias
    for p in range(K):
        for q in range(K):
            for c in range(C_in):
                out[:] = out + input[:, p : p + H - K + 1, q : q + W - K + 1, c, np.newaxis] * weights[p, q, c, :]
    return out


def reference(input, weights, bias):
    k = weights.shape[0]
    n, h, w, _ = input.shape
    h_out, w_out = h - k + 1, w - k + 1
    # Gather every receptive field as (N, H_out, W_out, K, K, C_in), then contract with the weights.
    windows = np.lib.stride_tricks.sliding_window_view(input, (k, k), axis=(1, 2))  # (N, H_out, W_out, C_in, K, K)
    assert windows.shape[:3] == (n, h_out, w_out)
    out = np.einsum("nijcpq,pqco->nijo", windows, weights, optimize=True)
    return (out + bias).astype(np.float32, copy=False)


PRESETS = {
    "test": dict(N=2, C_in=3, C_out=4, K=3, H=8, W=7),
    "small": dict(N=4, C_in=3, C_out=8, K=3, H=24, W=24),
    "S": dict(N=8, C_in=3, C_out=16, K=2, H=32, W=32),
    "M": dict(N=8, C_in=3, C_out=8, K=5, H=64, W=64),
    "L": dict(N=8, C_in=3, C_out=8, K=10, H=128, W=128),
    "paper": dict(N=8, C_in=3, C_out=16, K=20, H=256, W=256),
}


def initialize(N, C_in, C_out, K, H, W, datatype=np.float32):
    rng = np.random.default_rng(42)
    input = rng.random((N, H, W, C_in), dtype=np.float32).astype(datatype, copy=False)
    weights = rng.random((K, K, C_in, C_out), dtype=np.float32).astype(datatype, copy=False)
    bias = rng.random((C_out,), dtype=np.float32).astype(datatype, copy=False)
    return {
        "input": np.ascontiguousarray(input),
        "weights": np.ascontiguousarray(weights),
        "bias": np.ascontiguousarray(bias),
    }


OUTPUTS = ("__return",)
RTOL, ATOL = 1e-5, 1e-6
