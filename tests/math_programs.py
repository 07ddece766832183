"""Programs that apply one NumPy function each (tests/codegen/test_math_functions.py): what DaCe's unparser turns them
into, with NumPy's answer as the function's Python body run on NumPy arrays."""

import dace
import numpy as np

N = dace.symbol("N")


@dace.program
def absf(a: dace.float64[N], b: dace.float64[N], i: dace.int64[N], out: dace.float64[N]):
    out[:] = np.abs(a)


@dace.program
def absolute(a: dace.float64[N], b: dace.float64[N], i: dace.int64[N], out: dace.float64[N]):
    out[:] = np.absolute(a)


@dace.program
def absb(a: dace.float64[N], b: dace.float64[N], i: dace.int64[N], out: dace.float64[N]):
    out[:] = abs(a)


@dace.program
def sign(a: dace.float64[N], b: dace.float64[N], i: dace.int64[N], out: dace.float64[N]):
    out[:] = np.sign(a)


@dace.program
def modf(a: dace.float64[N], b: dace.float64[N], i: dace.int64[N], out: dace.float64[N]):
    out[:] = np.mod(a, b)


@dace.program
def floordiv(a: dace.float64[N], b: dace.float64[N], i: dace.int64[N], out: dace.float64[N]):
    out[:] = a // b


@dace.program
def recip(a: dace.float64[N], b: dace.float64[N], i: dace.int64[N], out: dace.float64[N]):
    out[:] = np.reciprocal(a)


@dace.program
def minmix(a: dace.float64[N], b: dace.float64[N], i: dace.int64[N], out: dace.float64[N]):
    out[:] = np.minimum(a, i)


@dace.program
def maxmix(a: dace.float64[N], b: dace.float64[N], i: dace.int64[N], out: dace.float64[N]):
    out[:] = np.maximum(i, a)


@dace.program
def modi(a: dace.float64[N], b: dace.float64[N], i: dace.int64[N], out: dace.float64[N]):
    out[:] = np.mod(i, 3)


@dace.program
def floordivi(a: dace.float64[N], b: dace.float64[N], i: dace.int64[N], out: dace.float64[N]):
    out[:] = i // 3


@dace.program
def floor(a: dace.float64[N], b: dace.float64[N], i: dace.int64[N], out: dace.float64[N]):
    out[:] = np.floor(a)


@dace.program
def pw(a: dace.float64[N], b: dace.float64[N], i: dace.int64[N], out: dace.float64[N]):
    out[:] = np.power(np.abs(a), b)


@dace.program
def fmod(a: dace.float64[N], b: dace.float64[N], i: dace.int64[N], out: dace.float64[N]):
    out[:] = np.fmod(a, b)


@dace.program
def signi(a: dace.float64[N], b: dace.float64[N], i: dace.int64[N], out: dace.float64[N]):
    out[:] = np.sign(i)


@dace.program
def absi(a: dace.float64[N], b: dace.float64[N], i: dace.int64[N], out: dace.float64[N]):
    out[:] = np.abs(i)


@dace.program
def remf(a: dace.float64[N], b: dace.float64[N], i: dace.int64[N], out: dace.float64[N]):
    out[:] = a % b


@dace.program
def remi(a: dace.float64[N], b: dace.float64[N], i: dace.int64[N], out: dace.float64[N]):
    out[:] = i % 3


@dace.program
def minf(a: dace.float64[N], b: dace.float64[N], i: dace.int64[N], out: dace.float64[N]):
    out[:] = np.minimum(a, b)


@dace.program
def ceil(a: dace.float64[N], b: dace.float64[N], i: dace.int64[N], out: dace.float64[N]):
    out[:] = np.ceil(a)


@dace.program
def trunc(a: dace.float64[N], b: dace.float64[N], i: dace.int64[N], out: dace.float64[N]):
    out[:] = np.trunc(a)


@dace.program
def rint(a: dace.float64[N], b: dace.float64[N], i: dace.int64[N], out: dace.float64[N]):
    out[:] = np.rint(a)


@dace.program
def exp2(a: dace.float64[N], b: dace.float64[N], i: dace.int64[N], out: dace.float64[N]):
    out[:] = np.exp2(b)


@dace.program
def log1p(a: dace.float64[N], b: dace.float64[N], i: dace.int64[N], out: dace.float64[N]):
    out[:] = np.log1p(np.abs(a))


