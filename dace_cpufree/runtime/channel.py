"""The host side of the device <-> host channel: a poller thread while ``cpufree_run`` is in flight.

ctypes releases the GIL during the foreign call, so a Python thread runs next to the kernel (or its emulation). It
reads the channel's host-mapped words through a NumPy view (progress, notification records) and writes the cancel
word. The layout comes from the generator (:attr:`KernelSource.channel`), not from this module.

Ctrl-C: the main thread sits in the foreign call, where Python's own SIGINT handler cannot run until the call
returns. For the duration of the call a handler is installed and :func:`signal.set_wakeup_fd` points at a pipe
the poller watches: the C-level signal handler writes the signal number there at once, the poller sets the cancel
word, and after the call ``KeyboardInterrupt`` is raised.
"""

from __future__ import annotations

import ctypes
import os
import select
import signal
import sys
import threading
import time
import warnings

import numpy as np

from dace_cpufree.errors import CpufreeError, KernelCancelled, LaunchError

POLL_S = 0.02  # the poller's period: progress is redrawn and notifications delivered at most this late


class ChannelHost:
    """The channel memory of one loaded library (allocated once by its launcher), seen from Python."""

    def __init__(self, lib, facts, program: str):
        self.facts = facts
        self.program = program
        lib.cpufree_channel_open.restype = ctypes.POINTER(ctypes.c_longlong)
        lib.cpufree_channel_dropped.restype = ctypes.c_ulonglong
        pointer = lib.cpufree_channel_open()
        if not pointer:
            raise LaunchError(f"{program}: {lib.cpufree_error().decode()}")
        self._lib = lib
        self.words = np.ctypeslib.as_array(pointer, shape=(facts.words,))  # int64 view of the mapped memory
        self.values = self.words.view(np.float64)
        self._at = facts.index

    def word(self, name: str) -> int:
        return int(self.words[self._at[name]])

    def set(self, name: str, value: int) -> None:
        self.words[self._at[name]] = value

    def dropped(self) -> int:
        """Notifications dropped so far (exact: read from the device's counter)."""
        return int(self._lib.cpufree_channel_dropped())


