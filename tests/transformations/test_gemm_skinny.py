"""Products with few output rows (``cpufree/gemm_skinny.cuh``): B streamed once, all rows of C in registers, K split
over blocks when the strips leave the grid idle. Checked on the host (the same decomposition run sequentially, against
NumPy), through the emulation (end to end), and built with nvcc for sm_80 and sm_90."""

import ctypes
import re
import subprocess

import dace
import numpy as np
import pytest
from helpers import host_library
from kernel_copies import mlp
from kernel_steps import items

import dace_cpufree
from dace_cpufree.runtime.build import INCLUDE_DIR, find_nvcc
from dace_cpufree.runtime.mathdx import nvcc_flags

M, N, K = (dace.symbol(s) for s in "MNK")

# The device driver's decomposition (gemm.cuh, gemm_detail::gemm_skinny) run block by block, warp by warp and lane by
# lane on the host: the same plan, units, lane loops and store, the warps' sums added in the order warp 0 adds them.
HOST_DRIVER = r"""
#include <cpufree/gemm_skinny.cuh>
#include <vector>
using namespace cpufree::skinny;

template <typename T, int R>
static void run(long long m, long long n, long long k, T alpha, const T *A, long long lda, bool ta, const T *B,
                long long ldb, T beta, T *C, long long ldc, long long blocks, long long warps, long long *splits) {
    constexpr int V = vec<T>();
    const long long lanes = 32;
    const Plan p = plan(n, k, V, lanes, warps, blocks);
    *splits = p.splits;
    if (p.splits > 1)
        for (long long i = 0; i < m; ++i)
            for (long long j = 0; j < n; ++j) C[i * ldc + j] = beta == T(0) ? T(0) : beta * C[i * ldc + j];
    for (long long b = 0; b < blocks; ++b)
        for (long long w = b; w < p.strips * p.splits; w += blocks) {
            const Unit u = unit(p, w, k);
            for (long long lane = 0; lane < lanes; ++lane) {
                const long long col = u.n0 + lane * V;
                T total[R][V] = {};
                for (long long wp = 0; wp < warps; ++wp) {
                    T acc[R][V] = {};
                    SmallOperand<T> a{A, ta ? 1 : lda, ta ? lda : 1, m, u.k1};
                    lane_partial<T, R>(acc, a, B, ldb, n, col, false, u.k0 + wp * kUnroll, u.k1, warps * kUnroll);
                    for (int i = 0; i < R; ++i)
                        for (int v = 0; v < V; ++v) total[i][v] += acc[i][v];
                }
                if (col >= n) continue;
                for (int i = 0; i < R && i < m; ++i) {
                    T *c = C + i * ldc + col;
                    if (p.splits > 1) {
                        for (int v = 0; v < V; ++v)
                            if (col + v < n) c[v] += alpha * total[i][v];
                    } else {
                        store_row<T>(c, total[i], n - col, false, alpha, beta);
                    }
                }
            }
        }
}

template <typename T>
static long long dispatch(long long m, long long n, long long k, T alpha, const T *A, long long lda, int ta,
                          const T *B, long long ldb, T beta, T *C, long long ldc, long long blocks, long long warps) {
    long long splits = 0;
    if (m <= 4) run<T, 4>(m, n, k, alpha, A, lda, ta, B, ldb, beta, C, ldc, blocks, warps, &splits);
    else if (m <= 8) run<T, 8>(m, n, k, alpha, A, lda, ta, B, ldb, beta, C, ldc, blocks, warps, &splits);
    else run<T, kMaxRows>(m, n, k, alpha, A, lda, ta, B, ldb, beta, C, ldc, blocks, warps, &splits);
    return splits;
}

extern "C" long long skinny_f32(long long m, long long n, long long k, float alpha, const float *A, long long lda,
                                int ta, const float *B, long long ldb, float beta, float *C, long long ldc,
                                long long blocks, long long warps) {
    return dispatch<float>(m, n, k, alpha, A, lda, ta, B, ldb, beta, C, ldc, blocks, warps);
}
extern "C" long long skinny_f64(long long m, long long n, long long k, double alpha, const double *A, long long lda,
                                int ta, const double *B, long long ldb, double beta, double *C, long long ldc,
                                long long blocks, long long warps) {
    return dispatch<double>(m, n, k, alpha, A, lda, ta, B, ldb, beta, C, ldc, blocks, warps);
}
"""


