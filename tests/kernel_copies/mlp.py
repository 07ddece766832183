"""Three-layer perceptron with ReLU activations and a softmax output (NPBench ``mlp``), float32.

h1 = max(input @ w1 + b1, 0)              (N, S0)
h2 = max(h1 @ w2 + b2, 0)                 (N, S1)
z  = h2 @ w3 + b3                         (N, S2)
out[n, s] = exp(z[n, s] - max_t z[n, t]) / sum_t exp(z[n, t] - max_t z[n, t])
"""

import dace
import numpy as np

NAME = "mlp"
CATEGORY = "other"
C_in = dace.symbol("C_in")
N = dace.symbol("N")
S0 = dace.symbol("S0")
S1 = dace.symbol("S1")
S2 = dace.symbol("S2")


@dace.program
def program(
    input: dace.float32[N, C_in],
    w1: dace.float32[C_in, S0],
    b1: dace.float32[S0],
    w2: dace.float32[S0, S1],
    b2: dace.float32[S1],
    w3: dace.float32[S1, S2],
    b3: dace.float32[S2],
):
    h1 = np.maximum(input @ w1 + b1, 0)
    h2 = np.maximum(h1 @ w2 + b2, 0)
    z = h2 @ w3 + b3
    z_max = np.max(z, axis=-1)
    e = np.exp(z - z_max[:, np.newaxis])
    e_sum = np.sum(e, axis=-1)
    return e / e_sum[:, np.newaxis]


def reference(input, w1, b1, w2, b2, w3, b3):
    h = input
    for w, b in ((w1, b1), (w2, b2)):
        h = np.maximum(np.matmul(h, w) + b, np.float32(0))
    z = np.matmul(h, w3) + b3
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


PRESETS = {
    "test": dict(C_in=3, N=4, S0=24, S1=16, S2=8),
    "small": dict(C_in=3, N=8, S0=300, S1=100, S2=10),
    "S": dict(C_in=3, N=8, S0=30000, S1=2000, S2=2000),
    "M": dict(C_in=3, N=8, S0=30000, S1=10000, S2=10000),
    "L": dict(C_in=3, N=8, S0=30000, S1=30000, S2=30000),
    "paper": dict(C_in=3, N=8, S0=30000, S1=10000, S2=1000),
}


def initialize(C_in, N, S0, S1, S2, datatype=np.float32):
    rng = np.random.default_rng(42)

    def uniform(*shape):
        return np.ascontiguousarray(rng.random(shape, dtype=np.float32).astype(datatype, copy=False))

    return {
        "input": uniform(N, C_in),
        "w1": uniform(C_in, S0),
        "b1": uniform(S0),
        "w2": uniform(S0, S1),
        "b2": uniform(S1),
        "w3": uniform(S1, S2),
        "b3": uniform(S2),
    }


OUTPUTS = ("__return",)
RTOL, ATOL = 1e-4, 1e-6
