// dace-cpufree device runtime: the few helpers that generated persistent kernels use.
// One header for every dialect: CUDA (nvcc), HIP (hipcc) and the single-thread host
// emulation (any C++17 compiler, -DCPUFREE_EMULATE) that tests the generator without a GPU.
#pragma once
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <cmath>
#include <climits>
#include <cfloat>
#include <type_traits>

#include "host_device.h"

#if defined(CPUFREE_EMULATE)
#include "emulate.h"
#elif defined(__HIP_PLATFORM_AMD__) || defined(__HIPCC__)
#include <hip/hip_runtime.h>
#include <hip/hip_cooperative_groups.h>
#include <chrono>  // the launcher's measure of the wall clock's rate (cpufree::wall_clock_rate)
#include <thread>
#define CPUFREE_LAUNCH_COOPERATIVE(kernel, grid, block, args, smem, stream) \
    hipLaunchCooperativeKernel((const void *)(kernel), grid, block, args, smem, stream)
#else
#include <cuda_runtime.h>
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
#define CPUFREE_LAUNCH_COOPERATIVE(kernel, grid, block, args, smem, stream) \
    cudaLaunchCooperativeKernel((const void *)(kernel), grid, block, args, smem, stream)
#endif

namespace cg = cooperative_groups;

#if defined(__HIPCC__) && !defined(CPUFREE_EMULATE)
__device__ int cpufree_wall_clock_khz;  // the rate of wall_clock64, set by the launcher (cpufree::clock_ns)
#endif

// The most threads a block may have on the target: the driver's value when the build saw a GPU
// (build.py passes it), else the limit of every CUDA and HIP architecture.
#ifndef CPUFREE_MAX_BLOCK_THREADS
#define CPUFREE_MAX_BLOCK_THREADS 1024
#endif
// A kernel that must run with full blocks: the compiler keeps its registers low enough that one block
// of CPUFREE_MAX_BLOCK_THREADS threads fits on a multiprocessor (see codegen/kernel.py for where; the
// build also caps the registers of the file's other device functions, build.full_block_flags).
#define CPUFREE_FULL_BLOCKS __launch_bounds__(CPUFREE_MAX_BLOCK_THREADS)

#if defined(CPUFREE_EMULATE) || defined(__HIPCC__)  // hipcc: clang's device overloads of std::complex
#include <complex>
namespace cpufree { template <typename T> using complex = std::complex<T>; }
#else
#include <cuda/std/complex>
namespace cpufree { template <typename T> using complex = cuda::std::complex<T>; }
#endif

// A complex number with a real one of another type (an integer; a float beside a double): the standard operators
// take the complex number's own type only, and DaCe's tasklets mix them (`z * 2`; np.fft.fft's DFT times its
// integer factor). The real operand is converted to the complex number's type, as NumPy does.
namespace cpufree::detail {
template <typename T, typename U>
using mixed_complex = std::enable_if_t<std::is_arithmetic<U>::value && !std::is_same<T, U>::value, cpufree::complex<T>>;
}
#define CPUFREE_MIXED_COMPLEX(OP)                                                                               \
    template <typename T, typename U>                                                                           \
    __host__ __device__ inline cpufree::detail::mixed_complex<T, U> operator OP(const cpufree::complex<T> &a, U b) { \
        return a OP T(b);                                                                                       \
    }                                                                                                           \
    template <typename T, typename U>                                                                           \
    __host__ __device__ inline cpufree::detail::mixed_complex<T, U> operator OP(U a, const cpufree::complex<T> &b) { \
        return T(a) OP b;                                                                                       \
    }
CPUFREE_MIXED_COMPLEX(+)
CPUFREE_MIXED_COMPLEX(-)
CPUFREE_MIXED_COMPLEX(*)
CPUFREE_MIXED_COMPLEX(/)
#undef CPUFREE_MIXED_COMPLEX

// DaCe tasklet code names a few types and functions through the `dace` namespace.
namespace dace {
using complex64 = cpufree::complex<float>;
using complex128 = cpufree::complex<double>;
using uint = unsigned int;
using float64 = double;
using float32 = float;
using int64 = long long;
using int32 = int;
using int16 = short;
using int8 = signed char;
using uint64 = unsigned long long;
using uint32 = unsigned int;
using uint16 = unsigned short;
using uint8 = unsigned char;
using bool_ = bool;
namespace math {
using ::exp; using ::log; using ::sqrt; using ::pow; using ::sin; using ::cos; using ::tanh; using ::fabs;
// the same of complex numbers (the real ones above stay the C library's)
#if defined(CPUFREE_EMULATE) || defined(__HIPCC__)
#define CPUFREE_COMPLEX_NS std
#else
#define CPUFREE_COMPLEX_NS cuda::std
#endif
template <typename T> __host__ __device__ inline cpufree::complex<T> pow(const cpufree::complex<T> &a, const cpufree::complex<T> &b) {
    return CPUFREE_COMPLEX_NS::pow(a, b);
}
template <typename T> __host__ __device__ inline cpufree::complex<T> pow(const cpufree::complex<T> &a, const T &b) {
    return CPUFREE_COMPLEX_NS::pow(a, b);
}
template <typename T> __host__ __device__ inline cpufree::complex<T> exp(const cpufree::complex<T> &a) { return CPUFREE_COMPLEX_NS::exp(a); }
template <typename T> __host__ __device__ inline cpufree::complex<T> log(const cpufree::complex<T> &a) { return CPUFREE_COMPLEX_NS::log(a); }
template <typename T> __host__ __device__ inline cpufree::complex<T> sqrt(const cpufree::complex<T> &a) { return CPUFREE_COMPLEX_NS::sqrt(a); }
template <typename T> __host__ __device__ inline cpufree::complex<T> sin(const cpufree::complex<T> &a) { return CPUFREE_COMPLEX_NS::sin(a); }
template <typename T> __host__ __device__ inline cpufree::complex<T> cos(const cpufree::complex<T> &a) { return CPUFREE_COMPLEX_NS::cos(a); }
#undef CPUFREE_COMPLEX_NS
// `x ** 3` with a literal integer exponent (for `x ** -3` the unparser writes `reciprocal(ipow(x, 3))` in interstate
// code; a tasklet's goes through py_pow_neg, math.cuh): by squaring, in x's type, so an integer power of an integer
// stays exact as in Python.
template <typename T> __host__ __device__ inline T ipow(T base, unsigned int exponent) {
    T result = T(1);
    while (exponent) {
        if (exponent & 1u) result *= base;
        exponent >>= 1;
        if (exponent) base *= base;  // not past the last bit: a signed square there could overflow
    }
    return result;
}
// An integer to an integer power is an integer, as in Python and NumPy (sizes such as R ** K index arrays).
// Plain overloads, not a template: the C++ library's own promoting pow template would make a template ambiguous.
#define CPUFREE_INT_POW(A, B)                                                      \
    __host__ __device__ inline A pow(A base, B exponent) {                         \
        return exponent < 0 ? (A)0 : ipow(base, (unsigned int)exponent);          \
    }
CPUFREE_INT_POW(long long, long long)
CPUFREE_INT_POW(long long, int)
CPUFREE_INT_POW(int, int)
CPUFREE_INT_POW(int, long long)
#undef CPUFREE_INT_POW
}  // namespace math
}  // namespace dace

