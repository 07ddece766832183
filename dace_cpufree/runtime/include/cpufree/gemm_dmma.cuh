// FP64 tile product on the DMMA tensor cores, warp by warp, for cpufree::gemm's GemmTileDmma tiles: the shared-memory
// layouts of the staged A and B tiles, how each lane loads its MMA fragments from them, the MMA itself and where each
// accumulator element lands in the output tile. Staging the tiles into these layouts and the epilogue are
// gemm.cuh's (gemm_tensor_dmma); this header holds only what is specific to the warp tiling.
//
// Warp tiling: the block's TileM x TileN output is split into WarpsM x WarpsN warp tiles of WTM x WTN elements; a warp
// computes its tile on MMA atoms of 16 x 8 x AtomK (PTX mma.m16n8k{4,8,16}.f64 on sm_90, four or more m8n8k4 on
// other architectures, with the same fragments).
//
// Fragment conventions (CuTe's MMA_Traits of SM90_16x8xK_F64F64F64F64_TN; lane = 4 * t1 + t0):
//   A value h + 2 q holds A[t1 + 8 h, kappa = t0 + 4 q]   (q < AtomK / 4)
//   B value q       holds B[kappa = t0 + 4 q, t1]
//   C value v0 + 2 v1 holds C[t1 + 8 v1, 2 t0 + v0]
// The sum over kappa is order-free, so kappa is mapped to the tile's k as t0 * (AtomK / 4) + q.
//
// AtomK 4: (WTM / 16) x (WTN / 8) atoms of C = A B. A lane's A values are 8-byte loads; along N, atoms are taken in
// pairs (atom 2 p + e, column c -> tile column 16 p + 2 c + e), so a lane's B values of one k for the two atoms of a
// pair are adjacent (16-byte loads), and its accumulators hold four adjacent columns 16 p + 4 t0 + {0..3}.
//
// AtomK 8, 16 ("swapped"): (WTN / 16) x (WTM / 8) atoms of C^T = B^T A^T: the atom's A operand is the tile of B (its
// rows are the tile's columns, atom row t1 + 8 h -> tile column 2 t1 + h) and its B operand the tile of A. A lane's
// two A values h = 0, 1 of one kappa are then adjacent in a row of B, and its B values q, q + 1 adjacent in a row of
// A: every fragment is one 16-byte load into two adjacent operand registers, with no register moves, and the
// accumulators hold columns 2 t1 + {0, 1} of rows 2 t0 + v0. (To a column-major library such as cuBLAS, NumPy's
// row-major A @ B is this same product B^T A^T.)
//
// Shared memory: A is TileM x TileK, K contiguous; B is TileK x TileN, N contiguous, as staged from untransposed
// NumPy operands. 16-byte chunks of a row are permuted by an XOR with bits of the row so that a warp's fragment
// loads and the block's 16-byte cp.async stores hit distinct banks; two adjacent elements of a chunk stay adjacent.
//
// Everything but dmma() is host-callable, so that a host program can check the index arithmetic against CuTe's
// fragment layouts (npbench_runs/gemm_tiles.py --check).
#pragma once

#if defined(__CUDACC__) && !defined(CPUFREE_DMMA_HOST_ONLY)
#include <cute/arch/mma_sm80.hpp>
#include <cute/arch/mma_sm90.hpp>
#endif

#include "host_device.h"

