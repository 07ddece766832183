// Device-side dense matrix product for persistent kernels:
//
//     cpufree::gemm(M, N, K, alpha, A, lda, transA, B, ldb, transB, beta, C, ldc)
//
// computes C = alpha * op(A) @ op(B) + beta * C on row-major (NumPy, C-order) arrays, op(X) = X or X.T,
// C is M x N. Every thread of every block of the cooperative grid calls it with the same arguments; it
// returns without a grid sync of its own (the caller syncs before C is read). BLAS convention: beta == 0
// does not read C (an uninitialised output is fine; NaN in C does not leak through).
//
// CUDA: built on the wheel nvidia-mathdx (its cuBLASDx headers and the CUTLASS/CuTe copy it ships must be on
// the include path, and cuBLASDx needs nvcc's --expt-relaxed-constexpr). Each block computes output tiles
// (grid-stride over tiles), staging A and B tiles through a multi-stage cp.async pipeline in dynamic shared
// memory (the launcher sizes it from gemm_shared_bytes), and accumulates the tile product in registers.
// When the output tiles would leave the grid's last wave of blocks mostly idle, the tiles of that wave have their K
// split over blocks (all tiles, where there are fewer tiles than blocks; or all tiles' K steps shared out evenly, a
// stream schedule; cpufree/gemm_schedule.cuh): those tiles of C are first scaled by beta, one grid sync, then their
// partial products are added atomically (so results may then differ from run to run in the last bits).
//
// FP64 runs each output tile on the DMMA tensor cores. A kernel's unbounded build on sm_90 (GemmTileDmma) takes the
// 16x8x8 tile with 16-byte copies (cpufree/gemm_dmma.cuh, gemm_tensor_dmma below) for untransposed operands whose rows
// allow 16-byte copies; every other FP64 product, every other architecture and the bounded build take CUTLASS's
// block-level multistage product (GemmTileCutlass: cpufree/gemm_cutlass.cuh, gemm_tensor_cutlass below; the CUTLASS
// copy the MathDx wheel ships), which alone on an H100 was faster than cuBLASDx 0.4's block GEMM (0.49-0.55x cuBLAS's
// FP64 speed) and than CuTe's collective main loop on the 16x8x16 instruction (docs/linear-algebra.md). FP32
// (GemmTile) stays on cuBLASDx's block GEMM, on FFMA as cuBLAS does by default (no TF32).
//
// FP32 products with few output rows (M <= skinny::kMaxRows, B untransposed) take neither: B is streamed once in
// 16-byte loads with all rows of C in registers (cpufree/gemm_skinny.cuh, gemm_skinny below), in the same launch
// (block size, shared memory) as the tiles. The choice is made at run time, from M, the same for every thread.
//
// Other element types (integers), HIP, and builds with -DCPUFREE_GEMM_PLAIN (no MathDx headers at hand)
// take a plain grid-stride loop nest with the same semantics.
// CPUFREE_EMULATE (host C++): the same plain loops on the host, any arithmetic T.
#pragma once

#include "gemm_dmma.cuh"
#include "gemm_schedule.cuh"

#if defined(CPUFREE_EMULATE)
#include "emulate.h"
#elif defined(__HIP_PLATFORM_AMD__) || defined(__HIPCC__)
#ifndef CPUFREE_GEMM_PLAIN
#define CPUFREE_GEMM_PLAIN
#endif
#else
#include <cooperative_groups.h>
#include <type_traits>
#ifndef CPUFREE_GEMM_PLAIN
// -I <nvidia-mathdx wheel>/nvidia/mathdx/include -I <nvidia-mathdx wheel>/nvidia/mathdx/external/cutlass/include
#include <cublasdx.hpp>
#include "gemm_cutlass.cuh"
#include "gemm_skinny.cuh"
#endif
#endif

// The build a kernel's body is compiled for (GemmBuildTile): 0 for a kernel built once; the body of a kernel built
// twice is a template whose parameter of this name hides this one (codegen/host.py). Product calls name it.
constexpr int cpufree_build = 0;

