"""Three matrix multiplications (Polybench ``3mm``): G = (A B) (C D), returned.

A: (NI, NK), B: (NK, NJ), C: (NJ, NM), D: (NM, NL); G: (NI, NL).
"""

import dace
import numpy as np

NAME = "k3mm"
CATEGORY = "blas"
NI = dace.symbol("NI")
NJ = dace.symbol("NJ")
NK = dace.symbol("NK")
NL = dace.symbol("NL")
NM = dace.symbol("NM")


@dace.program
def program(A: dace.float64[NI, NK], B: dace.float64[NK, NJ], C: dace.float64[NJ, NM], D: dace.float64[NM, NL]):
    return A @ B @ C @ D


def reference(A, B, C, D):
    E = np.dot(A, B)
    F = np.dot(C, D)
    return np.dot(E, F)


def product_flops(NI, NJ, NK, NL, NM):
    """Floating-point operations of the program's three products, left to right as written (DaCe and CuPy alike):
    A @ B, then (A B) @ C, then that @ D."""
    return 2 * NI * NJ * NK + 2 * NI * NM * NJ + 2 * NI * NL * NM


PRESETS = {
    "test": dict(NI=8, NJ=9, NK=10, NL=11, NM=12),
    "small": dict(NI=32, NJ=34, NK=36, NL=38, NM=40),
    "S": dict(NI=800, NJ=850, NK=900, NL=950, NM=1000),
    "M": dict(NI=2000, NJ=2200, NK=2400, NL=2600, NM=2800),
    "L": dict(NI=5500, NJ=6000, NK=6500, NL=7000, NM=7500),
    "paper": dict(NI=3200, NJ=3600, NK=4000, NL=4400, NM=4800),
}


def initialize(NI, NJ, NK, NL, NM, datatype=np.float64):
    def grid(r, c):
        return np.arange(r)[:, None], np.arange(c)[None, :]

    i, j = grid(NI, NK)
    A = np.ascontiguousarray(((i * j + 1) % NI) / (5 * NI), dtype=datatype)
    i, j = grid(NK, NJ)
    B = np.ascontiguousarray(((i * (j + 1) + 2) % NJ) / (5 * NJ), dtype=datatype)
    i, j = grid(NJ, NM)
    C = np.ascontiguousarray((i * (j + 3) % NL) / (5 * NL), dtype=datatype)
    i, j = grid(NM, NL)
    D = np.ascontiguousarray(((i * (j + 2) + 2) % NK) / (5 * NK), dtype=datatype)
    return {"A": A, "B": B, "C": C, "D": D}


OUTPUTS = ("__return",)
RTOL, ATOL = 1e-10, 1e-12
