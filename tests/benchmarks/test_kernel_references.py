"""CPU tests: every kernel's NumPy ``reference`` against values computed independently of it.

For each kernel a scalar-loop implementation written from the kernel's definition (Polybench's loop
nests, NPBench's semantics) runs on small random inputs of the ``test`` preset's shapes; a few kernels
also have a hand-computed example. Nothing here imports DaCe programs' results: it checks the references
that every compiler test compares against.
"""

import copy
import math
import zlib

import numpy as np
import pytest

from npbench_runs.kernels import KERNELS

# ---------------------------------------------------------------------------------------------------------
# Scalar-loop implementations (they mutate their array arguments in place like the references do and
# return what the kernel returns, or None).
# ---------------------------------------------------------------------------------------------------------


def loops_adi(u, TSTEPS):
    n = u.shape[0]
    v = np.zeros((n, n))
    p = np.zeros((n, n))
    q = np.zeros((n, n))
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
    for _ in range(TSTEPS):
        for i in range(1, n - 1):
            v[0, i] = 1.0
            p[i, 0] = 0.0
            q[i, 0] = v[0, i]
            for j in range(1, n - 1):
                p[i, j] = -c / (a * p[i, j - 1] + b)
                q[i, j] = (-d * u[j, i - 1] + (1.0 + 2.0 * d) * u[j, i] - f * u[j, i + 1] - a * q[i, j - 1]) / (
                    a * p[i, j - 1] + b
                )
            v[n - 1, i] = 1.0
            for j in range(n - 2, 0, -1):
                v[j, i] = p[i, j] * v[j + 1, i] + q[i, j]
        for i in range(1, n - 1):
            u[i, 0] = 1.0
            p[i, 0] = 0.0
            q[i, 0] = u[i, 0]
            for j in range(1, n - 1):
                p[i, j] = -f / (d * p[i, j - 1] + e)
                q[i, j] = (-a * v[i - 1, j] + (1.0 + 2.0 * a) * v[i, j] - c * v[i + 1, j] - d * q[i, j - 1]) / (
                    d * p[i, j - 1] + e
                )
            u[i, n - 1] = 1.0
            for j in range(n - 2, 0, -1):
                u[i, j] = p[i, j] * u[i, j + 1] + q[i, j]


def loops_atax(A, x):
    m, n = A.shape
    tmp = [sum(A[i, j] * x[j] for j in range(n)) for i in range(m)]
    return np.array([sum(A[i, j] * tmp[i] for i in range(m)) for j in range(n)])


def loops_bicg(A, p, r, s, q):
    n, m = A.shape
    for j in range(m):
        s[j] = sum(r[i] * A[i, j] for i in range(n))
    for i in range(n):
        q[i] = sum(A[i, j] * p[j] for j in range(m))


def loops_cg_residual(x, b, res, it, diag, tol, maxit):
    n = x.shape[0]

    def residual():
        return math.sqrt(sum((b[i] - (diag * x[i] - x[i - 1] - x[i + 1])) ** 2 for i in range(1, n - 1)))

    res[0] = residual()
    it[0] = 0
    while res[0] > tol and it[0] < maxit:
        new = [(b[i] + x[i - 1] + x[i + 1]) / diag for i in range(1, n - 1)]
        for i in range(1, n - 1):
            x[i] = new[i - 1]
        res[0] = residual()
        it[0] += 1


def loops_conv2d_bias(input, weights, bias):
    n_, h, w, c_in = input.shape
    k, _, _, c_out = weights.shape
    out = np.zeros((n_, h - k + 1, w - k + 1, c_out))
    for n in range(n_):
        for i in range(h - k + 1):
            for j in range(w - k + 1):
                for o in range(c_out):
                    acc = float(bias[o])
                    for p in range(k):
                        for q in range(k):
                            for c in range(c_in):
                                acc += float(input[n, i + p, j + q, c]) * float(weights[p, q, c, o])
                    out[n, i, j, o] = acc
    return out


def loops_covariance(float_n, data):
    n, m = data.shape
    for j in range(m):
        mean = sum(data[i, j] for i in range(n)) / float_n
        for i in range(n):
            data[i, j] -= mean
    cov = np.zeros((m, m))
    for i in range(m):
        for j in range(i, m):
            cov[i, j] = sum(data[k, i] * data[k, j] for k in range(n)) / (float_n - 1.0)
            cov[j, i] = cov[i, j]
    return cov