namespace cpufree {

// ---- Tile configuration -------------------------------------------------------------------------------
// One output tile is TileM x TileN; K advances TileK at a time through Stages shared-memory buffers.
// Threads is the block size cuBLASDx's block GEMM is built for; a block may be larger (extra threads
// help staging tiles and otherwise wait at the barriers), never smaller.
template <int TileM_, int TileN_, int TileK_, int Threads_, int Stages_>
struct GemmTile {
    static constexpr int kTileM = TileM_, kTileN = TileN_, kTileK = TileK_;
    static constexpr int kThreads = Threads_;
    static constexpr int kStages = Stages_;
};

// FP64 only: the same schedule, each output tile on CUTLASS's block-level multistage product
// (cpufree/gemm_cutlass.cuh):
// TileM x TileN x TileK in Stages shared buffers, WarpsM x WarpsN warps, 16 x 8 x InstK DMMA instructions on sm_90
// (InstK 4: see gemm_cutlass.cuh).
template <int TileM_, int TileN_, int TileK_, int WarpsM_, int WarpsN_, int InstK_, int Stages_>
struct GemmTileCutlass {
    static constexpr int kTileM = TileM_, kTileN = TileN_, kTileK = TileK_;
    static constexpr int kWarpsM = WarpsM_, kWarpsN = WarpsN_, kInstK = InstK_;
    static constexpr int kThreads = 32 * WarpsM_ * WarpsN_;
    static constexpr int kStages = Stages_;
    static constexpr bool kCutlass = true;
};

// FP64 only: TileM x 64 x 16 tiles on sm_90's 16x8x8 DMMA instruction with 16-byte copies (cpufree/gemm_dmma.cuh),
// for untransposed operands whose rows allow them (gemm_detail::dmma_applies); every other FP64 product, and every
// architecture but sm_90, on Narrow (a GemmTileCutlass). Blocks of exactly 128 threads, like CUTLASS's.
template <int TileM_, int Stages_, typename Narrow_>
struct GemmTileDmma {
    using Shape = dmma::Shape<TileM_>;
    using Narrow = Narrow_;
    static constexpr int kTileM = Shape::kTileM, kTileN = Shape::kTileN, kTileK = Shape::kTileK;
    static constexpr int kThreads = Shape::kThreads;
    static constexpr int kStages = Stages_;
    static constexpr bool kDmma = true;
    static_assert(Narrow::kThreads == kThreads, "both tiles run in the same blocks");
};

template <typename Tile, typename = void> struct gemm_tile_is_dmma { static constexpr bool value = false; };
template <typename Tile> struct gemm_tile_is_dmma<Tile, decltype(void(Tile::kDmma))> {
    static constexpr bool value = Tile::kDmma;
};

template <typename Tile, typename = void> struct gemm_tile_is_cutlass { static constexpr bool value = false; };
template <typename Tile> struct gemm_tile_is_cutlass<Tile, decltype(void(Tile::kCutlass))> {
    static constexpr bool value = Tile::kCutlass;
};

// Element types that take the tensor path (CUTLASS or cuBLASDx); any other T (integers) takes a plain loop nest.
template <typename T> struct gemm_uses_library { static constexpr bool value = false; };
#if !defined(CPUFREE_EMULATE) && !defined(CPUFREE_GEMM_PLAIN)
template <> struct gemm_uses_library<double> { static constexpr bool value = true; };
template <> struct gemm_uses_library<float> { static constexpr bool value = true; };
#endif

// Defaults per element type: the best of the configurations npbench_runs/gemm_tiles.py measures at NPBench's
// sizes (docs/linear-algebra.md). Larger tiles gain only at the largest sizes and would cost the fused kernel's
// other steps their occupancy (one register allocation and one block size serve every step).
template <typename T> struct GemmDefault { using type = GemmTile<64, 64, 16, 128, 3>; };
template <> struct GemmDefault<double> {  // 48 KiB shared
    using type = GemmTileDmma<64, 3, GemmTileCutlass<64, 64, 16, 2, 2, 4, 3>>;
};
template <> struct GemmDefault<float> { using type = GemmTile<64, 128, 16, 128, 3>; };  // 36 KiB shared

// The tile of each build of a kernel (codegen/host.py): build 0 runs with the registers ptxas chooses (two blocks of
// 128 threads per multiprocessor with products), build 1 is bounded to three such blocks (168 registers). FP64
// products take the DMMA tile in build 0 and CUTLASS's in build 1, where the DMMA tile spills 384 bytes a thread and
// CUTLASS's 96-144 (the launcher's rule takes a bounded build that spills at most 256: cpufree/launch.h). The launch
// facts below (block size, shared memory, output tiles) are stated once for both, so the builds must agree on them.
template <typename T, int Build> struct GemmBuildTile { using type = typename GemmDefault<T>::type; };
template <> struct GemmBuildTile<double, 1> { using type = GemmDefault<double>::type::Narrow; };

// Facts for the launcher: the block size gemm<T>'s tile is built for (a block it cannot run takes the plain path:
// block_runs_tile), and the dynamic shared memory each block needs.
// The plain path (other types, the emulation) needs neither: 0.
template <typename T, typename Tile = typename GemmDefault<T>::type>
__host__ __device__ constexpr int gemm_threads() {
    return gemm_uses_library<T>::value ? Tile::kThreads : 0;
}
// Whether a tile configuration runs in blocks of `block` threads: CUTLASS's product exactly its threads (its main loop
// synchronises the block inside, with every thread in its thread maps), cuBLASDx's at least its threads (the extra ones
// help staging and otherwise wait at the barriers). gemm_block_fits<T>: for gemm<T>'s tile, and true on the plain path.
template <typename Tile>
__host__ __device__ constexpr bool gemm_tile_runs_in(int block) {
    return gemm_tile_is_cutlass<Tile>::value || gemm_tile_is_dmma<Tile>::value ? block == Tile::kThreads
                                                                                : block >= Tile::kThreads;
}
template <typename T, typename Tile = typename GemmDefault<T>::type>
__host__ __device__ constexpr bool gemm_block_fits(int block) {
    return !gemm_uses_library<T>::value || gemm_tile_runs_in<Tile>(block);
}
template <typename T, typename Tile = typename GemmDefault<T>::type>
__host__ __device__ constexpr unsigned long long gemm_shared_bytes() {
#if !defined(CPUFREE_EMULATE) && !defined(CPUFREE_GEMM_PLAIN)
    if constexpr (gemm_tile_is_dmma<Tile>::value) {
        using S = typename Tile::Shape;
        const unsigned long long pipeline = sizeof(double) * Tile::kStages * (S::kAElems + S::kBElems);
        const unsigned long long staged = sizeof(double) * S::kTileM * S::kLdc;
        const unsigned long long narrow = gemm_shared_bytes<T, typename Tile::Narrow>();
        return cutlass_tile::larger(cutlass_tile::larger(pipeline, staged), narrow);
    }
    if constexpr (gemm_tile_is_cutlass<Tile>::value)
        return cutlass_tile::Shared<Tile::kTileM, Tile::kTileN, Tile::kTileK, Tile::kWarpsM, Tile::kWarpsN,
                                    Tile::kInstK, Tile::kStages>::kBytes;
#endif
    return gemm_uses_library<T>::value
               ? (unsigned long long)Tile::kStages * (Tile::kTileM + Tile::kTileN) * Tile::kTileK * sizeof(T)
               : 0;
}

// The output tiles of an M x N product of gemm<T> (0 on the plain path): the launcher's choice of build.
template <typename T, typename Tile = typename GemmDefault<T>::type>
__host__ __device__ constexpr long long gemm_tiles(long long M, long long N) {
    if (!gemm_uses_library<T>::value) return 0;
    return ((M + Tile::kTileM - 1) / Tile::kTileM) * ((N + Tile::kTileN - 1) / Tile::kTileN);
}

// Both builds' tiles give the launcher the same facts.
template <typename T>
constexpr bool gemm_builds_agree() {
    using A = typename GemmBuildTile<T, 0>::type;
    using B = typename GemmBuildTile<T, 1>::type;
    return A::kThreads == B::kThreads && A::kTileM == B::kTileM && A::kTileN == B::kTileN &&
           gemm_shared_bytes<T, A>() == gemm_shared_bytes<T, B>() &&
           gemm_tile_runs_in<A>(A::kThreads) == gemm_tile_runs_in<B>(A::kThreads);
}
static_assert(gemm_builds_agree<double>() && gemm_builds_agree<float>(), "the builds' launch facts differ");

#if defined(CPUFREE_EMULATE)

// ---- Host emulation: the definition, in plain loops ------------------------------------------------
// Grid-stride over the elements of C like the device's plain path, so that the race checker's threads share
// the work; the pointers are generic so that its recording arrays (racecheck.h) see every access.
template <typename T, int Build = 0, typename PA, typename PB, typename PC>
inline void gemm(long long M, long long N, long long K, T alpha, PA A, long long lda, bool transA, PB B,
                 long long ldb, bool transB, T beta, PC C, long long ldc) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < M * N; e += stride) {
        const long long i = e / N, j = e % N;
        T sum = T(0);
        for (long long k = 0; k < K; ++k) {
            const T a = transA ? T(A[k * lda + i]) : T(A[i * lda + k]);
            const T b = transB ? T(B[j * ldb + k]) : T(B[k * ldb + j]);
            sum += a * b;
        }
        C[i * ldc + j] = beta == T(0) ? alpha * sum : alpha * sum + beta * T(C[i * ldc + j]);
    }
}

#else  // CUDA, HIP

