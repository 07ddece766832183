// Two matrix-vector products over one matrix, in one pass over it:
//
//     cpufree::gemv_pair(rows, cols, A, lda, x, y, Ax, yA)
//
// computes Ax = A @ x (rows elements) and yA = y @ A (cols elements) for a row-major (NumPy, C-order) A of
// rows x cols with row pitch lda. NumPy programs often take both (bicg: `r @ A, A @ p`; mvt); computed one after
// the other they read A twice, and a product of vectors by a large matrix is bound by that reading. Every thread
// of every block of the cooperative grid calls it with the same arguments; it returns without a grid sync of its
// own after its last write (the caller syncs before Ax or yA is read). Ax and yA are written, never read first,
// and must not overlap A, x or y.
//
// CUDA, float and double: Ax and yA are zeroed, one grid sync, then the grid's warps stream A once. A warp owns a
// strip of columns (32 lanes x 4 loads of 16 bytes: 2 KiB of each row; scalar loads where A's rows are not 16-byte
// aligned) and a run of rows; the strips' rows are laid end to end and cut into one equal run per warp, so every
// warp reads the same amount (a run may cross into the next strip). Per row, a lane multiplies its elements with x
// (a partial of that row of Ax) and adds them, scaled by y[row], to its columns of yA. The row partials of eight
// rows are summed across the warp in one exchange (each shuffle halves the rows a lane holds) and added to Ax
// atomically, one add per row and strip; a lane's yA columns once per run. So the last bits may differ from run to
// run.
//
// Other element types, HIP, and the host emulation (CPUFREE_EMULATE): each thread computes whole elements of Ax
// and yA (a row's or a column's dot product), grid-stride, with no atomics and no sync.
//
//     cpufree::gemv_chain(rows, cols, A, lda, x, t, y)
//
// computes t = A @ x, then y = t @ A (atax): the second needs all of t. Where A's rows are 16-byte aligned, a row
// fits the registers of a block and every block gets at least kOnePassRows rows (chain_one_pass_fits), in one pass:
// a block owns whole rows, sums each over the block and adds it, scaled, to the block's partial y in registers, which
// is added to y atomically once per block (chain_one_pass). Otherwise in two passes, one grid sync between them,
// each the streamed pass above with one output: the first leaves A in the L2 cache as it reads it (not streamed),
// and the second takes each warp's run backward, so that it starts on the rows the first read last, which the cache
// still holds.
//
//     cpufree::gemv_right(rows, cols, A, lda, x, Ax)
//
// computes Ax = A @ x alone (a product outside every loop with no partner over its matrix: gesummv's two): the streamed
// pass with that one output, after Ax is zeroed and the grid synced.
#pragma once

#include "host_device.h"

#if defined(CPUFREE_EMULATE)
#include "emulate.h"
#elif !defined(__HIP_PLATFORM_AMD__) && !defined(__HIPCC__)
#include <cooperative_groups.h>
#define CPUFREE_GEMV_STREAM
#endif

