"""General matrix multiply (Polybench ``gemm``): C = alpha * A @ B + beta * C."""

import dace
import numpy as np

NAME = "gemm"
CATEGORY = "blas"
NI = dace.symbol("NI")
NJ = dace.symbol("NJ")
NK = dace.symbol("NK")


@dace.program
def program(
    alpha: dace.float64, beta: dace.float64, C: dace.float64[NI, NJ], A: dace.float64[NI, NK], B: dace.float64[NK, NJ]
):
    C[:] = alpha * A @ B + beta * C


def reference(alpha, beta, C, A, B):
    C[:] = alpha * np.dot(A, B) + beta * C


def product_flops(NI, NJ, NK):
    """Floating-point operations of the program's matrix product (a multiply and an add per term)."""
    return 2 * NI * NJ * NK


PRESETS = {
    "test": dict(NI=12, NJ=14, NK=16),
    "small": dict(NI=40, NJ=45, NK=50),
    "S": dict(NI=1000, NJ=1100, NK=1200),
    "M": dict(NI=2500, NJ=2750, NK=3000),
    "L": dict(NI=7000, NJ=7500, NK=8000),
    "paper": dict(NI=2000, NJ=2300, NK=2600),
}


def initialize(NI, NJ, NK, datatype=np.float64):
    i = np.arange(NI)[:, None]
    j = np.arange(NJ)[None, :]
    k_row = np.arange(NK)[None, :]
    k_col = np.arange(NK)[:, None]
    C = np.ascontiguousarray(((i * j + 1) % NI) / NI, dtype=datatype)
    A = np.ascontiguousarray((i * (k_row + 1) % NK) / NK, dtype=datatype)
    B = np.ascontiguousarray((k_col * (j + 2) % NJ) / NJ, dtype=datatype)
    return {"alpha": datatype(1.5), "beta": datatype(1.2), "C": C, "A": A, "B": B}


OUTPUTS = ("C",)
RTOL, ATOL = 1e-10, 1e-12