namespace gemm_detail {

// Plain path (integer types, builds without MathDx): one C element per thread, grid-stride, no shared memory.
template <typename T>
__device__ void gemm_plain(long long M, long long N, long long K, T alpha, const T *A, long long lda, bool transA,
                           const T *B, long long ldb, bool transB, T beta, T *C, long long ldc) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < M * N; e += stride) {
        const long long i = e / N, j = e % N;
        T sum = T(0);
        for (long long k = 0; k < K; ++k)
            sum += (transA ? A[k * lda + i] : A[i * lda + k]) * (transB ? B[j * ldb + k] : B[k * ldb + j]);
        T &c = C[i * ldc + j];
        c = beta == T(0) ? alpha * sum : alpha * sum + beta * c;
    }
}

#if !defined(CPUFREE_GEMM_PLAIN)

// The cuBLASDx architecture tag for the code being compiled: the newest one it knows not above the
// target. The host pass (no __CUDA_ARCH__) never runs this code; it only needs some valid value.
__host__ __device__ constexpr unsigned cublasdx_sm() {
#if defined(__CUDA_ARCH__)
    constexpr unsigned arch = __CUDA_ARCH__;
#else
    constexpr unsigned arch = 800;
#endif
    return arch >= 1200 ? 1200 : arch >= 1000 ? 1000 : arch >= 900 ? 900 : arch >= 890 ? 890
         : arch >= 860 ? 860 : arch >= 800 ? 800 : arch >= 750 ? 750 : 700;
}

// cuBLASDx's description of one tile product: shared-memory A (TileM x TileK) and B (TileK x TileN),
// A K-contiguous and B N-contiguous (the layouts of untransposed NumPy operands), C row-major,
// 16-byte aligned buffers, C accumulated in registers.
template <typename T, typename Tile>
using BlockGemm = decltype(cublasdx::Size<Tile::kTileM, Tile::kTileN, Tile::kTileK>() +
                           cublasdx::Precision<T>() + cublasdx::Type<cublasdx::type::real>() +
                           cublasdx::Function<cublasdx::function::MM>() +
                           cublasdx::Arrangement<cublasdx::row_major, cublasdx::row_major, cublasdx::row_major>() +
                           cublasdx::MaxAlignment() + cublasdx::SM<cublasdx_sm()>() + cublasdx::Block() +
                           cublasdx::BlockDim<Tile::kThreads>());

// How the grid's blocks share the work (cpufree/gemm_schedule.cuh), on this launch's blocks.
template <typename Tile>
__device__ inline Schedule make_schedule(long long M, long long N, long long K, long long forced = 0) {
    return make_schedule<Tile::kTileM, Tile::kTileN, Tile::kTileK>(M, N, K, gridDim.x, forced);
}
template <typename Tile>
__device__ inline WorkUnit work_unit(const Schedule &s, long long w) {
    return work_unit<Tile::kTileM, Tile::kTileN>(s, w, gridDim.x);
}
// The same, out of line: the CUTLASS tile's loop, which a kernel's bounded build runs at 168 registers, spilled more
// with the stream schedule's arithmetic inlined (k3mm's bounded build: 160 bytes a thread and 848 of reloads, against
// 136 and 516 before stream schedules and 104 and 204 out of line; inlined, k2mm's kernel was 6 us slower at S on an
// H200). The DMMA and cuBLASDx loops, with registers to spare, keep it inline (out of line, the unbounded build's
// gemm and k2mm were 1-2 % slower at paper).
template <typename Tile>
__device__ __noinline__ WorkUnit work_unit_out_of_line(const Schedule &s, long long w) {
    return work_unit<Tile>(s, w);
}
template <typename Tile>
__device__ inline KRange k_range(const WorkUnit &u, long long K) {
    return k_range<Tile::kTileK>(u, K);
}

// The block's dynamic shared memory (the launcher sizes it from gemm_shared_bytes).
__device__ inline unsigned char *dynamic_shared() {
    extern __shared__ __align__(16) unsigned char cpufree_dynamic_shared[];
    return cpufree_dynamic_shared;
}

// One element (or one 16-byte vector) from global into shared memory, zero when outside the matrix.
// sm_80+: asynchronous (cp.async, completed by cute::cp_async_wait); older: a plain load and store.
template <typename V>
__device__ inline void stage_copy(const V *src, V *dst, bool inside) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    cute::SM80_CP_ASYNC_CACHEALWAYS_ZFILL<V, V>::copy(*src, *dst, inside);
#else
    *dst = inside ? *src : V{};
#endif
}

// Shared-memory tiles have swizzled layouts (cuBLASDx's suggested ones). A copy of VecElems consecutive
// elements along a row of the tile can be one 16-byte cp.async when the layout keeps them adjacent and
// aligned there: checked once at compile time over the whole tile.
template <typename Layout, int Rows, int Cols, int VecElems>
__host__ __device__ constexpr bool rows_vectorizable() {
    if (Cols % VecElems != 0) return false;
    constexpr Layout layout{};
    for (int r = 0; r < Rows; ++r)
        for (int c = 0; c < Cols; c += VecElems) {
            const int base = int(layout(r, c));
            if (base % VecElems != 0) return false;
            for (int v = 1; v < VecElems; ++v)
                if (int(layout(r, c + v)) != base + v) return false;
        }
    return true;
}

// Stage a Rows x Cols tile of a row-major operand X (leading dimension ld) into shared memory with the
// given layout. Tile element (r, c) is X[(row0 + r) * ld + col0 + c] or, transposed, X[(col0 + c) * ld
// + row0 + r]; outside rows x cols it is zero. All threads of the block take part.
template <typename T, int Rows, int Cols, typename Layout>
__device__ inline void stage_tile(T *base, Layout layout, const T *X, long long ld, bool trans, long long row0,
                                  long long col0, long long rows, long long cols, bool vec_ok) {
    constexpr int kVec = 16 / int(sizeof(T));
    const int tid = threadIdx.x, nthreads = blockDim.x;
    if constexpr (rows_vectorizable<Layout, Rows, Cols, kVec>()) {
        if (!trans && vec_ok) {  // 16-byte copies along the contiguous dimension
            using Vec = cute::uint128_t;
            for (int i = tid; i < Rows * Cols / kVec; i += nthreads) {
                const int r = i / (Cols / kVec), c = (i % (Cols / kVec)) * kVec;
                const long long gr = row0 + r, gc = col0 + c;
                const bool inside = gr < rows && gc < cols;  // vec_ok: cols is a multiple of kVec
                const T *src = inside ? X + gr * ld + gc : X;
                stage_copy(reinterpret_cast<const Vec *>(src), reinterpret_cast<Vec *>(base + layout(r, c)),
                           inside);
            }
            return;
        }
    }
    if (!trans) {  // element copies, consecutive threads along a row (the contiguous dimension)
        for (int i = tid; i < Rows * Cols; i += nthreads) {
            const int r = i / Cols, c = i % Cols;
            const long long gr = row0 + r, gc = col0 + c;
            const bool inside = gr < rows && gc < cols;
            stage_copy(inside ? X + gr * ld + gc : X, base + layout(r, c), inside);
        }
    } else {  // transposed operand: consecutive threads down a column (contiguous in X)
        for (int i = tid; i < Rows * Cols; i += nthreads) {
            const int r = i % Rows, c = i / Rows;
            const long long gr = row0 + r, gc = col0 + c;
            const bool inside = gr < rows && gc < cols;
            stage_copy(inside ? X + gc * ld + gr : X, base + layout(r, c), inside);
        }
    }
}

