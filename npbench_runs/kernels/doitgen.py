"""Multiresolution analysis kernel (Polybench ``doitgen``).

    A[r, q, p] <- sum_s A[r, q, s] * C4[s, p]      for all r < NR, q < NQ, p < NP
i.e. every (r, q) row of A is replaced by its product with C4 (in place; Polybench uses a
``sum`` buffer so that the row is read completely before it is overwritten). The program writes
it as one batched matrix product, 3-D @ 2-D (NPBench's DaCe version also uses a batched product,
per ``r``).
"""

import dace
import numpy as np

NAME = "doitgen"
CATEGORY = "other"
NR = dace.symbol("NR")
NQ = dace.symbol("NQ")
NP = dace.symbol("NP")


@dace.program
def program(A: dace.float64[NR, NQ, NP], C4: dace.float64[NP, NP]):
    A[:] = A @ C4  # batched over (r, q): the rows of A times C4


def reference(A, C4):
    nr, nq, np_ = A.shape
    A[:] = (A.reshape(nr * nq, np_) @ C4).reshape(nr, nq, np_)


def product_flops(NR, NQ, NP):
    """Floating-point operations of the batched product: NR x NQ rows of NP times C4 (NP x NP)."""
    return 2 * NR * NQ * NP * NP


PRESETS = {
    "test": dict(NR=3, NQ=4, NP=5),
    "small": dict(NR=10, NQ=12, NP=16),
    "S": dict(NR=60, NQ=60, NP=128),
    "M": dict(NR=110, NQ=125, NP=256),
    "L": dict(NR=220, NQ=250, NP=512),
    "paper": dict(NR=220, NQ=250, NP=270),
}


def initialize(NR, NQ, NP, datatype=np.float64):
    r = np.arange(NR)[:, None, None]
    q = np.arange(NQ)[None, :, None]
    p = np.arange(NP)[None, None, :]
    A = np.ascontiguousarray(((r * q + p) % NP) / NP, dtype=datatype)
    s = np.arange(NP)[:, None]
    t = np.arange(NP)[None, :]
    C4 = np.ascontiguousarray((s * t % NP) / NP, dtype=datatype)
    return {"A": A, "C4": C4}


OUTPUTS = ("A",)
RTOL, ATOL = 1e-10, 1e-12