namespace cpufree {

template <typename T> __host__ __device__ inline T min_(T a, T b) { return a < b ? a : b; }
template <typename T> __host__ __device__ inline T max_(T a, T b) { return a > b ? a : b; }

// Quotient and remainder of a non-negative index (Divider::divmod).
struct DivMod {
    long long quot, rem;
};

// Division of non-negative 64-bit indices by a divisor d >= 0 that is fixed for the whole kernel (a map's extent
// made of kernel arguments), prepared once in the kernel's prologue. A division by a run-time value is a chain of
// about 20 dependent instructions on NVIDIA GPUs (I2F, MUFU.RCP, F2I, IMADs); it stays on the critical path of
// every grid-stride decode unless the compiler hoists it out of the time loop, which it stops doing once the
// loop holds control flow that changes per step. An index below 2^32 is divided by a multiply-high with a
// 32-bit magic number and a shift (Granlund and Montgomery, "Division by invariant integers using
// multiplication", 1994): with s = ceil(log2 d) and m = floor(2^32 (2^s - d) / d) + 1, the quotient is
// floor((mulhi(n, m) + n) / 2^s), exact for every n < 2^32 (tests/runtime/test_divider.py checks it). Larger
// indices take the plain 64-bit division, out of line: a branch that every thread of a warp takes the same way
// unless a map has more than 2^32 iterations. Only m is kept (one register from the prologue on); the divisor, a
// kernel argument's expression, and the shift, two instructions from it, are given at each division. d <= 1 and
// d >= 2^32 use m = 0 (quotient n with shift 0, or 0 with shift 32); d == 0 is never divided by (its map is
// empty), and building it does not trap.
struct Divider {
    unsigned int m;

    __host__ __device__ explicit Divider(long long d) : m(0) {
        if (d > 1 && d < (1ll << 32)) {
            // 2^s - d < 2^(s-1) <= 2^31: the shifted numerator fits in 64 bits; the quotient is below 2^32 - 1
            const unsigned long long excess = (1ull << shift(d)) - (unsigned long long)d;
            m = (unsigned int)((excess << 32) / (unsigned long long)d + 1);
        }
    }

    // ceil(log2 d) for 1 <= d < 2^32, else 32
    __host__ __device__ static unsigned int shift(long long d) {
        if (((unsigned long long)d >> 32) != 0) return 32;
        const unsigned int below = (unsigned int)d - 1;  // d == 0: all ones, shift 32
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
        return 32 - __clz(below);
#else
        unsigned int s = 0;
        while (s < 32 && (below >> s) != 0) ++s;
        return s;
#endif
    }

    __host__ __device__ static unsigned int mulhi(unsigned int a, unsigned int b) {
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
        return __umulhi(a, b);
#else
        return (unsigned int)(((unsigned long long)a * b) >> 32);
#endif
    }

    // n / d and n % d, for the d it was built with
    __host__ __device__ DivMod divmod(long long n, long long d) const {
        if (((unsigned long long)n >> 32) == 0) {
            const unsigned int x = (unsigned int)n;
            const unsigned int q = (unsigned int)(((unsigned long long)mulhi(x, m) + x) >> shift(d));
            return {(long long)q, (long long)(x - q * (unsigned int)d)};  // d >= 2^32: q == 0
        }
        return wide(n, d);
    }