// C = beta * C over the whole matrix (all threads of the grid): the first half of the skinny path's split-K.
template <typename T>
__device__ inline void scale_output(long long M, long long N, T beta, T *C, long long ldc) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < M * N; i += stride) {
        T &c = C[(i / N) * ldc + i % N];
        c = beta == T(0) ? T(0) : beta * c;
    }
}

// C = beta * C over the split tiles (all threads of the grid): the first half of split-K. Blocks take bands of a tile's
// rows (split_band), whose place they work out once a band, not once an element (the visiting order's divisions had
// made this pass cost more than its stores), their threads consecutive columns of the band's rows.
template <typename Tile, typename T>
__device__ inline void scale_split_tiles(const Schedule &s, long long M, long long N, T beta, T *C, long long ldc) {
    constexpr int TM = Tile::kTileM, TN = Tile::kTileN, kRows = kScaleBandRows<TM>;
    const long long bands = (long long)(s.tiles - s.whole) * (TM / kRows);
    for (long long u = blockIdx.x; u < bands; u += gridDim.x) {
        long long row, col;
        int rows, cols;
        split_band<TM, TN>(s, u, M, N, row, col, rows, cols);
        if (rows <= 0) continue;
        T *band = C + row * ldc + col;
        for (int e = int(threadIdx.x); e < kRows * TN; e += int(blockDim.x)) {
            const int r = e / TN, c = e % TN;
            if (r < rows && c < cols) {
                T &x = band[r * ldc + c];
                x = beta == T(0) ? T(0) : beta * x;
            }
        }
    }
}

// The schedule of a product, every thread of the grid: with split-K, C = beta * C over the split tiles first and a grid
// sync, so that every K range of them only adds its part.
template <typename Tile, typename T>
__device__ inline Schedule start_schedule(long long M, long long N, long long K, T beta, T *C, long long ldc,
                                          long long forced_splits) {
    const Schedule s = make_schedule<Tile>(M, N, K, forced_splits);
    if (s.whole < s.tiles) {
        scale_split_tiles<Tile>(s, M, N, beta, C, ldc);
        cooperative_groups::this_grid().sync();
    }
    return s;
}

// The block writes an output tile staged in shared memory (rows of Ldc elements) row by row, consecutive threads on
// consecutive columns: alpha, beta, the matrix's bounds and, under split-K, atomic adds.
template <int TM, int TN, int Ldc, typename T>
__device__ inline void write_staged_tile(const T *staged, const WorkUnit &u, long long M, long long N, T alpha, T beta,
                                         T *C, long long ldc, bool split) {
    for (int e = int(threadIdx.x); e < TM * TN; e += int(blockDim.x)) {
        const int r = e / TN, c = e % TN;
        const long long gm = u.m0 + r, gn = u.n0 + c;
        if (gm >= M || gn >= N) continue;
        const T v = alpha * staged[r * Ldc + c];
        T *out = C + gm * ldc + gn;
        if (split) atomicAdd(out, v);
        else *out = beta == T(0) ? v : v + beta * *out;
    }
}

// FP64 tiles on CUTLASS's block-level product (GemmTileCutlass, cpufree/gemm_cutlass.cuh); LayoutA/LayoutB: RowMajor
// for an untransposed operand, ColumnMajor for a transposed one. The block must have exactly Tile::kThreads threads
// (block_runs_tile): CUTLASS's main loop synchronises the block inside, with every thread in its thread maps.
template <typename T, typename Tile, typename LayoutA, typename LayoutB>
__device__ void gemm_tensor_cutlass(long long M, long long N, long long K, T alpha, const T *A, long long lda,
                                    const T *B, long long ldb, T beta, T *C, long long ldc, long long forced_splits) {
    static_assert(cute::is_same_v<T, double>, "GemmTileCutlass tiles multiply doubles");
    using Mma = typename cutlass_tile::Product<Tile::kTileM, Tile::kTileN, Tile::kTileK, Tile::kWarpsM, Tile::kWarpsN,
                                               Tile::kInstK, Tile::kStages, LayoutA, LayoutB>::Mma;
    constexpr int TM = Tile::kTileM, TN = Tile::kTileN, TK = Tile::kTileK;
    using Sizes = cutlass_tile::Shared<TM, TN, TK, Tile::kWarpsM, Tile::kWarpsN, Tile::kInstK, Tile::kStages>;
    static_assert(sizeof(typename Mma::SharedStorage) <= Sizes::kBytes,
                  "the launcher's shared memory holds this pass's pipeline");
    constexpr int kLdc = Sizes::kLdc;
    auto &storage = *reinterpret_cast<typename Mma::SharedStorage *>(dynamic_shared());
    T *const staged = reinterpret_cast<T *>(dynamic_shared());

    const Schedule s = start_schedule<Tile>(M, N, K, beta, C, ldc, forced_splits);
    const int thread = int(threadIdx.x), warp = thread / 32, lane = thread % 32;
    const typename Mma::IteratorA::Params params_a{LayoutA(lda)};
    const typename Mma::IteratorB::Params params_b{LayoutB(ldb)};

    const long long work = s.block_end(blockIdx.x, gridDim.x);
    for (long long w = blockIdx.x; w < work; w += gridDim.x) {
        const WorkUnit u = work_unit_out_of_line<Tile>(s, w);
        const KRange range = k_range<Tile>(u, K);
        const long long kbegin = range.begin, kend = range.end;
        typename Mma::FragmentC acc;
        acc.clear();
        {
            // CUTLASS's iterators take the K range as [kbegin, kend) of an extent ending at kend.
            typename Mma::IteratorA it_a(params_a, const_cast<T *>(A), {int(M), int(kend)}, thread,
                                         {int(u.m0), int(kbegin)});
            typename Mma::IteratorB it_b(params_b, const_cast<T *>(B), {int(kend), int(N)}, thread,
                                         {int(kbegin), int(u.n0)});
            Mma mma(storage, thread, warp, lane);
            const int iterations = int((kend - kbegin + TK - 1) / TK);
            if (iterations > 0) mma(iterations, acc, it_a, it_b, acc);
            cutlass::arch::cp_async_wait<0>();
        }
        __syncthreads();  // every warp done with the pipeline's buffers: they take the C tile now
        {
            const int wm = warp % Tile::kWarpsM, wn = warp / Tile::kWarpsM;
            typename Mma::Operator::IteratorC it_c({staged, cutlass::layout::RowMajor(kLdc)}, lane);
            it_c.add_tile_offset({wm, wn});
            it_c.store(acc);
        }
        __syncthreads();
        write_staged_tile<TM, TN, kLdc>(staged, u, M, N, alpha, beta, C, ldc, u.split);
        __syncthreads();  // the next tile (or the caller's next gemm) refills the shared buffers
    }
}

