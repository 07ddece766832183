// FP64 output tile on sm_90's 16x8x8 DMMA instruction with 16-byte copies (gemm.cuh, gemm_tensor_dmma): the index
// arithmetic, plain C++ that kernels and host programs share (tests/transformations/test_gemm_dmma.py runs it on the
// host against NumPy and counts its shared-memory bank conflicts).
//
// A TM x 64 output tile, K in steps of 16, 128 threads as 2 x 2 warps of (TM / 2) x 32 outputs. Untransposed row-major
// operands only (A K-contiguous, B N-contiguous), rows 16-byte aligned with an even number of elements: every
// global-to-shared copy moves 16 bytes (two doubles) along the contiguous dimension, and every fragment load reads 16
// bytes straight into the registers the instruction takes, in their order:
//
// - The instruction computes C^T = B^T A^T: its 16 rows are 16 columns of C, its 8 columns 8 rows of C. Its first
//   operand is then a 16 x 8 slice of B^T, the second an 8 x 8 slice of A^T.
// - The K order inside an instruction is free when both operands agree on it: instruction k index t (0..3) is K
//   element 2t of the eight, index t + 4 is element 2t + 1. A lane's two A values (k = t, t + 4, one row of A) are then
//   adjacent in that row: one 16-byte load.
// - The order of C's columns inside an instruction's 16 is free when the output follows it: instruction row g (0..7)
//   is column 2g, row g + 8 column 2g + 1. A lane's four B values are then two pairs of adjacent elements in rows 2t
//   and 2t + 1 of B: two 16-byte loads, in the instruction's register order.
// - Shared rows are stored in 16-byte chunks, permuted by an XOR of the row so that the eight lanes of every quarter
//   warp (which a 16-byte load serves together) read eight different bank groups: A rows hold 8 chunks, odd rows
//   swap their halves; B rows hold 32 chunks, permuted within aligned groups of 8 by bits 1 and 2 of K.
#pragma once

#include "host_device.h"

// A device pass for sm_90's family, whose DMMA instructions are 16 x 8 x K (4, 8, 16): this tile's 16x8x8 and the
// 16x8x4 of CUTLASS's tile (gemm_cutlass.cuh). sm_80 and the architectures after sm_90 have 8x8x4.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && __CUDA_ARCH__ < 1000
#define CPUFREE_SM90_DMMA 1
#endif