@dace.program
def hyp(a: dace.float64[N], b: dace.float64[N], i: dace.int64[N], out: dace.float64[N]):
    out[:] = np.arctan2(a, b)


@dace.program
def sqrt(a: dace.float64[N], b: dace.float64[N], i: dace.int64[N], out: dace.float64[N]):
    out[:] = np.sqrt(np.abs(a))


@dace.program
def pow2(a: dace.float64[N], b: dace.float64[N], i: dace.int64[N], out: dace.float64[N]):
    out[:] = a**2


@dace.program
def pow3(a: dace.float64[N], b: dace.float64[N], i: dace.int64[N], out: dace.float64[N]):
    out[:] = b**3


@dace.program
def powi(a: dace.float64[N], b: dace.float64[N], i: dace.int64[N], out: dace.float64[N]):
    out[:] = i**2


@dace.program
def powf(a: dace.float64[N], b: dace.float64[N], i: dace.int64[N], out: dace.float64[N]):
    out[:] = np.abs(a) ** 0.5


@dace.program
def tanh(a: dace.float64[N], b: dace.float64[N], i: dace.int64[N], out: dace.float64[N]):
    out[:] = np.tanh(a)


@dace.program
def logf(a: dace.float64[N], b: dace.float64[N], i: dace.int64[N], out: dace.float64[N]):
    out[:] = np.log(np.abs(a) + 1)


@dace.program
def arcsin(a: dace.float64[N], b: dace.float64[N], i: dace.int64[N], out: dace.float64[N]):
    out[:] = np.arcsin(np.clip(b, -1, 1))


@dace.program
def isnan(a: dace.float64[N], b: dace.float64[N], i: dace.int64[N], out: dace.float64[N]):
    out[:] = np.isnan(a) * 1.0


@dace.program
def heav(a: dace.float64[N], b: dace.float64[N], i: dace.int64[N], out: dace.float64[N]):
    out[:] = np.heaviside(a, 0.5)


@dace.program
def cbrt(a: dace.float64[N], b: dace.float64[N], i: dace.int64[N], out: dace.float64[N]):
    out[:] = np.cbrt(a)


@dace.program
def expm1(a: dace.float64[N], b: dace.float64[N], i: dace.int64[N], out: dace.float64[N]):
    out[:] = np.expm1(b)


@dace.program
def absneg(a: dace.float64[N], b: dace.float64[N], i: dace.int64[N], out: dace.float64[N]):
    out[:] = -np.abs(b)


@dace.program
def maxi(a: dace.float64[N], b: dace.float64[N], i: dace.int64[N], out: dace.float64[N]):
    out[:] = np.maximum(i, 2)


@dace.program
def floordivmix(a: dace.float64[N], b: dace.float64[N], i: dace.int64[N], out: dace.float64[N]):
    out[:] = i // b


@dace.program
def modmix(a: dace.float64[N], b: dace.float64[N], i: dace.int64[N], out: dace.float64[N]):
    out[:] = np.mod(i, b)


@dace.program
def hypot(a: dace.float64[N], b: dace.float64[N], i: dace.int64[N], out: dace.float64[N]):
    out[:] = np.hypot(a, b)


@dace.program
def cosh(a: dace.float64[N], b: dace.float64[N], i: dace.int64[N], out: dace.float64[N]):
    out[:] = np.cosh(b)


@dace.program
def sq(a: dace.float64[N], b: dace.float64[N], i: dace.int64[N], out: dace.float64[N]):
    out[:] = np.square(b)


@dace.program
def negmod(a: dace.float64[N], b: dace.float64[N], i: dace.int64[N], out: dace.float64[N]):
    out[:] = np.mod(-a, 3.0)


@dace.program
def many(a: dace.float64[N], b: dace.float64[N], i: dace.int64[N], out: dace.float64[N], k: dace.int64[N]):
    out[:] = np.abs(a) + np.sign(a) + np.mod(a, b) + a // b + np.reciprocal(b) + np.maximum(i, a) + np.fmod(a, b)
    out[:] = out + np.heaviside(a, 0.5) + np.isnan(a) * 1.0 + np.minimum(i, 2.5)
    k[:] = i // 3 + np.mod(i, 3) + np.sign(i) + np.abs(i) + np.maximum(i, 2)