def loops_doitgen(A, C4):
    nr, nq, np_ = A.shape
    for r in range(nr):
        for q in range(nq):
            row = [sum(A[r, q, s] * C4[s, p] for s in range(np_)) for p in range(np_)]
            for p in range(np_):
                A[r, q, p] = row[p]


def loops_fdtd_2d(ex, ey, hz, _fict_):
    nx, ny = ex.shape
    for t in range(_fict_.shape[0]):
        for j in range(ny):
            ey[0, j] = _fict_[t]
        for i in range(1, nx):
            for j in range(ny):
                ey[i, j] -= 0.5 * (hz[i, j] - hz[i - 1, j])
        for i in range(nx):
            for j in range(1, ny):
                ex[i, j] -= 0.5 * (hz[i, j] - hz[i, j - 1])
        for i in range(nx - 1):
            for j in range(ny - 1):
                hz[i, j] -= 0.7 * (ex[i, j + 1] - ex[i, j] + ey[i + 1, j] - ey[i, j])


def loops_gemm(alpha, beta, C, A, B):
    ni, nk = A.shape
    nj = B.shape[1]
    for i in range(ni):
        for j in range(nj):
            C[i, j] = beta * C[i, j] + alpha * sum(A[i, k] * B[k, j] for k in range(nk))


def loops_gemver(alpha, beta, A, u1, v1, u2, v2, w, x, y, z):
    n = A.shape[0]
    for i in range(n):
        for j in range(n):
            A[i, j] += u1[i] * v1[j] + u2[i] * v2[j]
    for i in range(n):
        x[i] += beta * sum(A[j, i] * y[j] for j in range(n))
    for i in range(n):
        x[i] += z[i]
    for i in range(n):
        w[i] += alpha * sum(A[i, j] * x[j] for j in range(n))


def loops_gesummv(alpha, beta, A, B, x):
    n = A.shape[0]
    return np.array(
        [alpha * sum(A[i, j] * x[j] for j in range(n)) + beta * sum(B[i, j] * x[j] for j in range(n)) for i in range(n)]
    )


def loops_go_fast(a):
    n = a.shape[0]
    trace = 0.0
    for i in range(n):
        trace += math.tanh(a[i, i])
    return np.array([[a[i, j] + trace for j in range(n)] for i in range(n)])


def loops_hdiff(in_field, out_field, coeff):
    ni, nj, nk = out_field.shape

    def u(i, j, k):  # interior frame: the halo is two points wide
        return in_field[i + 2, j + 2, k]

    def lap(i, j, k):
        return 4.0 * u(i, j, k) - (u(i + 1, j, k) + u(i - 1, j, k) + u(i, j + 1, k) + u(i, j - 1, k))

    def flx(i, j, k):  # flux through the face between rows i - 1 and i
        fx = lap(i, j, k) - lap(i - 1, j, k)
        return 0.0 if fx * (u(i, j, k) - u(i - 1, j, k)) > 0 else fx

    def fly(i, j, k):  # flux through the face between columns j - 1 and j
        fy = lap(i, j, k) - lap(i, j - 1, k)
        return 0.0 if fy * (u(i, j, k) - u(i, j - 1, k)) > 0 else fy

    for i in range(ni):
        for j in range(nj):
            for k in range(nk):
                div = flx(i + 1, j, k) - flx(i, j, k) + fly(i, j + 1, k) - fly(i, j, k)
                out_field[i, j, k] = u(i, j, k) - coeff[i, j, k] * div


def _heat_half_step(src, dst):
    n = src.shape[0]
    for i in range(1, n - 1):
        for j in range(1, n - 1):
            for k in range(1, n - 1):
                c = src[i, j, k]
                dst[i, j, k] = (
                    0.125 * (src[i + 1, j, k] - 2.0 * c + src[i - 1, j, k])
                    + 0.125 * (src[i, j + 1, k] - 2.0 * c + src[i, j - 1, k])
                    + 0.125 * (src[i, j, k + 1] - 2.0 * c + src[i, j, k - 1])
                    + c
                )


def loops_heat_3d(A, B, TSTEPS):
    for _ in range(TSTEPS):
        _heat_half_step(A, B)
        _heat_half_step(B, A)


