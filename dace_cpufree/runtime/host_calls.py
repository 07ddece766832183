"""Host callbacks of a running kernel: the reader of a request's arguments and the writer of its answer, built once
per callback over the channel's words (ctypes arrays: a word is read or written in a fraction of the time a NumPy
element access takes, and the round trip is dominated by such accesses otherwise)."""

from __future__ import annotations

_KINDS = {"f": "a float", "i": "an integer", "b": "a bool"}


def server(host, call) -> tuple:
    """``(call, function, read, write)`` for host callback ``call``: ``read()`` gives the request's arguments as the
    Python values the function gets (float, int or bool), ``write(value)`` puts its result into the answer's words
    (``None`` where the program uses no result)."""
    at = host.call_at
    ints, floats = host.ints, host.floats
    sources = [(floats if kind == "f" else ints, at["ARGS"] + k, kind == "b") for k, kind in enumerate(call.args)]

    def read():
        return [bool(words[k]) if as_bool else words[k] for words, k, as_bool in sources]

    write = None
    if call.results:
        kind, k = call.results[0], at["RESULTS"]

        def write(value):
            if value is None:
                raise TypeError(f"it returned None; the program uses its result as {_KINDS[kind]}")
            if kind == "f":
                floats[k] = float(value)
            elif kind == "b":
                ints[k] = int(bool(value))
            else:
                if isinstance(value, float) and not value.is_integer():
                    raise TypeError(f"it returned {value!r}; the program uses its result as an integer")
                ints[k] = int(value)

    return call, host.functions[call.id], read, write
