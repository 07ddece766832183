"""Host callbacks through the device <-> host channel (``print`` and Python functions DaCe turns into callbacks), and
the hang reports of ``debug_waits``: on the emulation (printed values in program order, a callback's result used by
the kernel, errors, the round trip measured), nvcc compiles the CUDA text, and on a GPU the same."""

import math
import statistics
import sys
import time

import dace
import numpy as np
import programs
import pytest
from dace_cpufree.codegen import channel as chan
from dace_cpufree.codegen.program_source import program_source

import dace_cpufree
from dace_cpufree.api import _transformed
from dace_cpufree.channel_marks import HostCall
from dace_cpufree.options import CompileOptions
from dace_cpufree.runtime import build
from dace_cpufree.runtime.program import PersistentProgram

N = dace.symbol("N")


def gamma(x):
    return math.gamma(x)  # math.gamma has no DaCe implementation: DaCe makes the call a callback


def scaled(x, factor):
    return int(x) * factor


def noop(x):
    return x + 0.0 * math.gamma(2.0)  # math.gamma: DaCe cannot parse it, so noop stays a callback


def failing(x):
    return math.gamma(x - x - 1.0)  # ValueError: math domain error


def sleepy(x):
    time.sleep(1.0)
    return math.gamma(x)


@dace.program
def printing_loop(A: dace.float64[N], T: dace.int64):
    for _ in range(T):
        A[1:] = A[:-1] + 1.0
        print("first", A[0], "last", A[N - 1])


@dace.program
def gamma_loop(A: dace.float64[N], T: dace.int64):
    for _ in range(T):
        A[1:] = A[:-1] + 1.0
        y: dace.float64 = gamma(A[1])
        A[0] = y  # every thread reads A[0] in the next step: a grid sync after the leader's call


@dace.program
def integer_result(A: dace.float64[N], out: dace.int64[1]):
    s = np.sum(A)
    k: dace.int64 = scaled(s, 3)
    out[0] = k
    print("sum", s, "k", k)


@dace.program
def ticks(A: dace.float64[N], T: dace.int64):
    for _ in range(T):
        y: dace.float64 = noop(A[0])
        A[0] = y + 1.0


@dace.program
def raising(A: dace.float64[N], T: dace.int64):
    for _ in range(T):
        A[1:] = A[:-1] + 1.0
        y: dace.float64 = failing(A[0])
        A[0] = y


@dace.program
def slow(A: dace.float64[N]):
    y: dace.float64 = sleepy(A[0])
    A[0] = y


@dace.program
def passes_an_array(A: dace.float64[N]):
    print(A)


@dace.program
def calls_in_a_map(A: dace.float64[N]):
    for i in dace.map[0:N]:
        y: dace.float64 = gamma(A[i])
        A[i] = y


@dace.program
def untyped_result(A: dace.float64[N]):
    y = gamma(A[1])
    A[0] = y


def gamma_reference(A, T):
    A = A.copy()
    for _ in range(T):
        A[1:] = A[:-1] + 1.0
        A[0] = math.gamma(A[1])
    return A


def test_print_reaches_stdout_in_program_order(capsys):
    run = dace_cpufree.compile(printing_loop, backend="emulate")
    A = np.zeros(6)
    run(A, 4)
    lines = capsys.readouterr().out.splitlines()
    want = []
    B = np.zeros(6)
    for _ in range(4):
        B[1:] = B[:-1] + 1.0
        want.append(f"first {B[0]} last {B[-1]}")
    assert lines == want


def test_a_python_callback_result_is_used_by_the_kernel():
    A = np.linspace(0.5, 1.5, 40)
    run = dace_cpufree.compile(gamma_loop, backend="emulate")
    want = gamma_reference(A, 3)
    run(A, 3)
    np.testing.assert_allclose(A, want)
    assert len(run.last_call_times) == 3


def test_integer_results_and_scalars_print(capsys):
    A = np.arange(5.0)
    out = np.zeros(1, np.int64)
    dace_cpufree.compile(integer_result, backend="emulate")(A, out)
    assert out[0] == 30
    assert capsys.readouterr().out.splitlines() == ["sum 10.0 k 30"]


@pytest.mark.parametrize("order", ["forward", "shuffle"])
def test_callbacks_under_the_race_checker(order):
    """Several blocks of several threads: the leader calls, the others read the result after a grid sync."""
    A = np.linspace(0.5, 1.5, 40)
    want = gamma_reference(A, 3)
    dace_cpufree.compile(gamma_loop, backend="emulate", race_check=order)(A, 3)
    np.testing.assert_allclose(A, want)


