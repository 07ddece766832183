"""The dace-cpufree exception family: each message names the problem and the fix."""


class CpufreeError(Exception):
    """Base class of every error raised by dace-cpufree."""


class NotPersistableError(CpufreeError):
    """The program contains something that cannot run inside one persistent kernel."""


class BuildError(CpufreeError):
    """The generated code did not compile."""


class LaunchError(CpufreeError):
    """The kernel could not be launched (no GPU, not co-resident, a CUDA error)."""


class ArgumentError(CpufreeError, TypeError):
    """An argument does not match the program's signature (shape, dtype, missing)."""


class CommunicationError(CpufreeError, ValueError):
    """A GPU-initiated communication call (``Putmem``, ``SignalWait``) is used incorrectly."""
