"""The launch's order against the caller's streams: the kernel is queued on CuPy's current stream (behind the work
that writes its inputs there, a non-blocking stream included), host arrays are copied on it, and a device array whose
``__cuda_array_interface__`` names another producer stream is waited for.

CPU: the generated launcher takes the stream and queues the events and the launch on it; the interface's stream is
read as the handle it names. GPU: results while the inputs are still to be written on a non-blocking stream when the
call is made (without the ordering, the kernel reads them before they are written).
"""

import sys
import threading
import types

import dace
import numpy as np
import pytest
from helpers import cupy_module

import dace_cpufree
from dace_cpufree.errors import CpufreeError
from dace_cpufree.runtime.arguments import producer_stream
from dace_cpufree.runtime.program import returns_early

N = dace.symbol("N")


@dace.program
def doubled(x: dace.float64[N]):
    return 2.0 * x


@dace.program
def add_into(x: dace.float64[N], y: dace.float64[N]):
    y[:] = y + x


# A producer that writes its array late: one block spins for this many clock cycles (about 10 ms), then
# fills the array. It leaves the other multiprocessors free, so a kernel not ordered behind it (a small grid: a
# small array) starts at once and reads the array before it is written.
_SIZE = 4096
_SPIN_CYCLES = 20_000_000
_VALUE = 7.0
_LATE_FILL = r"""
extern "C" __global__ void late_fill(double *x, long long n, double value, long long cycles) {
    const long long start = clock64();
    while (clock64() - start < cycles) {
    }
    for (long long i = threadIdx.x; i < n; i += blockDim.x) x[i] = value;
}
"""


def test_the_launcher_queues_the_kernel_and_its_events_on_the_callers_stream():
    code = dace_cpufree.generate_code(doubled)
    run = code[code.index('extern "C" int cpufree_run(') :]
    assert run.startswith('extern "C" int cpufree_run(void *cpufree_stream_arg, int cpufree_wait, ')
    start = run.index("cudaEventRecord(cpufree_start, cpufree_stream)")
    launch = run.index("cpufree_args, cpufree_dynamic_shared, cpufree_stream)")
    stop = run.index("cudaEventRecord(cpufree_stop, cpufree_stream)")
    assert start < launch < stop
    # waits for the kernel only where asked; a launch while the last kernel may still run is queued behind it on any
    # stream (one workspace; a stream handle does not tell streams apart), before the launch's hooks touch the
    # workspace, and the workspace is not freed under it
    assert stop < run.index("if (cpufree_wait) CPUFREE_CHECK(cudaEventSynchronize(cpufree_stop));")
    behind = run.index(
        "if (cpufree_state.pending) CPUFREE_CHECK(cudaStreamWaitEvent(cpufree_stream, cpufree_stop, 0));"
    )
    assert behind < run.index("CPUFREE_BEFORE_LAUNCH(") < start
    assert "pending_stream" not in code
    grow = run.index("if (cpufree_need > cpufree_state.workspace_size)")
    assert grow < run.index("if (cpufree_state.pending) CPUFREE_CHECK(cudaEventSynchronize(cpufree_state.stop));")
    assert run.index("cpufree_state.pending = !cpufree_wait;") > stop
    # the kernel's time is read off its events once it is done; the grid and block alone do not wait for it
    facts = code[code.index('extern "C" void cpufree_launch_config(') :]
    facts = facts[: facts.index("\n}")]
    assert facts.index("if (!ms) return;") < facts.index("cudaEventSynchronize(cpufree_state.stop)")
    assert facts.index("cudaEventSynchronize(cpufree_state.stop)") < facts.index("cudaEventElapsedTime(")
    copy = code[code.index('extern "C" int cpufree_memcpy(') :]
    copy = copy[: copy.index("\n}")]
    assert "static_cast<cudaStream_t>(stream)));" in copy[copy.index("cudaMemcpyAsync(") :]
    assert copy.index("cudaMemcpyAsync(") < copy.index("cudaStreamSynchronize(static_cast<cudaStream_t>(stream))")


def test_the_array_interfaces_stream_is_the_handle_it_names():
    def array(**iface):
        return types.SimpleNamespace(__cuda_array_interface__={"data": (1024, False), **iface})

    assert producer_stream(array(stream=1)) == 1  # the legacy default stream
    assert producer_stream(array(stream=0x7F00)) == 0x7F00
    assert producer_stream(array(stream=None)) is None  # the producer says no synchronisation is needed
    assert producer_stream(array()) is None  # version 2 of the interface names no stream
    assert producer_stream(np.zeros(3)) is None


class _RecordingLibrary:
    """Stands for a built program's library where only its stream waits are asked for."""

    def __init__(self):
        self.waited = []

    def cpufree_stream_synchronize(self, stream):
        self.waited.append(stream.value or 0)  # ctypes reads a null pointer back as None
        return 0


def _device_array(stream):
    return types.SimpleNamespace(__cuda_array_interface__={"data": (4096, False), "stream": stream})