    // n >= 2^32: the plain 64-bit division, out of line: the time loop's code keeps no division chain, and the
    // branch is taken by maps of over 2^32 iterations only
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
    __noinline__
#endif
    __host__ __device__ static DivMod wide(long long n, long long d) {
        return {n / d, n % d};
    }
};

// Part `k` of the `parts` blocks of a lane ("blocks" items, codegen/dataflow.py), counted from the grid's end:
// a grid-stride loop gives its remainder (one more iteration) to the first threads, so the blocks that put
// data are the ones without it.
__host__ __device__ inline unsigned int lane_part(unsigned int k, unsigned int parts) { return parts - 1 - k; }

// ---- block parts ---------------------------------------------------------------------------------------
// A kernel whose grid is split into parts: disjoint ranges of consecutive blocks that run different work at the
// same time and synchronise among themselves (part_sync) instead of with the whole grid.

// ceil(a * b / c) for 0 <= a <= c, 0 < c < 2^63: a / c is 0 or 1, the rest is b's bits against the remainder
// (no 128-bit product).
__host__ __device__ inline unsigned long long part_share(unsigned long long a, unsigned int b, unsigned long long c) {
    const unsigned long long whole = a / c;
    const unsigned long long r = a % c;
    unsigned long long q = 0, rem = 0;  // r * b = q * c + rem, rem < c
    for (int bit = 31; bit >= 0; --bit) {
        q <<= 1;
        rem <<= 1;
        if (rem >= c) { rem -= c; ++q; }
        if ((b >> bit) & 1u) {
            rem += r;  // rem < c and r < c: the sum stays below 2^64
            if (rem >= c) { rem -= c; ++q; }
        }
    }
    return whole * b + q + (rem != 0);
}

// Splits `grid` blocks among `k` parts: part j gets blocks [lo[j], hi[j]), in index order, all blocks used.
// `elems` is each part's work. Explicit (inferred false): sizes proportional to elems, ceil'd, at least 1.
// Inferred: a part of at most `threads` elements (one block's threads) gets 1 block, the others share the rest
// proportionally, at least 1 each. Then an overshoot is taken one block at a time from the largest part (of
// more than 1; ties: the lowest index), and a shortfall goes to the part of most elems (ties: the lowest index).
// With fewer blocks than parts every part gets the whole grid (the parts run one after another).
// Deterministic: every thread computes the same split. hi[] holds the sizes until the layout.
__host__ __device__ inline void split_blocks(const long long *elems, int k, bool inferred, unsigned int grid,
                                             unsigned int threads, unsigned int *lo, unsigned int *hi) {
    if (k <= 0) return;
    if (grid < (unsigned int)k) {
        for (int j = 0; j < k; ++j) { lo[j] = 0; hi[j] = grid; }
        return;
    }
    unsigned int shared = grid;  // the blocks that the proportional parts share
    unsigned long long total = 0;
    for (int j = 0; j < k; ++j) {
        const unsigned long long e = elems[j] > 0 ? (unsigned long long)elems[j] : 0ull;
        if (inferred && elems[j] <= (long long)threads) --shared;
        else total += e;
    }
    int most = 0;  // the part of most elements
    for (int j = 0; j < k; ++j) {
        if (elems[j] > elems[most]) most = j;
        const unsigned long long e = elems[j] > 0 ? (unsigned long long)elems[j] : 0ull;
        if ((inferred && elems[j] <= (long long)threads) || total == 0) { hi[j] = 1; continue; }
        const unsigned long long s = part_share(e, shared, total);
        hi[j] = s < 1 ? 1u : s > grid ? grid : (unsigned int)s;
    }
    unsigned long long sum = 0;
    for (int j = 0; j < k; ++j) sum += hi[j];
    while (sum > grid) {
        int big = -1;
        for (int j = 0; j < k; ++j)
            if (hi[j] > 1 && (big < 0 || hi[j] > hi[big])) big = j;
        --hi[big];  // some part has more than 1 while the sum exceeds grid >= k
        --sum;
    }
    hi[most] += grid - (unsigned int)sum;
    unsigned int at = 0;
    for (int j = 0; j < k; ++j) {
        lo[j] = at;
        at += hi[j];
        hi[j] = at;
    }
}

// The part of a scope that one block runs, kept for the whole kernel (3 registers instead of the split): its index
// (-1: every part, when the grid has fewer blocks than parts), its first block and its block count.
struct BlockShare {
    int index;
    unsigned int first, size;
    __host__ __device__ bool runs(int part) const { return index < 0 || index == part; }
};

// Block `block`'s share after split_blocks(..., grid, ...): with fewer blocks than parts, every part (index -1).
__host__ __device__ inline BlockShare share_of(const unsigned int *lo, const unsigned int *hi, int k,
                                               unsigned int grid, unsigned int block) {
    if (grid < (unsigned int)k) return BlockShare{-1, 0u, grid};
    for (int j = 0; j < k; ++j)
        if (lo[j] <= block && block < hi[j]) return BlockShare{j, lo[j], hi[j] - lo[j]};
    return BlockShare{-2, 0u, 0u};  // not reached: the parts cover the grid
}

// Independent steps side by side (an automatic scope of K steps): when together they have fewer elements than the
// grid has threads, step j gets blocks of its own, one plus its share of the other grid - K blocks in proportion
// to its elements (block boundaries from the prefix sums: a few multiplications, no loop over blocks); else every
// step runs on the whole grid (index -1), one after another as without the scope.
template <int K>
__host__ __device__ inline BlockShare auto_share(const long long (&elems)[K], unsigned int grid, unsigned int threads,
                                                 unsigned int block) {
    long long total = 0;
    for (int j = 0; j < K; ++j) total += elems[j] > 0 ? elems[j] : 0;
    if (grid < (unsigned int)K || total <= 0 || total >= (long long)grid * threads) return BlockShare{-1, 0u, grid};
    const double scale = (double)(grid - K) / (double)total;
    long long prefix = 0;
    unsigned int lo = 0;
    for (int j = 0; j < K; ++j) {
        prefix += elems[j] > 0 ? elems[j] : 0;
        const unsigned int hi = j == K - 1 ? grid : (unsigned int)(j + 1) + (unsigned int)((double)prefix * scale);
        if (block < hi) return BlockShare{j, lo, hi - lo};
        lo = hi;
    }
    return BlockShare{-1, 0u, grid};
}

// The barrier of one part, a zero-initialised global per part (`__device__ cpufree::PartBarrier bar[k];`).
// `count` is back to 0 after every completed barrier: no reset between launches.
struct PartBarrier {
    unsigned int count;
    unsigned int generation;
};

// A barrier among all threads of blocks [lo, hi), called by every thread of those blocks and by no other.
// One block: a block barrier. Else thread 0 of each block arrives on the counter; the last one resets it and
// starts a new generation, the others wait for it.
__device__ inline void part_sync(PartBarrier *bar, unsigned int lo, unsigned int hi) {
#if defined(CPUFREE_EMULATE) && defined(CPUFREE_RACE_CHECK)
    race::checker().part_barrier(race::self, bar, (int)lo, (int)hi);
#elif defined(CPUFREE_EMULATE)
    (void)bar; (void)lo; (void)hi;  // one block of one thread
#else
    if (hi - lo <= 1) {
        __syncthreads();
        return;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        volatile unsigned int *generation = &bar->generation;
        const unsigned int seen = *generation;  // before arriving: the last arrival changes it
        __threadfence();
        if (atomicAdd(&bar->count, 1u) == hi - lo - 1) {
            atomicExch(&bar->count, 0u);
            __threadfence();
            atomicAdd(&bar->generation, 1u);
        } else {
            while (*generation == seen) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700 && !defined(__HIPCC__)
                __nanosleep(32);
#endif
            }
        }
        __threadfence();
    }
    __syncthreads();
#endif
}