namespace cpufree {

namespace gemv_detail {

// Plain form: thread e computes Ax[e] (e < rows, where Right) or yA[e - rows] (where Left). Generic pointers, so
// that the emulation's recording arrays (racecheck.h) see every access.
template <typename T, bool Right, bool Left, typename PA, typename PX, typename PY, typename PAX, typename PYA>
__device__ inline void gemv_plain(long long rows, long long cols, PA A, long long lda, PX x, PY y, PAX Ax, PYA yA) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    const long long first = Right ? 0 : rows, end = Left ? rows + cols : rows;
    for (long long e = first + (long long)blockIdx.x * blockDim.x + threadIdx.x; e < end; e += stride) {
        T sum = T(0);
        if (e < rows) {
            for (long long j = 0; j < cols; ++j) sum += T(A[e * lda + j]) * T(x[j]);
            Ax[e] = sum;
        } else {
            const long long j = e - rows;
            for (long long i = 0; i < rows; ++i) sum += T(y[i]) * T(A[i * lda + j]);
            yA[j] = sum;
        }
    }
}

#if defined(CPUFREE_GEMV_STREAM)

constexpr int kLanes = 32;  // the shuffles below are CUDA's (HIP takes the plain form)
constexpr int kRows = 8;    // rows in flight per warp, summed across the warp in one exchange
constexpr int kLoads = 4;   // 16-byte loads per lane and row (a warp reads 2 KiB of each row; 1 KiB: 12 % slower)

// Where part `i` of `parts` even shares of `work` items starts (the first work % parts shares one item longer); it
// ends where part i + 1 starts.
__device__ inline long long share_start(long long work, long long parts, long long i) {
    return work / parts * i + (i < work % parts ? i : work % parts);
}

// Where a pass over A leaves it in the L2 cache: streamed (evicted first: A is read once), or kept (the second pass
// of a chain reads first what the first pass read last).
enum class Cache { kStream, kKeep };

template <Cache C, typename L>
__device__ inline L load_one(const L *p) {
    if constexpr (C == Cache::kStream)
        return __ldcs(p);
    else
        return *p;
}

// V elements from p: one 16-byte load when V * sizeof(T) == 16, else V loads.
template <typename T, int V, Cache C>
__device__ inline void load(const T *p, T (&v)[V]) {
    if constexpr (V == 2 && sizeof(T) == 8) {
        const double2 d = load_one<C>(reinterpret_cast<const double2 *>(p));
        v[0] = d.x, v[1] = d.y;
    } else if constexpr (V == 4 && sizeof(T) == 4) {
        const float4 f = load_one<C>(reinterpret_cast<const float4 *>(p));
        v[0] = f.x, v[1] = f.y, v[2] = f.z, v[3] = f.w;
    } else {
#pragma unroll
        for (int k = 0; k < V; ++k) v[k] = load_one<C>(p + k);
    }
}

// Sums each of the R values of s over the warp's lanes. Each step exchanges half of the values a lane holds with
// the lane `off` away and keeps the other half, summed: R - 1 shuffles for the first log2(R) steps, then one per
// step. Returns the sum of row row_of_lane<R>(lane), complete in the lanes with lane % (kLanes / R) == 0.
template <typename T, int R>
__device__ inline T sum_rows(T (&s)[R], int lane) {
    static_assert(R >= 1 && R <= kLanes && (R & (R - 1)) == 0, "rows: a power of two up to the warp");
    int off = kLanes / 2;
#pragma unroll
    for (int h = R / 2; h >= 1; h /= 2, off /= 2) {
        const bool high = lane & off;
#pragma unroll
        for (int k = 0; k < h; ++k) {
            const T send = high ? s[k] : s[k + h];
            const T keep = high ? s[k + h] : s[k];
            s[k] = keep + __shfl_xor_sync(0xffffffffu, send, off);
        }
    }
    T v = s[0];
#pragma unroll
    for (; off >= 1; off /= 2) v += __shfl_xor_sync(0xffffffffu, v, off);
    return v;
}

// The row (of R) whose sum sum_rows leaves in `lane`.
template <int R>
__device__ inline int row_of_lane(int lane) {
    int row = 0;
#pragma unroll
    for (int h = R / 2, off = kLanes / 2; h >= 1; h /= 2, off /= 2) row += (lane & off) ? h : 0;
    return row;
}

// The pass over A, V elements per load (16 bytes, or 1 where A's rows are not 16-byte aligned), for Ax (Right)
// and yA (Left); the outputs it adds to are zero. Backward: each warp takes its run from its end (the same groups of
// kRows rows as forward, the last first), so that a pass after one that kept A in the L2 cache (Cache::kKeep) starts
// on the rows that pass read last.
template <typename T, int V, bool Right, bool Left, Cache C, bool Backward>
__device__ void gemv_stream(long long rows, long long cols, const T *A, long long lda, const T *x, const T *y,
                            T *Ax, T *yA) {
    constexpr int U = V == 1 ? 4 : kLoads;  // loads per lane and row
    constexpr long long Strip = (long long)kLanes * U * V;  // columns of a strip
    const int lane = threadIdx.x % kLanes, warps = blockDim.x / kLanes, warp = threadIdx.x / kLanes;
    if (warp >= warps) return;  // the threads of a partial last warp take no share
    const long long all = (long long)gridDim.x * warps, me = (long long)blockIdx.x * warps + warp;
    const long long strips = (cols + Strip - 1) / Strip, work = strips * rows;
    long long lo = share_start(work, all, me), hi = share_start(work, all, me + 1);
    while (lo < hi) {  // the run's pieces within one strip each: [lo, ...) forward, [..., hi) backward
        long long piece;
        if constexpr (Backward) {
            const long long start = (hi - 1) / rows * rows;
            piece = hi - (start > lo ? start : lo);
            hi -= piece;
        } else {
            const long long stop = (lo / rows + 1) * rows;
            piece = (stop < hi ? stop : hi) - lo;
            lo += piece;
        }
        const long long at = Backward ? hi : lo - piece;
        const long long strip = at / rows, first = at % rows, last = first + piece;
        long long col[U];
        bool in[U];
        T xs[U][V], acc[U][V];
#pragma unroll
        for (int u = 0; u < U; ++u) {
            col[u] = strip * Strip + (long long)(u * kLanes + lane) * V;
            in[u] = col[u] < cols;  // cols % V == 0 where V > 1: a load is wholly inside or wholly outside
#pragma unroll
            for (int k = 0; k < V; ++k) xs[u][k] = Right && in[u] ? x[col[u] + k] : T(0), acc[u][k] = T(0);
        }
        const long long groups = (last - first + kRows - 1) / kRows;
        for (long long g = 0; g < groups; ++g) {
            const long long i = first + (Backward ? groups - 1 - g : g) * kRows;
            T a[kRows][U][V], ys[kRows], s[kRows];
#pragma unroll
            for (int r = 0; r < kRows; ++r) {
                const bool row_in = i + r < last;
                ys[r] = Left && row_in ? y[i + r] : T(0);
#pragma unroll
                for (int u = 0; u < U; ++u) {
                    if (row_in && in[u])
                        load<T, V, C>(A + (i + r) * lda + col[u], a[r][u]);
                    else
#pragma unroll
                        for (int k = 0; k < V; ++k) a[r][u][k] = T(0);
                }
            }
#pragma unroll
            for (int r = 0; r < kRows; ++r) {
                s[r] = T(0);
#pragma unroll
                for (int u = 0; u < U; ++u)
#pragma unroll
                    for (int k = 0; k < V; ++k) {
                        if constexpr (Right) s[r] += a[r][u][k] * xs[u][k];
                        if constexpr (Left) acc[u][k] += ys[r] * a[r][u][k];
                    }
            }
            if constexpr (Right) {
                const T sum = sum_rows<T, kRows>(s, lane);
                const long long row = i + row_of_lane<kRows>(lane);
                if (lane % (kLanes / kRows) == 0 && row < last) atomicAdd(&Ax[row], sum);
            }
        }
        if constexpr (Left)
#pragma unroll
            for (int u = 0; u < U; ++u)
                if (in[u])
#pragma unroll
                    for (int k = 0; k < V; ++k) atomicAdd(&yA[col[u] + k], acc[u][k]);
    }
}

// Whether the streamed form runs (the same for every thread): float or double, blocks of at least a warp; zeroes
// the n0 elements of o0 and the n1 of o1 first, then syncs the grid.
template <typename T>
__device__ inline bool stream_start(T *o0, long long n0, T *o1, long long n1) {
    if constexpr (sizeof(T) == 8 || sizeof(T) == 4) {
        if (blockDim.x < kLanes) return false;
        const long long stride = (long long)gridDim.x * blockDim.x;
        for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < n0 + n1; e += stride)
            (e < n0 ? o0[e] : o1[e - n0]) = T(0);
        cooperative_groups::this_grid().sync();
        return true;
    }
    return false;
}