@pytest.mark.parametrize(
    "launch, producers, waited",
    [
        (0, [1, None, 0x7F00, 0x7F00], [0x7F00]),  # 1 names the legacy default stream the launch is on; once each
        (0x5000, [1, 0x5000, 2], [0, 2]),  # the legacy (waited for as 0) and per-thread default streams
        (0x5000, [0x5000, None], []),
    ],
)
def test_a_call_waits_once_for_each_producer_stream_it_is_not_ordered_after(launch, producers, waited):
    prog = dace_cpufree.compile(doubled, backend="emulate")
    library = _RecordingLibrary()
    prog._lib = library
    values = {f"a{i}": _device_array(stream) for i, stream in enumerate(producers)}
    values["n"] = 3
    prog._wait_for_producers(values, launch)
    assert library.waited == waited


def test_a_call_of_the_general_kind_waits_for_its_arrays_producers():
    prog = dace_cpufree.compile(add_into, backend="emulate")
    seen = []
    prog._wait_for_producers = lambda values, stream: seen.append((sorted(values), stream))
    x, y = np.arange(4.0), np.ones(4)
    prog(x, y=y)  # positional and keyword arguments together: the general path
    assert seen == [(["x", "y"], 0)]
    np.testing.assert_array_equal(y, 1.0 + x)


class _RecordingRun:
    """Stands for the launcher: records whether each call asked it to wait for the kernel, then runs it."""

    def __init__(self, run):
        self.run, self.waits = run, []

    def __call__(self, stream, wait, *call):
        self.waits.append(wait)
        return self.run(stream, wait, *call)


def test_a_call_of_the_common_kind_returns_once_queued_where_the_program_returns_early():
    prog = dace_cpufree.compile(doubled, backend="emulate")
    assert not prog._returns_early  # the emulation runs the kernel inside the call
    launcher = prog._run = _RecordingRun(prog._run)
    x = np.arange(5.0)
    prog(x=x)
    prog._returns_early = True  # as a CUDA program without the channel, step timing or NVSHMEM
    np.testing.assert_array_equal(prog(x=x), 2.0 * x)  # the common kind
    prog(x, N=5)  # the general path (positional and keyword arguments): waits, whatever the program
    assert launcher.waits == [1, 0, 1]


def test_a_call_that_waits_its_turn_on_the_lock_still_returns_once_queued():
    prog = dace_cpufree.compile(doubled, backend="emulate")
    launcher = prog._run = _RecordingRun(prog._run)
    prog._returns_early = True
    x = np.arange(5.0)
    prog(x=x)  # the common path's launch
    prog._calling.acquire()  # a call in flight on another thread
    threading.Timer(0.2, prog._calling.release).start()
    np.testing.assert_array_equal(prog(x=x), 2.0 * x)  # waits for the lock (the call through _complete)
    assert launcher.waits == [0, 0] and not prog._calling.locked()


def test_a_call_during_a_cuda_graph_capture_is_refused(monkeypatch):
    prog = dace_cpufree.compile(doubled, backend="emulate")
    prog.backend = "cuda"  # _stream() as on the GPU, against a stand-in for CuPy
    capturing = types.SimpleNamespace(ptr=0x5000, is_capturing=lambda: True)
    refusing = types.SimpleNamespace(ptr=0x6000, is_capturing=lambda: (_ for _ in ()).throw(RuntimeError("HIP")))
    for stream, expected in ((refusing, 0x6000), (capturing, None)):
        cupy = types.SimpleNamespace(cuda=types.SimpleNamespace(get_current_stream=lambda stream=stream: stream))
        monkeypatch.setitem(sys.modules, "cupy", cupy)
        if expected is None:
            with pytest.raises(CpufreeError, match="captured into a CUDA graph.*Fix: call the program outside"):
                prog._stream()
        else:
            assert prog._stream() == expected  # a status the runtime cannot give: the launch reports what follows


def test_programs_whose_host_has_a_part_in_the_run_wait_for_the_kernel():
    @dace.program
    def told(x: dace.float64[N]):
        print(x[0])
        return 2.0 * x

    plain = dace_cpufree.compile(doubled, backend="emulate").source
    channel = dace_cpufree.compile(told, backend="emulate").source
    timed = dace_cpufree.compile(doubled, backend="emulate", step_times=True).source
    assert channel.channel is not None and timed.step_labels
    assert returns_early("cuda", plain, shmem=False)
    assert not returns_early("emulate", plain, shmem=False)
    assert not returns_early("cuda", plain, shmem=True)  # copies back from the symmetric buffers
    assert not returns_early("cuda", channel, shmem=False)  # the poller runs beside the kernel
    assert not returns_early("cuda", timed, shmem=False)  # step times are read after it


def test_the_host_emulation_runs_on_the_legacy_default_stream():
    prog = dace_cpufree.compile(doubled, backend="emulate")
    x = np.arange(5.0)
    assert prog._stream() == 0
    np.testing.assert_array_equal(prog(x=x), 2.0 * x)


