"""CPU: programs that communicate, run on several PEs emulated on the host (``compile(..., backend="emulate",
pes=P)``, ``run.on_pes([...])``), with and without the race checker.

Shown here: the small programs of every put form (contiguous, strided, concurrent, with and without a signal,
NVSHMEM's calls and direct stores) give the values the PEs put, on 2 and 4 PEs; the race checker reports a put into a
halo that the neighbour may still read (no flow control), a halo read before the wait for its signal and two PEs
putting into one element, each with the array, both PEs and both program lines; a wait for a signal that no PE sends
is a KernelHang naming the PE, the flag and (with the checker) the line; the API's refusals name the fix. The
benchmark programs (Jacobi, the process-grid stencil, CG) are in tests/benchmarks/test_multipe_emulate_benchmarks.py.
"""

import inspect

import numpy as np
import pytest
import shmem_programs as sp

import dace_cpufree
from dace_cpufree.errors import ArgumentError, CpufreeError, KernelHang, RaceError

N, M, T = 6, 7, 3


def _arrays(pes: int, flags: int) -> list[dict]:
    """Each PE's A (its values tell the PEs apart) and zeroed flags."""
    base = np.arange(N * M, dtype=np.float64).reshape(N, M)
    return [dict(A=base + 100.0 * pe, flags=np.zeros(flags, dtype=np.uint64)) for pe in range(pes)]


def _initial(pe: int) -> np.ndarray:
    return np.arange(N * M, dtype=np.float64).reshape(N, M) + 100.0 * pe


def _check_strided(calls: list, pes: int) -> None:
    """strided: every step halves the inner columns and puts column M-2 into column 0 of the PE to the left."""
    for pe, call in enumerate(calls):
        want = _initial(pe)
        want[:, 1:-1] *= 0.5**T
        want[:, 0] = _initial((pe + 1) % pes)[:, M - 2] * 0.5**T
        np.testing.assert_array_equal(call["A"], want, err_msg=f"PE {pe} of {pes}")
        assert call["flags"][1] == T


def _check_concurrent(calls: list, pes: int) -> None:
    """concurrent: the inner cells grow by 1 a step; the four edges of each PE come from its neighbours."""
    for pe, call in enumerate(calls):
        left, right = _initial((pe - 1) % pes) + T, _initial((pe + 1) % pes) + T
        want = _initial(pe)
        want[1:-1, 1:-1] += T
        want[0, 1:-1], want[N - 1, 1:-1] = left[N - 2, 1:-1], right[1, 1:-1]
        want[1:-1, 0], want[1:-1, M - 1] = left[1:-1, M - 2], right[1:-1, 1]
        np.testing.assert_array_equal(call["A"], want, err_msg=f"PE {pe} of {pes}")


def _check_signalled_once(calls: list, pes: int) -> None:
    for pe, call in enumerate(calls):
        np.testing.assert_array_equal(call["B"], _initial((pe - 1) % pes)[N - 2] * 2.0, err_msg=f"PE {pe} of {pes}")


CASES = {
    "strided": (sp.strided, 2, {"T": T}, _check_strided),
    "concurrent": (sp.concurrent, 4, {"T": T}, _check_concurrent),
    "signalled_once": (sp.signalled_once, 2, {}, _check_signalled_once),
}


@pytest.mark.parametrize(
    "case, transport, race",
    [
        ("strided", "p2p", "reverse"),
        ("concurrent", "proxy", "shuffle"),
        ("concurrent", "p2p", False),
        ("signalled_once", "proxy", False),
    ],
)
def test_small_programs_give_what_the_pes_put(case, transport, race):
    """Direct stores (p2p) and NVSHMEM's calls (proxy: a block's contiguous put with signal, strided iput, signal op),
    under the race checker, and the plain emulation (each PE one thread, the PEs truly at the same time)."""
    program, flags, extra, check = CASES[case]
    run = dace_cpufree.compile(program, backend="emulate", pes=2, race_check=race, shmem_transport=transport)
    for pes in (2, 4):
        calls = _arrays(pes, flags)
        for call in calls:
            call.update(extra)
            if case == "signalled_once":
                call["B"] = np.zeros(M)
        (run if pes == 2 else run.with_pes(pes)).on_pes(calls)
        check(calls, pes)