def test_the_callback_is_an_item_that_writes_its_result():
    source = dace_cpufree.kernel_source(gamma_loop)
    (call,) = source.channel.calls
    assert (call.name, call.args, call.results) == ("gamma", ("f",), ("f",))
    line = gamma_loop.f.__code__.co_firstlineno + 4  # the line of gamma(A[1]) (the decorator is the first)
    assert call.source.endswith(f"test_callbacks.py:{line}")
    code = source.code
    call_at = code.index("cpufree::channel::call(0,")
    assert "if (__tid == 0)" in code[code.rindex("// tasklet", 0, call_at) : call_at]  # the leader calls
    # A[0] = y after it is made by the leader too; the map of the next iteration (all threads) waits for a grid sync
    steps = {label: (strategy, sync) for label, strategy, sync in source.steps}
    assert steps["tasklet host_call_gamma_0"][0] == "leader thread"
    assert all(sync for label, (_, sync) in steps.items() if label.startswith("map"))


def test_round_trip_in_the_emulation():
    """Measures the round trip of a callback in the emulation (device thread -> poller thread -> device)."""
    run = dace_cpufree.compile(ticks, backend="emulate")
    A = np.zeros(4)
    run(A, 10)  # warm up
    times = []
    for n in (0, 2000):
        start = time.perf_counter()
        run(A, n)
        times.append(time.perf_counter() - start)
    per = (times[1] - times[0]) / 2000
    host = statistics.median(run.last_call_times)
    print(
        f"\nemulation round trip of a host callback: {per * 1e6:.1f} us per call "
        f"(Python function itself: {host * 1e6:.2f} us median)",
        file=sys.stderr,
    )
    assert A[0] == 10 + 2000 + 0  # every call answered
    assert per < 5e-3


def test_a_callback_that_raises_names_the_call_then_a_correct_run():
    run = dace_cpufree.compile(raising, backend="emulate")
    with pytest.raises(
        dace_cpufree.errors.HostCallbackError,
        match=r"failing\(\.\.\.\) at .*test_callbacks.py:\d+ "
        r"raised ValueError: math domain error",
    ) as info:
        run(np.zeros(8), 5)
    assert isinstance(info.value.__cause__, ValueError)
    run = dace_cpufree.compile(gamma_loop, backend="emulate")
    A = np.linspace(0.5, 1.5, 40)
    want = gamma_reference(A, 2)
    run(A, 2)
    np.testing.assert_allclose(A, want)


def test_a_callback_that_does_not_answer_in_time_stops_the_kernel():
    run = dace_cpufree.compile(slow, backend="emulate", callback_timeout=0.2)
    with pytest.raises(dace_cpufree.errors.HostCallbackError, match=r"sleepy\(\.\.\.\) at .*did not answer within"):
        run(np.ones(4))


def test_arrays_and_calls_in_maps_are_refused_with_the_line_and_the_fix():
    with pytest.raises(
        dace_cpufree.NotPersistableError,
        match=r"print\(\.\.\.\) at .*test_callbacks.py:\d+ passes "
        r"the array 'A'.*Fix: pass the elements",
    ):
        dace_cpufree.kernel_source(passes_an_array)
    with pytest.raises(dace_cpufree.NotPersistableError, match=r"inside a parallel loop.*Fix: call it outside"):
        dace_cpufree.kernel_source(calls_in_a_map)
    with pytest.raises(
        dace_cpufree.NotPersistableError,
        match=r"gamma\(\.\.\.\) at .*unknown.*Fix: annotate the "
        r"result: y: dace.float64 = gamma",
    ):
        dace_cpufree.kernel_source(untyped_result)


def test_programs_without_callbacks_get_no_call_slot():
    source = dace_cpufree.kernel_source(programs.time_loop, progress=True)
    assert not source.channel.calls and "CPUFREE_CHANNEL_CALL" not in source.code
    assert "cg::grid_group __grid = cg::this_grid();" in source.code
    assert source.channel.words == source.channel.ring_end


def test_the_call_slot_holds_two_flagged_words_per_value_and_the_hosts_unpacked_copy():
    calls = [HostCall(0, "f", ("f", "i"), ("f",)), HostCall(1, "g", ("b",), ())]
    facts = chan.facts(chan.ChannelSpec(ring=4), calls)
    at = facts.call_index
    assert at["ARG_WORDS"] == facts.ring_end + len(chan.CALL_WORDS)
    assert at["RESULT_WORDS"] == at["ARG_WORDS"] + 2 * 2  # the most arguments a call passes, two words each
    assert at["ARGS"] == at["RESULT_WORDS"] + 2 * 1
    assert at["RESULTS"] == at["ARGS"] + 2
    assert facts.words == at["RESULTS"] + 1
    assert "#define CPUFREE_CHANNEL_CALL_MAX_RESULTS 1" in chan.prelude(facts)  # sizes the leader's answer read