@pytest.fixture(scope="module")
def host(tmp_path_factory):
    lib = host_library(tmp_path_factory.mktemp("skinny"), HOST_DRIVER)
    for name, scalar in (("skinny_f32", ctypes.c_float), ("skinny_f64", ctypes.c_double)):
        fn = getattr(lib, name)
        ll, p = ctypes.c_longlong, ctypes.c_void_p
        fn.argtypes = [ll, ll, ll, scalar, p, ll, ctypes.c_int, p, ll, scalar, p, ll, ll, ll]
        fn.restype = ll
    return lib


def _host_product(lib, dtype, m, n, k, trans_a, blocks, warps, alpha=1.25, beta=0.5, pad=3, seed=0):
    """C = alpha * op(A) @ B + beta * C through the host run of the decomposition, operands with padded rows
    (leading dimensions past their widths); returns (result, NumPy's, the plan's K ranges per strip)."""
    rng = np.random.default_rng(seed)
    a_shape = (k, m) if trans_a else (m, k)
    A = rng.standard_normal((a_shape[0], a_shape[1] + pad)).astype(dtype)
    B = rng.standard_normal((k, n + pad)).astype(dtype)
    C = rng.standard_normal((m, n + pad)).astype(dtype)
    op_a = A[:, :m].T if trans_a else A[:, :k]
    want = C.copy()
    want[:, :n] = alpha * (op_a.astype(np.float64) @ B[:, :n].astype(np.float64)) + beta * C[:, :n]
    fn = lib.skinny_f32 if dtype == np.float32 else lib.skinny_f64
    ptr = lambda x: x.ctypes.data  # noqa: E731
    splits = fn(m, n, k, alpha, ptr(A), A.shape[1], int(trans_a), ptr(B), B.shape[1], beta, ptr(C), C.shape[1],
                blocks, warps)  # fmt: skip
    return C, want, splits


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("trans_a", [False, True], ids=["A", "A.T"])
@pytest.mark.parametrize(
    "m, n, k, blocks, warps",
    [
        (1, 5, 3, 4, 4),  # fewer columns than a lane's vector
        (3, 130, 7, 2, 4),  # columns past a strip, K shorter than a warp's rows in flight
        (8, 300, 1000, 24, 4),  # K split over blocks
        (8, 1000, 2049, 132, 5),  # a split, remainders in K, a block of five warps
        (13, 517, 301, 7, 3),  # M between buckets
        (16, 64, 4000, 264, 4),  # one strip, deep split
    ],
)
def test_the_decomposition_matches_numpy(host, dtype, trans_a, m, n, k, blocks, warps):
    got, want, splits = _host_product(host, dtype, m, n, k, trans_a, blocks, warps)
    assert splits >= 1
    tol = dict(rtol=1e-4, atol=1e-4 * np.sqrt(k)) if dtype == np.float32 else dict(rtol=1e-11, atol=1e-11)
    np.testing.assert_allclose(got, want, **tol)


def test_k_is_split_only_when_the_strips_leave_the_grid_idle(host):
    """On a grid of 264 blocks of 4 warps (an H100 at two blocks per multiprocessor): 2500 columns are 20 strips of
    128, whose K of 3000 is split 12 ways (240 units: 91 % of the blocks busy); K = 200 holds too few rows for every
    warp of a split range; 235 strips (mlp's first layer, K = 3) need no split."""
    args = dict(dtype=np.float32, trans_a=False, blocks=264, warps=4, pad=0)
    assert _host_product(host, m=8, n=2500, k=3000, **args)[2] == 12
    assert _host_product(host, m=8, n=2500, k=200, **args)[2] == 1
    assert _host_product(host, m=8, n=30000, k=3, **args)[2] == 1


@dace.program
def skinny(A: dace.float32[M, K], B: dace.float32[K, N], C: dace.float32[M, N]):
    C[:] = A @ B


@dace.program
def skinny_scaled(A: dace.float32[K, M], B: dace.float32[K, N], C: dace.float32[M, N]):
    C[:] = 0.5 * C + A.T @ B


