// Products with few output rows, for cpufree::gemm: C (M x N) = alpha * op(A) @ B + beta * C with M <= kMaxRows and
// B untransposed (K x N, N contiguous), the form of a small batch times a weight matrix (x @ W). A 64-row output
// tile would spend most of its multiply-adds on rows that do not exist; this form instead streams B once, in 16-byte
// loads, and keeps all M rows of the output in registers:
//
//   - a warp owns a strip of lanes x kVec consecutive columns (kVec = 16 / sizeof(T): one 16-byte load per lane and
//     row of B) and runs down a range of K, kUnroll rows of B in flight per lane; the small operand op(A) is read
//     one element at a time at warp-uniform addresses (M x K elements: cached, re-read once per strip);
//   - the block's warps split the unit's K range between them (interleaved by kUnroll rows) and hand their partial
//     sums to warp 0 through shared memory, so the output is combined once per block;
//   - work units are (strip, K range); K is split into ranges when the strips alone would leave the grid's last wave
//     mostly idle (the policy of the tile path's split-K), and then the blocks add their sums into C atomically
//     (C scaled by beta first, one grid sync).
//
// Why M <= 16: the accumulators take M x 16 bytes per lane (64 registers at M = 16, plus 32 for the rows in flight:
// within the register budget the tile path already sets for the kernel), and at M = 16 a loaded element feeds
// 16 multiply-adds, which at HBM speed uses under half of the FP32 or FP64 FMA rate per SM, so the form stays
// bandwidth-bound (docs/linear-algebra.md gives the numbers).
//
// Everything but the device driver (gemm.cuh, gemm_detail::gemm_skinny) is host-callable, so that a host program can
// run the same decomposition sequentially and check it against a plain product
// (tests/transformations/test_gemm_skinny.py).
#pragma once

#include "host_device.h"

