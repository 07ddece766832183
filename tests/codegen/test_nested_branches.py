"""Data-dependent control flow inside a parallel loop: DaCe keeps it as a nested SDFG inside the map, and the
kernel runs it as the sequential code of the thread that runs the iteration (``codegen/nested.py``). Checked
against NumPy under the race checker in the three orders, and built by nvcc."""

import dace
import numpy as np
import pytest
from builds import BACKENDS

import dace_cpufree
from dace_cpufree.runtime import build

N, M = dace.symbol("N"), dace.symbol("M")


@dace.program
def branch(A: dace.float64[N], B: dace.float64[N]):
    for i in dace.map[0:N]:
        if A[i] > 0.5:
            B[i] = A[i] * 2
        else:
            B[i] = -A[i]


@dace.program
def halvings(C: dace.float64[N], out: dace.int64[N]):
    for i in dace.map[0:N]:
        x = C[i]
        k = 0
        while x > 1.0:
            x = x / 2.0
            k = k + 1
        out[i] = k


@dace.program
def masked_mean(data: dace.float64[N], mask: dace.bool_[N], res: dace.float64[1]):
    total = np.float64(0)
    count = 0
    for j in dace.map[0:N]:
        if mask[j]:
            total += data[j]
            count += 1
    res[0] = total / count


@dace.program
def histogram(a: dace.float64[N], hist: dace.int64[M]):
    for i in dace.map[0:N]:
        b = min(dace.int64(a[i] * M), M - 1)
        hist[b] += 1


def _cases():
    rng = np.random.default_rng(11)
    a = rng.random(257)
    c = rng.random(100) * 1000.0
    mask = a > 0.3

    def halvings_ref(C):
        out = np.zeros(len(C), dtype=np.int64)
        for i, x in enumerate(C):
            while x > 1.0:
                x, out[i] = x / 2.0, out[i] + 1
        return out

    return {
        "branch": (branch, lambda: [a.copy(), np.zeros_like(a)], lambda args: np.where(a > 0.5, a * 2, -a), 1),
        "halvings": (halvings, lambda: [c.copy(), np.zeros(100, np.int64)], lambda args: halvings_ref(c), 1),
        "masked_mean": (masked_mean, lambda: [a.copy(), mask.copy(), np.zeros(1)], lambda args: a[mask].mean(), 2),
        "histogram": (
            histogram,
            lambda: [a.copy(), np.zeros(10, np.int64)],
            lambda args: np.bincount(np.minimum((a * 10).astype(np.int64), 9), minlength=10),
            1,
        ),
    }


CASES = _cases()


@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_numpy_under_the_race_checker(name):
    program, make, want, out = CASES[name]
    run = dace_cpufree.compile(program, backend="emulate", race_check="forward")
    for order in ("forward", "reverse", "shuffle"):
        run.race_order(order, seed=3)
        args = make()
        run(*args)
        got = args[out] if name != "masked_mean" else args[2][0]
        np.testing.assert_allclose(got, want(args), rtol=1e-12, err_msg=order)


def test_a_histogram_update_is_atomic():
    """``hist[b] += 1`` with ``b`` computed per element: other iterations hit the same bin."""
    code = dace_cpufree.generate_code(histogram).split("// ---- host launcher")[0]
    # the update sits in the iteration's sequential code, which the kernel IR holds only as text
    assert "cpufree::atomic_combine<cpufree::Op::Sum>(&" in code


def test_inner_names_do_not_shadow_the_outer_ones():
    code = dace_cpufree.generate_code(branch).split("// ---- host launcher")[0]
    assert "double *__n1_A = &A[0];" in code and "= N;" in code  # text under test: the printed names nvcc sees


@pytest.mark.compile
@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("backend", BACKENDS)
def test_builds(name, backend):
    source = dace_cpufree.kernel_source(CASES[name][0], backend=backend)
    assert build(source.code, f"nested_{name}", backend).stat().st_size > 0


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_numpy_on_gpu(name):
    program, make, want, out = CASES[name]
    args = make()
    dace_cpufree.compile(program)(*args)
    got = args[out] if name != "masked_mean" else args[2][0]
    np.testing.assert_allclose(got, want(args), rtol=1e-12)
