"""A compiled persistent program: argument binding, device memory and the one launch."""

from __future__ import annotations

import ctypes
import sys
import threading
import warnings
from pathlib import Path

import dace
import numpy as np

from dace_cpufree.errors import ArgumentError, CpufreeError, LaunchError, RaceError
from dace_cpufree.options import RACE_ORDERS
from dace_cpufree.vocabulary import N_PES_SYMBOL, PE_SYMBOL, is_symmetric

from .argument_memory import ArgumentMemory
from .arguments import Signature
from .channel import Call, require_channel
from .channel_memory import ChannelHost
from .nvshmem import attach_session, is_shmem_library
from .progress import ProgressView
from .step_times import StepTimes


def returns_early(backend: str, source, shmem: bool) -> bool:
    """Whether a call of CuPy arrays returns once its kernel is queued, like a CuPy operation: unless the host has a
    part in the kernel's run or after it (the channel's poller, reading step times, NVSHMEM's copies back) or runs
    the kernel itself (the emulation)."""
    return backend != "emulate" and getattr(source, "channel", None) is None and not source.step_labels and not shmem


class PersistentProgram(ArgumentMemory):
    """The callable that :func:`dace_cpufree.compile` returns.

    It accepts NumPy arrays, CuPy arrays (anything with ``__cuda_array_interface__``), scalars
    and symbols, like a DaCe program; NumPy arrays are copied to the device and back. A call is ordered like a CuPy
    operation, on CuPy's current stream (:meth:`_stream`). A call of CuPy arrays returns once its kernel is queued, as
    a CuPy operation does (synchronise the stream, or read a result, to wait for it); other calls (NumPy or other
    libraries' arrays), and those of programs with the channel, step timing or NVSHMEM, return when the kernel is done.

    :ivar last_kernel_ms: time of the last kernel, measured with device events (NaN before the first call); reading it
        waits for the kernel.
    :ivar launch_config: ``(grid, block)`` of the last launch.
    :ivar timeout: with the channel, seconds after which a call cancels its kernel (``None``: never).
    :ivar progress: with the channel, how a call shows the progress its kernel reports (see ``compile``).
    :ivar last_call_times: with host callbacks, seconds each Python function of the last call took on the host.

    A program built with the device <-> host channel (``source.channel``) also takes :meth:`on_progress`,
    :meth:`on_notify` and :meth:`cancel`, and stops its kernel on Ctrl-C (see ``docs/channel.md``).
    """

    def __init__(
        self,
        sdfg: dace.SDFG,
        source,
        library: Path,
        backend: str,
        progress: bool | str = False,
        timeout=None,
        callbacks: dict | None = None,
        attach=None,
    ):
        self.sdfg = sdfg
        self.source = source
        self.library = library
        self.backend = backend
        self._lib = ctypes.CDLL(str(library))
        self._lib.cpufree_error.restype = ctypes.c_char_p
        self._lib.cpufree_malloc.restype = ctypes.c_void_p
        self._lib.cpufree_malloc.argtypes = [ctypes.c_size_t]
        self._lib.cpufree_free.argtypes = [ctypes.c_void_p]
        self._lib.cpufree_memcpy.argtypes = [
            ctypes.c_void_p,
            ctypes.c_void_p,
            ctypes.c_size_t,
            ctypes.c_int,
            ctypes.c_void_p,
        ]
        self._lib.cpufree_stream_synchronize.argtypes = [ctypes.c_void_p]
        self._host_args = [a for a in source.args if a.kind != "workspace"]
        # the stream (see _stream) and whether to wait for the kernel (see _complete), then the program's arguments
        self._lib.cpufree_run.argtypes = [ctypes.c_void_p, ctypes.c_int] + [self._ctype(a) for a in self._host_args]
        # @mapgridscope: what the sizes must satisfy for block functions of one scope to touch no common element
        self._scope_checks = [
            (parts[0], dace.symbolic.pystr_to_symbolic(parts[0].requires))
            for parts in getattr(source, "block_scopes", None) or []
            if parts[0].requires
        ]
        self._checked_sizes = set()
        # the SHMEM session this program's PE belongs to: the process's (one PE per process), or ``attach(lib,
        # source)``'s (an emulated PE, runtime/emulated_pes.py)
        self._shmem = (attach or attach_session)(self._lib, source) if is_shmem_library(self._lib) else None
        self._symmetric = {a.name for a in self._host_args if a.kind == "array" and is_symmetric(a.desc)}
        # the parameters, read off once; calls of the common kind bind by plain comparisons (Signature.quick)
        self._signature = Signature(
            sdfg,
            self._host_args,
            device=backend != "emulate",
            quick=self._shmem is None,
            check_sizes=self._check_block_scopes if self._scope_checks else None,
            copied=frozenset(self._symmetric) if self._shmem is not None else frozenset(),
        )
        self._run = self._lib.cpufree_run
        self._config = (ctypes.c_int(), ctypes.c_int(), ctypes.c_float())
        self._config_refs = tuple(ctypes.byref(c) for c in self._config)
        facts = getattr(source, "channel", None)
        self._channel = (
            ChannelHost(self._lib, facts, sdfg.name, callbacks, source.step_sources) if facts is not None else None
        )
        self._returns_early = returns_early(backend, source, self._shmem is not None)
        self.progress, self.timeout = progress, timeout
        self._progress_callbacks, self._notify_callbacks = [], []
        self._cancel = threading.Event()
        # one call at a time per program on the host (_enter): the launcher's state (workspace, events, facts) and the
        # channel's words are the program's; the launcher queues each kernel behind the last, which may still run
        self._calling = threading.Lock()
        self._caller, self._in_flight = None, None  # the thread of the call in flight, and its channel state
        self.last_call_times = []

    @property
    def launch_config(self) -> tuple[int, int]:
        """The last launch's grid and block, read off the launcher when asked (a launch does not spend its time
        reading them); does not wait for its kernel."""
        grid, block, _ = self._config
        self._lib.cpufree_launch_config(self._config_refs[0], self._config_refs[1], None)
        return grid.value, block.value

    @property
    def last_kernel_ms(self) -> float:
        """The last kernel's time between the events around it; waits for the kernel where it still runs."""
        ms = self._config[2]
        self._lib.cpufree_launch_config(*self._config_refs)
        return ms.value if ms.value >= 0 else float("nan")

    def on_progress(self, callback):
        """Calls ``callback(done, total)`` on the host's poller thread whenever the reported progress changes
        while a call runs (values in the order the kernel wrote them; intermediate ones may be skipped). Returns
        ``callback``, so it can decorate."""
        require_channel(self._channel, self.sdfg.name, "on_progress")
        self._progress_callbacks.append(callback)
        return callback

    def on_notify(self, callback):
        """Calls ``callback(tag, value)`` on the host's poller thread for each ``dace_cpufree.notify(tag, value)``
        of the kernel, in the order they were made (string tags come back as strings, values as float). The kernel
        never waits: a notification made while the ring is full is dropped, and the call warns how many were.
        An exception in a callback is raised after the call. Returns ``callback``."""
        require_channel(self._channel, self.sdfg.name, "on_notify")
        self._notify_callbacks.append(callback)
        return callback

    def cancel(self) -> None:
        """Stops the running call's kernel at its next cancel point (from any thread); the call then raises
        :class:`~dace_cpufree.errors.KernelCancelled`. Without a running call, the next call is cancelled."""
        require_channel(self._channel, self.sdfg.name, "cancel()")
        self._cancel.set()

    def _stream(self) -> int:
        """The stream a call is ordered on: CuPy's current stream (its arrays are written in that order, and the
        returned ones are allocated for it), the legacy default stream (0) where CuPy is not imported or for the
        host emulation. The kernel is queued on it behind the caller's work, so that its inputs are complete however
        the caller's stream relates to the others (a non-blocking one included)."""
        if self.backend == "emulate":
            return 0
        cupy = sys.modules.get("cupy")
        if cupy is None:
            return 0
        stream = cupy.cuda.get_current_stream()
        try:
            capturing = stream.is_capturing()
        except RuntimeError:  # a query the runtime refuses (HIP; the legacy stream beside a capture): the launch says
            capturing = False
        if capturing:
            raise CpufreeError(
                f"{self.sdfg.name} was called while CuPy's current stream is being captured into a CUDA graph: the "
                "graph would hold the launch with the program's workspace as it is now, and a replay would run beside "
                "the program's later calls (which queue each kernel behind the last) and on memory they may have "
                "freed. Fix: call the program outside the capture."
            )
        return stream.ptr

    def _launch(self, stream: int, call: list, wait: bool) -> tuple[int, Call | None]:
        """The foreign call on ``stream`` (returning once the kernel is queued where not ``wait``); with the channel,
        the poller beside it (Ctrl-C, cancel, timeout, progress) until the kernel is done."""
        if self._channel is None:
            return self._run(stream, 1 if wait else 0, *call), None
        view = ProgressView(self.progress, self.sdfg.name) if self.progress else None
        state = Call(self._channel, view, self._progress_callbacks, self._notify_callbacks, self.timeout, self._cancel)
        self._in_flight = state
        return state.run(lambda: self._run(stream, 1, *call)), state

    def _enter(self) -> None:
        """Takes the program's lock for one call, waiting for a call in flight on another thread. A call from the
        thread of the call in flight or from its channel's poller (a callback) would wait for it forever, since that
        call waits for the callback to return: refused with an error instead."""
        if not self._calling.acquire(blocking=False):
            me = threading.get_ident()
            poller = getattr(getattr(self._in_flight, "poller", None), "ident", None)
            if me in (self._caller, poller):
                raise CpufreeError(
                    f"{self.sdfg.name} was called from one of its own callbacks (on_progress, on_notify or a host "
                    "callback) while it runs: that call would wait for the running one, which waits for the "
                    "callback. Fix: keep what the callback needs and call the program again after the running call "
                    "returns."
                )
            self._calling.acquire()
        self._caller = threading.get_ident()

    def _ctype(self, arg):
        if arg.kind == "array":
            return ctypes.c_void_p
        if arg.kind == "symbol":
            return ctypes.c_longlong if arg.ctype == "long long" else ctypes.c_double
        return arg.desc.dtype.as_ctypes()

    def configure(self, block_size: int = 0, max_blocks: int = 0) -> None:
        """Fixes the block size and caps the grid (0: chosen from occupancy at run time). Warns where the kernel's
        matrix products cannot run their tiles in such blocks: they then run their plain loop (correct, slower)."""
        lib = self._lib
        lib.cpufree_configure(int(block_size), int(max_blocks))
        if block_size > 0 and hasattr(lib, "cpufree_block_fits") and not lib.cpufree_block_fits(int(block_size)):
            need = int(lib.cpufree_products_block())
            warnings.warn(
                f"{self.sdfg.name}: configure(block_size={block_size}): the kernel's matrix products run their tiles "
                f"in blocks of {need} threads (FP64 products exactly, FP32 ones at least); in these blocks some or all "
                f"of them take their plain loop: correct, several times slower. Fix: configure(block_size={need}), "
                "or 0 for the launcher's choice.",
                RuntimeWarning,
                stacklevel=2,
            )

    def race_order(self, order: str, seed: int = 1) -> None:
        """The order in which the race checker runs the threads between barriers from the next call on:
        ``"forward"``, ``"reverse"`` or ``"shuffle"`` (with ``seed``). Only for ``race_check`` builds."""
        if not hasattr(self._lib, "cpufree_race_order"):
            raise CpufreeError(
                f"{self.sdfg.name} was not built with race checking. Fix: compile(..., race_check=True)."
            )
        if order not in RACE_ORDERS:
            raise CpufreeError(f"race order {order!r}. Fix: use one of {', '.join(RACE_ORDERS)}.")
        self._lib.cpufree_race_order(RACE_ORDERS.index(order), ctypes.c_uint(seed))

    def device_name(self) -> str:
        buf = ctypes.create_string_buffer(256)
        self._check(self._lib.cpufree_device_name(buf, 256))
        return buf.value.decode()

    def step_times(self) -> StepTimes:
        """Per-block time of each segment of the last launch; see :class:`StepTimes`. Needs a kernel built with
        step timing (``compile(..., step_times=True)`` or ``DACE_CPUFREE_STEP_TIMES=1``; CUDA, or the host
        emulation)."""
        labels = self.source.step_labels
        if not labels:
            raise CpufreeError(
                f"{self.sdfg.name} was built without step timing. Fix: dace_cpufree.compile(..., step_times=True) "
                "or DACE_CPUFREE_STEP_TIMES=1 before compiling (the timed build is cached apart from the plain one)."
            )
        launch = self.launch_config
        grid = launch[0]
        if grid <= 0:
            raise CpufreeError(f"{self.sdfg.name} has not run yet. Fix: call the program once, then step_times().")
        n = len(labels)
        rows = np.zeros((grid, n + 2), dtype=np.uint64)
        read = self._lib.cpufree_step_times_read
        read.argtypes = [ctypes.c_void_p, ctypes.c_int]
        got = read(ctypes.c_void_p(rows.ctypes.data), grid)
        if got < 0:
            raise LaunchError(f"{self.sdfg.name}: {self._lib.cpufree_error().decode()}")
        rows = rows[:got].astype(np.float64)
        ns, cycles = rows[:, n], np.maximum(rows[:, n + 1], 1.0)
        us = rows[:, :n] * (ns / cycles)[:, None] / 1e3
        return StepTimes(list(labels), us, ns / 1e3, launch)

    def _check(self, rc: int) -> None:
        if rc != 0:
            report = getattr(self._lib, "cpufree_race_report", None)  # an emulation built with race checking
            if report is not None:
                report.restype = ctypes.c_char_p
                text = report().decode()
                if text:
                    raise RaceError(self.sdfg.name, text)
            raise LaunchError(f"{self.sdfg.name}: {self._lib.cpufree_error().decode()}")

    def __call__(self, *args, **kwargs):
        quick = self._signature.quick(args, kwargs)
        if quick is None:
            return self._general_call(args, kwargs)
        call, returned = quick
        if self._returns_early and self._calling.acquire(blocking=False):
            # the launch alone: no channel, nothing to copy back, no kernel to wait for (see _complete)
            try:
                rc = self._run(self._stream(), 0, *call)
                if rc != 0:
                    self._check(rc)  # the launcher's error text, before another call can replace it
            finally:
                self._calling.release()
        else:
            self._complete(self._stream(), call, (), wait=not self._returns_early)
        if not returned:
            return None
        return returned[0] if len(returned) == 1 else tuple(returned)

    def _general_call(self, args: tuple, kwargs: dict):
        """A call that is not of the common kind: every check, with its message; NumPy arrays copied to the device
        and back, symmetric arrays to the PE's buffers."""
        sig = self._signature
        values = sig.check_values(sig.bind_names(args, kwargs))
        fixed = None if self._shmem is None else {PE_SYMBOL: self._shmem.rank, N_PES_SYMBOL: self._shmem.size}
        symbols = sig.infer_symbols(values, fixed)
        if self._scope_checks:
            self._check_block_scopes(symbols)
        returns = sig.new_returns(values, symbols)
        stream = self._stream()
        self._wait_for_producers(values, stream)
        if self._shmem is not None:
            # the copies into the symmetric buffers and the collective launch run on the legacy default stream,
            # behind a barrier there (cpufree/shmem.cuh): the caller's stream is waited for first
            self._check(self._lib.cpufree_stream_synchronize(ctypes.c_void_p(stream)))
            stream = 0
        owned = []
        try:
            call = []
            for arg in self._host_args:
                if arg.kind == "array":
                    bound = self._bind_array(arg, values[arg.name], symbols, stream, values, fixed)
                    owned.append(bound)
                    call.append(ctypes.c_void_p(bound.pointer))
                elif arg.kind == "symbol":
                    call.append(symbols[arg.name])
                else:
                    call.append(values[arg.name])
            self._complete(stream, call, owned)
        finally:
            for bound in owned:
                if bound.device is not None:
                    self._lib.cpufree_free(ctypes.c_void_p(bound.device))
        if not returns:
            return None
        out = [values[name] for name in returns]
        return out[0] if len(out) == 1 else tuple(out)

    def _complete(self, stream: int, call: list, owned: list, wait: bool = True) -> None:
        """The launch on ``stream``, its error, the copies back into ``owned`` host arrays, and the last launch's
        facts. Where not ``wait``, returns once the kernel is queued (its errors surface at the stream's next
        synchronisation, as a CuPy kernel's do)."""
        channel = None
        self._enter()
        try:
            rc, channel = self._launch(stream, call, wait)
            if rc != 0 and channel is not None:
                channel.raise_hang()  # debug waits: the hang report, rather than the launch's error
            self._check(rc)
            self._read_back(owned, stream)
        finally:
            self._caller, self._in_flight = None, None
            self._calling.release()
            if self._channel is not None:
                self._cancel.clear()
        if channel is not None:
            self.last_call_times = channel.call_times
            channel.outcome()

    def _check_block_scopes(self, symbols: dict) -> None:
        """Block functions of one scope run at the same time: where the frontend could not show that they touch no
        common element for every size, these sizes are checked here, before the launch."""
        key = tuple(sorted(symbols.items()))
        if key in self._checked_sizes:
            return
        for part, condition in self._scope_checks:
            if not bool(dace.symbolic.evaluate(condition, symbols)):
                grid = part.name.split("__")[0]
                sizes = ", ".join(f"{s} = {symbols[s]}" for s in sorted(map(str, condition.free_symbols)))
                raise ArgumentError(
                    f"{self.sdfg.name}: for {sizes}, block functions of '{grid}' would touch the same elements "
                    f"(they need {part.requires}), and they run at the same time. Fix: use larger sizes, or call "
                    "the dependent steps after the grid function."
                )
        self._checked_sizes.add(key)