namespace cpufree {
namespace dmma {

constexpr int log2_exact(int v) { return v <= 1 ? 0 : 1 + log2_exact(v / 2); }

// A tile (Rows x Cols doubles, Cols contiguous): 16-byte chunk c of row r is stored at chunk c ^ mask(r).
// AtomK 16: a fragment load covers two rows x four chunks per 8 lanes -> rows differ in bit 0.
// AtomK 8: two rows x four chunks -> bit 2. AtomK 4 (8-byte loads, 16 lanes a phase): four rows x two chunks -> bits 1-2.
template <int Rows, int Cols, int AtomK>
struct LayoutA {
    static_assert(Cols % 16 == 0, "A tile: TileK must be a multiple of 16");
    static constexpr int kCosize = Rows * Cols;
    CPUFREE_HD static constexpr int mask(int r) {
        return AtomK == 16 ? (r & 1) : AtomK == 8 ? ((r & 1) << 2) : ((r & 3) << 1);
    }
    CPUFREE_HD constexpr int operator()(int r, int c) const {
        return r * Cols + ((((c >> 1) ^ mask(r))) << 1) + (c & 1);
    }
};

// B tile (Rows = K x Cols = N doubles, N contiguous): a 16-byte fragment load of 8 lanes reads four k rows
// (t0 * AtomK / 4) x two chunks -> chunk ^= (bits of k / (AtomK / 4)) << 1.
template <int Rows, int Cols, int AtomK>
struct LayoutB {
    static_assert(Cols % 16 == 0, "B tile: TileN must be a multiple of 16");
    static constexpr int kCosize = Rows * Cols;
    static constexpr int kShift = log2_exact(AtomK / 4);
    CPUFREE_HD static constexpr int mask(int r) { return ((r >> kShift) & 3) << 1; }
    CPUFREE_HD constexpr int operator()(int r, int c) const {
        return r * Cols + ((((c >> 1) ^ mask(r))) << 1) + (c & 1);
    }
};

// One warp's share of a tile and the fragments of one K block (AtomK deep).
template <int TileM, int TileN, int TileK, int WarpsM, int WarpsN, int AtomK>
struct Warp {
    static_assert(AtomK == 4 || AtomK == 8 || AtomK == 16, "AtomK: 4, 8 or 16");
    static_assert(TileK % AtomK == 0, "TileK must be a multiple of AtomK");
    static constexpr int kWTM = TileM / WarpsM, kWTN = TileN / WarpsN;
    static_assert(kWTM * WarpsM == TileM && kWTN * WarpsN == TileN, "warps must split the tile evenly");
    // kSwapped (AtomK 8, 16): the atoms compute C^T = B^T A^T, their rows running along the tile's N and their
    // columns along M (kMI atoms along N, kNJ along M); otherwise kMI atoms along M and kNJ along N.
    static constexpr bool kSwapped = AtomK > 4;
    static constexpr int kMI = kSwapped ? kWTN / 16 : kWTM / 16, kNJ = kSwapped ? kWTM / 8 : kWTN / 8;
    static_assert(kSwapped ? kMI * 16 == kWTN && kNJ * 8 == kWTM : kMI * 16 == kWTM && kNJ * 8 == kWTN,
                  "warp tile: 16 x 16 atoms");
    static_assert(kNJ % 2 == 0, "warp tile: multiple of 16 x 16");
    static constexpr int kKB = TileK / AtomK;  // K blocks per staged tile
    static constexpr int kKV = AtomK / 4;      // A values per row and B values per atom, per lane
    using LA = LayoutA<TileM, TileK, AtomK>;
    using LB = LayoutB<TileK, TileN, AtomK>;

    struct Frag {
        double a[kMI][2 * kKV];
        double b[kNJ][kKV];
    };

    CPUFREE_HD static int warp_m0(int warp) { return (warp / WarpsN) * kWTM; }
    CPUFREE_HD static int warp_n0(int warp) { return (warp % WarpsN) * kWTN; }

    // Swapped atoms: a lane's fragment loads lie at fixed offsets from a few per-lane bases in a stage buffer (the
    // swizzles leave the steps along kappa, the atoms and the K blocks untouched), so that a K step adds a stage's
    // base to them once instead of computing every address.
    struct Offsets {
        int a;                               // in B's tile: kappa = t0 kKV, column 2 t1 of the warp's first atom
        int b[kKB][kKV / 2 > 0 ? kKV / 2 : 1];  // in A's tile: row t1 of the warp's first atom, kappa = t0 kKV + 2 qq
    };
    CPUFREE_HD static Offsets offsets(int warp, int lane) {
        const int t0 = lane & 3, t1 = lane >> 2;
        constexpr LA la{};
        constexpr LB lb{};
        Offsets o{};
        if constexpr (kSwapped) {
            o.a = lb(t0 * kKV, warp_n0(warp) + 2 * t1);
            for (int kb = 0; kb < kKB; ++kb)
                for (int qq = 0; qq < kKV / 2; ++qq) o.b[kb][qq] = la(warp_m0(warp) + t1, kb * AtomK + t0 * kKV + 2 * qq);
        }
        return o;
    }

