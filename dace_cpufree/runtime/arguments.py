"""Arguments of a call as the launch takes them: scalar values checked against the declared types, device
pointers of CuPy-like arrays, and what a call owns for an argument."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dace_cpufree.errors import ArgumentError


@dataclass
class Bound:
    """An argument as the launch passes it, and what the call owns or copies back for it."""

    pointer: int
    host: np.ndarray | None = None  # a NumPy array copied to the device and back
    device: int | None = None  # device buffer owned by this call
    back: tuple[int, int, int] | None = None  # (destination, symmetric buffer, bytes) copied back after the run


def device_pointer(value) -> int | None:
    iface = getattr(value, "__cuda_array_interface__", None)
    return None if iface is None else int(iface["data"][0])


def scalar_value(program: str, arg, value):
    """A scalar argument as its ctypes type takes it; integers for integer parameters (a float would be cut)."""
    dtype = np.dtype(arg.desc.dtype.as_numpy_dtype())
    kind = "an integer" if dtype.kind in "iub" else "a real number" if dtype.kind == "f" else f"a {dtype} value"
    if isinstance(value, (bool, int, float, complex, np.generic)):
        have, item = np.asarray(value).dtype.kind, value.item() if isinstance(value, np.generic) else value
    elif getattr(value, "shape", None) == () and hasattr(value, "dtype"):  # a 0-d NumPy or CuPy array
        have, item = np.dtype(value.dtype).kind, value.item()
    else:
        have = item = None
    if have is not None:
        if dtype.kind in "iub" and have in "iub":
            return item
        if dtype.kind in "fc" and have in "iubf" + ("c" if dtype.kind == "c" else ""):
            return item
    raise ArgumentError(
        f"{program}: '{arg.name}' is {value!r} ({type(value).__name__}), the program declares it "
        f"{arg.desc.dtype.to_string()}: {kind}. Fix: pass {kind}"
        + (f" (int({arg.name}) if the value is whole)." if dtype.kind in "iub" else ".")
    )


def is_integer(value) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def array_value(program: str, arg, value, rank: int, declared: str, dtype) -> object:
    """An array argument as the kernel takes it: an array (not a list), with extra unit dimensions dropped down to
    the declared ``rank`` (``(N, 1)`` for ``float64[N]``, as upstream DaCe accepts), writable where the program
    writes it; else an :class:`ArgumentError` naming the parameter and the fix."""
    name = arg.name
    if not hasattr(value, "shape") or not hasattr(value, "dtype"):
        raise ArgumentError(
            f"{program}: '{name}' is a {type(value).__name__}, the program expects an array ({declared}). "
            f"Fix: pass np.asarray(...) with dtype {dtype} (or a CuPy array)."
        )
    shape = list(value.shape)
    while len(shape) > rank and 1 in shape:  # drop unit dimensions, last first, down to the declared rank
        del shape[len(shape) - 1 - shape[::-1].index(1)]
    if len(shape) != len(value.shape) and len(shape) == rank:
        value = value.reshape(shape)
    if arg.written and getattr(getattr(value, "flags", None), "writeable", True) is False:
        raise ArgumentError(
            f"{program}: '{name}' is read-only, and the program writes it. Fix: pass a writable copy ({name}.copy())."
        )
    return value
