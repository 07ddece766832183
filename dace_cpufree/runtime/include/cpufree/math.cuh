// Tasklet math: the functions DaCe's Python-to-C++ unparser names in tasklet code (np.mod -> py_mod,
// // -> py_floor, np.sign -> sign_numpy_2, ...), with NumPy's semantics, the same on the device (nvcc,
// hipcc) and in the host emulation. Global namespace, as the unparser writes them unqualified.
#pragma once
#include <climits>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <utility>

#if defined(CPUFREE_EMULATE)
// Tasklet code calls these unqualified. <cmath> declares their float and integer overloads in std only, where
// the device compilers declare them in the global namespace too: without these, an unqualified abs(double) is
// C's int abs(int) and truncates, sin(float) and nextafter(float, float) run in double precision, and
// isfinite/signbit do not compile.
using std::abs;
using std::isinf;
using std::isnan;
using std::max;
using std::min;
using std::acos; using std::acosh; using std::asin; using std::asinh; using std::atan; using std::atan2;
using std::atanh; using std::cbrt; using std::ceil; using std::copysign; using std::cos; using std::cosh;
using std::erf; using std::erfc; using std::exp; using std::exp2; using std::expm1; using std::fabs;
using std::fdim; using std::floor; using std::fma; using std::fmax; using std::fmin; using std::fmod;
using std::frexp; using std::hypot; using std::isfinite; using std::ldexp; using std::lgamma; using std::log;
using std::log10; using std::log1p; using std::log2; using std::modf; using std::nearbyint; using std::nextafter;
using std::pow; using std::remainder; using std::rint; using std::round; using std::signbit; using std::sin;
using std::sinh; using std::sqrt; using std::tan; using std::tanh; using std::tgamma; using std::trunc;
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