@dace.program
def single_precision(a: dace.float32[N], b: dace.float32[N], i: dace.int32[N], out: dace.float32[N]):
    out[:] = np.abs(a) + np.sign(b) + a // b + np.mod(a, b) + np.maximum(a, i)


@dace.program
def small_integers(a: dace.int16[N], b: dace.uint16[N], out: dace.int64[N]):
    out[:] = np.abs(a) + b // 3 + np.mod(a, 5)


@dace.program
def rint_halves(a: dace.float64[N], b: dace.float64[N], i: dace.int64[N], out: dace.float64[N]):
    out[:] = np.rint(np.floor(a) + 0.5)  # halves: to even, as NumPy (C's round() goes away from zero)


@dace.program
def spacing(a: dace.float64[N], b: dace.float64[N], i: dace.int64[N], out: dace.float64[N]):
    out[:] = np.spacing(a)


@dace.program
def logaddexp(a: dace.float64[N], b: dace.float64[N], i: dace.int64[N], out: dace.float64[N]):
    out[:] = np.logaddexp(a * 200.0, b) + np.logaddexp2(b, a)


@dace.program
def float_power(a: dace.float64[N], b: dace.float64[N], i: dace.int64[N], out: dace.float64[N]):
    out[:] = np.float_power(np.abs(a), b)


@dace.program
def divmod_(a: dace.float64[N], b: dace.float64[N], i: dace.int64[N], out: dace.float64[N]):
    q, r = np.divmod(a, b)
    out[:] = q * 1000.0 + r


@dace.program
def modf_parts(a: dace.float64[N], b: dace.float64[N], i: dace.int64[N], out: dace.float64[N]):
    f, w = np.modf(a)
    out[:] = f * 1000.0 + w


@dace.program
def frexp(a: dace.float64[N], b: dace.float64[N], i: dace.int64[N], out: dace.float64[N]):
    m, e = np.frexp(a)
    out[:] = m * 1000.0 + e


@dace.program
def gcd_lcm(a: dace.float64[N], b: dace.float64[N], i: dace.int64[N], out: dace.float64[N]):
    out[:] = np.gcd(i, 6) * 100 + np.lcm(i, 4)


@dace.program
def degrees(a: dace.float64[N], b: dace.float64[N], i: dace.int64[N], out: dace.float64[N]):
    out[:] = np.degrees(a) + np.radians(b)


@dace.program
def ufuncs(a: dace.float64[N], b: dace.float64[N], i: dace.int64[N], out: dace.float64[N]):
    q, r = np.divmod(a, b)
    f, w = np.modf(a)
    m, e = np.frexp(a)
    out[:] = np.rint(a) + np.spacing(a) + np.logaddexp(a, b) + np.float_power(np.abs(a), b) + q + r + f + w + m + e
    out[:] = out + np.gcd(i, 6) + np.lcm(i, 4) + np.degrees(a) + np.radians(b) + np.logaddexp2(a, b)


@dace.program
def clamped_indices(a: dace.float64[N], out: dace.float64[N]):
    """Indices that DaCe keeps as sympy's Min, Max and Abs in the memlets (``Min(N - 1, k + 3)``)."""
    for k in dace.map[0:N]:
        out[k] = a[min(k + 3, N - 1)] + 2.0 * a[max(k - 2, 0)] + 3.0 * a[abs(k - 5)]


def clamped_indices_reference(a):
    n = len(a)
    return np.array([a[min(k + 3, n - 1)] + 2.0 * a[max(k - 2, 0)] + 3.0 * a[abs(k - 5)] for k in range(n)])


PROGRAMS = [
    ufuncs,
    rint_halves,
    spacing,
    logaddexp,
    float_power,
    divmod_,
    modf_parts,
    frexp,
    gcd_lcm,
    degrees,
    absf,
    absolute,
    absb,
    sign,
    modf,
    floordiv,
    recip,
    minmix,
    maxmix,
    modi,
    floordivi,
    floor,
    pw,
    fmod,
    signi,
    absi,
    remf,
    remi,
    minf,
    ceil,
    trunc,
    rint,
    exp2,
    log1p,
    hyp,
    sqrt,
    pow2,
    pow3,
    powi,
    powf,
    tanh,
    logf,
    arcsin,
    isnan,
    heav,
    cbrt,
    expm1,
    absneg,
    maxi,
    floordivmix,
    modmix,
    hypot,
    cosh,
    sq,
    negmod,
]