// Reduction operators of write-conflict resolution (DaCe's WCR), by kind.
// Logical ones come from np.any / np.all (`x or y`, `x and y`), bitwise ones from np.bitwise_or.reduce and the like.
enum class Op { Sum, Product, Min, Max, LogicalAnd, LogicalOr, LogicalXor, BitwiseAnd, BitwiseOr, BitwiseXor, Custom };

template <Op op, typename T> __host__ __device__ inline T combine(T a, T b) {
    if constexpr (op == Op::Sum) return a + b;
    else if constexpr (op == Op::Product) return a * b;
    else if constexpr (op == Op::Min) return b < a ? b : a;
    else if constexpr (op == Op::LogicalAnd) return T(a && b);
    else if constexpr (op == Op::LogicalOr) return T(a || b);
    else if constexpr (op == Op::LogicalXor) return T(bool(a) != bool(b));
    else if constexpr (op == Op::BitwiseAnd) return T(a & b);
    else if constexpr (op == Op::BitwiseOr) return T(a | b);
    else if constexpr (op == Op::BitwiseXor) return T(a ^ b);
    else return b > a ? b : a;
}

// Atomic read-modify-write for locations that several threads of the grid update.
// Sums use the native atomicAdd; the rest is a compare-and-swap loop on the bit pattern.
// A complex sum: each part atomically (other operators have no order on complex numbers).
template <Op op, typename T> __device__ inline void atomic_combine(complex<T> *ptr, complex<T> val) {
    static_assert(op == Op::Sum, "atomic_combine of complex numbers: sums only");
    T *parts = reinterpret_cast<T *>(ptr);
#if defined(CPUFREE_EMULATE)
    parts[0] += val.real();
    parts[1] += val.imag();
#else
    atomicAdd(parts, val.real());
    atomicAdd(parts + 1, val.imag());
#endif
}
template <Op op, typename T> __device__ inline void atomic_combine(T *ptr, T val) {
#if defined(CPUFREE_EMULATE)
    *ptr = combine<op>(*ptr, val);
#else
    if constexpr (op == Op::Sum && std::is_integral<T>::value && sizeof(T) == 8) {
        // no signed 64-bit atomicAdd: two's complement adds the same bits unsigned
        atomicAdd(reinterpret_cast<unsigned long long *>(ptr), (unsigned long long)val);
    } else if constexpr (op == Op::Sum && (sizeof(T) == 4 || sizeof(T) == 8)) {
        atomicAdd(ptr, val);
    } else if constexpr (sizeof(T) == 8) {
        unsigned long long *addr = reinterpret_cast<unsigned long long *>(ptr);
        unsigned long long old = *addr, assumed;
        do {
            assumed = old;
            T cur = *reinterpret_cast<T *>(&assumed);
            T upd = combine<op>(cur, val);
            old = atomicCAS(addr, assumed, *reinterpret_cast<unsigned long long *>(&upd));
        } while (assumed != old);
    } else if constexpr (sizeof(T) < 4) {
        // a bool (np.any's result) or a short: compare-and-swap on the aligned word that holds it
        static_assert(sizeof(T) == 1 || sizeof(T) == 2, "atomic_combine supports 1-, 2-, 4- and 8-byte types");
        const unsigned long long at = reinterpret_cast<unsigned long long>(ptr);
        unsigned int *word = reinterpret_cast<unsigned int *>(at & ~3ull);
        const unsigned int shift = unsigned(at & 3ull) * 8u, mask = ((1u << (8u * sizeof(T))) - 1u) << shift;
        unsigned int old = *word, assumed;
        do {
            assumed = old;
            T cur, upd;
            const unsigned int bits = (assumed & mask) >> shift;
            memcpy(&cur, &bits, sizeof(T));
            upd = combine<op>(cur, val);
            unsigned int upd_bits = 0;
            memcpy(&upd_bits, &upd, sizeof(T));
            old = atomicCAS(word, assumed, (assumed & ~mask) | (upd_bits << shift));
        } while (assumed != old);
    } else {
        static_assert(sizeof(T) == 4, "atomic_combine supports 1-, 2-, 4- and 8-byte types");
        unsigned int *addr = reinterpret_cast<unsigned int *>(ptr);
        unsigned int old = *addr, assumed;
        do {
            assumed = old;
            T cur = *reinterpret_cast<T *>(&assumed);
            T upd = combine<op>(cur, val);
            old = atomicCAS(addr, assumed, *reinterpret_cast<unsigned int *>(&upd));
        } while (assumed != old);
    }
#endif
}