// The chain in one pass where the rows allow it (chain_one_pass_fits): a block owns a run of whole rows and takes
// them one at a time, each thread holding up to kOnePassLoads 16-byte vectors of the row in registers (the next row's
// loads started before the current row is summed). Per row: each thread's products with x, summed over the warp and
// then over the block's warps (one barrier a row: the warps' sums alternate between two slots), the row's t written
// once, and the row, scaled by it, added to the thread's columns of y in registers; those are added to y atomically
// once per block at the end. A is read once instead of twice; the outputs it adds to are zero.
constexpr int kOnePassLoads = 10;  // 16-byte vectors per thread and row at most (5120 float64 at 256 threads)
constexpr int kOnePassRows = 4;    // rows per block at least (fewer: the streamed passes share the work better)

template <typename T>
__device__ inline bool chain_one_pass_fits(long long rows, long long cols, const T *A, long long lda) {
    constexpr int V = 16 / sizeof(T);
    return rows_of_vectors(A, lda, cols) && blockDim.x % kLanes == 0 && blockDim.x / kLanes <= kLanes &&
           cols / V <= (long long)kOnePassLoads * blockDim.x && rows >= (long long)kOnePassRows * gridDim.x;
}

template <typename T>
__device__ void chain_one_pass(long long rows, long long cols, const T *A, long long lda, const T *x, T *t, T *y) {
    constexpr int V = 16 / sizeof(T), P = kOnePassLoads;
    __shared__ T warp_sums[2][kLanes];
    const int tid = threadIdx.x, lane = tid % kLanes, warp = tid / kLanes, warps = blockDim.x / kLanes;
    const long long vecs = cols / V, first = share_start(rows, gridDim.x, blockIdx.x);
    const long long last = share_start(rows, gridDim.x, blockIdx.x + 1);
    T cur[P][V], next[P][V], acc[P][V];
    auto load_row = [&](long long i, T(&a)[P][V]) {
#pragma unroll
        for (int k = 0; k < P; ++k) {
            const long long c = tid + (long long)k * blockDim.x;
            if (c < vecs)
                load<T, V, Cache::kStream>(A + i * lda + c * V, a[k]);
            else
#pragma unroll
                for (int e = 0; e < V; ++e) a[k][e] = T(0);
        }
    };
    auto take_row = [&](long long i, const T(&a)[P][V]) {
        T s = T(0);
#pragma unroll
        for (int k = 0; k < P; ++k) {
            const long long c = tid + (long long)k * blockDim.x;
            if (c < vecs)
#pragma unroll
                for (int e = 0; e < V; ++e) s += a[k][e] * x[c * V + e];
        }
        T one[1] = {s};
        s = sum_rows<T, 1>(one, lane);  // the warp's sum, complete in lane 0, which writes it
        T(&slot)[kLanes] = warp_sums[(i - first) & 1];
        if (lane == 0) slot[warp] = s;
        __syncthreads();  // a slot is written again two rows later, after the next row's barrier: all have read it
        T ti = T(0);
        for (int w = 0; w < warps; ++w) ti += slot[w];
        if (tid == 0) t[i] = ti;
#pragma unroll
        for (int k = 0; k < P; ++k)
#pragma unroll
            for (int e = 0; e < V; ++e) acc[k][e] += ti * a[k][e];
    };
#pragma unroll
    for (int k = 0; k < P; ++k)
#pragma unroll
        for (int e = 0; e < V; ++e) acc[k][e] = T(0);
    load_row(first, cur);  // every block has kOnePassRows rows or more (chain_one_pass_fits)
    for (long long i = first; i < last; i += 2) {  // two rows a round, so that the two buffers keep their registers
        if (i + 1 < last) load_row(i + 1, next);
        take_row(i, cur);
        if (i + 1 < last) {
            if (i + 2 < last) load_row(i + 2, cur);
            take_row(i + 1, next);
        }
    }
#pragma unroll
    for (int k = 0; k < P; ++k) {
        const long long c = tid + (long long)k * blockDim.x;
        if (c < vecs)
#pragma unroll
            for (int e = 0; e < V; ++e) atomicAdd(&y[c * V + e], acc[k][e]);
    }
}