def loops_jacobi_1d(A, B, TSTEPS):
    n = A.shape[0]
    for _ in range(TSTEPS):
        for i in range(1, n - 1):
            B[i] = 0.33333 * (A[i - 1] + A[i] + A[i + 1])
        for i in range(1, n - 1):
            A[i] = 0.33333 * (B[i - 1] + B[i] + B[i + 1])


def loops_jacobi_2d(A, B, TSTEPS):
    n = A.shape[0]
    for _ in range(TSTEPS):
        for i in range(1, n - 1):
            for j in range(1, n - 1):
                B[i, j] = 0.2 * (A[i, j] + A[i, j - 1] + A[i, j + 1] + A[i + 1, j] + A[i - 1, j])
        for i in range(1, n - 1):
            for j in range(1, n - 1):
                A[i, j] = 0.2 * (B[i, j] + B[i, j - 1] + B[i, j + 1] + B[i + 1, j] + B[i - 1, j])


def _matmul(X, Y):
    return np.array(
        [[sum(X[i, k] * Y[k, j] for k in range(X.shape[1])) for j in range(Y.shape[1])] for i in range(X.shape[0])]
    )


def loops_k2mm(alpha, beta, A, B, C, D):
    tmp = alpha * _matmul(A, B)
    prod = _matmul(tmp, C)
    for i in range(D.shape[0]):
        for j in range(D.shape[1]):
            D[i, j] = beta * D[i, j] + prod[i, j]


def loops_k3mm(A, B, C, D):
    return _matmul(_matmul(A, B), _matmul(C, D))


def _softmax_row(row):
    top = max(row)
    e = [math.exp(v - top) for v in row]
    total = sum(e)
    return [v / total for v in e]


def loops_mlp(input, w1, b1, w2, b2, w3, b3):
    def layer(x, w, b, relu):
        rows = []
        for n in range(len(x)):
            row = []
            for s in range(w.shape[1]):
                acc = float(b[s]) + sum(float(x[n][c]) * float(w[c, s]) for c in range(w.shape[0]))
                row.append(max(acc, 0.0) if relu else acc)
            rows.append(row)
        return rows

    h = layer(input, w1, b1, True)
    h = layer(h, w2, b2, True)
    z = layer(h, w3, b3, False)
    return np.array([_softmax_row(row) for row in z])


def loops_mvt(x1, x2, y_1, y_2, A):
    n = A.shape[0]
    for i in range(n):
        x1[i] += sum(A[i, j] * y_1[j] for j in range(n))
    for i in range(n):
        x2[i] += sum(A[j, i] * y_2[j] for j in range(n))


def loops_softmax(x):
    out = np.zeros(x.shape)
    for n in range(x.shape[0]):
        for h in range(x.shape[1]):
            for i in range(x.shape[2]):
                out[n, h, i, :] = _softmax_row([float(v) for v in x[n, h, i, :]])
    return out


def loops_syr2k(alpha, beta, C, A, B):
    n, m = A.shape
    for i in range(n):
        for j in range(i + 1):
            C[i, j] *= beta
        for k in range(m):
            for j in range(i + 1):
                C[i, j] += A[j, k] * alpha * B[i, k] + B[j, k] * alpha * A[i, k]


def loops_vadv(utens_stage, u_stage, wcon, u_pos, utens, dtr_stage):
    ni, nj, nk = utens_stage.shape
    bet_m = bet_p = 0.5
    for i in range(ni):
        for j in range(nj):
            cp = [0.0] * nk
            dp = [0.0] * nk
            for k in range(nk):
                gav = -0.25 * (wcon[i + 1, j, k] + wcon[i, j, k]) if k > 0 else 0.0
                gcv = 0.25 * (wcon[i + 1, j, k + 1] + wcon[i, j, k + 1]) if k < nk - 1 else 0.0
                a = bet_p * gav
                c = bet_p * gcv
                b = dtr_stage - a - c
                d = dtr_stage * u_pos[i, j, k] + utens[i, j, k] + utens_stage[i, j, k]
                if k > 0:
                    d -= bet_m * gav * (u_stage[i, j, k - 1] - u_stage[i, j, k])
                if k < nk - 1:
                    d -= bet_m * gcv * (u_stage[i, j, k + 1] - u_stage[i, j, k])
                if k == 0:
                    cp[k] = c / b
                    dp[k] = d / b
                else:
                    m = 1.0 / (b - cp[k - 1] * a)
                    cp[k] = c * m
                    dp[k] = (d - dp[k - 1] * a) * m
            x = dp[nk - 1]
            utens_stage[i, j, nk - 1] = dtr_stage * (x - u_pos[i, j, nk - 1])
            for k in range(nk - 2, -1, -1):
                x = dp[k] - cp[k] * x
                utens_stage[i, j, k] = dtr_stage * (x - u_pos[i, j, k])


