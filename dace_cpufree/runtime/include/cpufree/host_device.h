// CPUFREE_HD marks the functions that kernels and host programs both call: the index arithmetic of the product
// paths, which host programs check against NumPy and CuTe's layouts (tests/transformations/).
#pragma once

#ifndef CPUFREE_HD
#if defined(__CUDACC__)
#define CPUFREE_HD __host__ __device__
#else
#define CPUFREE_HD
#endif
#endif

namespace cpufree {

// Whether the rows of a row-major matrix X (leading dimension ld, cols columns) take 16-byte vector accesses: they
// start 16-byte aligned and hold whole vectors, so that a vector lies wholly inside a row or wholly outside. The
// product tiles' copies (gemm.cuh) and the matrix-vector passes (gemv.cuh) ask it.
template <typename T>
CPUFREE_HD inline bool rows_of_vectors(const T *X, long long ld, long long cols) {
    constexpr long long kVec = 16 / sizeof(T);
    return reinterpret_cast<unsigned long long>(X) % 16 == 0 && ld % kVec == 0 && cols % kVec == 0;
}

}  // namespace cpufree