// A copy of n elements from one run of memory to another that does not overlap it, by every thread of the grid
// (thread tid of nthreads; codegen/scopes.py, whole_run_copy). On the device, 16-byte vectors where both runs have the
// same alignment within 16 bytes, and four loads in flight per thread before their stores in either form.
template <typename T>
__host__ __device__ inline void copy_run(T *dst, const T *src, long long n, long long tid, long long nthreads) {
    long long f = tid;
#if !defined(CPUFREE_EMULATE)
    if constexpr (sizeof(T) <= 16 && 16 % sizeof(T) == 0) {
        const unsigned long long a = reinterpret_cast<unsigned long long>(dst);
        const unsigned long long b = reinterpret_cast<unsigned long long>(src);
        if (a % 16 == b % 16 && a % sizeof(T) == 0) {
            constexpr long long kPer = 16 / (long long)sizeof(T);
            long long head = (long long)((16 - a % 16) % 16) / (long long)sizeof(T);
            if (head > n) head = n;
            const long long vectors = (n - head) / kPer;
            const uint4 *s = reinterpret_cast<const uint4 *>(src + head);
            uint4 *d = reinterpret_cast<uint4 *>(dst + head);
            long long v = tid;
            for (; v + 3 * nthreads < vectors; v += 4 * nthreads) {
                const uint4 x0 = s[v], x1 = s[v + nthreads], x2 = s[v + 2 * nthreads], x3 = s[v + 3 * nthreads];
                d[v] = x0, d[v + nthreads] = x1, d[v + 2 * nthreads] = x2, d[v + 3 * nthreads] = x3;
            }
            for (; v < vectors; v += nthreads) d[v] = s[v];
            for (long long g = tid; g < head; g += nthreads) dst[g] = src[g];
            for (f = head + vectors * kPer + tid; f < n; f += nthreads) dst[f] = src[f];
            return;
        }
    }
    for (; f + 3 * nthreads < n; f += 4 * nthreads) {
        const T x0 = src[f], x1 = src[f + nthreads], x2 = src[f + 2 * nthreads], x3 = src[f + 3 * nthreads];
        dst[f] = x0, dst[f + nthreads] = x1, dst[f + 2 * nthreads] = x2, dst[f + 3 * nthreads] = x3;
    }
#endif
    for (; f < n; f += nthreads) dst[f] = src[f];
}

#if !defined(CPUFREE_EMULATE)
// Warp shuffles of a value: complex numbers as their two parts.
template <typename T> __device__ inline T shfl_down(T v, int offset) {
#if defined(__HIPCC__)
    return __shfl_down(v, offset);
#else
    return __shfl_down_sync(0xffffffffu, v, offset);
#endif
}
template <typename T> __device__ inline complex<T> shfl_down(complex<T> v, int offset) {
    return complex<T>(shfl_down(v.real(), offset), shfl_down(v.imag(), offset));
}
template <typename T> __device__ inline T shfl_xor(T v, int offset) {
#if defined(__HIPCC__)
    return __shfl_xor(v, offset);
#else
    return __shfl_xor_sync(0xffffffffu, v, offset);
#endif
}
template <typename T> __device__ inline complex<T> shfl_xor(complex<T> v, int offset) {
    return complex<T>(shfl_xor(v.real(), offset), shfl_xor(v.imag(), offset));
}
#endif

// Combines per-lane partials across a warp (``has``: the lane saw at least one element). The
// result is valid in lane 0; the return value says whether any lane had one. Every lane of the
// warp must call it together, and blocks are whole warps (the launcher rounds the block size).
template <Op op, typename T> __device__ inline bool warp_reduce(T &val, bool has) {
#if defined(CPUFREE_EMULATE)
    return has;  // warpSize is 1
#else
    for (int offset = warpSize / 2; offset > 0; offset /= 2) {
#if defined(__HIPCC__)
        T other = shfl_down(val, offset);
        int other_has = __shfl_down((int)has, offset);
#else
        T other = shfl_down(val, offset);
        int other_has = __shfl_down_sync(0xffffffffu, (int)has, offset);
#endif
        if (other_has) {
            val = has ? combine<op>(val, other) : other;
            has = true;
        }
    }
    return has;
#endif
}

// Flush of a grid-wide reduction: partials are first combined across the warp, so one atomic per
// warp reaches memory instead of one per thread (contention on one address was the bottleneck).
template <Op op, typename T> __device__ inline void warp_atomic_combine(T *ptr, T val, bool has) {
    if (warp_reduce<op>(val, has) && threadIdx.x % warpSize == 0) atomic_combine<op>(ptr, val);
}

#if defined(CPUFREE_RACE_CHECK)
// An element of the race checker's arrays (racecheck.h) read as an operand.
template <Op op, typename T> inline T combine(race::ref<T> a, T b) { return combine<op>(T(a), b); }
template <Op op, typename T> inline T combine(T a, race::ref<T> b) { return combine<op>(a, T(b)); }
// The atomics on them, recorded as atomic accesses.
template <Op op, typename T, typename V> inline void atomic_combine(race::ptr<T> ptr, V val) {
    race::atomic_update(ptr, [&](T cur) { return combine<op>(cur, T(val)); });
}
template <Op op, typename T, typename V> inline void warp_atomic_combine(race::ptr<T> ptr, V val, bool has) {
    if (has) atomic_combine<op>(ptr, val);
}
#endif

// The largest and smallest values of an integer type or bool (the start of a min or a max reduction): every width,
// signed or not (a bool's max starts at false, its min at true).
template <typename T> __host__ __device__ constexpr T largest() {
    if constexpr (std::is_same<T, bool>::value) return true;
    else if constexpr (std::is_signed<T>::value) return T((1ull << (8 * sizeof(T) - 1)) - 1ull);
    else return T(~T(0));
}
template <typename T> __host__ __device__ constexpr T smallest() {
    if constexpr (std::is_same<T, bool>::value) return false;
    else if constexpr (std::is_signed<T>::value) return T(-largest<T>() - 1);
    else return T(0);
}