// Whether an untransposed FP64 product can take the DMMA tile (GemmTileDmma): every 16-byte chunk of its rows starts
// 16-byte aligned and lies wholly inside or wholly outside the matrix (pointers aligned, even leading dimensions, even
// N and K). The same answer for every thread of the grid.
__device__ inline bool dmma_applies(const double *A, long long lda, const double *B, long long ldb, long long N,
                                    long long K) {
    return rows_of_vectors(A, lda, K) && rows_of_vectors(B, ldb, N);
}

#if defined(CPUFREE_SM90_DMMA)
// FP64 tiles on the 16x8x8 DMMA instruction (GemmTileDmma; index arithmetic and layouts: cpufree/gemm_dmma.cuh), for
// untransposed operands that dmma_applies to. CUTLASS's multistage order: Stages - 1 K tiles in flight through
// 16-byte cp.async, one block barrier per K tile, the fragments of the next K step loaded while the current one
// multiplies. The K loop is unrolled by Stages so that every shared-memory address is a per-thread register plus an
// immediate; output tiles wholly inside the matrix copy without predicates, edge tiles and the last partial K tile
// zero-fill what lies outside. The loop body is compiled twice: without any test for the K tiles whose copies are all
// plain (the main loop of an inside tile), with them for the rest (alone on an H200: 0.80x cuBLAS's FP64 speed ->
// 0.86-0.91x at NPBench's products, docs/linear-algebra.md). The accumulators leave through shared memory
// (write_staged_tile).
template <typename Tile>
__device__ void gemm_tensor_dmma(long long M, long long N, long long K, double alpha, const double *A, long long lda,
                                 const double *B, long long ldb, double beta, double *C, long long ldc,
                                 long long forced_splits) {
    using S = typename Tile::Shape;
    constexpr int TM = S::kTileM, TN = S::kTileN, TK = S::kTileK, Stages = Tile::kStages;
    constexpr int kStage = S::kAElems + S::kBElems;  // doubles per pipeline stage: A, then B
    static_assert(Stages >= 2 && S::kSteps == 2 && S::kBCopies % 2 == 0, "the loop below is written for these");
    using Chunk = cute::uint128_t;
    // A through L2 only (cp.async.cg), B through L1 too (.ca). Alone on an H100 at NPBench's paper products: the
    // fastest of the four choices at three of six, within 1.3 % at two, 3 % behind both .ca at doitgen's 55000 x 270
    // x 270, where both .cg were 12 % slower; both .ca were 1-4 % slower at k2mm's and k3mm's (docs/linear-algebra.md).
    using CopyA = cute::SM80_CP_ASYNC_CACHEGLOBAL_ZFILL<Chunk, Chunk>;
    using CopyB = cute::SM80_CP_ASYNC_CACHEALWAYS_ZFILL<Chunk, Chunk>;
    using Mma = cute::SM90_16x8x8_F64F64F64F64_TN;
    double *const smem = reinterpret_cast<double *>(dynamic_shared());

    const Schedule s = start_schedule<Tile>(M, N, K, beta, C, ldc, forced_splits);
    const int tid = int(threadIdx.x), warp = tid / 32, lane = tid % 32;
    const int wm = warp % 2, wn = warp / 2;
    const int a_row = dmma::a_copy_row(tid, 0), a_col = 2 * dmma::a_copy_chunk(tid);
    const int b_row = dmma::b_copy_row(tid, 0), b_col = 2 * dmma::b_copy_chunk(tid);
    double *const a_dst = smem + dmma::a_copy_offset(tid);
    double *const b_dst[2] = {smem + S::kAElems + dmma::b_copy_offset(tid, 0),
                              smem + S::kAElems + dmma::b_copy_offset(tid, 1)};
    const double *const a_frag[2] = {smem + dmma::a_frag_offset<TM>(wm, lane, 0),
                                     smem + dmma::a_frag_offset<TM>(wm, lane, 1)};
    const double *const b_frag = smem + S::kAElems + dmma::b_frag_offset(wn, lane);
    const long long a_step = dmma::kACopyRows * lda, b_step = dmma::kBCopyRows * ldb;  // between a thread's copies

    const long long work = s.block_end(blockIdx.x, gridDim.x);
    for (long long w = blockIdx.x; w < work; w += gridDim.x) {
        const WorkUnit u = work_unit<Tile>(s, w);
        const KRange range = k_range<Tile>(u, K);
        const long long kbegin = range.begin, kend = range.end;
        const int k_tiles = kend > kbegin ? int((kend - kbegin + TK - 1) / TK) : 0;
        // K tiles copied without predicates: all of them in an output tile inside the matrix, but a last partial one.
        const bool inside = u.m0 + TM <= M && u.n0 + TN <= N;
        const int k_plain = inside ? int((kend - kbegin) / TK) : 0;
        const double *a_src = A + (u.m0 + a_row) * lda + kbegin + a_col;
        const double *b_src = B + (kbegin + b_row) * ldb + u.n0 + b_col;

        // This thread's j-th A or B chunk into the stage at `off` (zero where not `in`).
        auto copy_a = [&](int off, int j, bool in) {
            CopyA::copy(*reinterpret_cast<const Chunk *>(in ? a_src + j * a_step : A),
                        *reinterpret_cast<Chunk *>(a_dst + off + j * dmma::kACopyStride), in);
        };
        auto copy_b = [&](int off, int j, bool in) {
            CopyB::copy(*reinterpret_cast<const Chunk *>(in ? b_src + j * b_step : B),
                        *reinterpret_cast<Chunk *>(b_dst[j % 2] + off + (j / 2) * dmma::kBCopyPairStride), in);
        };
        // K tile kt into stage `stage`; the sources advance by one K tile per call.
        auto fetch = [&](int kt, int stage, auto plain) {
            const int off = stage * kStage;
            if (decltype(plain)::value || kt < k_plain) {
#pragma unroll
                for (int j = 0; j < S::kACopies; ++j) copy_a(off, j, true);
#pragma unroll
                for (int j = 0; j < S::kBCopies; ++j) copy_b(off, j, true);
            } else if (kt < k_tiles) {
                const long long k = kbegin + (long long)kt * TK;
                const bool a_k = k + a_col < kend, b_n = u.n0 + b_col < N;
#pragma unroll
                for (int j = 0; j < S::kACopies; ++j) copy_a(off, j, a_k && u.m0 + dmma::a_copy_row(tid, j) < M);
#pragma unroll
                for (int j = 0; j < S::kBCopies; ++j) copy_b(off, j, b_n && k + dmma::b_copy_row(tid, j) < kend);
            }
            a_src += TK;
            b_src += TK * ldb;
        };

        // The second operands (A) of the warp's column groups, the first operands (B) of its row groups: one K step's.
        double2 af[S::kGroupsM], bf[S::kGroupsN][2];
        auto load_a = [&](int stage, int step, int q) {
            af[q] = *reinterpret_cast<const double2 *>(a_frag[step] + stage * kStage + dmma::a_frag_stride(q));
        };
        auto load_b = [&](int stage, int step, int p) {
#pragma unroll
            for (int e = 0; e < 2; ++e)
                bf[p][e] =
                    *reinterpret_cast<const double2 *>(b_frag + stage * kStage + dmma::b_frag_stride(step, e, p));
        };

        double acc[S::kGroupsN][S::kGroupsM][4];
#pragma unroll
        for (int p = 0; p < S::kGroupsN; ++p)
#pragma unroll
            for (int q = 0; q < S::kGroupsM; ++q)
#pragma unroll
                for (int v = 0; v < 4; ++v) acc[p][q][v] = 0.0;

#pragma unroll
        for (int st = 0; st < Stages - 1; ++st) {
            fetch(st, st, std::false_type{});
            cute::cp_async_fence();
        }
        cute::cp_async_wait<Stages - 2>();
        __syncthreads();
#pragma unroll
        for (int q = 0; q < S::kGroupsM; ++q) load_a(0, 0, q);
#pragma unroll
        for (int p = 0; p < S::kGroupsN; ++p) load_b(0, 0, p);
        auto tiles = [&](int k0, auto plain) {
#pragma unroll
            for (int r = 0; r < Stages; ++r) {  // K tile k0 + r, in stage r
                if (decltype(plain)::value || k0 + r < k_tiles) {
#pragma unroll
                    for (int step = 0; step < S::kSteps; ++step) {
                        const bool last = step == S::kSteps - 1;
                        if (last) {  // the next K tile's stage: landed, and visible to every warp
                            cute::cp_async_wait<Stages - 2>();
                            __syncthreads();
                        }
                        if (step == 0) {  // every warp is past the barrier that ended its reads of that stage
                            fetch(k0 + r + Stages - 1, (r + Stages - 1) % Stages, plain);
                            cute::cp_async_fence();
                        }
                        // The next step's fragments replace each operand right after its last use in this one, so
                        // that their loads overlap the remaining instructions with one set of fragment registers.
                        const int next_stage = last ? (r + 1) % Stages : r, next_step = last ? 0 : step + 1;
#pragma unroll
                        for (int p = 0; p < S::kGroupsN; ++p) {
#pragma unroll
                            for (int q = 0; q < S::kGroupsM; ++q) {
                                const double2 &x = bf[p][0], &y = bf[p][1], &a = af[q];
                                double *d = acc[p][q];
                                Mma::fma(d[0], d[1], d[2], d[3], x.x, x.y, y.x, y.y, a.x, a.y, d[0], d[1], d[2], d[3]);
                                if (p == S::kGroupsN - 1) load_a(next_stage, next_step, q);
                            }
                            load_b(next_stage, next_step, p);
                        }
                    }
                }
            }
        };
        int k0 = 0;  // plain: every tile this round multiplies (k0 + r) and fetches (k0 + r + Stages - 1) is plain
        for (; k0 + 2 * Stages - 2 < k_plain; k0 += Stages) tiles(k0, std::true_type{});
        for (; k0 < k_tiles; k0 += Stages) tiles(k0, std::false_type{});
        cute::cp_async_wait<0>();
        __syncthreads();  // every warp done with the pipeline's buffers: they take the C tile now
        double *const staged = smem;
#pragma unroll
        for (int p = 0; p < S::kGroupsN; ++p)
#pragma unroll
            for (int q = 0; q < S::kGroupsM; ++q)
#pragma unroll
                for (int v = 0; v < 2; ++v)
                    *reinterpret_cast<double2 *>(staged + dmma::acc_row<TM>(wm, lane, q, v) * S::kLdc +
                                                 dmma::acc_col(wn, lane, p, v)) = {acc[p][q][v], acc[p][q][v + 2]};
        __syncthreads();
        write_staged_tile<TM, TN, S::kLdc>(staged, u, M, N, alpha, beta, C, ldc, u.split);
        __syncthreads();  // the next tile (or the caller's next gemm) refills the shared buffers
    }
}
#endif

