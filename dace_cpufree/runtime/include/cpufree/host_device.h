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