// Index expressions: DaCe prints sympy's Min, Max and Abs of a memlet's subset or a map's range under these
// names (A[min(i + 3, N - 1)], A[abs(i - c)]); any number of arguments, NumPy's promotion between them.
template <typename T> __host__ __device__ inline T Abs(const T &x) { return x < T(0) ? T(-x) : x; }
template <typename A> __host__ __device__ inline A Min(const A &a) { return a; }
template <typename A> __host__ __device__ inline A Max(const A &a) { return a; }
template <typename A, typename B, typename... R>
__host__ __device__ inline auto Min(const A &a, const B &b, const R &...rest) {
    using T = decltype(a + b);
    return Min(T(b) < T(a) ? T(b) : T(a), rest...);
}
template <typename A, typename B, typename... R>
__host__ __device__ inline auto Max(const A &a, const B &b, const R &...rest) {
    using T = decltype(a + b);
    return Max(T(a) < T(b) ? T(b) : T(a), rest...);
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

// ---- NumPy ufuncs that DaCe's frontend writes as calls of their own ------------------------------------
// (np.float_power -> np_float_pow, np.divmod -> py_divmod, np.modf -> np_modf, np.frexp -> np_frexp, np.conj ->
// conj, np.degrees -> rad2deg, np.radians -> deg2rad, np.gcd / np.lcm, and two that codegen/expressions.py
// renames: np.rint and round() -> py_round, np.spacing -> np_spacing.) NumPy's results, integer inputs
// computed as double where NumPy's are; global namespace, as the unparser writes them unqualified.
namespace cpufree {
template <typename T> using real_of = std::conditional_t<std::is_integral<T>::value, double, T>;
}  // namespace cpufree

// The arithmetic type of a tasklet operand: its own, or an array element's under the race checker (race::ref<T>).
namespace cpufree {
template <typename T> using operand_t = std::decay_t<decltype(std::declval<const T &>() + 0)>;
}  // namespace cpufree
// `a / b` of a Python tasklet: Python's quotient, a float also of two integers (codegen/expressions.py,
// _TaskletMath); a float operand divides as before.
template <typename A, typename B> __host__ __device__ inline auto py_div(const A &a, const B &b) {
    using VA = cpufree::operand_t<A>;
    using VB = cpufree::operand_t<B>;
    if constexpr (std::is_integral<VA>::value && std::is_integral<VB>::value) return double(VA(a)) / double(VB(b));
    else return VA(a) / VB(b);
}
// `x ** -k` of a Python tasklet, k a positive literal: Python's value, a float where x is an integer (the unparser's
// reciprocal(ipow(x, k)) divides integers: 1 / N of a size, np.fft.ifft's normalisation, was 0). The power is taken
// in the result's type, so an integer base does not overflow.
template <typename T> __host__ __device__ inline auto py_pow_neg(const T &x, unsigned int k) {
    using R = cpufree::real_of<cpufree::operand_t<T>>;
    return R(1) / dace::math::ipow(R(cpufree::operand_t<T>(x)), k);
}

template <typename A, typename B> __host__ __device__ inline double np_float_pow(const A &a, const B &b) {
    return pow(double(a), double(b));
}
// NumPy's divmod: the quotient rounded down, the remainder with the divisor's sign (py_floor, py_mod).
template <typename A, typename B, typename Q, typename R>
__host__ __device__ inline void py_divmod(const A &a, const B &b, Q &quotient, R &rest) {
    quotient = Q(py_floor(a, b));
    rest = R(py_mod(a, b));
}
// np.modf(x) -> (fractional part, integral part), both with x's sign.
template <typename T, typename F, typename I> __host__ __device__ inline void np_modf(const T &x, F &fractional, I &integral) {
    cpufree::real_of<T> whole;
    fractional = F(modf(cpufree::real_of<T>(x), &whole));
    integral = I(whole);
}
// np.frexp(x) -> (mantissa, exponent); the exponent of an infinity or a NaN is 0, as NumPy gives.
template <typename T, typename M, typename E> __host__ __device__ inline void np_frexp(const T &x, M &mantissa, E &exponent) {
    const cpufree::real_of<T> v(x);
    int e = 0;
    mantissa = M(frexp(v, &e));
    exponent = E(v - v == 0 ? e : 0);  // v - v is 0 exactly when v is finite
}
// np.spacing(x): the distance to the next value away from zero (negative below zero, NaN for infinities).
template <typename T> __host__ __device__ inline cpufree::real_of<T> np_spacing(const T &x) {
    using R = cpufree::real_of<T>;
    const R v(x);
    return (v < R(0) ? nextafter(v, R(-INFINITY)) : nextafter(v, R(INFINITY))) - v;
}
// Python's round(x) and np.rint(x): halves to even (C's round() takes them away from zero).
template <typename T> __host__ __device__ inline T py_round(const T &x) {
    if constexpr (std::is_integral<T>::value) return x;
    else return rint(x);
}
// The complex conjugate of a real number is the number (complex numbers take cpufree::complex's own conj).
template <typename T, typename = std::enable_if_t<std::is_arithmetic<T>::value>>
__host__ __device__ inline T conj(const T &x) {
    return x;
}
template <typename T> __host__ __device__ inline cpufree::real_of<T> rad2deg(const T &x) {
    using R = cpufree::real_of<T>;
    return R(x) * (R(180) / R(3.14159265358979323846));
}
template <typename T> __host__ __device__ inline cpufree::real_of<T> deg2rad(const T &x) {
    using R = cpufree::real_of<T>;
    return R(x) * (R(3.14159265358979323846) / R(180));
}
// np.gcd / np.lcm of integers: non-negative, gcd(0, 0) == 0 and lcm(0, x) == 0.
template <typename A, typename B> __host__ __device__ inline auto gcd(const A &a, const B &b) -> decltype(a + b) {
    using T = decltype(a + b);
    T x = T(a), y = T(b);
    if constexpr (std::is_signed<T>::value) {
        x = x < 0 ? -x : x;
        y = y < 0 ? -y : y;
    }
    while (y != 0) {
        const T r = x % y;
        x = y;
        y = r;
    }
    return x;
}
template <typename A, typename B> __host__ __device__ inline auto lcm(const A &a, const B &b) -> decltype(a + b) {
    using T = decltype(a + b);
    const T g = gcd(a, b);
    if (g == 0) return T(0);
    const T m = T(a) / g * T(b);
    if constexpr (std::is_signed<T>::value) return m < 0 ? -m : m;
    else return m;
}
// np.logaddexp(x, y) = log(exp(x) + exp(y)) and np.logaddexp2, as NumPy computes them: no overflow of exp.
template <typename A, typename B> __host__ __device__ inline auto np_logaddexp(const A &a, const B &b) {
    using R = cpufree::real_of<decltype(a + b)>;
    const R x(a), y(b), d = x - y;
    if (x == y) return x + R(0.693147180559945309417232121458176568);  // also equal infinities
    if (d > 0) return x + log1p(exp(-d));
    if (d <= 0) return y + log1p(exp(d));
    return d;  // NaN
}
template <typename A, typename B> __host__ __device__ inline auto np_logaddexp2(const A &a, const B &b) {
    using R = cpufree::real_of<decltype(a + b)>;
    const R x(a), y(b), d = x - y;
    const R log2e(1.442695040888963407359924681001892137);
    if (x == y) return x + R(1);
    if (d > 0) return x + log2e * log1p(exp2(-d));
    if (d <= 0) return y + log2e * log1p(exp2(d));
    return d;
}

// np.argmax / np.argmin (transformations/arg_reductions.py): an int64 whose order is the order of the values, so
// that the extreme value is found with an integer max/min atomic. NaN lies above every number (nan_high, argmax) or
// below (argmin): NumPy returns the first NaN. -0.0 and 0.0 are equal; float widens to double exactly.
namespace cpufree {
template <bool nan_high, typename T> __host__ __device__ inline long long arg_key(const T &value) {
    if constexpr (std::is_floating_point_v<T>) {
        if (value != value) return nan_high ? LLONG_MAX : LLONG_MIN;
        if (value == T(0)) return 0;
        const double d = (double)value;
        long long bits;
        memcpy(&bits, &d, sizeof(bits));
        return bits < 0 ? bits ^ LLONG_MAX : bits;  // negative numbers: larger magnitude, smaller key
    } else if constexpr (std::is_unsigned_v<T> && sizeof(T) == 8) {
        return (long long)(value ^ 0x8000000000000000ULL);
    } else {
        return (long long)value;
    }
}
}  // namespace cpufree