// Whether the launch's blocks can run a tile configuration (gemm_tile_runs_in).
template <typename Tile>
__device__ inline bool block_runs_tile() {
    return gemm_tile_runs_in<Tile>(int(blockDim.x));
}

// cuBLASDx's block GEMM on tiles staged in shared memory (FP32; FP64 where a GemmTile configuration names it).
template <typename T, typename Tile>
__device__ void gemm_tensor_cublasdx(long long M, long long N, long long K, T alpha, const T *A, long long lda,
                                     bool transA, const T *B, long long ldb, bool transB, T beta, T *C, long long ldc,
                                     long long forced_splits) {
    using BLAS = BlockGemm<T, Tile>;
    constexpr int TM = Tile::kTileM, TN = Tile::kTileN, TK = Tile::kTileK, kStages = Tile::kStages;
    constexpr int kStageA = TM * TK, kStageB = TK * TN;

    // Dynamic shared memory: the launcher gives every block gemm_shared_bytes<T>() of the kernel's products
    // (the stages of a large tile exceed the 48 KiB a block may declare statically).
    T *const smem_a = reinterpret_cast<T *>(dynamic_shared());
    T *const smem_b = smem_a + kStages * kStageA;
    static_assert((kStageA * kStages * sizeof(T)) % 16 == 0, "B stages start 16-byte aligned");

    const auto layout_a = BLAS::suggest_layout_smem_a();
    const auto layout_b = BLAS::suggest_layout_smem_b();
    static_assert(cute::cosize(decltype(layout_a.layout){}) <= kStageA, "A layout exceeds its stage buffer");
    static_assert(cute::cosize(decltype(layout_b.layout){}) <= kStageB, "B layout exceeds its stage buffer");

    const Schedule s = start_schedule<Tile>(M, N, K, beta, C, ldc, forced_splits);

    // Operand extents as staged: op(A) is M x K, op(B) is K x N.
    const bool vec_a = !transA && rows_of_vectors(A, lda, K);  // 16-byte copies of an untransposed operand
    const bool vec_b = !transB && rows_of_vectors(B, ldb, N);

    const long long work = s.block_end(blockIdx.x, gridDim.x);
    for (long long w = blockIdx.x; w < work; w += gridDim.x) {
        const WorkUnit u = work_unit<Tile>(s, w);
        const long long m0 = u.m0, n0 = u.n0, kt_begin = u.first, nk = u.count;

        auto stage = [&](long long step) {  // copy K step `step` of this range into its stage buffer
            const int buf = int(step % kStages);
            const long long k0 = (kt_begin + step) * TK;
            stage_tile<T, TM, TK>(smem_a + buf * kStageA, layout_a.layout, A, lda, transA, m0, k0, M, K, vec_a);
            stage_tile<T, TK, TN>(smem_b + buf * kStageB, layout_b.layout, B, ldb, transB, k0, n0, K, N, vec_b);
        };

        auto partitioner = BLAS::suggest_partitioner();
        auto acc = partitioner.make_accumulator_fragment();
        cublasdx::clear(acc);

        // Pipeline: kStages - 1 steps in flight ahead of the one being multiplied. Every thread commits
        // one cp.async group per step (empty ones too), so wait<kStages - 2> means "step kt has landed".
        for (int p = 0; p < kStages - 1; ++p) {
            if (p < nk) stage(p);
            cute::cp_async_fence();
        }
        for (long long kt = 0; kt < nk; ++kt) {
            cute::cp_async_wait<kStages - 2>();
            __syncthreads();  // step kt visible to all; the buffer step kt - 1 used is free again
            if (kt + kStages - 1 < nk) stage(kt + kStages - 1);
            cute::cp_async_fence();
            const int buf = int(kt % kStages);
            auto sa = cublasdx::make_tensor(smem_a + buf * kStageA, layout_a);
            auto sb = cublasdx::make_tensor(smem_b + buf * kStageB, layout_b);
            BLAS().execute(sa, sb, acc);  // threads past BLAS's own block size skip inside
        }
        cute::cp_async_wait<0>();

        // Epilogue straight from registers: each thread writes the C elements its fragment holds.
        if (partitioner.is_thread_active()) {
            for (int i = 0; i < cute::size(acc); ++i) {
                const auto mn = partitioner.map_fragment_index(i);
                const long long gm = m0 + cute::get<0>(mn), gn = n0 + cute::get<1>(mn);
                if (gm < M && gn < N) {
                    T *c = C + gm * ldc + gn;
                    const T part = alpha * acc(i);
                    if (u.split) atomicAdd(c, part);
                    else *c = beta == T(0) ? part : part + beta * *c;
                }
            }
        }
        __syncthreads();  // the next tile (or the caller's next gemm) refills the shared buffers
    }
}