// Identity element of a reduction operator (the start of a tile lane's partial).
template <Op op, typename T> __host__ __device__ constexpr T identity() {
    if constexpr (op == Op::Sum) return T(0);
    else if constexpr (op == Op::Product || op == Op::LogicalAnd) return T(1);
    else if constexpr (op == Op::LogicalOr || op == Op::LogicalXor || op == Op::BitwiseOr || op == Op::BitwiseXor)
        return T(0);
    else if constexpr (op == Op::BitwiseAnd) return T(~T(0));
    else if constexpr (op == Op::Min) {
        if constexpr (T(0.5) != T(0)) return T(INFINITY);
        else return largest<T>();
    } else {
        if constexpr (T(0.5) != T(0)) return T(-INFINITY);
        else return smallest<T>();
    }
}

template <Op op> struct Combine {
    template <typename T> __host__ __device__ T operator()(T a, T b) const { return combine<op>(a, b); }
};

// Thread scheduler support. A step partitions each block into tiles of a power-of-two size and
// strides the tiles over its fused outer loop; lanes of a tile cover the contiguous dimension.

// Smallest power of two >= extent (1 for an empty extent): the tile a contiguous extent asks for.
__host__ __device__ inline long long pow2_at_least(long long extent) {
    long long t = 1;
    while (t < extent) t *= 2;
    return t;
}

// The block size of a bounded kernel with matrix products (codegen/host.py kernel_builds): the products' (``need``;
// where they take the plain path, 0, the launcher never takes the bounded kernel).
__host__ __device__ constexpr int bound_threads(long long need) { return need > 0 ? (int)need : 128; }

// The tile of a reduction step: enough lanes that each combines about sixteen elements of the reduced extent
// (long rows get up to 1024 lanes, which keeps the whole grid loading; rows of up to 512, as in softmax, get a
// warp: no block-level barrier per row), at least a warp. ``rows``: how many rows the step reduces (0: unknown),
// ``threads``: the grid's threads.
__host__ __device__ inline long long reduction_tile(long long extent, long long rows, long long threads,
                                                   long long warp) {
    // Long rows, and enough of them to give every warp of the grid its own: a warp per row, no tile
    // barriers (gesummv at 11200 x 11200 ran 1.4x slower on 1024-thread tiles than on warps).
    if (extent >= 4096 && rows * warp >= threads) return warp;
    long long want = pow2_at_least((extent + 15) / 16);
    // Fewer rows than the grid has tiles of that size: more lanes per row (down to two elements a lane), so that
    // the grid's threads share the rows and each lane's loop is short. On an H100 at paper: syr2k (1 to 1200
    // rows of 1000) 9.42 -> 7.89 ms, mvt 1.66 -> 1.45 ms.
    while (want < 1024 && rows > 0 && rows * want * 2 <= threads && want * 4 <= extent) want *= 2;
    return want < warp ? warp : want;
}

#if !defined(CPUFREE_EMULATE)
// The tile of a reduction step at run time (reduction_tile for this grid).
__device__ inline long long tile_for_reduction(long long extent, long long rows = 0) {
    return reduction_tile(extent, rows, (long long)gridDim.x * blockDim.x, warpSize);
}

// The tile of an element-wise step at run time: the largest power of two (at most the extent's)
// whose chunks cover the contiguous extent with at most 1/8 idle lanes, at least a warp.
__device__ inline long long tile_for_map(long long extent) {
    for (long long t = pow2_at_least(extent); t > warpSize; t /= 2)
        if (((extent + t - 1) / t * t - extent) * 8 <= extent) return t;
    return warpSize;
}

// The tile of a column reduction (outputs along the contiguous dimension) at run time: a lane per output, as many
// lanes as give each row's loads 1 KiB of doubles in one piece (at least a warp): DRAM streams such pieces; a warp's
// 256 bytes a row, scattered over the grid, reached 1.6 TB/s of an H100's 3 (A.T @ y of atax at paper).
__device__ inline long long tile_for_columns(long long outputs, long long) {
    long long lanes = warpSize;
    while (lanes < 128 && lanes < outputs) lanes *= 2;
    return lanes;
}

// How many ranges of rows each group of a column reduction's outputs is split into: as many as keep the units of
// work (a group and a range) within four per tile of the grid, rounded down so that no tile gets a fifth (a last
// wave of a few units costs a whole unit's time), each range at least 64 rows (the ranges' sums meet in atomic
// adds, one per output and range).
__device__ inline long long column_chunks(long long groups, long long rows, long long tiles) {
    if (groups <= 0) return 1;
    const long long want = 4 * tiles / groups, most = rows / 64 > 1 ? rows / 64 : 1;
    return want < 1 ? 1 : want > most ? most : want;
}

// The warp (wavefront) size the device code is compiled for: 32 on NVIDIA, the target's wavefront on AMD (64 on CDNA,
// 32 on RDNA with wave32; clang defines __AMDGCN_WAVEFRONT_SIZE in each device pass), 1 in the emulation. Tiles up to
// it are one warp's lanes; larger tiles need a barrier of their own (BlockTile).
#if defined(CPUFREE_EMULATE)
#define CPUFREE_WARP 1
#elif defined(__HIPCC__) && defined(__AMDGCN_WAVEFRONT_SIZE)
#define CPUFREE_WARP __AMDGCN_WAVEFRONT_SIZE
#elif defined(__HIPCC__)
#define CPUFREE_WARP 64  // the host pass of a HIP build: device code is parsed, never run
#else
#define CPUFREE_WARP 32
#endif

#if defined(__HIPCC__)
// A tile of at most a wavefront on AMD (ROCm's thread_block_tile lacks num_threads and the meta-group calls): the
// lanes run in lockstep, so its sync only orders memory; shuffles stay within the tile's lanes.
template <unsigned int Size> struct WaveTile {
    __device__ static constexpr unsigned long long num_threads() { return Size; }
    __device__ unsigned long long thread_rank() const { return tile_rank(threadIdx.x, Size); }
    __device__ unsigned long long meta_group_rank() const { return tile_group(threadIdx.x, Size); }
    __device__ unsigned long long meta_group_size() const { return tile_groups(blockDim.x, Size); }
    __device__ void sync() const {
        __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
        __builtin_amdgcn_wave_barrier();
        __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
    }
    template <typename T> __device__ T shfl_xor(T v, int offset) const { return __shfl_xor(v, offset, (int)Size); }
    template <typename T> __device__ complex<T> shfl_xor(complex<T> v, int offset) const {
        return complex<T>(shfl_xor(v.real(), offset), shfl_xor(v.imag(), offset));
    }
};
#endif