LOOPS = {name[len("loops_") :]: fn for name, fn in globals().items() if name.startswith("loops_")}

# Kernels whose inputs stay as ``initialize`` makes them (vadv: the random signs of a uniform[-1, 1) wcon
# can make the tridiagonal pivots arbitrarily small); all others get uniform[-1, 1) floats, so that
# ReLU, the hdiff flux limiter and max-subtraction in softmax see both signs.
KEEP_INITIAL = {"vadv"}


def _inputs(name):
    module = KERNELS[name]
    args = module.initialize(**module.PRESETS["test"])
    if name in KEEP_INITIAL:
        return args
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    for key, value in args.items():
        if isinstance(value, np.ndarray) and value.ndim > 0 and np.issubdtype(value.dtype, np.floating):
            args[key] = rng.uniform(-1.0, 1.0, value.shape).astype(value.dtype)
    if name == "cg_residual":
        # Stop on the tolerance after a few sweeps (checked below), well before maxit.
        x, b, diag = args["x"], args["b"], args["diag"]
        r0 = np.linalg.norm(b[1:-1] - (diag * x[1:-1] - x[:-2] - x[2:]))
        args["tol"] = args["diag"].dtype.type(0.3 * r0)
        args["maxit"] = 500
    return args


def _tolerances(module):
    single = any(getattr(v, "dtype", None) == np.float32 for v in module.initialize(**module.PRESETS["test"]).values())
    return (2e-5, 1e-6) if single else (1e-9, 1e-12)


def test_every_kernel_has_a_loop_implementation():
    assert set(LOOPS) == set(KERNELS)


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_reference_matches_scalar_loops(name):
    module = KERNELS[name]
    args = _inputs(name)
    ref_args = copy.deepcopy(args)
    loop_args = copy.deepcopy(args)
    want_ret = module.reference(**ref_args)
    loop_ret = LOOPS[name](**loop_args)
    rtol, atol = _tolerances(module)
    for out in module.OUTPUTS:
        got = want_ret if out == "__return" else ref_args[out]
        expected = loop_ret if out == "__return" else loop_args[out]
        assert np.shape(got) == np.shape(expected), f"{name}: {out}"
        np.testing.assert_allclose(got, expected, rtol=rtol, atol=atol, err_msg=f"{name}: {out}")
        if out != "__return" and out in args:  # the kernel really changed this output
            assert not np.array_equal(args[out], expected), f"{name}: {out} unchanged"
    if name == "cg_residual":
        assert 0 < loop_args["it"][0] < loop_args["maxit"]


# ---------------------------------------------------------------------------------------------------------
# Hand-computed examples.
# ---------------------------------------------------------------------------------------------------------


def test_go_fast_by_hand():
    a = np.array([[0.5, 1.0], [2.0, -0.25]])
    trace = 0.46211715726000974 + -0.24491866240370913  # tanh(0.5) + tanh(-0.25)
    np.testing.assert_allclose(KERNELS["go_fast"].reference(a.copy()), a + trace, rtol=1e-14)


def test_softmax_by_hand():
    x = np.array([0.0, math.log(3.0)], dtype=np.float32).reshape(1, 1, 1, 2)
    np.testing.assert_allclose(KERNELS["softmax"].reference(x).ravel(), [0.25, 0.75], rtol=1e-6)


def test_mlp_by_hand():
    # input (1, 1); layer sizes 2, 1, 2; the second hidden unit of layer 1 is clipped by ReLU.
    f = np.float32
    inp = np.array([[2.0]], f)
    w1, b1 = np.array([[1.0, -1.0]], f), np.array([0.0, 0.5], f)  # h1 = relu([2, -1.5]) = [2, 0]
    w2, b2 = np.array([[3.0], [5.0]], f), np.array([-1.0], f)  # h2 = relu(6 - 1) = 5
    w3, b3 = np.array([[0.0, 1.0]], f), np.array([0.0, math.log(3.0) - 5.0], f)  # z = [0, ln 3]
    out = KERNELS["mlp"].reference(inp, w1, b1, w2, b2, w3, b3)
    np.testing.assert_allclose(out, [[0.25, 0.75]], rtol=1e-5)