class Call:
    """One call of a program with the channel: the poller, the cancel word, Ctrl-C and the timeout.

    :param cancel_event: set by :meth:`PersistentProgram.cancel` from any thread.
    """

    def __init__(self, host: ChannelHost, progress_view, progress_callbacks, notify_callbacks, timeout, cancel):
        self.host = host
        self.view = progress_view
        self.on_progress = list(progress_callbacks)
        self.on_notify = list(notify_callbacks)
        self.timeout = timeout
        self.cancel_event = cancel
        self.reason = None  # "interrupt", "cancel()" or "timeout" once the cancel word is set
        self.interrupted = False
        self.errors = []  # exceptions raised by callbacks, re-raised after the call
        self._stop = threading.Event()
        self._last = None  # the last (done, total) delivered
        self._dropped = 0

    # ---- the call ---------------------------------------------------------------------------------------------
    def run(self, launch):
        """Runs ``launch()`` (the foreign call) with the poller beside it and returns its result."""
        host = self.host
        host.set("CANCEL", 0)
        host.set("STOPPED", 0)
        host.set("SYNCS", 0)
        self._dropped = host.word("DROPPED")
        rfd, wfd = os.pipe()
        os.set_blocking(wfd, False)
        os.set_blocking(rfd, False)
        restore = self._catch_sigint(wfd)
        poller = threading.Thread(target=self._poll, args=(rfd, time.monotonic()), name="cpufree-channel", daemon=True)
        poller.start()
        try:
            return launch()
        finally:
            self._stop.set()
            try:
                os.write(wfd, b"\0")  # wakes the poller from its select
            except OSError:
                pass
            poller.join()
            restore()
            os.close(rfd)
            os.close(wfd)
            self._drain()
            self._progress(final=True)

    def outcome(self) -> None:
        """After the call: ``KeyboardInterrupt`` for Ctrl-C, :class:`KernelCancelled` if the kernel stopped early,
        a callback's exception, or a warning about dropped notifications."""
        dropped = self.host.dropped() - self._dropped if self.host.word("DROPPED") != self._dropped else 0
        if dropped > 0:
            warnings.warn(
                f"{self.host.program}: {dropped} notification(s) dropped: the ring ({self.host.facts.ring} records) "
                "was full. Fix: notify less often, make the callbacks faster, or compile with a larger notify_ring.",
                RuntimeWarning,
                stacklevel=3,
            )
        if self.interrupted:
            raise KeyboardInterrupt
        stopped = self.host.word("STOPPED")
        if stopped:
            site = self.host.facts.sites[stopped - 1]
            syncs = self.host.word("SYNCS")
            done, total = self.host.word("DONE"), self.host.word("TOTAL")
            raise KernelCancelled(self.host.program, self.reason or "cancel", site, syncs, (done, total))
        if self.errors:
            raise self.errors[0]

    # ---- the poller thread ------------------------------------------------------------------------------------
    def _poll(self, rfd: int, start: float) -> None:
        while not self._stop.is_set():
            ready, _, _ = select.select([rfd], [], [], POLL_S)
            if ready:
                try:
                    data = os.read(rfd, 64)
                except BlockingIOError:
                    data = b""
                if bytes([signal.SIGINT]) in data:
                    self.interrupted = True
                    self._cancel("interrupt")
            if self.cancel_event.is_set():
                self._cancel("cancel()")
            if self.timeout is not None and time.monotonic() - start > self.timeout:
                self._cancel("timeout")
            self._drain()
            self._progress()

    def _cancel(self, reason: str) -> None:
        if self.reason is None:
            self.reason = reason
            self.host.set("CANCEL", 1)

    def _progress(self, final: bool = False) -> None:
        done, total = self.host.word("DONE"), self.host.word("TOTAL")
        if (done, total) != self._last and (done, total) != (0, 0):
            self._last = (done, total)
            for callback in self.on_progress:
                self._safely(callback, done, total)
            if self.view is not None:
                self.view.update(done, total)
        if final and self.view is not None:
            self.view.close()

    def _drain(self) -> None:
        """Delivers the complete records in order and hands their slots back to the kernel."""
        host, facts = self.host, self.host.facts
        tail = host.word("TAIL")
        while True:
            base = facts.header + facts.record * (tail % facts.ring)
            if int(host.words[base]) != tail + 1:
                break
            tag = int(host.words[base + 1])
            value = float(host.values[base + 2])
            tail += 1
            host.set("TAIL", tail)
            name = facts.tags.get(tag, tag)
            for callback in self.on_notify:
                self._safely(callback, name, value)

    def _safely(self, callback, *args) -> None:
        try:
            callback(*args)
        except Exception as err:  # noqa: BLE001 - re-raised in the caller's thread after the call
            if not self.errors:
                self.errors.append(err)

    # ---- Ctrl-C -----------------------------------------------------------------------------------------------
    def _catch_sigint(self, wfd: int):
        """Routes SIGINT to the poller for the duration of the call (main thread only); returns the undo."""
        if threading.current_thread() is not threading.main_thread():
            return lambda: None
        try:
            previous_fd = signal.set_wakeup_fd(wfd, warn_on_full_buffer=False)
        except ValueError:
            return lambda: None
        previous = signal.signal(signal.SIGINT, self._on_sigint)

        def restore():
            signal.signal(signal.SIGINT, previous)
            signal.set_wakeup_fd(previous_fd)

        return restore

    def _on_sigint(self, signum, frame) -> None:
        # Runs in the main thread once the foreign call has returned; the poller already acted on the byte.
        self.interrupted = True


class ProgressView:
    """A live bar of ``(done, total)``: tqdm, rich, or text lines; closed at the end of the call."""

    def __init__(self, kind, label: str):
        self.kind = _renderer(kind)
        self.label = label
        self._bar = None
        self._last_line = 0.0

    def update(self, done: int, total: int) -> None:
        total = total if total > 0 else None
        if self.kind == "tqdm":
            if self._bar is None:
                from tqdm.auto import tqdm

                self._bar = tqdm(total=total, desc=self.label, leave=True)
            if total != self._bar.total:
                self._bar.total = total
            self._bar.update(done - self._bar.n)
        elif self.kind == "rich":
            if self._bar is None:
                from rich.progress import Progress

                self._bar = Progress(transient=False)
                self._bar.start()
                self._task = self._bar.add_task(self.label, total=total)
            self._bar.update(self._task, completed=done, total=total)
        else:
            now = time.monotonic()
            if now - self._last_line >= 1.0:
                self._last_line = now
                print(f"{self.label}: {done}" + (f"/{total}" if total else ""), file=sys.stderr, flush=True)

    def close(self) -> None:
        if self._bar is None:
            return
        if self.kind == "tqdm":
            self._bar.close()
        else:
            self._bar.stop()
        self._bar = None


def _renderer(kind) -> str:
    if kind in ("tqdm", "rich", "text"):
        return kind
    for name in ("tqdm", "rich"):
        try:
            __import__(name)
            return name
        except ImportError:
            continue
    return "text"


def require_channel(host: ChannelHost | None, program: str, what: str) -> ChannelHost:
    if host is None:
        raise CpufreeError(
            f"{program} was built without the device <-> host channel, so {what} cannot reach the kernel. Fix: "
            "dace_cpufree.compile(..., channel=True) (or progress=True / timeout=seconds)."
        )
    return host