// op(A)[i, k + u] of one iteration of skinny::lane_partial (R rows x kUnroll), read once per warp: lane l loads the
// values q = l, l + 32, ... (q = i * kUnroll + u) and get() broadcasts value q from its lane. 32 lanes, as the tensor
// paths' warps; every lane of the warp calls fetch and get together.
template <typename T, int R>
struct SmallOperandWarp {
    static constexpr int kLanes = 32, kPer = R * skinny::kUnroll / kLanes;
    static_assert(kPer * kLanes == R * skinny::kUnroll, "the warp's lanes split a loop iteration's values evenly");
    const T *A;
    long long a_row, a_col, m, k_end;  // as skinny::SmallOperand
    int lane;
    T vals[kPer];
    __device__ void fetch(long long k) {
#pragma unroll
        for (int j = 0; j < kPer; ++j) {
            const int q = lane + kLanes * j, i = q / skinny::kUnroll, u = q % skinny::kUnroll;
            vals[j] = i < m && k + u < k_end ? A[i * a_row + (k + u) * a_col] : T(0);
        }
    }
    __device__ T get(int i, int u) const {
        const int q = i * skinny::kUnroll + u;
        return __shfl_sync(0xffffffffu, vals[q / kLanes], q % kLanes);
    }
};

// Few output rows (M <= skinny::kMaxRows, B untransposed): B streamed once, all rows of C in registers
// (cpufree/gemm_skinny.cuh). R: the rows each lane accumulates (M rounded up). The block's warps split a unit's K range
// and warps 1.. hand their sums to warp 0 through the dynamic shared memory of the tile path (Tile's stages), as many
// warps at a time as it holds; warp 0 writes the unit's columns (atomically when K is split over blocks).
template <typename T, typename Tile, int R>
__device__ void gemm_skinny(long long M, long long N, long long K, T alpha, const T *A, long long lda, bool transA,
                            const T *B, long long ldb, T beta, T *C, long long ldc) {
    constexpr int V = skinny::vec<T>();
    constexpr int lanes = SmallOperandWarp<T, R>::kLanes;
    const int warps = int(blockDim.x) / lanes;
    const int warp = int(threadIdx.x) / lanes, lane = int(threadIdx.x) % lanes;
    const skinny::Plan p = skinny::plan(N, K, V, lanes, warps, gridDim.x);
    if (p.splits > 1) {
        scale_output(M, N, beta, C, ldc);
        cooperative_groups::this_grid().sync();
    }
    const bool vec_b = reinterpret_cast<unsigned long long>(B) % 16 == 0 && ldb % V == 0;
    const bool vec_c = reinterpret_cast<unsigned long long>(C) % 16 == 0 && ldc % V == 0;
    T *const slots = reinterpret_cast<T *>(dynamic_shared());
    const int slot = R * V * lanes;  // one warp's sums, element (i, v) of lane l at (i * V + v) * lanes + l
    const int capacity = int(gemm_shared_bytes<T, Tile>() / (sizeof(T) * slot));
    const long long work = p.strips * p.splits;
    for (long long w = blockIdx.x; w < work; w += gridDim.x) {
        const skinny::Unit u = skinny::unit(p, w, K);
        const long long n = u.n0 + (long long)lane * V;
        T acc[R][V];
#pragma unroll
        for (int i = 0; i < R; ++i)
#pragma unroll
            for (int v = 0; v < V; ++v) acc[i][v] = T(0);
        if (warp < warps) {
            SmallOperandWarp<T, R> a{A, transA ? 1 : lda, transA ? lda : 1, M, u.k1, lane};
            skinny::lane_partial<T, R>(acc, a, B, ldb, N, n, vec_b, u.k0 + (long long)warp * skinny::kUnroll, u.k1,
                                       (long long)warps * skinny::kUnroll);
        }
        for (int first = 1; first < warps; first += capacity) {
            if (warp >= first && warp < first + capacity && warp < warps) {
                T *mine = slots + (warp - first) * slot + lane;
#pragma unroll
                for (int i = 0; i < R; ++i)
#pragma unroll
                    for (int v = 0; v < V; ++v) mine[(i * V + v) * lanes] = acc[i][v];
            }
            __syncthreads();
            if (warp == 0) {
                const int count = warps - first < capacity ? warps - first : capacity;
                for (int s = 0; s < count; ++s) {
                    const T *theirs = slots + s * slot + lane;
#pragma unroll
                    for (int i = 0; i < R; ++i)
#pragma unroll
                        for (int v = 0; v < V; ++v) acc[i][v] += theirs[(i * V + v) * lanes];
                }
            }
            __syncthreads();  // the slots are free again
        }
        if (warp != 0 || n >= N) continue;
#pragma unroll
        for (int i = 0; i < R; ++i) {
            if (i >= M) break;
            T *c = C + i * ldc + n;
            if (p.splits > 1) {
#pragma unroll
                for (int v = 0; v < V; ++v)
                    if (n + v < N) atomicAdd(c + v, alpha * acc[i][v]);
            } else {
                skinny::store_row<T>(c, acc[i], N - n, vec_c, alpha, beta);
            }
        }
    }
}