def test_conv2d_bias_by_hand():
    inp = np.array([1.0, 2.0, 3.0, 4.0], np.float32).reshape(1, 2, 2, 1)
    weights = np.array([1.0, 0.0, 0.0, -1.0], np.float32).reshape(2, 2, 1, 1)
    out = KERNELS["conv2d_bias"].reference(inp, weights, np.array([0.5], np.float32))
    assert out.shape == (1, 1, 1, 1)
    assert out[0, 0, 0, 0] == pytest.approx(1.0 - 4.0 + 0.5)


def test_covariance_by_hand():
    data = np.array([[1.0, 2.0], [3.0, 6.0], [5.0, 10.0]])  # mean [3, 6]
    cov = KERNELS["covariance"].reference(3.0, data)
    np.testing.assert_allclose(data, [[-2.0, -4.0], [0.0, 0.0], [2.0, 4.0]])
    np.testing.assert_allclose(cov, [[4.0, 8.0], [8.0, 16.0]])


def test_syr2k_by_hand():
    A = np.array([[1.0], [2.0]])
    B = np.array([[3.0], [4.0]])
    C = np.array([[1.0, 9.0], [1.0, 1.0]])
    KERNELS["syr2k"].reference(1.0, 2.0, C, A, B)
    # C[0,0] = 2 + (1*3 + 3*1); C[1,0] = 2 + (1*4 + 3*2); C[1,1] = 2 + (2*4 + 4*2); C[0,1] untouched.
    np.testing.assert_allclose(C, [[8.0, 9.0], [12.0, 18.0]])


def test_doitgen_by_hand():
    A = np.array([1.0, 2.0, -1.0, 0.0]).reshape(2, 1, 2)
    C4 = np.array([[1.0, 2.0], [3.0, 4.0]])
    KERNELS["doitgen"].reference(A, C4)
    np.testing.assert_allclose(A.reshape(2, 2), [[7.0, 10.0], [-1.0, -2.0]])


def test_hdiff_by_hand():
    # One interior point (I = J = K = 1), fields constant in j, so only the i-fluxes matter.
    def run(column, coeff):
        in_field = np.repeat(np.array(column, dtype=np.float64)[:, None, None], 5, axis=1)
        out = np.zeros((1, 1, 1))
        KERNELS["hdiff"].reference(in_field, out, np.full((1, 1, 1), coeff))
        return out[0, 0, 0]

    # u(i) = i^4, i = -2..2: lap = -(u(i+1) - 2u(i) + u(i-1)) = -(12 i^2 + 2), so lap(-1..1) = -14, -2, -14.
    # Face below: flux -2 - (-14) = 12, gradient u(0) - u(-1) = -1: opposite signs, kept.
    # Face above: flux -14 - (-2) = -12, gradient +1: kept. out = u(0) - coeff (-12 - 12) = 24 coeff.
    assert run([16.0, 1.0, 0.0, 1.0, 16.0], 0.5) == pytest.approx(12.0)
    # A unit bump: fluxes 5 / -5 have the signs of the gradients (+1 / -1), both limited to 0: out = u(0).
    assert run([0.0, 0.0, 1.0, 0.0, 0.0], 0.5) == pytest.approx(1.0)


def test_vadv_by_hand():
    # wcon = 0 decouples the levels: a = c = 0, b = dtr, x = d / dtr, utens_stage = dtr * (x - u_pos)
    # = u_pos * dtr + utens + utens_stage - dtr * u_pos = utens + utens_stage.
    shape = (1, 1, 3)
    utens_stage = np.array([1.0, 2.0, 3.0]).reshape(shape)
    utens = np.array([0.5, 0.25, -1.0]).reshape(shape)
    u_pos = np.array([7.0, 8.0, 9.0]).reshape(shape)
    KERNELS["vadv"].reference(utens_stage, np.ones(shape), np.zeros((2, 1, 3)), u_pos, utens, 0.15)
    np.testing.assert_allclose(utens_stage.ravel(), [1.5, 2.25, 2.0], rtol=1e-12)