// A tile of more than a warp: consecutive threads of a block, synchronised with a named barrier of
// its own (ids 1..15; 0 is __syncthreads). Lighter than cooperative_groups' large tiles, which raised
// register use from 40 to 64 per thread in softmax and halved occupancy on an H200.
template <unsigned int Size> struct BlockTile {
    __device__ static constexpr unsigned long long num_threads() { return Size; }
    __device__ unsigned long long thread_rank() const { return threadIdx.x % Size; }
    __device__ unsigned long long meta_group_rank() const { return threadIdx.x / Size; }
    __device__ unsigned long long meta_group_size() const { return blockDim.x / Size; }
    __device__ void sync() const {
#if defined(__HIPCC__)
        __syncthreads();  // never taken on AMD: with_tile keeps HIP's tiles within a wavefront (no named barriers)
#else
        asm volatile("bar.sync %0, %1;" ::"r"((unsigned)(1 + meta_group_rank())), "r"(Size) : "memory");
#endif
    }
};

// Each tile size's instantiation of a step is its own (not inlined) function: inlined, the variants of
// all steps of a time loop shared one register allocation (117 registers for Jacobi 2-D instead of 34).
// The kernel's pointers come as parameters (`p`), declared as in the kernel's signature: captured, the
// function saw them as members of a struct, lost the global address space and `__restrict__`, and
// accessed them with generic loads and stores that could not be reordered (gesummv at 11200^2 on an
// H200: 2.11 ms as a step function with captured pointers, 1.53 ms inlined). Scalars are captured by value.
template <typename F, typename Tile, typename... P> __device__ __noinline__ void run_step(F f, Tile tile, P... p) {
    f(tile, p...);
}

// Code in a function of its own: SHMEM calls (a put, a wait) and, in kernels that communicate, the grid
// steps of loops. Inlined, the library's calls and the kernel's hot loops shared one register allocation
// (jacobi_3d's overlapped form: 232 registers per thread; 48 with both apart). Pointers as for run_step.
template <typename F, typename... P> __device__ __noinline__ void apart(F f, P... p) { f(p...); }

// Whether a tile of Size (more than a warp) serves `want` in this block: at most 15 per block, one named barrier
// each. with_tile and tile_size choose by it alike.
template <unsigned int Size> __device__ inline bool tile_fits(long long want) {
    return want >= (long long)Size && blockDim.x % Size == 0 && blockDim.x / Size <= 15;
}

// Calls f(tile) with the largest tile size <= Size that `want` reaches and the block can hold:
// warp-sized and smaller tiles are cooperative_groups::tiled_partition<T>, larger ones BlockTile<T>
// (at most 15 per block: one named barrier each). All threads of the block call it together.
// On AMD, which has no named barriers, tiles stay within a wavefront (WaveTile).
template <unsigned int Size, typename F, typename... P> __device__ inline void with_tile(long long want, F &&f, P... p) {
#if defined(__HIPCC__)
    run_step(f, WaveTile<(unsigned int)within_wavefront(Size, CPUFREE_WARP)>{}, p...);
#else
    if constexpr (Size > CPUFREE_WARP) {
        if (tile_fits<Size>(want)) {
            run_step(f, BlockTile<Size>{}, p...);
            return;
        }
        with_tile<Size / 2>(want, f, p...);
    } else {
        run_step(f, cg::tiled_partition<Size>(cg::this_thread_block()), p...);
    }
#endif
}

// The tile size with_tile<Size>(want, ...) takes in this block (the same in every thread of the block).
template <unsigned int Size> __device__ inline long long tile_size(long long want) {
#if defined(__HIPCC__)
    return (long long)within_wavefront(Size, CPUFREE_WARP);
#else
    if constexpr (Size > CPUFREE_WARP) {
        return tile_fits<Size>(want) ? (long long)Size : tile_size<Size / 2>(want);
    } else {
        return Size;
    }
#endif
}

// Reduction of one value per lane across a tile; every lane gets the result.
template <Op op, typename T, unsigned int Size> __device__ inline T tile_reduce(const BlockTile<Size> &tile, T val) {
    __shared__ T partial[32];  // one per warp of the block
    const unsigned int warp = threadIdx.x / warpSize, lane = threadIdx.x % warpSize;
    for (int offset = warpSize / 2; offset > 0; offset /= 2) val = combine<op>(val, shfl_xor(val, offset));
    if (lane == 0) partial[warp] = val;
    tile.sync();
    const unsigned int first = tile.meta_group_rank() * (Size / warpSize);
    val = partial[first];
    for (unsigned int w = 1; w < Size / warpSize; ++w) val = combine<op>(val, partial[first + w]);
    tile.sync();  // the partials may be overwritten by the tile's next reduction
    return val;
}

template <Op op, typename Tile, typename T> __device__ inline T tile_reduce(const Tile &tile, T val) {
#if defined(__HIPCC__)
    for (unsigned int offset = tile.num_threads() / 2; offset > 0; offset /= 2)
        val = combine<op>(val, tile.shfl_xor(val, offset));
    return val;
#else
    return cg::reduce(tile, val, Combine<op>());
#endif
}
#else
template <typename F, typename... P> inline void apart(F f, P... p) { f(p...); }
inline long long tile_for_reduction(long long extent, long long = 0) { return pow2_at_least(extent); }
inline long long tile_for_map(long long extent) { return pow2_at_least(extent); }
template <unsigned int Size> inline long long tile_size(long long) { return Size; }
inline long long tile_for_columns(long long, long long) { return 1; }
inline long long column_chunks(long long, long long, long long) { return 1; }
template <unsigned int Size, typename F, typename... P> inline void with_tile(long long, F &&f, P... p) {
    f(cg::tiled_partition<Size>(cg::this_thread_block()), p...);  // the emulated tile is one thread
}
template <Op op, typename Tile, typename T> inline T tile_reduce(const Tile &, T val) { return val; }
#endif

