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

import os
import select
import signal
import sys
import threading
import time
import warnings

from dace_cpufree.errors import CpufreeError, HostCallbackError, KernelCancelled, KernelHang, LaunchError

from .channel_memory import ChannelHost
from .hang import hang_report

POLL_S = 0.02  # the poller's period: progress is redrawn and notifications delivered at most this late
HANG_SHOW_S = 2.0  # debug waits: a hang report is printed on stderr if the kernel has not returned this long after
CALL_WAIT_NS = 2_000_000  # with host callbacks: the poller waits for a request this long at a time (native, no GIL)


class Call:
    """One call of a program with the channel: the poller, the stop request, Ctrl-C and the timeout.

    :param cancel_event: set by :meth:`PersistentProgram.cancel` from any thread.
    """

    def __init__(self, host: ChannelHost, progress_view, progress_callbacks, notify_callbacks, timeout, cancel):
        self.host = host
        self.view = progress_view if host.pe == 0 else None  # the other PEs' progress: their on_progress callbacks
        self.on_progress = list(progress_callbacks)
        self.on_notify = list(notify_callbacks)
        self.timeout = timeout
        self.cancel_event = cancel
        self.reason = None  # "interrupt", "cancel()" or "timeout" once the stop was asked
        self.interrupted = False
        self.errors = []  # exceptions raised by callbacks, re-raised after the call
        self._stop = threading.Event()
        self.poller = None  # the poller thread while run() runs
        self._last = None  # the last (done, total) delivered
        self._dropped = 0
        self.call_errors = []  # HostCallbackError of a callback that raised or returned something unusable
        self._answered = 0  # the last host request answered
        self._first_request = 0  # requests made before this call (the device numbers them on)
        self.call_times = []  # with host callbacks: seconds each callable took (the host's part of a round trip)
        self._hang_shown = False
        self._hang_at = None  # when the poller first saw a hang report

    # ---- the call ---------------------------------------------------------------------------------------------
    def run(self, launch):
        """Runs ``launch()`` (the foreign call) with the poller beside it and returns its result."""
        host = self.host
        host.cancel(0)
        host.set("STOPPED", 0)
        host.set("SYNCS", 0)
        host.set("PEER", 0)
        host.set("LEFT", 0)
        self._dropped = host.word("DROPPED")
        facts = host.facts
        if facts.calls:  # every earlier request counts as answered (one the last launch gave up on, too)
            self._answered = self._first_request = host.call_word("REQ")
        if facts.debug_waits is not None:
            host.words[facts.hang_index["SITE"]] = 0
            if host._lib.cpufree_debug_reset() != 0:
                raise LaunchError(f"{host.program}: resetting the debug grid barrier failed")
        rfd, wfd = os.pipe()
        os.set_blocking(wfd, False)
        os.set_blocking(rfd, False)
        restore = self._catch_sigint(wfd)
        poller = threading.Thread(target=self._poll, args=(rfd, time.monotonic()), name="cpufree-channel", daemon=True)
        self.poller = poller  # its callbacks may not call the same program again (PersistentProgram._enter)
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
        self.raise_hang()
        if self.call_errors:
            raise self.call_errors[0] from self.call_errors[0].__cause__
        self._unanswered()
        host = self.host
        stopped = host.word("STOPPED")
        # A program that communicates: a PE stops because a peer did (PEER), or left a wait for a peer's signal
        # because a PE stops and ran on to its end without that data (LEFT): its results are not complete either.
        if stopped or host.word("LEFT"):
            peer = host.word("PEER")
            reason = self.reason or (f"PE {peer - 1}, which stopped" if peer else "cancel")
            site = (
                host.facts.sites[stopped - 1]
                if stopped
                else "wait for a peer's signal, left because a PE stopped (the kernel then ran on to its end)"
            )
            progress = (host.word("DONE"), host.word("TOTAL"))
            raise KernelCancelled(host.program, reason, site, host.word("SYNCS") if stopped else None, progress)
        if self.errors:
            raise self.errors[0]

    def raise_hang(self) -> None:
        """:class:`KernelHang` where a kernel built with ``debug_waits`` reported a grid sync that waited too long
        (or blocks that met at different grid syncs)."""
        error = hang_report(self.host)
        if error is not None:
            raise error

    def _unanswered(self) -> None:
        """A request the kernel made and gave up on (the host did not answer within ``callback_timeout``)."""
        facts = self.host.facts
        if not facts.calls or self.host.call_word("LATE") <= self._first_request:
            return
        call = facts.calls[self.host.requested_call()]
        raise HostCallbackError(
            f"{self.host.program}: the host callback {call.name}(...) at {call.source or 'an unknown line'} did not "
            f"answer within {facts.call_timeout:g} s, so the kernel stopped. Fix: make it return sooner, or compile "
            "with a larger callback_timeout=.",
            call.name,
            call.source,
        )

    # ---- host callbacks -----------------------------------------------------------------------------------------
    def _serve(self, request: int) -> None:
        """Calls the requested Python function with the request's arguments and writes its answer (RESP last)."""
        host = self.host
        ints, at = host.ints, host.call_at
        call, function, read, write = host.servers[ints[at["ID"]]]
        if self.reason is not None:  # a stop was asked: the kernel makes no more calls after this answer
            self._answer(request, 2)
            return
        status = 0
        try:
            args = read()
            begun = time.perf_counter()
            value = function(*args)
            self.call_times.append(time.perf_counter() - begun)
            if write is not None:
                write(value)
        except Exception as err:  # noqa: BLE001 - re-raised in the caller's thread after the call
            status = 1
            error = HostCallbackError(
                f"{host.program}: the host callback {call.name}(...) at {call.source or 'an unknown line'} raised "
                f"{type(err).__name__}: {err}. The kernel stopped at its next cancel point. Fix: make {call.name} "
                "handle these arguments (it runs on the host with the call's scalar values) or catch the error in "
                "it.",
                call.name,
                call.source,
            )
            error.__cause__ = err
            if not self.call_errors:
                self.call_errors.append(error)
            self._cancel("a failed host callback")
        self._answer(request, status)

    def _answer(self, request: int, status: int) -> None:
        """The answer to request ``request``: its status and the results ``write`` left in ``RESULTS``, as the
        request's flagged words (``cpufree_channel_answer``)."""
        self.host.answer(request, status)
        self._answered = request

    # ---- the poller thread ------------------------------------------------------------------------------------
    def _poll(self, rfd: int, start: float) -> None:
        if self.host.facts.calls:
            self._poll_calls(rfd, start)
            return
        while not self._stop.is_set():
            ready, _, _ = select.select([rfd], [], [], POLL_S)
            self._housekeeping(ready, rfd, start)

    def _poll_calls(self, rfd: int, start: float) -> None:
        """With host callbacks: waits for requests in native code (spinning while they come often), and does the
        rest every ``POLL_S``."""
        wait = self.host._lib.cpufree_channel_wait_call
        last = time.monotonic()
        while not self._stop.is_set():
            request = wait(self._answered, CALL_WAIT_NS)
            if request != self._answered:
                self._serve(request)
            if time.monotonic() - last >= POLL_S:
                last = time.monotonic()
                ready, _, _ = select.select([rfd], [], [], 0)
                self._housekeeping(ready, rfd, start)

    def _housekeeping(self, ready, rfd: int, start: float) -> None:
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
        self._hang_seen()

    def _hang_seen(self) -> None:
        """Debug waits: the report is shown at once on stderr, in case the kernel cannot leave (a block stuck
        elsewhere); the call raises it when the kernel returns."""
        if self.host.facts.debug_waits is None or self._hang_shown or self.host.hang_word("SITE") == 0:
            return
        if self._hang_at is None:
            self._hang_at = time.monotonic()
        if time.monotonic() - self._hang_at < HANG_SHOW_S:
            return  # the kernel is leaving: the call raises it
        self._hang_shown = True
        try:
            self.raise_hang()
        except KernelHang as err:
            print(f"dace_cpufree: {err}", file=sys.stderr, flush=True)

    def _cancel(self, reason: str) -> None:
        if self.reason is None:
            self.reason = reason
            try:
                self.host.cancel(1)
            except LaunchError as err:  # on the poller thread: re-raised in the caller's thread after the call
                self.errors.append(err)

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


def require_channel(host: ChannelHost | None, program: str, what: str) -> ChannelHost:
    if host is None:
        raise CpufreeError(
            f"{program} was built without the device <-> host channel, so {what} cannot reach the kernel. Fix: "
            "dace_cpufree.compile(..., channel=True) (or progress=True / timeout=seconds)."
        )
    return host
