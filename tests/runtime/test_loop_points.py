"""One cancel point per loop iteration: with the channel on, the first grid sync at the top level of a loop's body is a
cancel point and the loop's other grid syncs are plain (counted only); nested loops have their own; debug waits keep
every grid sync a cancel point. Structure of the generated code and results on the emulation."""

import dace
import numpy as np
import pytest
from kernel_copies import jacobi_2d

import dace_cpufree
from dace_cpufree.errors import NotPersistableError

N = dace.symbol("N")


@dace.program
def nested_steps(A: dace.float64[N], B: dace.float64[N], T: dace.int64, U: dace.int64):
    for t in range(T):  # noqa: B007 - the loops' variables differ: DaCe would share one name between them
        B[1:-1] = 0.5 * (A[:-2] + A[2:])
        for u in range(U):  # noqa: B007
            A[1:-1] = 0.5 * (B[:-2] + B[2:])
            B[1:-1] = 0.5 * (A[:-2] + A[2:])
        A[1:-1] = 0.5 * (B[:-2] + B[2:])


@dace.program
def one_variable_twice(A: dace.float64[N], T: dace.int64, U: dace.int64):
    for _ in range(T):
        for _ in range(U):
            A[:] = A + 1.0


@dace.program
def alternating(A: dace.float64[N], B: dace.float64[N], T: dace.int64):
    for t in range(T):
        if t % 2 == 0:
            B[1:-1] = 0.5 * (A[:-2] + A[2:])
        else:
            A[1:-1] = 0.5 * (B[:-2] + B[2:])


def _kernel(code: str) -> str:
    return code[code.index("CPUFREE_CHANNEL_BEGIN()") : code.index("// ---- host launcher")]


def test_a_time_loop_with_two_grid_syncs_has_one_cancel_point_at_its_first():
    kernel = _kernel(dace_cpufree.kernel_source(jacobi_2d.program, channel=True).code)
    assert kernel.count("CPUFREE_CHANNEL_BEFORE_SYNC(") == 1 and kernel.count("CPUFREE_CHANNEL_PLAIN_SYNC()") == 1
    assert kernel.index("CPUFREE_CHANNEL_BEFORE_SYNC(") < kernel.index("CPUFREE_CHANNEL_PLAIN_SYNC()")
    debug = _kernel(dace_cpufree.kernel_source(jacobi_2d.program, debug_waits=1).code)
    assert debug.count("CPUFREE_CHANNEL_BEFORE_SYNC(") == 2 and "CPUFREE_CHANNEL_PLAIN_SYNC()" not in debug


def test_nested_loops_have_a_cancel_point_each_and_run_correctly():
    source = dace_cpufree.kernel_source(nested_steps, channel=True)
    sites = source.channel.sites
    assert sorted(s.split(" ")[0] for s in sites) == ["grid", "grid", "head", "head"]  # a head and a sync each loop
    assert _kernel(source.code).count("CPUFREE_CHANNEL_PLAIN_SYNC()") == 2  # the inner loop's second, the outer's last
    A, B = np.linspace(0.0, 1.0, 40), np.zeros(40)
    want_A, want_B = A.copy(), B.copy()
    for _ in range(3):
        want_B[1:-1] = 0.5 * (want_A[:-2] + want_A[2:])
        for _ in range(2):
            want_A[1:-1] = 0.5 * (want_B[:-2] + want_B[2:])
            want_B[1:-1] = 0.5 * (want_A[:-2] + want_A[2:])
        want_A[1:-1] = 0.5 * (want_B[:-2] + want_B[2:])
    dace_cpufree.compile(nested_steps, backend="emulate", channel=True, race_check="shuffle")(A, B, T=3, U=2)
    np.testing.assert_allclose(A, want_A)
    np.testing.assert_allclose(B, want_B)


@pytest.mark.parametrize("race", [False, "shuffle"])
def test_a_loop_whose_grid_syncs_are_all_in_branches_keeps_them_all(race):
    source = dace_cpufree.kernel_source(alternating, channel=True)
    assert "CPUFREE_CHANNEL_PLAIN_SYNC()" not in source.code
    A, B = np.linspace(0.0, 1.0, 32), np.zeros(32)
    want_A, want_B = A.copy(), B.copy()
    for t in range(5):
        if t % 2 == 0:
            want_B[1:-1] = 0.5 * (want_A[:-2] + want_A[2:])
        else:
            want_A[1:-1] = 0.5 * (want_B[:-2] + want_B[2:])
    dace_cpufree.compile(alternating, backend="emulate", channel=True, race_check=race)(A, B, T=5)
    np.testing.assert_allclose(A, want_A)
    np.testing.assert_allclose(B, want_B)


def test_nested_loops_over_one_variable_are_refused_with_the_line():
    """Python keeps the two loops' iterations apart; DaCe runs them as one variable (the outer loop would run fewer
    times), so the program is refused rather than computed differently."""
    with pytest.raises(NotPersistableError, match=r"loop over '_' at .*test_loop_points.py:\d+ is nested in another"):
        dace_cpufree.kernel_source(one_variable_twice)