def _line_of(program, text: str) -> str:
    """``shmem_programs.py:<line>)`` of the program's first line that holds ``text``, as a step's label ends."""
    lines, first = inspect.getsourcelines(program.f)
    return f"shmem_programs.py:{first + next(k for k, line in enumerate(lines) if text in line)})"


def _ring_calls(pes: int, steps: int | None = None, b: bool = True) -> list[dict]:
    calls = []
    for pe in range(pes):
        call = dict(A=np.arange(8, dtype=np.float64) + 10.0 * pe)
        if b:
            call.update(B=np.zeros(8), flags=np.zeros(1, dtype=np.uint64))
        if steps is not None:
            call["T"] = steps
        calls.append(call)
    return calls


def test_a_put_without_flow_control_is_a_race():
    """The put of step t + 1 into the neighbour's halo is not ordered after the neighbour's read of step t's halo."""
    run = dace_cpufree.compile(sp.ring_without_flow_control, backend="emulate", pes=2, race_check=True)
    with pytest.raises(RaceError) as info:
        run.on_pes(_ring_calls(2, steps=3))
    report = info.value.report
    assert "write after read on 'A' element 0 of PE 1" in report
    assert "of PE 1 in step 'map" in report and "of PE 0 in step 'tasklet putmem" in report
    put, read = _line_of(sp.ring_without_flow_control, "Putmem"), _line_of(sp.ring_without_flow_control, "B[1:-1] =")
    assert put in report and read in report, report
    assert "between PEs:" in report


def test_a_halo_read_before_its_wait_is_a_race():
    run = dace_cpufree.compile(sp.halo_read_before_wait, backend="emulate", pes=2, race_check=True)
    with pytest.raises(RaceError) as info:
        run.on_pes(_ring_calls(2))
    report = info.value.report
    assert "read after write on 'A' element 0 of PE 1" in report or "write after read on 'A' element 0" in report
    assert _line_of(sp.halo_read_before_wait, "Putmem") in report
    assert _line_of(sp.halo_read_before_wait, "B[1:-1] =") in report


def test_two_pes_putting_into_one_element_is_a_race():
    run = dace_cpufree.compile(sp.same_element_from_every_pe, backend="emulate", pes=2, race_check=True)
    with pytest.raises(RaceError, match=r"write after write on 'A' element 0 of PE 0: .* of PE 0 .* of PE 1"):
        run.on_pes(_ring_calls(2, b=False))


@pytest.mark.parametrize("race", [True, False], ids=["race_check", "plain"])
def test_a_wait_for_a_signal_never_sent_is_a_hang(race):
    """Every PE waits for the value 2 where the puts signal 1: reported at once, not after a timeout, naming the PE
    and the flag, and with the race checker the program line of the wait."""
    run = dace_cpufree.compile(sp.wait_never_signalled, backend="emulate", pes=2, race_check=race)
    with pytest.raises(KernelHang) as info:
        run.on_pes(_ring_calls(2))
    error = info.value
    assert error.pe == 0 and error.site == "SignalWait on 'flags' element 0 of PE 0"
    assert "is 1" in str(error) and "Fix:" in str(error)
    if race:
        assert error.source.endswith(_line_of(sp.wait_never_signalled, "SignalWait")[:-1]), error.source
    # the PEs can run again afterwards
    with pytest.raises(KernelHang):
        run.on_pes(_ring_calls(2))


def test_the_api_names_the_fix():
    with pytest.raises(CpufreeError, match=r"pes=P.*run\.on_pes"):
        dace_cpufree.compile(sp.strided, backend="emulate")
    run = dace_cpufree.compile(sp.signalled_once, backend="emulate", pes=2)
    with pytest.raises(CpufreeError, match=r"run\.on_pes\(\[kwargs_pe0, \.\.\., kwargs_pe1\]\)"):
        run(np.zeros((N, M)), np.zeros(M), np.zeros(2, dtype=np.uint64))
    with pytest.raises(ArgumentError, match="list of 2 dicts"):
        run.on_pes([{}])
    with pytest.raises(CpufreeError, match="host emulation"):
        dace_cpufree.compile(sp.strided, backend="cuda", pes=2, load=False)
