"""The device <-> host channel on the emulation: progress, notifications, cancel (cancel(), timeout, Ctrl-C), and a
correct run after a cancelled one; nvcc compiles the CUDA text; on a GPU, a cancelled kernel leaves every block."""

import _thread
import signal
import threading
import time
import warnings

import dace
import numpy as np
import pytest
from dace_cpufree.codegen import channel as chan
from dace_cpufree.codegen import ir

import dace_cpufree
from dace_cpufree.runtime import build

N = dace.symbol("N")


@dace.program
def jacobi_reporting(A: dace.float64[N], B: dace.float64[N], T: dace.int64):
    for t in range(T):
        B[1:-1] = 0.5 * (A[:-2] + A[2:])
        A[1:-1] = 0.5 * (B[:-2] + B[2:])
        dace_cpufree.progress(t + 1, T)
        dace_cpufree.notify("iteration", t)


@dace.program
def jacobi_plain(A: dace.float64[N], B: dace.float64[N], T: dace.int64):
    for _ in range(T):
        B[1:-1] = 0.5 * (A[:-2] + A[2:])
        A[1:-1] = 0.5 * (B[:-2] + B[2:])


@dace.program
def scalar_recurrence(x: dace.float64[1], T: dace.int64):
    for _ in range(T):
        x[0] = 0.5 * x[0] + 1.0


def reference(A, B, T):
    A, B = A.copy(), B.copy()
    for _ in range(T):
        B[1:-1] = 0.5 * (A[:-2] + A[2:])
        A[1:-1] = 0.5 * (B[:-2] + B[2:])
    return A, B


def inputs(n=2000):
    rng = np.random.default_rng(0)
    return rng.random(n), rng.random(n)


def check_correct(run, T=25):
    A, B = inputs(200)
    want = reference(A, B, T)
    run(A, B, T)
    np.testing.assert_allclose(A, want[0])
    np.testing.assert_allclose(B, want[1])


@pytest.fixture(scope="module")
def reporting():
    return dace_cpufree.compile(jacobi_reporting, backend="emulate", notify_ring=64)


@pytest.fixture(scope="module")
def plain():
    return dace_cpufree.compile(jacobi_plain, backend="emulate", channel=True)


def test_progress_reaches_the_callback_in_order(reporting):
    seen = []
    reporting.on_progress(lambda done, total: seen.append((done, total)))
    A, B = inputs(20000)
    T = 400
    want = reference(A, B, T)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # notifications dropped: not this test's subject
        reporting(A, B, T)
    reporting._progress_callbacks.clear()
    np.testing.assert_allclose(A, want[0])
    assert seen[-1] == (T, T)
    assert all(total == T for _, total in seen)
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)


def test_automatic_progress_of_the_time_loop(capsys):
    run = dace_cpufree.compile(jacobi_plain, backend="emulate", progress="text")
    seen = []
    run.on_progress(lambda done, total: seen.append((done, total)))
    check_correct(run, T=30)
    assert seen and seen[-1] == (30, 30)
    assert "jacobi_plain" in capsys.readouterr().err  # the text bar


def _progress_heads(program):
    """The first item of each loop that reports progress, in the printed kernel IR."""
    root = dace_cpufree.kernel_source(program, progress=True).kernel_ir
    loops = [n for seq in ir.seqs(root) for n in seq.children if isinstance(n, ir.Loop) and n.progress]
    return [loop.body.children[0] for loop in loops]


@dace.program
def halving(A: dace.float64[N], B: dace.float64[N]):
    while A[0] > 1.0:
        B[1:-1] = 0.5 * (A[:-2] + A[2:])
        A[:] = 0.5 * A


def test_a_loop_with_grid_syncs_has_its_progress_read_at_the_looks():
    """A loop with a variable of known range: the looks read its progress from the variable, and the loop counts
    nothing (its head keeps no code: its cancel point is the grid sync that opens the body). Without one (a while
    loop) its head counts the iterations begun, and the looks read that count."""
    root = dace_cpufree.kernel_source(jacobi_plain, progress=True).kernel_ir
    (loop,) = [n for seq in ir.seqs(root) for n in seq.children if isinstance(n, ir.Loop) and n.progress]
    assert loop.progress_var == "_" and loop.body.children[0].code == []
    assert {i.progress_at for i in ir.items(loop) if i.sync_before} == {"_"}
    heads = _progress_heads(halving)
    assert len(heads) == 1 and heads[0].code[-1] == chan.TICK_COUNTED
    run = dace_cpufree.compile(halving, backend="emulate", progress=True)
    seen = []
    run.on_progress(lambda done, total: seen.append((done, total)))
    A, B = np.full(16, 1024.0), np.zeros(16)
    run(A, B)
    assert A[0] == 1.0 and seen[-1] == (10, 0)  # ten iterations, no total known


