"""GPU-initiated communication inside a ``@dace.program``, as in the paper's listings.

>>> from dace_cpufree import nvshmem
>>> @dace.program
... def step(A: dace.float64[N, M], flags: dace.uint64[2], red: dace.float64[1], T: dace.int64):
...     me, npes = nvshmem.my_pe(), nvshmem.n_pes()
...     for t in range(1, T + 1):
...         nvshmem.Putmem(A[0, :], A[N - 2, :], (me + 1) % npes, flags[0], t)
...         nvshmem.SignalWait(flags[0], t)
...         red[0] = np.sum(A[1:-1, :] * A[1:-1, :])
...         nvshmem.Allreduce(red, "sum")  # every PE: the global sum

The same program builds for NVSHMEM (``backend="cuda"``) and ROC_SHMEM (``backend="hip"``). Arrays
that a call touches are placed on the symmetric heap by the compiler. These functions only have a
meaning inside a program compiled by :func:`dace_cpufree.compile`; called from Python they raise.
"""

from __future__ import annotations

from dace_cpufree import frontend as _frontend  # noqa: F401  (registers the calls with DaCe)
from dace_cpufree.errors import CommunicationError


def _outside(name: str):
    raise CommunicationError(
        f"nvshmem.{name}() was called from Python. It is a device-side operation: call it inside a "
        "@dace.program and build the program with dace_cpufree.compile(...)."
    )


def Putmem(dest, src, pe, flag=None, signal=None):  # noqa: N802 - the paper's name
    """Writes the local ``src`` into ``dest`` on PE ``pe``; with ``flag``/``signal``, sets ``flag`` on
    that PE to ``signal`` once the data has arrived. ``src``/``dest``: same shape and dtype, any slices."""
    _outside("Putmem")


def SignalWait(flag, signal):  # noqa: N802 - the paper's name
    """Waits until the local ``flag`` (one ``uint64`` element) is at least ``signal``."""
    _outside("SignalWait")


def Allreduce(buffer, op, nonblocking=False):  # noqa: N802 - DaCe's name (dace.comm.Allreduce)
    """Reduces ``buffer`` (a contiguous 1-D array of a few elements) in place over all PEs: afterwards every PE
    holds the same ``op`` (``'sum'``, ``'max'``, ``'min'``, ``'prod'``; DaCe's ``'MPI_SUM'`` ... too) of every
    PE's values. With ``nonblocking=True`` the reduction only starts: the program goes on (the buffer must not
    be used) until :func:`AllreduceWait` of the same buffer, which leaves the result in it."""
    _outside("Allreduce")


def AllreduceWait(buffer):  # noqa: N802 - the API's style
    """Completes the non-blocking :func:`Allreduce` of ``buffer``: afterwards it holds the result."""
    _outside("AllreduceWait")


def my_pe():
    """This process's PE number (0 ... n_pes() - 1)."""
    _outside("my_pe")


def n_pes():
    """The number of PEs (processes, one per GPU)."""
    _outside("n_pes")


__all__ = ["Putmem", "SignalWait", "Allreduce", "AllreduceWait", "my_pe", "n_pes"]
