// FP64 tile product on CUTLASS's block-level multistage matrix product (cutlass::gemm::threadblock::DefaultMma, the
// main loop of CUTLASS's own DGEMM kernels): predicated global-to-shared iterators on cp.async, CUTLASS's shared
// layouts for 64-bit operands, warp fragments double-buffered in registers and the DMMA instructions of the device
// (16x8xK on sm_90, 8x8x4 on sm_80). The persistent kernel keeps the schedule (gemm.cuh: grid-stride over output tiles
// in bands, split-K); this file supplies one tile: C[m0:m0+TM, n0:n0+TN] (+)= alpha * A[m0:, k range] B[k range, n0:]
// + beta * C, edges predicated. The accumulators leave through shared memory (the main loop's buffers, free by then),
// so the block writes rows of C whole: alpha, beta, bounds and split-K atomics in one place.
#pragma once

#include <cutlass/cutlass.h>
#include <cutlass/gemm/gemm.h>
#include <cutlass/gemm/threadblock/default_mma.h>
#include <cutlass/layout/matrix.h>

#include "gemm_dmma.cuh"  // CPUFREE_SM90_DMMA

namespace cpufree {
namespace cutlass_tile {

// The DMMA instruction: 16x8xInstK on sm_90 (CUTLASS's shared-memory iterators for 64-bit operands deliver the
// fragments of 16x8x4 only: with InstK 8 the product came out wrong on an H100), 8x8x4 on sm_80 and on architectures
// after sm_90 (the form every one since sm_80 has). The shared layouts and iterators do not depend on the instruction,
// so the host (which sizes shared memory) and every device pass agree on SharedStorage.
template <int InstK> struct Sm80Arch {
    using Tag = cutlass::arch::Sm80;
    using Instruction = cutlass::gemm::GemmShape<8, 8, 4>;
};
#if defined(CPUFREE_SM90_DMMA)
template <int InstK> struct Arch {
    static_assert(InstK == 4, "CUTLASS's 64-bit shared-memory iterators feed the 16x8x4 instruction only");
    using Tag = cutlass::arch::Sm90;
    using Instruction = cutlass::gemm::GemmShape<16, 8, InstK>;
};
#else
template <int InstK> struct Arch : Sm80Arch<InstK> {};
#endif

// One configuration's block product for operands in CUTLASS's layouts: RowMajor for an untransposed row-major operand,
// ColumnMajor for op(X) = X.T of a row-major X (its leading dimension unchanged).
template <int TM, int TN, int TK, int WM, int WN, int InstK, int Stages, typename LayoutA, typename LayoutB,
          typename Target = Arch<InstK>>
struct Product {
    using Default = cutlass::gemm::threadblock::DefaultMma<
        double, LayoutA, 1, double, LayoutB, 1, double, cutlass::layout::RowMajor, cutlass::arch::OpClassTensorOp,
        typename Target::Tag, cutlass::gemm::GemmShape<TM, TN, TK>, cutlass::gemm::GemmShape<TM / WM, TN / WN, TK>,
        typename Target::Instruction, Stages, cutlass::arch::OpMultiplyAdd>;
    using Mma = typename Default::ThreadblockMma;
};

using Row = cutlass::layout::RowMajor;
using Col = cutlass::layout::ColumnMajor;

constexpr unsigned long long larger(unsigned long long a, unsigned long long b) { return a > b ? a : b; }

// Shared memory of a configuration: the largest pipeline of the four operand layouts, or the staged C tile (rows padded
// by one element so that a warp's accumulator stores spread over the banks), whichever is larger. Sized with the sm_80
// instruction in every compilation pass, so that the host's launch and every device pass agree (gemm_tensor_cutlass
// checks its own pipeline against it).
template <int TM, int TN, int TK, int WM, int WN, int InstK, int Stages>
struct Shared {
    template <typename LA, typename LB>
    static constexpr unsigned long long pipeline() {
        return sizeof(
            typename Product<TM, TN, TK, WM, WN, InstK, Stages, LA, LB, Sm80Arch<InstK>>::Mma::SharedStorage);
    }
    static constexpr int kLdc = TN + 1;
    static constexpr unsigned long long kBytes =
        larger(larger(larger(pipeline<Row, Row>(), pipeline<Row, Col>()),
                      larger(pipeline<Col, Row>(), pipeline<Col, Col>())),
               sizeof(double) * TM * kLdc);
};

}  // namespace cutlass_tile
}  // namespace cpufree