def test_a_loop_without_grid_syncs_counts_its_progress():
    heads = _progress_heads(scalar_recurrence)  # one thread's loop: no grid sync, so no looks
    assert len(heads) == 1 and heads[0].code[-1] == chan.TICK_SHOWN
    run = dace_cpufree.compile(scalar_recurrence, backend="emulate", progress="text")
    seen = []
    run.on_progress(lambda done, total: seen.append((done, total)))
    x = np.zeros(1)
    run(x, 20000)
    assert seen[-1] == (20000, 20000)
    np.testing.assert_allclose(x, [2.0])


def test_notifications_in_order_and_a_full_ring_drops():
    run = dace_cpufree.compile(jacobi_reporting, backend="emulate", notify_ring=4)
    got = []

    def slow(tag, value):
        got.append((tag, value))
        time.sleep(0.002)

    run.on_notify(slow)
    A, B = inputs(2000)
    with pytest.warns(RuntimeWarning, match="dropped"):
        run(A, B, 500)
    values = [v for _, v in got]
    assert all(tag == "iteration" for tag, _ in got)
    assert values == sorted(values) and len(set(values)) == len(values)
    assert values[0] == 0.0 and 4 <= len(values) < 500


def test_notifications_all_delivered_when_the_ring_keeps_up(reporting):
    got = []
    reporting.on_notify(lambda tag, value: got.append(value))
    A, B = inputs(200)
    reporting(A, B, 50)
    reporting._notify_callbacks.clear()
    assert got == [float(t) for t in range(50)]


def test_cancel_from_another_thread_then_a_correct_run(plain):
    A, B = inputs()
    timer = threading.Timer(0.3, plain.cancel)
    timer.start()
    start = time.monotonic()
    with pytest.raises(dace_cpufree.KernelCancelled) as err:
        plain(A, B, 10**9)
    timer.join()
    assert time.monotonic() - start < 10
    assert err.value.reason == "cancel()" and err.value.syncs > 0
    assert "grid sync" in err.value.site or "loop" in err.value.site
    check_correct(plain)


def test_timeout_then_a_correct_run():
    run = dace_cpufree.compile(jacobi_plain, backend="emulate", timeout=0.3, progress="text")
    A, B = inputs()
    with pytest.raises(dace_cpufree.KernelCancelled, match="timeout") as err:
        run(A, B, 10**9)
    done, total = err.value.progress
    assert total == 10**9 and 0 < done < total  # the step reached
    run.timeout = None
    check_correct(run)


def test_a_cancel_leaves_at_the_first_cancel_point_after_a_look(plain):
    """Every thread reads a look's word at its first cancel point after the look's grid sync and stops there, and the
    stop reports the grid syncs it passed. A step of this loop has two grid syncs, of which the first, opening the
    body, is the one cancel point (loop_points): a look is one of those, so the next is a step later, after an even
    count."""
    sites = plain.source.channel.sites
    assert [s.split(" ")[0] for s in sites] == ["head", "grid"]  # the head's point is left out: the sync opens the body
    for delay in (0.1, 0.2, 0.3):
        A, B = inputs()
        timer = threading.Timer(delay, plain.cancel)
        timer.start()
        with pytest.raises(dace_cpufree.KernelCancelled) as err:
            plain(A, B, 10**9)
        timer.join()
        assert err.value.syncs > 0 and err.value.syncs % 2 == 0, err.value.syncs
        assert err.value.site == sites[1], err.value.site
    check_correct(plain)


@pytest.mark.parametrize("order", ["forward", "reverse"])
def test_every_thread_leaves_at_the_same_cancel_point(order):
    """Under the race checker (several threads, one at a time) a thread that left at another cancel point than the
    rest would leave them at a grid sync that never completes: reported, not a KernelCancelled."""
    run = dace_cpufree.compile(jacobi_plain, backend="emulate", channel=True, race_check=order)
    A, B = inputs(64)
    timer = threading.Timer(0.3, run.cancel)
    timer.start()
    with pytest.raises(dace_cpufree.KernelCancelled) as err:
        run(A, B, 10**9)
    timer.join()
    assert err.value.reason == "cancel()" and err.value.syncs > 0
    check_correct(run)


