"""Argument values as the launch takes them, one at a time: scalars checked against the declared types, arrays
as the kernel takes them, device arrays read through their ``__cuda_array_interface__``, and the memory two arrays
share."""

from __future__ import annotations

import numpy as np

from dace_cpufree.errors import ArgumentError


def device_pointer(value) -> int | None:
    iface = getattr(value, "__cuda_array_interface__", None)
    return None if iface is None else int(iface["data"][0])


def device_layout(value) -> tuple[np.dtype, bool]:
    """A device array's dtype and whether it is C-contiguous, as its ``__cuda_array_interface__`` states them, so
    that any library's array reads alike (PyTorch's ``dtype`` is no NumPy dtype, and it has no ``flags``); strides
    absent or ``None`` mean C-contiguous, and a dimension of one element may have any stride."""
    iface = value.__cuda_array_interface__
    dtype = np.dtype(iface["typestr"])
    shape, strides = tuple(iface["shape"]), iface.get("strides")
    if strides is None or 0 in shape:
        return dtype, True
    expected = c_strides(shape, dtype.itemsize)
    return dtype, all(stride == want for size, stride, want in zip(shape, strides, expected) if size > 1)


def producer_stream(value) -> int | None:
    """The stream on which a device array's producer may still be writing it, as its ``__cuda_array_interface__``
    (version 3) names it: a CUDA stream handle (1: the legacy default stream, 2: the per-thread default one);
    ``None`` where it names none or the value is no device array."""
    iface = getattr(value, "__cuda_array_interface__", None)
    stream = None if iface is None else iface.get("stream")
    return None if stream is None else int(stream)


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


def c_strides(shape: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    strides, step = [], itemsize
    for size in reversed(shape):
        strides.append(step)
        step *= size
    return tuple(reversed(strides))


def array_span(value, device: bool) -> tuple[tuple[int, int] | None, bool]:
    """The bytes ``[first, end)`` an array argument covers (``None`` where it holds nothing or is not C-contiguous,
    which the launch refuses with its own message), and whether the kernel takes it by pointer (``False``: the launch
    copies it, a NumPy array for a GPU backend)."""
    ptr = device_pointer(value) if device else None
    by_pointer = ptr is not None or not device
    if ptr is not None:
        contiguous = device_layout(value)[1]
    else:
        iface = getattr(value, "__array_interface__", None)
        ptr = None if iface is None else int(iface["data"][0])
        contiguous = getattr(getattr(value, "flags", None), "c_contiguous", True)
    nbytes = int(getattr(value, "nbytes", 0))
    if ptr is None or nbytes == 0 or not contiguous:
        return None, by_pointer
    return (ptr, ptr + nbytes), by_pointer


def shared_written_memory(spans: list) -> tuple[str, str] | None:
    """Two parameters whose arrays share memory where that could change the answer: ``spans`` holds ``(name,
    (first, end) or None, written, by_pointer)``. The kernel reads and writes its arrays as distinct (DaCe's code and
    ours order steps by the containers they name), so an array written while another name reads or writes the same
    memory would give an answer NumPy does not. Arrays the launch copies in and (where written) back may share memory
    unless both are written (then one copy back would overwrite the other)."""
    for i, (name, span, written, by_pointer) in enumerate(spans):
        if span is None:
            continue
        for other, other_span, other_written, other_by_pointer in spans[i + 1 :]:
            if other_span is None or not (span[0] < other_span[1] and other_span[0] < span[1]):
                continue
            if (written and other_written) or ((written or other_written) and by_pointer and other_by_pointer):
                return (name, other) if written else (other, name)
    return None


def overlap_error(program: str, names: tuple[str, str]) -> ArgumentError:
    written, other = names
    return ArgumentError(
        f"{program}: '{written}' and '{other}' share memory, and the program writes '{written}'. The kernel takes "
        f"its arrays as distinct, so the result would differ from NumPy's. Fix: pass a copy ({other}.copy())."
    )