#if defined(__HIPCC__) && !defined(CPUFREE_EMULATE)
__global__ void read_wall_clock(unsigned long long *out) {
#if defined(__HIP_DEVICE_COMPILE__)
    *out = (unsigned long long)wall_clock64();
#endif
}
// The rate of wall_clock64 on device `dev` in kHz (the launcher's value of cpufree_wall_clock_khz): the device
// attribute where the HIP runtime has it (ROCm 5.3 on) and answers, else measured on the device: two readings 20 ms
// apart on the host's steady clock (each after one launch, so that the launches' latency cancels).
inline hipError_t wall_clock_rate(int *khz, int dev) {
#if HIP_VERSION >= 50300000
    if (hipDeviceGetAttribute(khz, hipDeviceAttributeWallClockRate, dev) == hipSuccess && *khz > 0) return hipSuccess;
    (void)hipGetLastError();
#endif
    unsigned long long *ticks = nullptr, host[2] = {0, 0};
    hipError_t e = hipMalloc((void **)&ticks, sizeof(host));
    if (e != hipSuccess) return e;
    std::chrono::steady_clock::time_point at[2];
    for (int i = 0; i < 2 && e == hipSuccess; ++i) {
        if (i == 1) std::this_thread::sleep_for(std::chrono::milliseconds(20));
        hipLaunchKernelGGL(read_wall_clock, dim3(1), dim3(1), 0, 0, ticks + i);
        e = hipDeviceSynchronize();
        at[i] = std::chrono::steady_clock::now();
    }
    if (e == hipSuccess) e = hipMemcpy(host, ticks, sizeof(host), hipMemcpyDeviceToHost);
    (void)hipFree(ticks);
    const long long us = std::chrono::duration_cast<std::chrono::microseconds>(at[1] - at[0]).count();
    if (e == hipSuccess) *khz = us > 0 ? (int)((host[1] - host[0]) * 1000ull / (unsigned long long)us) : 0;
    return e == hipSuccess && *khz <= 0 ? hipErrorInvalidValue : e;
}
#endif

// Nanoseconds of the device's constant-rate clock, for timeouts and step times: CUDA's global timer; on HIP the wall
// clock (wall_clock64) at the rate the launcher reads off the device (hipDeviceAttributeWallClockRate, in kHz, into
// cpufree_wall_clock_khz before the first launch); the emulation's steady clock.
#if defined(CPUFREE_EMULATE)
inline long long clock_ns() { return clock64(); }
#else
__device__ __forceinline__ long long clock_ns() {
#if defined(__HIPCC__) && defined(__HIP_DEVICE_COMPILE__)
    const unsigned long long ticks = wall_clock64(), khz = (unsigned long long)cpufree_wall_clock_khz;
    return (long long)(ticks / khz * 1000000ull + ticks % khz * 1000000ull / khz);
#elif defined(__HIPCC__)
    return 0;  // the host pass of a HIP build
#else
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return (long long)t;
#endif
}
#endif

// ---- step timing (DACE_CPUFREE_STEP_TIMES=1, codegen/kernel.py) -------------------------------------------
// Thread 0 of every block adds the clock64 cycles since its previous mark to the segment that the mark closes
// (a grid sync, a block barrier, a step of the program, or the control flow between steps). The sums live in
// shared memory: a mark costs a few cycles and no memory round trip (an earlier form kept
// them in a local array, whose misses under a stencil's load cost up to 2 us per mark and held the block's
// other warps at the next barrier). When the kernel ends (also by a return) each block stores its sums, its
// elapsed globaltimer ns and clock64 cycles in row blockIdx.x of `out` (blocks beyond CPUFREE_TIMES_BLOCKS
// are not recorded); the launcher's cpufree_step_times_read copies the rows to the host.
#ifndef CPUFREE_TIMES_BLOCKS
#define CPUFREE_TIMES_BLOCKS 4096
#endif
#if defined(CPUFREE_EMULATE) || !(defined(__HIP_PLATFORM_AMD__) || defined(__HIPCC__))  // none for HIP yet
// `shared` holds N + 3 values: the N sums, then thread 0's last mark, its first cycle and its first ns (in
// shared memory too, so that a timed kernel keeps the plain kernel's registers; they set its launch).
template <int N> struct StepTimes {
    unsigned long long *seg;
    unsigned long long (*out)[N + 2];
    __device__ StepTimes(unsigned long long *shared, unsigned long long (*rows)[N + 2]) : seg(shared), out(rows) {
        for (int s = threadIdx.x; s < N; s += blockDim.x) seg[s] = 0;
        if (threadIdx.x == 0) {
            seg[N] = seg[N + 1] = (unsigned long long)clock64();
            seg[N + 2] = clock_ns();
        }
        __syncthreads();
    }
    __device__ __forceinline__ void mark(int s) {
        if (threadIdx.x == 0) {
            const unsigned long long now = (unsigned long long)clock64();
            seg[s] += now - seg[N];
            seg[N] = now;
        }
    }
    __device__ ~StepTimes() {
        if (threadIdx.x == 0 && blockIdx.x < CPUFREE_TIMES_BLOCKS) {
            for (int s = 0; s < N; ++s) out[blockIdx.x][s] = seg[s];
            out[blockIdx.x][N] = clock_ns() - seg[N + 2];
            out[blockIdx.x][N + 1] = (unsigned long long)clock64() - seg[N + 1];
        }
    }
};
#endif

}  // namespace cpufree

using cpufree::max_;
using cpufree::min_;

#include "math.cuh"

