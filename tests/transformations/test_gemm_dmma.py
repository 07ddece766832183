"""FP64 tiles on the 16x8x8 DMMA instruction (``cpufree/gemm_dmma.cuh``, ``gemm_detail::gemm_tensor_dmma``): the
index arithmetic run on the host. A host program plays one block, warp by warp and lane by lane: the 16-byte copies
into shared memory, the fragment loads the kernel makes (its per-thread bases and strides, each compared with the
layout's slots), the instruction defined here from PTX's fragment layout of ``mma.m16n8k8.f64``, and the staged
output. Checked against NumPy, with every shared-memory slot written once and no bank conflict in the 16-byte loads
and stores."""

import ctypes

import numpy as np
import pytest
from helpers import host_library

HOST_BLOCK = r"""
#include <cpufree/gemm_dmma.cuh>
#include <vector>
using namespace cpufree::dmma;

// mma.m16n8k8.row.col.f64 as PTX defines its fragments (lane = 4 g + t): a0 (g, t), a1 (g + 8, t), a2 (g, t + 4),
// a3 (g + 8, t + 4) of the 16 x 8 A; b0 (k t, n g), b1 (k t + 4, n g) of the 8 x 8 B; d0 (g, 2t), d1 (g, 2t + 1),
// d2 (g + 8, 2t), d3 (g + 8, 2t + 1) of the 16 x 8 D += A B.
static void instruction(const double a[32][4], const double b[32][2], double d[32][4]) {
    double A[16][8], B[8][8], D[16][8];
    for (int l = 0; l < 32; ++l) {
        const int g = l / 4, t = l % 4;
        A[g][t] = a[l][0], A[g + 8][t] = a[l][1], A[g][t + 4] = a[l][2], A[g + 8][t + 4] = a[l][3];
        B[t][g] = b[l][0], B[t + 4][g] = b[l][1];
        D[g][2 * t] = d[l][0], D[g][2 * t + 1] = d[l][1], D[g + 8][2 * t] = d[l][2], D[g + 8][2 * t + 1] = d[l][3];
    }
    for (int i = 0; i < 16; ++i)
        for (int j = 0; j < 8; ++j)
            for (int k = 0; k < 8; ++k) D[i][j] += A[i][k] * B[k][j];
    for (int l = 0; l < 32; ++l) {
        const int g = l / 4, t = l % 4;
        d[l][0] = D[g][2 * t], d[l][1] = D[g][2 * t + 1], d[l][2] = D[g + 8][2 * t], d[l][3] = D[g + 8][2 * t + 1];
    }
}

// A quarter warp's 16-byte accesses at these double offsets: how many share a bank group with an earlier one.
static long long conflicts(const int offsets[8]) {
    long long n = 0;
    for (int x = 0; x < 8; ++x)
        for (int y = 0; y < x; ++y) n += (offsets[x] / 2) % 8 == (offsets[y] / 2) % 8;
    return n;
}

// C (TM x 64) = A (TM x K, row-major) @ B (K x 64, row-major), K a multiple of 16. Returns -1 when an offset the
// kernel computes differs from the layout's slot or a slot is written twice or never, else the bank conflicts counted.
template <int TM>
static long long block(const double *A, const double *B, double *C, int K) {
    using S = Shape<TM>;
    std::vector<double> smem(S::kAElems + S::kBElems);
    static double acc[4][32][S::kGroupsN][S::kGroupsM][4];
    for (auto &w : acc) for (auto &l : w) for (auto &p : l) for (auto &q : p) for (double &v : q) v = 0.0;
    long long banks = 0;
    for (int kt = 0; kt < K / 16; ++kt) {
        std::vector<int> written(smem.size(), 0);
        for (int tid = 0; tid < 128; ++tid) {
            for (int j = 0; j < S::kACopies; ++j) {
                const int row = a_copy_row(tid, j), chunk = a_copy_chunk(tid);
                if (row != a_copy_row(tid, 0) + j * kACopyRows) return -1;  // the kernel's source steps
                const int dst = a_copy_offset(tid) + j * kACopyStride;
                if (dst != 2 * a_slot(row, chunk)) return -1;
                for (int e = 0; e < 2; ++e) smem[dst + e] = A[row * K + kt * 16 + 2 * chunk + e], ++written[dst + e];
            }
            for (int j = 0; j < S::kBCopies; ++j) {
                const int row = b_copy_row(tid, j), chunk = b_copy_chunk(tid);
                if (row != b_copy_row(tid, 0) + j * kBCopyRows) return -1;
                const int dst = S::kAElems + b_copy_offset(tid, j % 2) + (j / 2) * kBCopyPairStride;
                if (dst != S::kAElems + 2 * b_slot(row, chunk)) return -1;
                for (int e = 0; e < 2; ++e) smem[dst + e] = B[(kt * 16 + row) * 64 + 2 * chunk + e], ++written[dst + e];
            }
        }
        for (int w : written)
            if (w != 1) return -1;
        for (int warp = 0; warp < 4; ++warp) {
            const int wm = warp % 2, wn = warp / 2;
            for (int step = 0; step < S::kSteps; ++step) {
                double af[32][S::kGroupsM][2], bf[32][S::kGroupsN][2][2];
                for (int q = 0; q < S::kGroupsM; ++q) {
                    int quarter[4][8];
                    for (int lane = 0; lane < 32; ++lane) {
                        const int off = a_frag_offset<TM>(wm, lane, step) + a_frag_stride(q);
                        if (off != 2 * a_slot(a_frag_row<TM>(wm, lane, q), a_frag_chunk(lane, step))) return -1;
                        af[lane][q][0] = smem[off], af[lane][q][1] = smem[off + 1];
                        quarter[lane / 8][lane % 8] = off;
                    }
                    for (auto &qw : quarter) banks += conflicts(qw);
                }
                for (int p = 0; p < S::kGroupsN; ++p)
                    for (int e = 0; e < 2; ++e) {
                        int quarter[4][8];
                        for (int lane = 0; lane < 32; ++lane) {
                            const int off = b_frag_offset(wn, lane) + b_frag_stride(step, e, p);
                            if (off != 2 * b_slot(b_frag_row(lane, step, e), b_frag_chunk(wn, lane, p))) return -1;
                            bf[lane][p][e][0] = smem[S::kAElems + off], bf[lane][p][e][1] = smem[S::kAElems + off + 1];
                            quarter[lane / 8][lane % 8] = off;
                        }
                        for (auto &qw : quarter) banks += conflicts(qw);
                    }
                for (int p = 0; p < S::kGroupsN; ++p)
                    for (int q = 0; q < S::kGroupsM; ++q) {
                        double a[32][4], b[32][2], d[32][4];
                        for (int lane = 0; lane < 32; ++lane) {
                            for (int x = 0; x < 2; ++x)
                                for (int y = 0; y < 2; ++y) a[lane][2 * x + y] = bf[lane][p][x][y];
                            b[lane][0] = af[lane][q][0], b[lane][1] = af[lane][q][1];
                            for (int v = 0; v < 4; ++v) d[lane][v] = acc[warp][lane][p][q][v];
                        }
                        instruction(a, b, d);
                        for (int lane = 0; lane < 32; ++lane)
                            for (int v = 0; v < 4; ++v) acc[warp][lane][p][q][v] = d[lane][v];
                    }
            }
        }
    }
    for (int tid = 0; tid < 128; ++tid) {  // the copies' quarter warps: 16-byte stores into shared memory
        if (tid % 8) continue;
        for (int j = 0; j < S::kACopies; ++j) {
            int q[8];
            for (int x = 0; x < 8; ++x) q[x] = a_copy_offset(tid + x) + j * kACopyStride;
            banks += conflicts(q);
        }
        for (int j = 0; j < S::kBCopies; ++j) {
            int q[8];
            for (int x = 0; x < 8; ++x) q[x] = b_copy_offset(tid + x, j % 2) + (j / 2) * kBCopyPairStride;
            banks += conflicts(q);
        }
    }
    for (int warp = 0; warp < 4; ++warp)  // the staged tile's 16-byte stores: accumulators v, v + 2 adjacent
        for (int p = 0; p < S::kGroupsN; ++p)
            for (int q = 0; q < S::kGroupsM; ++q)
                for (int v = 0; v < 2; ++v) {
                    int quarter[4][8];
                    for (int lane = 0; lane < 32; ++lane) {
                        const int r = acc_row<TM>(warp % 2, lane, q, v), c = acc_col(warp / 2, lane, p, v);
                        if (acc_row<TM>(warp % 2, lane, q, v + 2) != r || acc_col(warp / 2, lane, p, v + 2) != c + 1 ||
                            (r * S::kLdc + c) % 2 != 0)
                            return -1;
                        quarter[lane / 8][lane % 8] = r * S::kLdc + c;
                    }
                    for (auto &qw : quarter) banks += conflicts(qw);
                }
    std::vector<int> staged(TM * 64, 0);
    for (int warp = 0; warp < 4; ++warp)
        for (int lane = 0; lane < 32; ++lane)
            for (int p = 0; p < S::kGroupsN; ++p)
                for (int q = 0; q < S::kGroupsM; ++q)
                    for (int v = 0; v < 4; ++v) {
                        const int r = acc_row<TM>(warp % 2, lane, q, v), c = acc_col(warp / 2, lane, p, v);
                        if (r < 0 || r >= TM || c < 0 || c >= 64) return -1;
                        C[r * 64 + c] = acc[warp][lane][p][q][v];
                        ++staged[r * 64 + c];
                    }
    for (int w : staged)
        if (w != 1) return -1;
    return banks;
}

extern "C" long long dmma_block_128(const double *A, const double *B, double *C, int K) {
    return block<128>(A, B, C, K);
}
extern "C" long long dmma_block_64(const double *A, const double *B, double *C, int K) {
    return block<64>(A, B, C, K);
}
"""


@pytest.fixture(scope="module")
def host(tmp_path_factory):
    lib = host_library(tmp_path_factory.mktemp("dmma"), HOST_BLOCK)
    for tm in (64, 128):
        fn = getattr(lib, f"dmma_block_{tm}")
        fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int]
        fn.restype = ctypes.c_longlong
    return lib


@pytest.mark.parametrize("tm", [64, 128])
@pytest.mark.parametrize("k", [16, 48])
def test_one_block_of_the_dmma_tile_matches_numpy_without_bank_conflicts(host, tm, k):
    rng = np.random.default_rng(tm + k)
    A = rng.standard_normal((tm, k))
    B = rng.standard_normal((k, 64))
    C = np.full((tm, 64), np.nan)
    banks = getattr(host, f"dmma_block_{tm}")(A.ctypes.data, B.ctypes.data, C.ctypes.data, k)
    assert banks >= 0, "an offset differs from the layout's slot, or a slot is written twice or never"
    np.testing.assert_allclose(C, A @ B, rtol=1e-12, atol=1e-12)
    assert banks == 0
