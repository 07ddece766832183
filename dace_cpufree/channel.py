"""Talking to a running kernel from inside a ``@dace.program``: progress and notifications.

>>> @dace.program
... def solve(A: dace.float64[N], res: dace.float64[1], T: dace.int64):
...     for t in range(T):
...         ...
...         dace_cpufree.progress(t + 1, T)          # a live bar on the host (compile(..., progress=True))
...         dace_cpufree.notify("residual", res[0])  # run.on_notify(callback) gets ("residual", value)

Both only have a meaning inside a program compiled by :func:`dace_cpufree.compile`; the kernel never waits for
the host (see ``docs/channel.md``). Called from Python they raise.
"""

from __future__ import annotations

from dace_cpufree.errors import CpufreeError
from dace_cpufree.frontend import channel_calls as _calls  # noqa: F401  (registers the calls with DaCe)


def _outside(name: str):
    raise CpufreeError(
        f"dace_cpufree.{name}() was called from Python. It is a device-side call: use it inside a @dace.program "
        "compiled with dace_cpufree.compile(...)."
    )


def progress(done, total):
    """Reports ``done`` of ``total`` (integers: constants, symbols or scalars) to the host; one thread writes it."""
    _outside("progress")


def notify(tag, value):
    """Sends ``(tag, value)`` to the host's ``on_notify`` callbacks without waiting. ``tag``: a string or integer
    constant; ``value``: a number, symbol or scalar (sent as float64). Dropped and counted if the ring is full."""
    _outside("notify")


__all__ = ["notify", "progress"]