namespace cpufree {
namespace skinny {

constexpr int kMaxRows = 16;       // most output rows of the form (see above)
constexpr int kUnroll = 8;         // rows of B a lane has in flight: 8 x 16 bytes
constexpr int kMinIterations = 4;  // fewest loop iterations per warp that a split K range keeps

// Elements of T per 16-byte load.
template <typename T> CPUFREE_HD constexpr int vec() { return int(16 / sizeof(T)); }

// How the grid shares a product: `strips` column strips of `strip_cols` columns, each split into `splits` K ranges of
// `k_per` rows (a multiple of kUnroll; the last range may be shorter).
struct Plan {
    long long strip_cols, strips, splits, k_per;
};

// The fewest K ranges per strip whose units fill the grid's waves to at least 7/8, else the best fill, with every
// warp keeping kMinIterations iterations per range.
CPUFREE_HD inline Plan plan(long long N, long long K, int vec_elems, long long lanes, long long warps,
                            long long blocks) {
    Plan p;
    p.strip_cols = lanes * vec_elems;
    p.strips = (N + p.strip_cols - 1) / p.strip_cols;
    p.splits = 1;
    long long most = K / (warps * kUnroll * kMinIterations);
    if (most > blocks) most = blocks;
    double best = 0.0;
    for (long long s = 1; s <= most && p.strips > 0; ++s) {
        const long long units = p.strips * s, waves = (units + blocks - 1) / blocks;
        const double fill = double(units) / double(waves * blocks);
        if (fill > best + 1e-9) best = fill, p.splits = s;
        if (8 * units >= 7 * waves * blocks) break;
    }
    const long long per = (K + p.splits - 1) / p.splits;
    p.k_per = (per + kUnroll - 1) / kUnroll * kUnroll;
    if (p.k_per == 0) p.k_per = kUnroll;
    p.splits = (K + p.k_per - 1) / p.k_per;  // no empty range after the rounding
    if (p.splits < 1) p.splits = 1;
    return p;
}

// Work unit `w` of a plan: its strip's first column and its K range [k0, k1).
struct Unit {
    long long n0, k0, k1;
};
CPUFREE_HD inline Unit unit(const Plan &p, long long w, long long K) {
    Unit u;
    u.n0 = (w / p.splits) * p.strip_cols;
    u.k0 = (w % p.splits) * p.k_per;
    u.k1 = u.k0 + p.k_per < K ? u.k0 + p.k_per : K;
    return u;
}

// kVec consecutive elements of a row of B from p, zero past `cols_left`; one 16-byte streaming load where `vec` (B's
// rows 16-byte aligned) and the whole vector is inside.
template <typename T>
CPUFREE_HD inline void load_row(T (&b)[vec<T>()], const T *p, long long cols_left, bool vec_ok) {
    constexpr int V = vec<T>();
#if defined(__CUDA_ARCH__)
    if (vec_ok && cols_left >= V) {
        if constexpr (V == 4) {
            const float4 v = __ldcs(reinterpret_cast<const float4 *>(p));
            b[0] = v.x, b[1] = v.y, b[2] = v.z, b[3] = v.w;
        } else {
            const double2 v = __ldcs(reinterpret_cast<const double2 *>(p));
            b[0] = v.x, b[1] = v.y;
        }
        return;
    }
#else
    (void)vec_ok;
#endif
#pragma unroll
    for (int v = 0; v < V; ++v) b[v] = v < cols_left ? p[v] : T(0);
}

// One lane's output values of a row: C[n .. n + kVec) = alpha * sums + beta * C (C not read where beta is 0), one
// 16-byte load and store where `vec_ok` (C's rows 16-byte aligned) and the whole vector is inside, else per element.
template <typename T>
CPUFREE_HD inline void store_row(T *c, const T (&sums)[vec<T>()], long long cols_left, bool vec_ok, T alpha, T beta) {
    constexpr int V = vec<T>();
#if defined(__CUDA_ARCH__)
    if (vec_ok && cols_left >= V) {
        if constexpr (V == 4) {
            float4 o{alpha * sums[0], alpha * sums[1], alpha * sums[2], alpha * sums[3]};
            if (beta != T(0)) {
                const float4 q = *reinterpret_cast<const float4 *>(c);
                o.x += beta * q.x, o.y += beta * q.y, o.z += beta * q.z, o.w += beta * q.w;
            }
            *reinterpret_cast<float4 *>(c) = o;
        } else {
            double2 o{alpha * sums[0], alpha * sums[1]};
            if (beta != T(0)) {
                const double2 q = *reinterpret_cast<const double2 *>(c);
                o.x += beta * q.x, o.y += beta * q.y;
            }
            *reinterpret_cast<double2 *>(c) = o;
        }
        return;
    }
#else
    (void)vec_ok;
#endif
#pragma unroll
    for (int v = 0; v < V; ++v)
        if (v < cols_left) c[v] = beta == T(0) ? alpha * sums[v] : alpha * sums[v] + beta * c[v];
}

// op(A)[i, k + u] for the rows of one loop iteration (k .. k + kUnroll), read straight from memory: the host's view
// (a device warp instead shares the reads between its lanes and broadcasts them, gemm.cuh's SmallOperandWarp).
template <typename T>
struct SmallOperand {
    const T *A;
    long long a_row, a_col, m, k_end;  // op(A)[i, k] = A[i * a_row + k * a_col]; m rows, K ends at k_end
    long long k = 0;
    CPUFREE_HD void fetch(long long k_) { k = k_; }
    CPUFREE_HD T get(int i, int u) const {
        return i < m && k + u < k_end ? A[i * a_row + (k + u) * a_col] : T(0);
    }
};

// One lane's partial sums: acc[i][v] += sum over its rows k of op(A)[i, k] * B[k, n + v], for the rows
// k = k_first, k_first + 1, ... in groups of kUnroll that start k_step apart, up to k_end; columns n .. n + kVec of N
// (a lane past N multiplies zeros: every lane of a warp runs the same iterations). `a` gives op(A)[i, k + u]
// (SmallOperand or the warp's version of it).
template <typename T, int R, typename Small>
CPUFREE_HD inline void lane_partial(T (&acc)[R][vec<T>()], Small &a, const T *B, long long ldb, long long N, long long n,
                                    bool vec_b, long long k_first, long long k_end, long long k_step) {
    constexpr int V = vec<T>();
    const long long cols_left = N - n;
    for (long long k = k_first; k < k_end; k += k_step) {
        a.fetch(k);
        T b[kUnroll][V];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
            if (k + u < k_end && cols_left > 0) {
                load_row<T>(b[u], B + (k + u) * ldb + n, cols_left, vec_b);
            } else {
#pragma unroll
                for (int v = 0; v < V; ++v) b[u][v] = T(0);
            }
        }
#pragma unroll
        for (int u = 0; u < kUnroll; ++u)
#pragma unroll
            for (int i = 0; i < R; ++i) {
                const T ai = a.get(i, u);
#pragma unroll
                for (int v = 0; v < V; ++v) acc[i][v] += ai * b[u][v];
            }
    }
}

}  // namespace skinny
}  // namespace cpufree
