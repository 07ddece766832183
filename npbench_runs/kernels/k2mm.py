"""Two matrix multiplications (Polybench ``2mm``): D = alpha * A B C + beta * D.

A: (NI, NK), B: (NK, NJ), C: (NJ, NL), D: (NI, NL).
"""

import dace
import numpy as np

NAME = "k2mm"
CATEGORY = "blas"
NI = dace.symbol("NI")
NJ = dace.symbol("NJ")
NK = dace.symbol("NK")
NL = dace.symbol("NL")


@dace.program
def program(
    alpha: dace.float64,
    beta: dace.float64,
    A: dace.float64[NI, NK],
    B: dace.float64[NK, NJ],
    C: dace.float64[NJ, NL],
    D: dace.float64[NI, NL],
):
    D[:] = alpha * A @ B @ C + beta * D


def reference(alpha, beta, A, B, C, D):
    tmp = alpha * np.dot(A, B)
    D[:] = beta * D + np.dot(tmp, C)


def product_flops(NI, NJ, NK, NL):
    """Floating-point operations of the program's two matrix products, A @ B and (A B) @ C."""
    return 2 * NI * NJ * NK + 2 * NI * NL * NJ


PRESETS = {
    "test": dict(NI=8, NJ=9, NK=10, NL=11),
    "small": dict(NI=32, NJ=34, NK=36, NL=38),
    "S": dict(NI=800, NJ=850, NK=900, NL=950),
    "M": dict(NI=2000, NJ=2250, NK=2500, NL=2750),
    "L": dict(NI=6000, NJ=6500, NK=7000, NL=7500),
    "paper": dict(NI=3200, NJ=3600, NK=4400, NL=4800),
}


def initialize(NI, NJ, NK, NL, datatype=np.float64):
    def grid(r, c):
        return np.arange(r)[:, None], np.arange(c)[None, :]

    i, j = grid(NI, NK)
    A = np.ascontiguousarray(((i * j + 1) % NI) / NI, dtype=datatype)
    i, j = grid(NK, NJ)
    B = np.ascontiguousarray((i * (j + 1) % NJ) / NJ, dtype=datatype)
    i, j = grid(NJ, NL)
    C = np.ascontiguousarray(((i * (j + 3) + 1) % NL) / NL, dtype=datatype)
    i, j = grid(NI, NL)
    D = np.ascontiguousarray((i * (j + 2) % NK) / NK, dtype=datatype)
    return {"alpha": datatype(1.5), "beta": datatype(1.2), "A": A, "B": B, "C": C, "D": D}


OUTPUTS = ("D",)
RTOL, ATOL = 1e-10, 1e-12
