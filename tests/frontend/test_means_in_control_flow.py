"""``np.mean`` (``ndarray.mean``, ``np.argmax`` along an axis) inside a loop or a branch: DaCe's frontend adds the
call's states to the SDFG's top-level region, splitting the loop body, and simplification stopped with "Ambiguous or
undefined starting block" (upstream DaCe alike); ``rehome_nested_call_states`` moves them into the body
(transformations/frontend_states.py). Results against NumPy on the emulation and under the race checker."""

import dace
import numpy as np
import pytest
from builds import BACKENDS
from dace_cpufree.transformations.frontend_states import rehome_nested_call_states

import dace_cpufree
from dace_cpufree.errors import NotPersistableError
from dace_cpufree.runtime import build

N, M = dace.symbol("N"), dace.symbol("M")


@dace.program
def centred_steps(a: dace.float64[N], out: dace.float64[N]):
    for _t in range(3):
        m = np.mean(a)
        out[:] = out + a - m
        a[:] = a * 1.5


@dace.program
def mean_in_an_expression_in_a_loop(a: dace.float64[N], out: dace.float64[N]):
    for _t in range(4):
        out[:] = out + (a - np.mean(a)) * 2
        a[:] = a + out


@dace.program
def method_mean_in_a_branch(a: dace.float64[N], out: dace.float64[N], flag: dace.int64):
    if flag > 0:
        out[:] = a - a.mean()
    else:
        out[:] = a + np.mean(a)


@dace.program
def row_means_in_nested_loops(A: dace.float64[N, M], out: dace.float64[N]):
    for _t in range(2):
        for _s in range(2):
            out[:] = out + np.mean(A, axis=1)
        A[:] = A * 0.5


@dace.program
def argmax_in_a_loop(A: dace.float64[N, M], out: dace.int64[N]):
    for _t in range(2):
        out[:] = out + np.argmax(A, axis=1)
        A[:] = -A


@dace.program
def integer_mean_in_a_loop(a: dace.int64[N], out: dace.float64[N]):
    for _t in range(3):
        out[:] = out + (a - np.mean(a)) * 2
        a[:] = a + 1


def _centred(a):
    out = np.zeros_like(a)
    for _ in range(3):
        out += a - np.mean(a)
        a = a * 1.5
    return out


def _expression(a):
    a, out = a.copy(), np.zeros_like(a)
    for _ in range(4):
        out = out + (a - np.mean(a)) * 2
        a = a + out
    return out


def _nested(A):
    A, out = A.copy(), np.zeros(A.shape[0])
    for _ in range(2):
        for _ in range(2):
            out += np.mean(A, axis=1)
        A = A * 0.5
    return out


def _argmax(A):
    A, out = A.copy(), np.zeros(A.shape[0], np.int64)
    for _ in range(2):
        out += np.argmax(A, axis=1)
        A = -A
    return out


def _integer(a):
    a, out = a.copy(), np.zeros(a.shape)
    for _ in range(3):
        out += (a - np.mean(a)) * 2
        a = a + 1
    return out


@pytest.mark.parametrize("race_check", [False, True], ids=["emulate", "race-check"])
def test_means_in_loops_and_branches_match_numpy(race_check):
    rng = np.random.default_rng(5)
    a, A = rng.random(13), rng.random((7, 9))
    run = lambda prog: dace_cpufree.compile(prog, backend="emulate", race_check=race_check)  # noqa: E731

    out = np.zeros(13)
    run(centred_steps)(a.copy(), out)
    np.testing.assert_allclose(out, _centred(a), rtol=1e-12)

    out = np.zeros(13)
    run(mean_in_an_expression_in_a_loop)(a.copy(), out)
    np.testing.assert_allclose(out, _expression(a), rtol=1e-12)

    for flag, ref in ((1, a - a.mean()), (0, a + a.mean())):
        out = np.zeros(13)
        run(method_mean_in_a_branch)(a, out, flag)
        np.testing.assert_allclose(out, ref, rtol=1e-12)

    out = np.zeros(7)
    run(row_means_in_nested_loops)(A.copy(), out)
    np.testing.assert_allclose(out, _nested(A), rtol=1e-12)

    out = np.zeros(7, np.int64)
    run(argmax_in_a_loop)(A.copy(), out)
    np.testing.assert_array_equal(out, _argmax(A))

    ai = rng.integers(-20, 20, 11)
    out = np.zeros(11)
    run(integer_mean_in_a_loop)(ai.copy(), out)
    np.testing.assert_allclose(out, _integer(ai), rtol=1e-12)
    assert (out != np.trunc(out)).any()  # the means have fractions


def test_the_split_body_is_reconnected_and_simplifies():
    sdfg = centred_steps.to_sdfg(simplify=False)
    top = {b.label for b in sdfg.nodes()}
    assert any("nested_call" in label for label in top)  # the frontend's split: the sum at the top level
    assert rehome_nested_call_states(sdfg) == 3
    assert all("nested_call" not in b.label for b in sdfg.nodes())
    (loop,) = [r for r in sdfg.all_control_flow_regions() if isinstance(r, dace.sdfg.state.LoopRegion)]
    assert set(loop.bfs_nodes(loop.start_block)) == set(loop.nodes())  # every state reached from the body's start
    assert all(b.parent_graph is loop for b in loop.nodes())
    sdfg.validate()
    sdfg.simplify()  # stopped with "Ambiguous or undefined starting block" before


@dace.program
def mean_in_a_while_condition(a: dace.float64[N]):
    while np.mean(a) < 20.0:
        a[:] = a * 2.0


@dace.program
def sum_in_a_while_condition(a: dace.float64[N]):
    while np.sum(a) / N < 20.0:
        a[:] = a * 2.0


def test_a_mean_in_a_while_condition_is_refused_with_a_fix_that_runs():
    """The frontend copies a while condition's states into the body while the sum is still at the top level: the
    copy has no sum (DaCe's simplification stopped with "Ambiguous or undefined starting block"). The fix runs."""
    with pytest.raises(NotPersistableError, match=r"starts at several states.*while condition.*np.sum\(a\) / a.size"):
        dace_cpufree.compile(mean_in_a_while_condition, backend="emulate")
    a = np.ones(5)
    dace_cpufree.compile(sum_in_a_while_condition, backend="emulate")(a)
    np.testing.assert_array_equal(a, np.full(5, 32.0))


@pytest.mark.compile
@pytest.mark.parametrize("backend", BACKENDS)
def test_builds_a_mean_in_a_loop(backend):
    source = dace_cpufree.kernel_source(mean_in_an_expression_in_a_loop, backend=backend)
    assert build(source.code, "mean_in_a_loop", backend).stat().st_size > 0


@pytest.mark.gpu
def test_means_in_loops_match_numpy_on_gpu():
    rng = np.random.default_rng(6)
    a, A = rng.random(1000), rng.random((300, 257))
    out = np.zeros(1000)
    dace_cpufree.compile(mean_in_an_expression_in_a_loop)(a.copy(), out)
    np.testing.assert_allclose(out, _expression(a), rtol=1e-10)
    out = np.zeros(300)
    dace_cpufree.compile(row_means_in_nested_loops)(A.copy(), out)
    np.testing.assert_allclose(out, _nested(A), rtol=1e-12)
    ai = rng.integers(-20, 20, 999)
    out = np.zeros(999)
    dace_cpufree.compile(integer_mean_in_a_loop)(ai.copy(), out)
    np.testing.assert_allclose(out, _integer(ai), rtol=1e-10)