# ---- debug waits: hang reports ----------------------------------------------------------------------------------
def test_debug_waits_run_a_correct_program_unchanged():
    for race in (False, "shuffle"):
        run = dace_cpufree.compile(programs.time_loop, backend="emulate", debug_waits=5, race_check=race)
        a, b = np.arange(64.0), np.zeros(64)
        want_a, want_b = a.copy(), b.copy()
        programs.time_loop.f(want_a, want_b, 4)
        run(a, b, T=4)
        np.testing.assert_allclose(a, want_a)
        np.testing.assert_allclose(b, want_b)


def _planted_hang(backend: str, race_check):
    """``time_loop`` with debug waits where only block 0 makes the first grid sync (a planted generator bug)."""
    opts = CompileOptions.resolve(backend=backend, race_check=race_check, debug_waits=1.0)
    sdfg = _transformed(programs.time_loop, opts)
    source = program_source(sdfg, opts)
    code = source.code.replace("__grid.sync();", "if (blockIdx.x == 0) __grid.sync();", 1)
    assert code != source.code
    library = build(code, f"planted_hang_{backend}", backend, race_check=race_check)
    return PersistentProgram(sdfg, source, library, backend)


def test_a_grid_sync_that_some_blocks_skip_reports_the_block_and_the_step():
    run = _planted_hang("emulate", "forward")
    with pytest.raises(dace_cpufree.errors.KernelHang) as info:
        run(np.ones(64), np.zeros(64), T=3)
    err = info.value
    assert err.site.startswith("grid sync before ") and err.source.endswith("programs.py:26")
    assert err.missing is not None and err.missing != err.block
    assert "hang: block" in str(err) and "Fix: every block must reach every grid sync" in str(err)
    # the next call of a correct build runs normally
    run = dace_cpufree.compile(programs.time_loop, backend="emulate", debug_waits=1, race_check="forward")
    run(np.ones(64), np.zeros(64), T=2)


def test_debug_waits_options_are_checked():
    with pytest.raises(dace_cpufree.CpufreeError, match="debug_waits=-1"):
        dace_cpufree.kernel_source(programs.time_loop, debug_waits=-1)
    with pytest.raises(dace_cpufree.CpufreeError, match="need the channel"):
        dace_cpufree.kernel_source(programs.time_loop, debug_waits=True, channel=False)


def test_debug_waits_print_the_timed_out_barrier():
    source = dace_cpufree.kernel_source(programs.time_loop, debug_waits=2)
    assert "cpufree::channel::DebugGrid __grid;" in source.code
    assert "#define CPUFREE_CHANNEL_HANG_TIMEOUT_NS 2000000000LL" in source.code
    assert source.channel.site_steps and source.channel.hang_at == source.channel.ring_end


@pytest.mark.compile
@pytest.mark.parametrize("debug", [None, 3.0])
def test_nvcc_compiles_callbacks_and_debug_waits(debug):
    source = dace_cpufree.kernel_source(gamma_loop, debug_waits=debug or False)
    assert source.channel.calls
    library = build(source.code, f"nvcc_callbacks_{'debug' if debug else 'plain'}", "cuda")
    assert library.exists()


# ---- on a GPU ---------------------------------------------------------------------------------------------------
@pytest.mark.gpu
def test_gpu_callbacks_and_print(capsys):
    A = np.linspace(0.5, 1.5, 1 << 16)
    want = gamma_reference(A, 5)
    dace_cpufree.compile(gamma_loop)(A, 5)
    np.testing.assert_allclose(A, want)
    run = dace_cpufree.compile(printing_loop)
    capsys.readouterr()  # what DaCe's parser printed (it reports the calls it turns into callbacks)
    run(np.zeros(6), 3)
    printed = [line for line in capsys.readouterr().out.splitlines() if line.startswith("first")]
    assert printed == ["first 0.0 last 1.0", "first 0.0 last 2.0", "first 0.0 last 3.0"]


@pytest.mark.gpu
def test_gpu_a_skipped_grid_sync_is_reported_then_a_correct_run():
    run = _planted_hang("cuda", None)
    with pytest.raises(dace_cpufree.errors.KernelHang, match="hang: "):
        run(np.ones(1 << 16), np.zeros(1 << 16), T=3)
    run = dace_cpufree.compile(programs.time_loop, debug_waits=1)
    a, b = np.arange(64.0), np.zeros(64)
    want_a, want_b = a.copy(), b.copy()
    programs.time_loop.f(want_a, want_b, 4)
    run(a, b, T=4)
    np.testing.assert_allclose(a, want_a)
