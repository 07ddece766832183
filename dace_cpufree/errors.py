"""The dace-cpufree exception family: each message names the problem and the fix."""

from __future__ import annotations


class CpufreeError(Exception):
    """Base class of every error raised by dace-cpufree."""


class NotPersistableError(CpufreeError):
    """The program contains something that cannot run inside one persistent kernel."""


class BuildError(CpufreeError):
    """The generated code did not compile.

    :ivar first_error: the compiler's first error line (later errors are often its consequences), or ``None``.
    :ivar step: the label of the kernel step whose generated code holds that error, where it could be told.
    """

    def __init__(self, message: str, first_error: str | None = None, step: str | None = None):
        super().__init__(message)
        self.first_error = first_error
        self.step = step


class LaunchError(CpufreeError):
    """The kernel could not be launched (no GPU, not co-resident, a CUDA error)."""


class ArgumentError(CpufreeError, TypeError):
    """An argument does not match the program's signature (shape, dtype, missing)."""


class RaceError(LaunchError):
    """The emulation's race checker (``compile(..., backend="emulate", race_check=...)``) saw two threads access an
    element with no barrier ordering them, at least one of them writing, or a barrier that could never complete.

    :ivar report: one line per conflict (array and element, the two threads, their steps with program lines).
    """

    def __init__(self, program: str, report: str):
        super().__init__(
            f"{program}: the race checker found unsynchronised accesses:\n{report.rstrip()}\n"
            "Fix: the generator must place a grid sync (different blocks) or a block barrier (same block) between "
            "the two steps; report the program, or write the two steps so that each thread reads what it wrote."
        )
        self.report = report


class CommunicationError(CpufreeError, ValueError):
    """A GPU-initiated communication call (``Putmem``, ``SignalWait``) is used incorrectly."""


class KernelCancelled(CpufreeError):
    """A running kernel was stopped by ``run.cancel()`` or ``compile(..., timeout=...)`` before it finished.

    Every thread left at the same cancel point (a loop head or a grid sync); the arrays hold what the kernel had
    computed by then (NumPy arguments are copied back as usual). The next call runs from the start.

    :ivar reason: ``"cancel()"`` or ``"timeout"``.
    :ivar site: the cancel point where the kernel stopped, e.g. ``"grid sync before map_x"``.
    :ivar syncs: grid syncs the kernel had passed (``None``: not known, for a PE that left a wait for a peer and
                 ran on to its end).
    :ivar progress: the last ``(done, total)`` the kernel reported (``(0, 0)``: none).
    """

    def __init__(self, program: str, reason: str, site: str, syncs: int | None, progress: tuple[int, int] = (0, 0)):
        done, total = progress
        reached = f", progress {done}/{total}" if total or done else ""
        passed = f", after {syncs} grid sync(s)" if syncs is not None else ""
        super().__init__(
            f"{program}: kernel stopped by {reason} at the {site}{passed}{reached}. "
            "Its arrays hold the state reached there; the next call runs from the start."
        )
        self.reason, self.site, self.syncs, self.progress = reason, site, syncs, progress


class HostCallbackError(CpufreeError):
    """A host callback of the program (``print``, a Python function) raised, returned something the kernel cannot
    take, or did not answer in time; the kernel stopped at its next cancel point.

    :ivar name: the callback; :ivar source: ``file:line`` of the call in the program.
    """

    def __init__(self, message: str, name: str = "", source: str = ""):
        super().__init__(message)
        self.name, self.source = name, source


class KernelHang(CpufreeError):
    """A kernel built with ``debug_waits`` had a grid sync, block or tile barrier wait longer than its timeout (or its
    blocks meet at different grid syncs): it reported where and stopped instead of hanging.

    :ivar site: the grid sync, e.g. ``"grid sync before map _Add__map"``; :ivar source: the step's program line.
    :ivar block: the block that waited (gave up); :ivar missing: the first block that was not at that sync
                 (``None``: unknown), :ivar missing_site: the grid sync it reached last (``None``: none).
    :ivar thread: at a block or tile barrier: the first thread of ``block`` that did not arrive, and ``threads`` how
                  many did not (``None``: not such a barrier, or unknown).
    """

    def __init__(
        self, message: str, site: str, source: str, block: int, missing, missing_site, thread=None, threads=None
    ):
        super().__init__(message)
        self.site, self.source, self.block, self.missing, self.missing_site = site, source, block, missing, missing_site
        self.thread, self.threads = thread, threads