    // The fragments of K block kb from one stage's A and B tiles.
    CPUFREE_HD static void load(Frag &f, const double *sa, const double *sb, int warp, int lane, int kb) {
        load(f, sa, sb, offsets(warp, lane), warp, lane, kb);
    }
    CPUFREE_HD static void load(Frag &f, const double *sa, const double *sb, const Offsets &o, int warp, int lane,
                                int kb) {
        if constexpr (kSwapped) {
            // Atom row t1 + 8 h is tile column 2 t1 + h, so A values h = 0, 1 of one kappa are adjacent in B's rows;
            // B values q, q + 1 are adjacent in A's rows. Every load is 16 bytes into two adjacent operand registers.
#pragma unroll
            for (int i = 0; i < kMI; ++i)
#pragma unroll
                for (int q = 0; q < kKV; ++q) {
                    const double2 v =
                        *reinterpret_cast<const double2 *>(sb + o.a + (kb * AtomK + q) * TileN + 16 * i);
                    f.a[i][2 * q] = v.x;
                    f.a[i][2 * q + 1] = v.y;
                }
#pragma unroll
            for (int j = 0; j < kNJ; ++j)
#pragma unroll
                for (int q = 0; q < kKV; q += 2) {
                    const double2 v = *reinterpret_cast<const double2 *>(sa + o.b[kb][q / 2] + 8 * j * TileK);
                    f.b[j][q] = v.x;
                    f.b[j][q + 1] = v.y;
                }
            return;
        }
        const int t0 = lane & 3, t1 = lane >> 2;
        const int m0 = warp_m0(warp), n0 = warp_n0(warp);
        const int k0 = kb * AtomK + t0 * kKV;
        constexpr LA la{};
        constexpr LB lb{};
#pragma unroll
        for (int i = 0; i < kMI; ++i)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int row = m0 + 16 * i + t1 + 8 * h;
                if constexpr (kKV == 1) {
                    f.a[i][h] = sa[la(row, k0)];
                } else {
#pragma unroll
                    for (int q = 0; q < kKV; q += 2) {
                        const double2 v = *reinterpret_cast<const double2 *>(sa + la(row, k0 + q));
                        f.a[i][h + 2 * q] = v.x;
                        f.a[i][h + 2 * (q + 1)] = v.y;
                    }
                }
            }
#pragma unroll
        for (int p = 0; p < kNJ / 2; ++p)
#pragma unroll
            for (int q = 0; q < kKV; ++q) {
                const double2 v = *reinterpret_cast<const double2 *>(sb + lb(k0 + q, n0 + 16 * p + 2 * t1));
                f.b[2 * p][q] = v.x;
                f.b[2 * p + 1][q] = v.y;
            }
    }

    // Output tile coordinates of accumulator value v of atom (i, j).
    CPUFREE_HD static int c_row(int warp, int lane, int i, int j, int v) {
        if constexpr (kSwapped) return warp_m0(warp) + 8 * j + 2 * (lane & 3) + (v & 1);
        return warp_m0(warp) + 16 * i + (lane >> 2) + 8 * (v >> 1);
    }
    CPUFREE_HD static int c_col(int warp, int lane, int i, int j, int v) {
        if constexpr (kSwapped) return warp_n0(warp) + 16 * i + 2 * (lane >> 2) + (v >> 1);
        return warp_n0(warp) + 16 * (j >> 1) + 4 * (lane & 3) + 2 * (v & 1) + (j & 1);
    }
};

#if defined(__CUDACC__) && !defined(CPUFREE_DMMA_HOST_ONLY)
// d += a * b for one 16 x 8 x AtomK atom (fragments as above).
template <int AtomK>
__device__ inline void dmma(double (&d)[4], const double (&a)[AtomK / 2], const double (&b)[AtomK / 4]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && __CUDA_ARCH__ < 1000
    if constexpr (AtomK == 16)
        cute::SM90::MMA_16x8x16_F64F64F64F64_TN::fma(d[0], d[1], d[2], d[3], a[0], a[1], a[2], a[3], a[4], a[5], a[6],
                                                      a[7], b[0], b[1], b[2], b[3], d[0], d[1], d[2], d[3]);
    else if constexpr (AtomK == 8)
        cute::SM90::MMA_16x8x8_F64F64F64F64_TN::fma(d[0], d[1], d[2], d[3], a[0], a[1], a[2], a[3], b[0], b[1], d[0],
                                                     d[1], d[2], d[3]);
    else
        cute::SM90::MMA_16x8x4_F64F64F64F64_TN::fma(d[0], d[1], d[2], d[3], a[0], a[1], b[0], d[0], d[1], d[2], d[3]);
#else
    // m8n8k4: A[t1, t0], B[t0, t1], C[t1, 2 t0 + v]: the top (h = 0) and bottom (h = 1) halves of the atom, K in 4s.
#pragma unroll
    for (int q = 0; q < AtomK / 4; ++q)
#pragma unroll
        for (int h = 0; h < 2; ++h)
            cute::SM80_8x8x4_F64F64F64F64_TN::fma(d[2 * h], d[2 * h + 1], a[h + 2 * q], b[q], d[2 * h], d[2 * h + 1]);
#endif
}
#endif

}  // namespace dmma
}  // namespace cpufree