@pytest.mark.parametrize("how", ["raise_signal", "interrupt_main"])
def test_ctrl_c_stops_the_kernel_then_a_correct_run(plain, how):
    send = (lambda: signal.raise_signal(signal.SIGINT)) if how == "raise_signal" else _thread.interrupt_main
    handler = signal.getsignal(signal.SIGINT)
    A, B = inputs()
    timer = threading.Timer(0.3, send)
    timer.start()
    start = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        plain(A, B, 10**9)
    timer.join()
    assert time.monotonic() - start < 10
    assert signal.getsignal(signal.SIGINT) is handler  # restored after the call
    check_correct(plain)


def test_without_the_channel_nothing_is_printed():
    source = dace_cpufree.kernel_source(jacobi_plain)
    assert getattr(source, "channel", None) is None and "CPUFREE_CHANNEL" not in source.code
    run = dace_cpufree.compile(jacobi_plain, backend="emulate")
    with pytest.raises(dace_cpufree.CpufreeError, match="without the device <-> host channel"):
        run.cancel()


def test_calls_from_python_raise():
    with pytest.raises(dace_cpufree.CpufreeError, match="inside a @dace.program"):
        dace_cpufree.progress(1, 2)


@pytest.mark.compile
@pytest.mark.parametrize("program", [jacobi_reporting, jacobi_plain])
def test_nvcc_compiles_the_channel(program):
    source = dace_cpufree.kernel_source(program, progress=True)
    assert source.channel is not None and source.channel.sites
    library = build(source.code, f"nvcc_channel_{program.name}", "cuda")
    assert library.exists()


@pytest.mark.gpu
def test_gpu_cancel_leaves_every_block_then_a_correct_run():
    run = dace_cpufree.compile(jacobi_reporting, timeout=0.5)
    A, B = inputs(1 << 20)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        with pytest.raises(dace_cpufree.KernelCancelled):
            run(A, B, 10**9)
        run.timeout = None
        check_correct(run)


@pytest.mark.gpu
def test_gpu_progress_and_notifications_arrive_in_order():
    """On a GPU: the program's own progress and notifications, and the automatic progress of a time loop read from
    its variable at the looks, reach the host's callbacks in order; the results match NumPy."""
    run = dace_cpufree.compile(jacobi_reporting, notify_ring=4096)
    seen, notes = [], []
    run.on_progress(lambda done, total: seen.append((done, total)))
    run.on_notify(lambda tag, value: notes.append((tag, value)))
    A, B = inputs(1 << 16)
    T = 3000
    want = reference(A, B, T)
    run(A, B, T)
    np.testing.assert_allclose(A, want[0])
    assert seen[-1] == (T, T) and [d for d, _ in seen] == sorted(d for d, _ in seen)
    assert notes == [("iteration", float(t)) for t in range(T)]
    automatic = dace_cpufree.compile(jacobi_plain, progress=True)
    seen.clear()
    automatic.on_progress(lambda done, total: seen.append((done, total)))
    check_correct(automatic, T=20000)
    assert seen[-1] == (20000, 20000) and [d for d, _ in seen] == sorted(d for d, _ in seen)


def test_a_callback_that_calls_its_own_program_gets_an_error_not_a_hang():
    run = dace_cpufree.compile(jacobi_reporting, backend="emulate", notify_ring=64)
    A, B = inputs(200)
    run.on_notify(lambda tag, value: run(*inputs(200), 2))  # the program again, from its own callback
    start = time.monotonic()
    with pytest.raises(dace_cpufree.CpufreeError, match="called from one of its own callbacks"):
        run(A, B, 20)
    assert time.monotonic() - start < 60
    run._notify_callbacks.clear()
    check_correct(run)  # the lock was released


def test_calls_of_one_program_from_two_threads_take_turns():
    run = dace_cpufree.compile(jacobi_plain, backend="emulate")
    results, errors = {}, []

    def call(key):
        try:
            A, B = inputs(200)
            run(A, B, 300)
            results[key] = (A, B)
        except Exception as err:  # noqa: BLE001 - reported below
            errors.append(err)

    threads = [threading.Thread(target=call, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors and sorted(results) == [0, 1]
    want = reference(*inputs(200), 300)
    for A, B in results.values():
        np.testing.assert_allclose(A, want[0])
        np.testing.assert_allclose(B, want[1])