// Runs gemv_stream with 16-byte loads where A's rows allow them.
template <typename T, bool Right, bool Left, Cache C = Cache::kStream, bool Backward = false>
__device__ inline void stream(long long rows, long long cols, const T *A, long long lda, const T *x, const T *y,
                              T *Ax, T *yA) {
    constexpr int V = 16 / sizeof(T);
    if (rows_of_vectors(A, lda, cols))
        gemv_stream<T, V, Right, Left, C, Backward>(rows, cols, A, lda, x, y, Ax, yA);
    else
        gemv_stream<T, 1, Right, Left, C, Backward>(rows, cols, A, lda, x, y, Ax, yA);
}

#endif  // CPUFREE_GEMV_STREAM

}  // namespace gemv_detail

template <typename T, typename PA, typename PX, typename PY, typename PAX, typename PYA>
__device__ inline void gemv_pair(long long rows, long long cols, PA A, long long lda, PX x, PY y, PAX Ax, PYA yA) {
#if defined(CPUFREE_GEMV_STREAM)
    if (gemv_detail::stream_start<T>(Ax, rows, yA, cols)) {
        gemv_detail::stream<T, true, true>(rows, cols, A, lda, x, y, Ax, yA);
        return;
    }
#endif
    gemv_detail::gemv_plain<T, true, true>(rows, cols, A, lda, x, y, Ax, yA);
}

