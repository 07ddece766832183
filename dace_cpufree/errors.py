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


class CommunicationError(CpufreeError, ValueError):
    """A GPU-initiated communication call (``Putmem``, ``SignalWait``) is used incorrectly."""
