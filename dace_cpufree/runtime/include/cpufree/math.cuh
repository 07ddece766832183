// Tasklet math: the functions DaCe's Python-to-C++ unparser names in tasklet code (np.mod -> py_mod,
// // -> py_floor, np.sign -> sign_numpy_2, ...), with NumPy's semantics, the same on the device (nvcc,
// hipcc) and in the host emulation. Global namespace, as the unparser writes them unqualified.
#pragma once
#include <cmath>
#include <type_traits>

#if defined(CPUFREE_EMULATE)
// <cmath> declares the floating-point overloads in std only: without these, an unqualified abs(double) is
// C's int abs(int) and truncates (the device compilers have the overloads in the global namespace).
using std::abs;
using std::isinf;
using std::isnan;
using std::max;
using std::min;
#endif

// min/max of two different types (an int64 and a literal int, an int and a double): NumPy's promotion,
// i.e. the type of a + b. Same-type calls keep the compilers' own overloads.
template <typename A, typename B, typename = std::enable_if_t<!std::is_same<A, B>::value>>
__host__ __device__ inline auto max(A a, B b) -> decltype(a + b) {
    using T = decltype(a + b);
    return T(a) > T(b) ? T(a) : T(b);
}
template <typename A, typename B, typename = std::enable_if_t<!std::is_same<A, B>::value>>
__host__ __device__ inline auto min(A a, B b) -> decltype(a + b) {
    using T = decltype(a + b);
    return T(a) < T(b) ? T(a) : T(b);
}

// Integer division rounded down / up (DaCe writes these for symbolic and integer expressions).
template <typename T, typename U>
__host__ __device__ inline T int_floor(const T &n, const U &d) {
    const T q = n / T(d);
    return (n % T(d) != 0 && ((n < 0) != (d < 0))) ? q - 1 : q;
}
template <typename T, typename U>
__host__ __device__ inline T int_ceil(const T &n, const U &d) {
    const T q = n / T(d);
    return (n % T(d) != 0 && ((n < 0) == (d < 0))) ? q + 1 : q;
}

namespace cpufree {
// Python's / NumPy's divmod of floating-point values: the remainder has the divisor's sign, and the quotient
// is rounded so that q * b + r == a holds as closely as floating point allows.
template <typename T>
__host__ __device__ inline void float_divmod(T a, T b, T &q, T &r) {
    if (b == T(0)) {
        q = a / b;
        r = std::fmod(a, b);
        return;
    }
    r = std::fmod(a, b);
    T div = (a - r) / b;
    if (r != T(0)) {
        if ((b < T(0)) != (r < T(0))) {
            r += b;
            div -= T(1);
        }
    } else {
        r = std::copysign(T(0), b);
    }
    if (div != T(0)) {
        q = std::floor(div);
        if (div - q > T(0.5)) q += T(1);
    } else {
        q = std::copysign(T(0), a / b);
    }
}
}  // namespace cpufree

// a // b (NumPy's floor_divide): integers round down (0 for a zero divisor, as NumPy returns).
template <typename A, typename B>
__host__ __device__ inline auto py_floor(const A &a, const B &b) -> decltype(a + b) {
    using T = decltype(a + b);
    if constexpr (std::is_integral<T>::value) {
        return T(b) == 0 ? T(0) : int_floor(T(a), T(b));
    } else {
        T q, r;
        cpufree::float_divmod(T(a), T(b), q, r);
        return q;
    }
}
// np.mod / a % b: the remainder takes the divisor's sign (0 for an integer zero divisor, as NumPy returns).
template <typename A, typename B>
__host__ __device__ inline auto py_mod(const A &a, const B &b) -> decltype(a + b) {
    using T = decltype(a + b);
    if constexpr (std::is_integral<T>::value) {
        if (T(b) == 0) return T(0);
        const T r = T(a) % T(b);
        return (r != 0 && ((r < 0) != (T(b) < 0))) ? r + T(b) : r;
    } else {
        T q, r;
        cpufree::float_divmod(T(a), T(b), q, r);
        return r;
    }
}
// np.fmod: the remainder takes the dividend's sign (C's).
template <typename A, typename B>
__host__ __device__ inline auto c_mod(const A &a, const B &b) -> decltype(a + b) {
    using T = decltype(a + b);
    if constexpr (std::is_integral<T>::value) {
        return T(b) == 0 ? T(0) : T(a) % T(b);
    } else {
        return std::fmod(T(a), T(b));
    }
}
// np.sign (NumPy 2: -1, 0, 1; NaN stays NaN).
template <typename T>
__host__ __device__ inline T sign_numpy_2(const T &x) {
    if constexpr (!std::is_integral<T>::value) {
        if (x != x) return x;
    }
    return T((T(0) < x) - (x < T(0)));
}
template <typename T>
__host__ __device__ inline T sign(const T &x) {
    return sign_numpy_2(x);
}
// np.heaviside(x, h0): 0 below zero, h0 at zero, 1 above; NaN stays NaN.
template <typename T, typename U>
__host__ __device__ inline T heaviside(const T &x, const U &h0) {
    if (x != x) return x;
    return x < T(0) ? T(0) : (x > T(0) ? T(1) : T(h0));
}
// np.reciprocal
template <typename T>
__host__ __device__ inline T reciprocal(const T &x) {
    return T(1) / x;
}
