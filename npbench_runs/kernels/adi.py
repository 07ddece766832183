"""Alternating Direction Implicit solver for 2-D heat diffusion (Polybench ``adi``).

Coefficients (Polybench):
    DX = DY = 1/N, DT = 1/TSTEPS, B1 = 2, B2 = 1
    mul1 = B1*DT/DX^2, mul2 = B2*DT/DY^2
    a = c = -mul1/2, b = 1 + mul1, d = f = -mul2/2, e = 1 + mul2
For t = 1 .. TSTEPS:
  column sweep (for every i in 1..N-2, vectorised over i below):
    v[0,i] = 1; p[i,0] = 0; q[i,0] = v[0,i]
    j = 1..N-2:  p[i,j] = -c / (a p[i,j-1] + b)
                 q[i,j] = (-d u[j,i-1] + (1+2d) u[j,i] - f u[j,i+1] - a q[i,j-1])
                          / (a p[i,j-1] + b)
    v[N-1,i] = 1
    j = N-2..1:  v[j,i] = p[i,j] v[j+1,i] + q[i,j]
  row sweep (for every i in 1..N-2):
    u[i,0] = 1; p[i,0] = 0; q[i,0] = u[i,0]
    j = 1..N-2:  p[i,j] = -f / (d p[i,j-1] + e)
                 q[i,j] = (-a v[i-1,j] + (1+2a) v[i,j] - c v[i+1,j] - d q[i,j-1])
                          / (d p[i,j-1] + e)
    u[i,N-1] = 1
    j = N-2..1:  u[i,j] = p[i,j] u[i,j+1] + q[i,j]

Note: this follows Polybench's ``b = 1 + mul1`` (NPBench's NumPy port uses
``1 + mul2``); only the numerical values differ, not the work.
"""

import dace
import numpy as np

NAME = "adi"
CATEGORY = "iterative"
N = dace.symbol("N")


@dace.program
def program(u: dace.float64[N, N], TSTEPS: dace.int64):
    v = np.zeros((N, N), dtype=np.float64)
    p = np.zeros((N, N), dtype=np.float64)
    q = np.zeros((N, N), dtype=np.float64)

    DX = 1.0 / N
    DY = 1.0 / N
    DT = 1.0 / TSTEPS
    B1 = 2.0
    B2 = 1.0
    mul1 = B1 * DT / (DX * DX)
    mul2 = B2 * DT / (DY * DY)
    a = -mul1 / 2.0
    b = 1.0 + mul1
    c = a
    d = -mul2 / 2.0
    e = 1.0 + mul2
    f = d

    for t in range(TSTEPS):
        # column sweep
        v[0, 1 : N - 1] = 1.0
        p[1 : N - 1, 0] = 0.0
        q[1 : N - 1, 0] = v[0, 1 : N - 1]
        for j in range(1, N - 1):
            p[1 : N - 1, j] = -c / (a * p[1 : N - 1, j - 1] + b)
            q[1 : N - 1, j] = (
                -d * u[j, 0 : N - 2] + (1.0 + 2.0 * d) * u[j, 1 : N - 1] - f * u[j, 2:N] - a * q[1 : N - 1, j - 1]
            ) / (a * p[1 : N - 1, j - 1] + b)
        v[N - 1, 1 : N - 1] = 1.0
        for j in range(N - 2, 0, -1):
            v[j, 1 : N - 1] = p[1 : N - 1, j] * v[j + 1, 1 : N - 1] + q[1 : N - 1, j]

        # row sweep
        u[1 : N - 1, 0] = 1.0
        p[1 : N - 1, 0] = 0.0
        q[1 : N - 1, 0] = u[1 : N - 1, 0]
        for j in range(1, N - 1):
            p[1 : N - 1, j] = -f / (d * p[1 : N - 1, j - 1] + e)
            q[1 : N - 1, j] = (
                -a * v[0 : N - 2, j] + (1.0 + 2.0 * a) * v[1 : N - 1, j] - c * v[2:N, j] - d * q[1 : N - 1, j - 1]
            ) / (d * p[1 : N - 1, j - 1] + e)
        u[1 : N - 1, N - 1] = 1.0
        for j in range(N - 2, 0, -1):
            u[1 : N - 1, j] = p[1 : N - 1, j] * u[1 : N - 1, j + 1] + q[1 : N - 1, j]


def reference(u, TSTEPS):
    n = u.shape[0]
    v = np.zeros_like(u)
    p = np.zeros_like(u)
    q = np.zeros_like(u)

    dx = 1.0 / n
    dy = 1.0 / n
    dt = 1.0 / TSTEPS
    mul1 = 2.0 * dt / (dx * dx)
    mul2 = 1.0 * dt / (dy * dy)
    a = -mul1 / 2.0
    b = 1.0 + mul1
    c = a
    d = -mul2 / 2.0
    e = 1.0 + mul2
    f = d

    I = slice(1, n - 1)  # interior index range i = 1..n-2 (vectorised)
    for _ in range(TSTEPS):
        # column sweep: tridiagonal solves along the first axis of u
        v[0, I] = 1.0
        p[I, 0] = 0.0
        q[I, 0] = v[0, I]
        for j in range(1, n - 1):
            den = a * p[I, j - 1] + b
            p[I, j] = -c / den
            q[I, j] = (-d * u[j, 0 : n - 2] + (1.0 + 2.0 * d) * u[j, 1 : n - 1] - f * u[j, 2:n] - a * q[I, j - 1]) / den
        v[n - 1, I] = 1.0
        for j in range(n - 2, 0, -1):
            v[j, I] = p[I, j] * v[j + 1, I] + q[I, j]

        # row sweep: tridiagonal solves along the second axis
        u[I, 0] = 1.0
        p[I, 0] = 0.0
        q[I, 0] = u[I, 0]
        for j in range(1, n - 1):
            den = d * p[I, j - 1] + e
            p[I, j] = -f / den
            q[I, j] = (-a * v[0 : n - 2, j] + (1.0 + 2.0 * a) * v[1 : n - 1, j] - c * v[2:n, j] - d * q[I, j - 1]) / den
        u[I, n - 1] = 1.0
        for j in range(n - 2, 0, -1):
            u[I, j] = p[I, j] * u[I, j + 1] + q[I, j]


PRESETS = {
    "test": dict(N=12, TSTEPS=3),
    "small": dict(N=40, TSTEPS=5),
    "S": dict(N=100, TSTEPS=5),
    "M": dict(N=200, TSTEPS=20),
    "L": dict(N=500, TSTEPS=50),
    "paper": dict(N=200, TSTEPS=100),
}


def initialize(N, TSTEPS, datatype=np.float64):
    i = np.arange(N, dtype=datatype)[:, None]
    j = np.arange(N, dtype=datatype)[None, :]
    u = np.ascontiguousarray((i + N - j) / N, dtype=datatype)
    return {"u": u, "TSTEPS": int(TSTEPS)}


OUTPUTS = ("u",)
RTOL, ATOL = 1e-10, 1e-12
