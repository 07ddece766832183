"""``np.fft.fft`` and ``np.fft.ifft`` of one dimension (DaCe's library node, expanded to its explicit DFT map, the
sums atomic) against NumPy, every normalisation, and the Python semantics of the tasklet code they and programs
bring: ``math.cos`` and ``math.pi`` of a library tasklet, a complex number times an integer, and ``x ** -k`` and a
symbolic ``1 / N``, which DaCe's unparser writes as integer divisions (upstream DaCe returns zeros for
``np.fft.ifft``, whose ``1 / N`` normalisation it divides as integers; docs/dace-limitations.md)."""

import dace
import numpy as np
import pytest
from builds import BACKENDS
from dace_cpufree.codegen import expressions

import dace_cpufree
from dace_cpufree.errors import NotPersistableError
from dace_cpufree.runtime import build

N = dace.symbol("N")


@dace.program
def transforms(a: dace.complex128[N], f: dace.complex128[N], i: dace.complex128[N]):
    f[:] = np.fft.fft(a)
    i[:] = np.fft.ifft(a)


@dace.program
def ortho(a: dace.complex128[N], f: dace.complex128[N], i: dace.complex128[N]):
    f[:] = np.fft.fft(a, norm="ortho")
    i[:] = np.fft.ifft(a, norm="ortho")


@dace.program
def forward(a: dace.complex128[N], f: dace.complex128[N], i: dace.complex128[N]):
    f[:] = np.fft.fft(a, norm="forward")
    i[:] = np.fft.ifft(a, norm="forward")


@dace.program
def negative_powers(out: dace.float64[N], z: dace.complex128[N], big: dace.int32[N], far: dace.float64[N]):
    for k in dace.map[0:N]:
        out[k] = (k + 1) ** -2 + 2**-3
        z[k] = z[k] * 3
        far[k] = big[k] ** -2  # the square of an int32 near 50,000 does not fit an int32


def _signal(n=37, seed=5):
    rng = np.random.default_rng(seed)
    return rng.standard_normal(n) + 1j * rng.standard_normal(n)


@pytest.mark.parametrize("program, norm", [(transforms, "backward"), (ortho, "ortho"), (forward, "forward")])
def test_fft_and_ifft_match_numpy_in_the_emulation(program, norm):
    a = _signal()
    f, i = np.zeros_like(a), np.zeros_like(a)
    dace_cpufree.compile(program, backend="emulate")(a.copy(), f, i)
    np.testing.assert_allclose(f, np.fft.fft(a, norm=norm), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(i, np.fft.ifft(a, norm=norm), rtol=1e-12, atol=1e-12)


def test_fft_matches_numpy_under_the_race_checker():
    a = _signal(19)
    f, i = np.zeros_like(a), np.zeros_like(a)
    dace_cpufree.compile(transforms, backend="emulate", race_check=True)(a.copy(), f, i)
    np.testing.assert_allclose(f, np.fft.fft(a), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(i, np.fft.ifft(a), rtol=1e-12, atol=1e-12)


def test_negative_powers_and_complex_times_an_integer_follow_python():
    z = _signal(9)
    out, far = np.zeros(9), np.zeros(9)
    big = np.arange(50_000, 50_009, dtype=np.int32)
    got = z.copy()
    dace_cpufree.compile(negative_powers, backend="emulate")(out, got, big, far)
    np.testing.assert_allclose(out, (np.arange(9) + 1.0) ** -2 + 0.125, rtol=1e-15)
    np.testing.assert_allclose(got, z * 3, rtol=1e-15)
    np.testing.assert_allclose(far, big.astype(np.float64) ** -2, rtol=1e-15)


def test_math_module_names_become_c_and_unknown_ones_are_refused():
    def translate(code: str, inputs=("x",)) -> str:
        tasklet = dace.nodes.Tasklet("t", set(inputs), {"y"}, code)
        return expressions.tasklet_code(tasklet, {name: dace.float64 for name in (*inputs, "y")})

    assert translate("y = math.cos(x) + math.pi") == f"y = (cos(x) + {np.pi!r});"
    assert translate("y = math.gamma(x) * math.inf") == "y = (tgamma(x) * INFINITY);"
    assert translate("y = math.log(x, 2)") == "y = (log(x) / log(2));"
    assert translate("y = reciprocal(x)") == "y = reciprocal(x);"  # np.reciprocal of a value: NumPy's
    assert translate("y = reciprocal(M)") == "y = py_pow_neg(M, 1);"  # a symbolic 1 / M: a real number
    assert translate("y = x ** -2") == "y = py_pow_neg(x, 2);"
    with pytest.raises(NotPersistableError, match=r"math\.factorial.*Fix:"):
        translate("y = math.factorial(x)")


@pytest.mark.compile
@pytest.mark.parametrize("program", [transforms, negative_powers], ids=lambda p: p.name)
@pytest.mark.parametrize("backend", BACKENDS)
def test_builds_the_transforms(program, backend):
    source = dace_cpufree.kernel_source(program, backend=backend)
    assert build(source.code, f"fft_{program.name}", backend).stat().st_size > 0


@pytest.mark.gpu
@pytest.mark.parametrize("program, norm", [(transforms, "backward"), (ortho, "ortho")])
def test_fft_and_ifft_match_numpy_on_gpu(program, norm):
    a = _signal(1000)
    f, i = np.zeros_like(a), np.zeros_like(a)
    dace_cpufree.compile(program)(a.copy(), f, i)
    np.testing.assert_allclose(f, np.fft.fft(a, norm=norm), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(i, np.fft.ifft(a, norm=norm), rtol=1e-10, atol=1e-10)