// Whether gemm_skinny takes a product: few rows, B untransposed, and one warp's sums fit the shared memory.
template <typename T, typename Tile>
__device__ inline bool skinny_applies(long long M, bool transB) {
    return M <= skinny::kMaxRows && !transB &&
           warpSize == SmallOperandWarp<T, skinny::kMaxRows>::kLanes &&
           (unsigned long long)skinny::kMaxRows * skinny::vec<T>() * warpSize * sizeof(T) <=
               gemm_shared_bytes<T, Tile>();
}

// Tensor path: the tile policy picks the product (GemmTileDmma: the DMMA tile where dmma_applies, else its CUTLASS
// tile; GemmTileCutlass: CUTLASS, FP64; GemmTile: cuBLASDx).
template <typename T, typename Tile>
__device__ void gemm_tensor(long long M, long long N, long long K, T alpha, const T *A, long long lda, bool transA,
                            const T *B, long long ldb, bool transB, T beta, T *C, long long ldc,
                            long long forced_splits = 0) {
    if constexpr (gemm_tile_is_dmma<Tile>::value) {
        static_assert(cute::is_same_v<T, double>, "GemmTileDmma tiles multiply doubles");
#if defined(CPUFREE_SM90_DMMA)
        if (!transA && !transB && dmma_applies(A, lda, B, ldb, N, K)) {
            gemm_tensor_dmma<Tile>(M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, forced_splits);
            return;
        }
#endif
        gemm_tensor<T, typename Tile::Narrow>(M, N, K, alpha, A, lda, transA, B, ldb, transB, beta, C, ldc,
                                              forced_splits);
    } else if constexpr (gemm_tile_is_cutlass<Tile>::value) {
        // No FP64 tensor cores (and no cp.async) before sm_80; CUTLASS's iterators take extents as int.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
        constexpr bool kTensorCores = false;
#else
        constexpr bool kTensorCores = true;
#endif
        constexpr long long kInt = 2147483647;
        if (!kTensorCores || M > kInt || N > kInt || K > kInt) {
            gemm_plain<T>(M, N, K, alpha, A, lda, transA, B, ldb, transB, beta, C, ldc);
            return;
        }
        using cutlass_tile::Col, cutlass_tile::Row;
        if (!transA && !transB)
            gemm_tensor_cutlass<T, Tile, Row, Row>(M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, forced_splits);
        else if (!transA)
            gemm_tensor_cutlass<T, Tile, Row, Col>(M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, forced_splits);
        else if (!transB)
            gemm_tensor_cutlass<T, Tile, Col, Row>(M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, forced_splits);
        else
            gemm_tensor_cutlass<T, Tile, Col, Col>(M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, forced_splits);
    } else
        gemm_tensor_cublasdx<T, Tile>(M, N, K, alpha, A, lda, transA, B, ldb, transB, beta, C, ldc, forced_splits);
}

#endif  // !CPUFREE_GEMM_PLAIN

}  // namespace gemm_detail

template <typename T, int Build = 0>
__device__ void gemm(long long M, long long N, long long K, T alpha, const T *A, long long lda, bool transA,
                     const T *B, long long ldb, bool transB, T beta, T *C, long long ldc) {
    using Tile = typename GemmBuildTile<T, Build>::type;
#if !defined(CPUFREE_GEMM_PLAIN)
    // A block the tile cannot run (smaller than its thread count; for CUTLASS's FP64 tile, any other size: a user's
    // block size) takes the (slow, correct) plain path. The launcher avoids it with gemm_threads<T>().
    if constexpr (gemm_uses_library<T>::value) {
        // Few rows: FP32 only. In FP64 the streaming form reached 1.7-2.6 TB/s on B and 0.67-0.97x cuBLAS on four
        // of five shapes (H100): the tiles keep those products.
        const bool runs_tile = gemm_detail::block_runs_tile<Tile>();
        if constexpr (sizeof(T) == 4) {
            if (runs_tile && gemm_detail::skinny_applies<T, Tile>(M, transB)) {
                if (M <= 4)
                    gemm_detail::gemm_skinny<T, Tile, 4>(M, N, K, alpha, A, lda, transA, B, ldb, beta, C, ldc);
                else if (M <= 8)
                    gemm_detail::gemm_skinny<T, Tile, 8>(M, N, K, alpha, A, lda, transA, B, ldb, beta, C, ldc);
                else
                    gemm_detail::gemm_skinny<T, Tile, skinny::kMaxRows>(M, N, K, alpha, A, lda, transA, B, ldb, beta,
                                                                         C, ldc);
                return;
            }
        }
        if (runs_tile)
            gemm_detail::gemm_tensor<T, Tile>(M, N, K, alpha, A, lda, transA, B, ldb, transB, beta, C, ldc);
        else
            gemm_detail::gemm_plain<T>(M, N, K, alpha, A, lda, transA, B, ldb, transB, beta, C, ldc);
    } else
#endif
        gemm_detail::gemm_plain<T>(M, N, K, alpha, A, lda, transA, B, ldb, transB, beta, C, ldc);
}

#endif  // CPUFREE_EMULATE

#if defined(CPUFREE_EMULATE)
#define CPUFREE_GEMM_ENTRY inline
#else
#define CPUFREE_GEMM_ENTRY __device__
#endif

// NumPy's C = alpha * (op(A) @ op(B)) + beta * C, for a scaling and sum that a program wrote around a product and that
// transformations/scaled_products.py folded into the call: as gemm, except that C is read where beta is 0 too (NumPy's
// 0 * NaN is NaN, 0 * -1 is -0; BLAS's convention leaves C unread). Then C = 0 * C first, one grid sync, and beta = 1.
template <typename T, int Build = 0, typename PA, typename PB, typename PC>
CPUFREE_GEMM_ENTRY void gemm_numpy(long long M, long long N, long long K, T alpha, PA A, long long lda, bool transA,
                                   PB B, long long ldb, bool transB, T beta, PC C, long long ldc) {
    if (beta == T(0)) {
        const long long stride = (long long)gridDim.x * blockDim.x;
        for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < M * N; e += stride) {
            const long long at = (e / N) * ldc + e % N;
            C[at] = T(0) * T(C[at]);
        }
        cooperative_groups::this_grid().sync();
        beta = T(1);
    }
    gemm<T, Build>(M, N, K, alpha, A, lda, transA, B, ldb, transB, beta, C, ldc);
}

#undef CPUFREE_GEMM_ENTRY

}  // namespace cpufree
