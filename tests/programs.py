"""Small programs whose structure (steps, syncs) is known by hand."""

import dace
import numpy as np

N = dace.symbol("N")


@dace.program
def independent_then_dependent(A: dace.float64[N], B: dace.float64[N], C: dace.float64[N], D: dace.float64[N]):
    B[:] = A + 1.0  # step 1
    C[:] = A * 2.0  # no dependency on the map above: same step
    D[1:] = B[:-1] + C[1:]  # reads B and C written by other threads: one grid.sync()


@dace.program
def two_independent(A: dace.float64[N], B: dace.float64[N], C: dace.float64[N]):
    B[:] = A + 1.0
    C[:] = A * 3.0


@dace.program
def time_loop(A: dace.float64[N], B: dace.float64[N], T: dace.int64):
    for _ in range(T):
        B[1:-1] = 0.5 * (A[:-2] + A[2:])
        A[1:-1] = 0.5 * (B[:-2] + B[2:])


@dace.program
def scalar_sum(A: dace.float64[N], out: dace.float64[1]):
    out[0] = np.sum(A)


@dace.program
def update_and_dot(x: dace.float64[N], y: dace.float64[N], out: dace.float64[1]):
    # an explicit tasklet: its connectors are declared with << and >> (names ruff cannot see)
    for i in dace.map[0:N]:
        with dace.tasklet:
            a << x[i]  # noqa: F821
            b >> y[i]  # noqa: F821
            s >> out(1, lambda u, v: u + v)[0]  # noqa: F821
            b = 2.0 * a  # noqa: F821, F841
            s = a * a  # noqa: F821, F841


BR, BM, BK, BN = (dace.symbol(s) for s in ("BR", "BM", "BK", "BN"))


@dace.program
def both_batched(A: dace.float64[BR, BM, BK], B: dace.float64[BR, BK, BN], C: dace.float64[BR, BM, BN]):
    C[:] = A @ B  # a matrix per batch entry on both sides: DaCe's map of products (pure expansion)


@dace.program
def boundary_copies(p: dace.float64[N, N]):
    """Copies between two regions of one array (the direction DaCe records on the memlet)."""
    p[0, :] = p[1, :]
    p[:, -1] = p[:, -2]
    p[-1, :] = p[-2, :]
    p[:, 0] = p[:, 1]


M, SK = dace.symbol("M"), dace.symbol("K")


@dace.program
def softmax_f64(x: dace.float64[N, M, SK, SK]):
    tmp_max = np.max(x, axis=-1)
    tmp_out = np.exp(x - tmp_max[:, :, :, np.newaxis])
    tmp_sum = np.sum(tmp_out, axis=-1)
    return tmp_out / tmp_sum[:, :, :, np.newaxis]


SOFTMAX_PAPER = dict(N=64, H=16, SM=512)  # NPBench's softmax at its paper preset


@dace.program
def row_sums(A: dace.float64[M, N], x: dace.float64[N], y: dace.float64[M]):
    for _ in range(2):  # repeated (alone outside loops it would be one streamed call, cpufree::gemv_right)
        y[:] = A @ x  # reduced along the contiguous dimension, a tile or warp per row


@dace.program
def column_sums(x2: dace.float64[N], y_2: dace.float64[N], A: dace.float64[N, N]):
    x2 += y_2 @ A  # mvt's second product alone: outputs along the contiguous dimension