// Ax = A @ x alone (gesummv's two products): Ax zeroed, one grid sync, then gemv_pair's streamed pass with this one
// output; elsewhere (HIP, other types, the emulation) the plain form's first half.
template <typename T, typename PA, typename PX, typename PAX>
__device__ inline void gemv_right(long long rows, long long cols, PA A, long long lda, PX x, PAX Ax) {
#if defined(CPUFREE_GEMV_STREAM)
    if (gemv_detail::stream_start<T>(Ax, rows, (T *)nullptr, 0)) {
        gemv_detail::stream<T, true, false>(rows, cols, A, lda, x, (const T *)nullptr, Ax, (T *)nullptr);
        return;
    }
#endif
    gemv_detail::gemv_plain<T, true, false>(rows, cols, A, lda, x, x, Ax, Ax);
}

// t = A @ x, then y = t @ A (atax: `(A @ x) @ A`; the second product needs all of t): one pass over A where a row
// fits a block's registers and every block gets rows enough (chain_one_pass_fits), else two, one grid sync between
// them, streamed as gemv_pair's passes with one of its two outputs each; elsewhere (HIP, other types, the emulation)
// the plain form's two halves.
template <typename T, typename PA, typename PX, typename PTW, typename PY>
__device__ inline void gemv_chain(long long rows, long long cols, PA A, long long lda, PX x, PTW t, PY y) {
#if defined(CPUFREE_GEMV_STREAM)
    if (gemv_detail::stream_start<T>(t, rows, y, cols)) {
        if (gemv_detail::chain_one_pass_fits<T>(rows, cols, A, lda)) {
            gemv_detail::chain_one_pass<T>(rows, cols, A, lda, x, t, y);
            return;
        }
        using gemv_detail::Cache;
        gemv_detail::stream<T, true, false, Cache::kKeep>(rows, cols, A, lda, x, (const T *)nullptr, t, (T *)nullptr);
        cooperative_groups::this_grid().sync();
        gemv_detail::stream<T, false, true, Cache::kStream, true>(rows, cols, A, lda, (const T *)nullptr, t,
                                                                  (T *)nullptr, y);
        return;
    }
#endif
    gemv_detail::gemv_plain<T, true, false>(rows, cols, A, lda, x, t, t, y);
    cooperative_groups::this_grid().sync();
    gemv_detail::gemv_plain<T, false, true>(rows, cols, A, lda, x, t, t, y);
}

}  // namespace cpufree
