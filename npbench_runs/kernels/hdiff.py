"""COSMO horizontal diffusion (NPBench ``hdiff``, after the GridTools/gt4py stencil definition).

``in_field`` has a halo of two points in i and j: in_field[i + 2, j + 2, k] is the point above
out_field[i, j, k]. With ``u = in_field`` and all indices in the interior's frame:
    lap[i, j]  = 4 u[i, j] - (u[i+1, j] + u[i-1, j] + u[i, j+1] + u[i, j-1])        -1 <= i <= I, -1 <= j <= J
    fx[i, j]   = lap[i, j] - lap[i-1, j];  flx[i, j] = 0 if fx (u[i, j] - u[i-1, j]) > 0 else fx
    fy[i, j]   = lap[i, j] - lap[i, j-1];  fly[i, j] = 0 if fy (u[i, j] - u[i, j-1]) > 0 else fy
    out[i, j]  = u[i, j] - coeff[i, j] (flx[i+1, j] - flx[i, j] + fly[i, j+1] - fly[i, j])
independently for every level k.
"""

import dace
import numpy as np

NAME = "hdiff"
CATEGORY = "other"
I = dace.symbol("I")
J = dace.symbol("J")
K = dace.symbol("K")


@dace.program
def program(in_field: dace.float64[I + 4, J + 4, K], out_field: dace.float64[I, J, K], coeff: dace.float64[I, J, K]):
    # Laplacian on the interior plus a one-point ring: lap[a, b] sits on in_field[a + 1, b + 1].
    lap = 4.0 * in_field[1 : I + 3, 1 : J + 3, :] - (
        in_field[0 : I + 2, 1 : J + 3, :]
        + in_field[2 : I + 4, 1 : J + 3, :]
        + in_field[1 : I + 3, 0 : J + 2, :]
        + in_field[1 : I + 3, 2 : J + 4, :]
    )
    # Fluxes through the I + 1 faces in i (flx[a, b]: between interior rows a - 1 and a).
    dlx = lap[1 : I + 2, 1 : J + 1, :] - lap[0 : I + 1, 1 : J + 1, :]
    flx = np.where(dlx * (in_field[2 : I + 3, 2 : J + 2, :] - in_field[1 : I + 2, 2 : J + 2, :]) > 0.0, 0.0, dlx)
    # Fluxes through the J + 1 faces in j.
    dly = lap[1 : I + 1, 1 : J + 2, :] - lap[1 : I + 1, 0 : J + 1, :]
    fly = np.where(dly * (in_field[2 : I + 2, 2 : J + 3, :] - in_field[2 : I + 2, 1 : J + 2, :]) > 0.0, 0.0, dly)
    out_field[:] = in_field[2 : I + 2, 2 : J + 2, :] - coeff * (
        flx[1 : I + 1, :, :] - flx[0:I, :, :] + fly[:, 1 : J + 1, :] - fly[:, 0:J, :]
    )


def reference(in_field, out_field, coeff):
    ni, nj, _ = out_field.shape
    u = in_field

    def sh(di, dj):
        """u on interior rows -1 .. I and columns -1 .. J, shifted by (di, dj)."""
        return u[1 + di : 1 + di + ni + 2, 1 + dj : 1 + dj + nj + 2, :]

    lap = 4.0 * sh(0, 0) - sh(-1, 0) - sh(1, 0) - sh(0, -1) - sh(0, 1)  # rows/cols -1 .. I / J
    centre = u[2 : ni + 2, 2 : nj + 2, :]

    fx = np.diff(lap[:, 1 : nj + 1, :], axis=0)  # faces between rows a-1 and a, a = 0 .. I
    gx = u[2 : ni + 3, 2 : nj + 2, :] - u[1 : ni + 2, 2 : nj + 2, :]
    flx = fx.copy()
    flx[fx * gx > 0] = 0.0

    fy = np.diff(lap[1 : ni + 1, :, :], axis=1)
    gy = u[2 : ni + 2, 2 : nj + 3, :] - u[2 : ni + 2, 1 : nj + 2, :]
    fly = fy.copy()
    fly[fy * gy > 0] = 0.0

    out_field[:] = centre - coeff * (np.diff(flx, axis=0) + np.diff(fly, axis=1))


PRESETS = {
    "test": dict(I=6, J=5, K=3),
    "small": dict(I=16, J=16, K=8),
    "S": dict(I=64, J=64, K=60),
    "M": dict(I=128, J=128, K=160),
    "L": dict(I=384, J=384, K=160),
    "paper": dict(I=256, J=256, K=160),
}


def initialize(I, J, K, datatype=np.float64):
    rng = np.random.default_rng(42)
    in_field = rng.random((I + 4, J + 4, K)).astype(datatype, copy=False)
    out_field = rng.random((I, J, K)).astype(datatype, copy=False)
    coeff = rng.random((I, J, K)).astype(datatype, copy=False)
    return {
        "in_field": np.ascontiguousarray(in_field),
        "out_field": np.ascontiguousarray(out_field),
        "coeff": np.ascontiguousarray(coeff),
    }


OUTPUTS = ("out_field",)
RTOL, ATOL = 1e-10, 1e-12
