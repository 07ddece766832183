// CPUFREE_HD marks the functions that kernels and host programs both call: the index arithmetic of the product
// paths, which host programs check against NumPy and CuTe's layouts (tests/transformations/), and of the tiles of a
// block for any wavefront size (tests/hip/).
#pragma once

#ifndef CPUFREE_HD
#if defined(__CUDACC__) || defined(__HIPCC__)
#define CPUFREE_HD __host__ __device__
#else
#define CPUFREE_HD
#endif
#endif

#include <type_traits>

// sympy's Max and Min as DaCe prints them in expressions: a distributed program's owned ranges, e.g.
// Max(1, pe * local - 1). Both arguments are converted to their common type first.
template <typename A, typename B> CPUFREE_HD constexpr std::common_type_t<A, B> Max(A a, B b) {
    return a < b ? std::common_type_t<A, B>(b) : std::common_type_t<A, B>(a);
}
template <typename A, typename B> CPUFREE_HD constexpr std::common_type_t<A, B> Min(A a, B b) {
    return b < a ? std::common_type_t<A, B>(b) : std::common_type_t<A, B>(a);
}
template <typename A, typename B, typename C, typename... R> CPUFREE_HD constexpr auto Max(A a, B b, C c, R... r) {
    return Max(Max(a, b), c, r...);
}
template <typename A, typename B, typename C, typename... R> CPUFREE_HD constexpr auto Min(A a, B b, C c, R... r) {
    return Min(Min(a, b), c, r...);
}

namespace cpufree {

// Whether the rows of a row-major matrix X (leading dimension ld, cols columns) take 16-byte vector accesses: they
// start 16-byte aligned and hold whole vectors, so that a vector lies wholly inside a row or wholly outside. The
// product tiles' copies (gemm.cuh) and the matrix-vector passes (gemv.cuh) ask it.
template <typename T>
CPUFREE_HD inline bool rows_of_vectors(const T *X, long long ld, long long cols) {
    constexpr long long kVec = 16 / sizeof(T);
    return reinterpret_cast<unsigned long long>(X) % 16 == 0 && ld % kVec == 0 && cols % kVec == 0;
}

// Tiles of `size` lanes (a power of two) in a block: a thread's tile and its rank there, and the block's tile count.
// A tile of at most a warp (wavefront) lies within one, since warps start at multiples of their size.
CPUFREE_HD constexpr unsigned long long tile_rank(unsigned long long thread, unsigned long long size) { return thread % size; }
CPUFREE_HD constexpr unsigned long long tile_group(unsigned long long thread, unsigned long long size) { return thread / size; }
CPUFREE_HD constexpr unsigned long long tile_groups(unsigned long long block, unsigned long long size) { return block / size; }
// The tile size of a step whose bound is `size` on a target without a barrier per tile (AMD: no named barriers): the
// largest power of two <= size that fits in a wavefront of `warp` lanes.
CPUFREE_HD constexpr unsigned long long within_wavefront(unsigned long long size, unsigned long long warp) {
    return size > warp ? within_wavefront(size / 2, warp) : size;
}

}  // namespace cpufree