def _fill_late(cp, x, stream):
    """Queues on ``stream`` a kernel that writes ``_VALUE`` into ``x`` after spinning; returns at once."""
    kernel = cp.RawKernel(_LATE_FILL, "late_fill")
    with stream:
        kernel((1,), (256,), (x, np.int64(x.size), np.float64(_VALUE), np.int64(_SPIN_CYCLES)))


def _late_inputs(cp, prog, params):
    """``x`` still to be written by ``_fill_late`` on a new non-blocking stream, ``y`` ones: ``(x, y, stream)``.
    ``prog`` is called once on other arrays first (its ``params``), so that the launcher's first-call work (device
    queries, module loading) is not what holds the call back while the producer runs."""
    prog(**{name: cp.zeros(_SIZE) for name in params})
    x, y = cp.zeros(_SIZE), cp.ones(_SIZE)
    cp.cuda.Device().synchronize()
    stream = cp.cuda.Stream(non_blocking=True)
    _fill_late(cp, x, stream)
    return x, y, stream


@pytest.mark.gpu
def test_inputs_still_written_on_a_non_blocking_current_stream():
    cp = cupy_module()
    prog = dace_cpufree.compile(doubled, backend="cuda")
    x, _, stream = _late_inputs(cp, prog, ["x"])
    with stream:
        out = prog(x=x)
    stream.synchronize()
    assert float(out.min()) == float(out.max()) == 2.0 * _VALUE


@pytest.mark.gpu
def test_an_array_written_in_place_on_a_non_blocking_current_stream():
    cp = cupy_module()
    prog = dace_cpufree.compile(add_into, backend="cuda")
    x, y, stream = _late_inputs(cp, prog, ["x", "y"])
    with stream:
        prog(x=x, y=y)
        y *= 3.0  # queued behind the call on the same stream
    stream.synchronize()
    assert float(y.min()) == float(y.max()) == 3.0 * (1.0 + _VALUE)


@pytest.mark.gpu
def test_numpy_arguments_under_a_non_blocking_current_stream():
    cp = cupy_module()
    prog = dace_cpufree.compile(add_into, backend="cuda")
    x, y = np.full(_SIZE, 2.0), np.ones(_SIZE)
    with cp.cuda.Stream(non_blocking=True):
        prog(x, y)  # copied in and back on that stream
    np.testing.assert_array_equal(y, 3.0)


class _Foreign:
    """A device array of another library: its interface names the stream its producer may still write it on."""

    def __init__(self, array, stream):
        self._array = array
        self.shape, self.dtype, self.nbytes, self.flags = array.shape, array.dtype, array.nbytes, array.flags
        self.__cuda_array_interface__ = dict(array.__cuda_array_interface__, stream=stream.ptr)


@pytest.mark.gpu
def test_a_foreign_array_is_waited_for_on_its_producers_stream():
    cp = cupy_module()
    prog = dace_cpufree.compile(add_into, backend="cuda")
    x, y, producer = _late_inputs(cp, prog, ["x", "y"])
    prog(x=_Foreign(x, producer), y=y)  # on the legacy default stream, not ordered behind the producer's
    cp.cuda.Device().synchronize()
    assert float(y.min()) == float(y.max()) == 1.0 + _VALUE


@dace.program
def smoothed(x: dace.float64[N], steps: dace.int64):
    t = np.copy(x)  # the returned array
    for _ in range(steps):
        t[1:-1] = 0.5 * (t[:-2] + t[2:])  # the sum is a transient in the program's workspace
    return t


def _smoothed_reference(x: np.ndarray, steps: int) -> np.ndarray:
    t = x.copy()
    for _ in range(steps):
        t[1:-1] = 0.5 * (t[:-2] + t[2:])
    return t


@pytest.mark.gpu
def test_a_call_returns_once_queued_and_calls_on_two_streams_take_turns():
    cp = cupy_module()
    prog = dace_cpufree.compile(smoothed, backend="cuda")
    assert any(a.kind == "workspace" for a in prog.source.args)  # what two kernels side by side would share
    steps = 20_000  # tens of milliseconds on a small grid (a small array), which leaves room for a second kernel
    rng = np.random.default_rng(3)
    x1, x2 = rng.random(_SIZE), rng.random(_SIZE)
    d1, d2 = cp.asarray(x1), cp.asarray(x2)
    prog(x=d1, steps=1)  # the first call's set-up
    cp.cuda.Device().synchronize()
    first, second = cp.cuda.Stream(non_blocking=True), cp.cuda.Stream(non_blocking=True)
    with first:
        out1 = prog(x=d1, steps=steps)
        assert not first.done  # returned while its kernel runs
    with second:
        out2 = prog(x=d2, steps=steps)  # the same workspace: queued behind the first kernel
    ms = prog.last_kernel_ms  # waits for the second kernel
    assert second.done and ms > 0.0
    first.synchronize()
    np.testing.assert_allclose(cp.asnumpy(out1), _smoothed_reference(x1, steps), rtol=1e-12, atol=0.0)
    np.testing.assert_allclose(cp.asnumpy(out2), _smoothed_reference(x2, steps), rtol=1e-12, atol=0.0)