@dace.program
def skinny_double(A: dace.float64[M, K], B: dace.float64[K, N], C: dace.float64[M, N]):
    C[:] = A @ B


@pytest.mark.parametrize(
    "program, m, n, k",
    [(skinny, 8, 133, 57), (skinny, 1, 7, 300), (skinny_scaled, 16, 41, 129), (skinny_scaled, 5, 130, 9)],
    ids=lambda v: getattr(v, "name", str(v)),
)
def test_skinny_products_match_numpy_in_the_emulation(program, m, n, k):
    dtype = np.float32
    rng = np.random.default_rng(m + n + k)
    a = rng.standard_normal((m, k) if program is skinny else (k, m)).astype(dtype)
    b = rng.standard_normal((k, n)).astype(dtype)
    c = rng.standard_normal((m, n)).astype(dtype)
    want = a @ b if program is skinny else 0.5 * c + a.T @ b
    dace_cpufree.compile(program, backend="emulate", race_check="shuffle")(a, b, c)
    np.testing.assert_allclose(c, want, rtol=1e-4, atol=1e-4)


def test_mlp_matches_numpy_in_the_emulation():
    kernel = mlp
    args = kernel.initialize(**kernel.PRESETS["small"])
    got = dace_cpufree.compile(kernel.program, backend="emulate")(**args)
    np.testing.assert_allclose(got, kernel.reference(**args), rtol=kernel.RTOL, atol=kernel.ATOL)


def test_mlp_products_are_calls_of_every_thread_with_the_tile_launch():
    """The row count is decided inside the call (mlp's batch is a symbol): the products stay one call each, and the
    launch keeps the tile path's block size and shared memory, which the skinny form fits in."""
    source = dace_cpufree.kernel_source(mlp.program)
    calls = [i for i in items(source) if i.collective]
    assert len(calls) == 3
    assert all("cpufree::gemm<float, cpufree_build>((long long)(N)," in "\n".join(c.code) for c in calls)
    assert (source.need_block, source.dynamic_shared) == (
        "cpufree::gemm_threads<float>()",
        "cpufree::gemm_shared_bytes<float>()",
    )


@pytest.mark.compile
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("program", [skinny, skinny_scaled, skinny_double], ids=lambda p: p.name)
def test_nvcc_builds_the_streaming_form(program, arch, tmp_path):
    nvcc = find_nvcc()
    assert nvcc, "nvcc not found (the compile marker skips this test only outside CI)"
    src = tmp_path / "skinny.cu"
    src.write_text(dace_cpufree.kernel_source(program).code)
    cmd = [nvcc, "-std=c++17", f"-arch={arch}", f"-I{INCLUDE_DIR}", *nvcc_flags(), "-ptx", str(src), "-o", "p.ptx"]
    proc = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    ptx = (tmp_path / "p.ptx").read_text()
    if program is skinny_double:  # FP64 products keep the tiles: the form is not in the kernel
        assert "ld.global.cs" not in ptx
        return
    assert re.search(r"ld\.global\.cs\.v4\.f32", ptx)  # B streamed in 16-byte loads
    assert "shfl.sync" in ptx  # op(A) shared between a warp's lanes
    assert re.search(r"(red|atom)\.global\.add\.f32", ptx)  # blocks' sums of a split K


@pytest.mark.gpu
@pytest.mark.parametrize("program", [skinny, skinny_scaled], ids=lambda p: p.name)
@pytest.mark.parametrize("m, n, k", [(8, 10000, 30000), (3, 1001, 9), (16, 129, 100003), (11, 4099, 1000)])
def test_skinny_products_match_numpy_on_gpu(program, m, n, k):
    dtype = np.float32
    rng = np.random.default_rng(1)
    a = rng.random((m, k) if program is skinny else (k, m)).astype(dtype)
    b = rng.random((k, n)).astype(dtype)
    c = rng.random((m, n)).astype(dtype)
    want = a.astype(np.float64) @ b if program is skinny else 0.5 * c + a.T @ b
    dace_cpufree.compile(program)(a, b, c)
    np.testing.assert_allclose(c, want, rtol=1e-4)