namespace cpufree {
namespace dmma {

template <int TM>
struct Shape {
    static_assert(TM == 64 || TM == 128, "DMMA tiles are 64 or 128 rows by 64 columns");
    static constexpr int kTileM = TM, kTileN = 64, kTileK = 16, kThreads = 128;
    static constexpr int kWarpM = TM / 2, kWarpN = 32;         // outputs of each of the 2 x 2 warps
    static constexpr int kGroupsM = kWarpM / 8;                // instructions along a warp's rows (8 rows each)
    static constexpr int kGroupsN = kWarpN / 16;               // along its columns (16 columns each)
    static constexpr int kSteps = kTileK / 8;                  // 16 x 8 x 8 steps per K tile
    static constexpr int kAElems = TM * kTileK, kBElems = kTileK * kTileN;  // doubles per stage
    static constexpr int kACopies = TM * (kTileK / 2) / kThreads;  // 16-byte copies per thread and stage
    static constexpr int kBCopies = kTileK * (kTileN / 2) / kThreads;
    static constexpr int kLdc = kTileN + 2;  // the staged C tile's rows, padded: 16-byte stores free of conflicts
};

// Chunk slot (in 16-byte units from the stage's A or B buffer) of chunk `chunk` of row `row` (A: 8 chunks a row,
// B: 32).
CPUFREE_HD constexpr int a_slot(int row, int chunk) { return row * 8 + (chunk ^ ((row & 1) << 2)); }
CPUFREE_HD constexpr int b_slot(int k, int chunk) { return k * 32 + (chunk ^ (k & 6)); }

// The copies of thread `tid`: its j-th A chunk is chunk a_copy_chunk(tid) of tile row a_copy_row(tid, j), its j-th B
// chunk chunk b_copy_chunk(tid) of tile row (K) b_copy_row(tid, j). A warp copies whole rows: coalesced reads.
// A thread's copies are kACopyRows (kBCopyRows) rows apart: the kernel steps its source pointers by that many rows.
constexpr int kACopyRows = 16, kBCopyRows = 4;
CPUFREE_HD constexpr int a_copy_row(int tid, int j) { return tid / 8 + kACopyRows * j; }
CPUFREE_HD constexpr int a_copy_chunk(int tid) { return tid % 8; }
CPUFREE_HD constexpr int b_copy_row(int tid, int j) { return tid / 32 + kBCopyRows * j; }
CPUFREE_HD constexpr int b_copy_chunk(int tid) { return tid % 32; }

// Fragments of lane `lane` (g = lane / 4, t = lane % 4) of warp (wm, wn) in K step `step` (eight K):
// - instruction column group q (C rows 8q..8q + 7 of the warp's): one 16-byte A load of row a_frag_row, chunk
//   a_frag_chunk: the instruction's second operand (b0, b1) (K elements 2t, 2t + 1);
// - instruction row group p (C columns 16p..16p + 15 of the warp's), e = 0, 1: one 16-byte B load of row b_frag_row
//   (K element 2t + e), chunk b_frag_chunk: registers 2e, 2e + 1 of the first operand (C columns 2g, 2g + 1).
template <int TM>
CPUFREE_HD constexpr int a_frag_row(int wm, int lane, int q) { return wm * Shape<TM>::kWarpM + 8 * q + lane / 4; }
CPUFREE_HD constexpr int a_frag_chunk(int lane, int step) { return 4 * step + lane % 4; }
CPUFREE_HD constexpr int b_frag_row(int lane, int step, int e) { return 8 * step + 2 * (lane % 4) + e; }
CPUFREE_HD constexpr int b_frag_chunk(int wn, int lane, int p) { return wn * 16 + 8 * p + lane / 4; }

// Tile row and column of accumulator v (0..3) of instruction (p, q) of lane `lane` of warp (wm, wn): the instruction's
// (row, column) (g, 2t), (g, 2t + 1), (g + 8, 2t), (g + 8, 2t + 1) are C's (row 2t, column 2g), (2t + 1, 2g),
// (2t, 2g + 1), (2t + 1, 2g + 1) of the instruction's 8 x 16 part. Accumulators v and v + 2 (v = 0, 1) are adjacent
// in a row of C: one 16-byte store into the staged tile.
template <int TM>
CPUFREE_HD constexpr int acc_row(int wm, int lane, int q, int v) {
    return wm * Shape<TM>::kWarpM + 8 * q + 2 * (lane % 4) + (v & 1);
}
CPUFREE_HD constexpr int acc_col(int wn, int lane, int p, int v) {
    return wn * 32 + 16 * p + 2 * (lane / 4) + (v >> 1);
}

// What the kernel computes of the above (offsets in doubles from a stage's A or B buffer): a per-thread base and
// constant strides, so that the main loop's shared-memory addresses are a register plus an immediate. Rows 8 or 16
// apart keep the swizzle of A (row parity) and of B (bits 1 and 2 of K); chunks 8 apart keep B's. The host check
// compares every use with the slots above.
CPUFREE_HD constexpr int a_copy_offset(int tid) { return 2 * a_slot(a_copy_row(tid, 0), a_copy_chunk(tid)); }
constexpr int kACopyStride = 2 * kACopyRows * 8;  // copy j + 1: 16 rows further
CPUFREE_HD constexpr int b_copy_offset(int tid, int parity) {
    return 2 * b_slot(b_copy_row(tid, parity), b_copy_chunk(tid));
}
constexpr int kBCopyPairStride = 2 * 2 * kBCopyRows * 32;  // copy j + 2: 8 rows further
template <int TM>
CPUFREE_HD constexpr int a_frag_offset(int wm, int lane, int step) {
    return 2 * a_slot(a_frag_row<TM>(wm, lane, 0), a_frag_chunk(lane, step));
}
CPUFREE_HD constexpr int a_frag_stride(int q) { return 2 * 8 * q * 8; }
CPUFREE_HD constexpr int b_frag_offset(int wn, int lane) {
    return 2 * b_slot(b_frag_row(lane, 0, 0), b_frag_chunk(wn, lane, 0));
}
CPUFREE_HD constexpr int b_frag_stride(int step, int e, int p) { return 2 * ((8 * step + e) * 32 + 8 * p); }

}  // namespace dmma
}  // namespace cpufree
