"""2-D finite-difference time-domain kernel (Polybench ``fdtd-2d``).

For t = 0 .. TMAX-1:
    ey[0, j]  = _fict_[t]                                          (all j)
    ey[i, j] -= 0.5 * (hz[i, j] - hz[i-1, j])                      1 <= i < NX
    ex[i, j] -= 0.5 * (hz[i, j] - hz[i, j-1])                      1 <= j < NY
    hz[i, j] -= 0.7 * (ex[i, j+1] - ex[i, j] + ey[i+1, j] - ey[i, j])
                                                     0 <= i < NX-1, 0 <= j < NY-1
"""

import dace
import numpy as np

NAME = "fdtd_2d"
CATEGORY = "iterative"
NX = dace.symbol("NX")
NY = dace.symbol("NY")
TMAX = dace.symbol("TMAX")


@dace.program
def program(ex: dace.float64[NX, NY], ey: dace.float64[NX, NY], hz: dace.float64[NX, NY], _fict_: dace.float64[TMAX]):
    for t in range(TMAX):
        ey[0, :] = _fict_[t]
        ey[1:NX, :] = ey[1:NX, :] - 0.5 * (hz[1:NX, :] - hz[0 : NX - 1, :])
        ex[:, 1:NY] = ex[:, 1:NY] - 0.5 * (hz[:, 1:NY] - hz[:, 0 : NY - 1])
        hz[0 : NX - 1, 0 : NY - 1] = hz[0 : NX - 1, 0 : NY - 1] - 0.7 * (
            ex[0 : NX - 1, 1:NY] - ex[0 : NX - 1, 0 : NY - 1] + ey[1:NX, 0 : NY - 1] - ey[0 : NX - 1, 0 : NY - 1]
        )


def reference(ex, ey, hz, _fict_):
    nx, ny = ex.shape
    for t in range(_fict_.shape[0]):
        ey[0, :] = _fict_[t]
        ey[1:nx, :] = ey[1:nx, :] - 0.5 * (hz[1:nx, :] - hz[0 : nx - 1, :])
        ex[:, 1:ny] = ex[:, 1:ny] - 0.5 * (hz[:, 1:ny] - hz[:, 0 : ny - 1])
        hz[0 : nx - 1, 0 : ny - 1] = hz[0 : nx - 1, 0 : ny - 1] - 0.7 * (
            ex[0 : nx - 1, 1:ny] - ex[0 : nx - 1, 0 : ny - 1] + ey[1:nx, 0 : ny - 1] - ey[0 : nx - 1, 0 : ny - 1]
        )


PRESETS = {
    "test": dict(TMAX=5, NX=12, NY=14),
    "small": dict(TMAX=10, NX=40, NY=45),
    "S": dict(TMAX=20, NX=200, NY=220),
    "M": dict(TMAX=60, NX=400, NY=450),
    "L": dict(TMAX=150, NX=800, NY=900),
    "paper": dict(TMAX=500, NX=1000, NY=1200),
}


def initialize(TMAX, NX, NY, datatype=np.float64):
    i = np.arange(NX, dtype=datatype)[:, None]
    j = np.arange(NY, dtype=datatype)[None, :]
    ex = np.ascontiguousarray(i * (j + 1) / NX, dtype=datatype)
    ey = np.ascontiguousarray(i * (j + 2) / NY, dtype=datatype)
    hz = np.ascontiguousarray(i * (j + 3) / NX, dtype=datatype)
    _fict_ = np.arange(TMAX, dtype=datatype)
    return {"ex": ex, "ey": ey, "hz": hz, "_fict_": _fict_}


OUTPUTS = ("ex", "ey", "hz")
# atol 1e-10: at the paper preset every compiled GPU framework (upstream DaCe's and ours alike) differs from
# NumPy by the same few 1e-11 (contracted multiply-adds); 1e-12 rejected all of them
RTOL, ATOL = 1e-10, 1e-10
