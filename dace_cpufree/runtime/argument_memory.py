"""The device memory of a call's arguments on the general path: arrays checked and bound (NumPy arrays copied to
the device, symmetric ones into the PE's buffers), copied back after the launch, and the producers' streams waited
for."""

from __future__ import annotations

import ctypes

import numpy as np

from dace_cpufree.errors import ArgumentError, LaunchError

from .argument_values import device_layout, device_pointer, producer_stream
from .arguments import Bound


def _not_contiguous(program: str, name: str, value, module: str, written: bool) -> str:
    """The refusal of an array that is not C-contiguous (a strided view, a transpose, Fortran order), with the fix:
    ``module`` is ``"np"`` for a host array, ``"cupy"`` for a device one."""
    what = "NumPy or CuPy array" if module == "np" else "array"
    strides = getattr(value, "strides", None)
    shown = f" (strides {strides} for shape {getattr(value, 'shape', None)})" if strides is not None else ""
    fix = f"{module}.ascontiguousarray({name})"
    if written:
        fix += f", and copy the result back into {name} afterwards, since the program writes it"
    return (
        f"{program}: '{name}' must be a C-contiguous {what}{shown}: the kernel indexes it as one row-major block. "
        f"Fix: pass {fix}."
    )


class ArgumentMemory:
    """The argument binding of :class:`~dace_cpufree.runtime.program.PersistentProgram`'s general path. It reads the
    program's library (``_lib``, ``_check``), signature, backend and SHMEM session (``_shmem``, ``_symmetric``)."""

    def _wait_for_producers(self, values: dict, stream: int) -> None:
        """Waits for the streams that device arrays name as their producers' (``__cuda_array_interface__``'s
        ``stream``) where the launch on ``stream`` is not ordered after them: work queued there may still write
        them."""
        waited = {stream}
        for value in values.values():
            producer = producer_stream(value)
            if producer == 1:  # the interface's name for the legacy default stream, which the launcher calls 0
                producer = 0
            if producer is not None and producer not in waited:
                self._check(self._lib.cpufree_stream_synchronize(ctypes.c_void_p(producer)))
                waited.add(producer)

    def _bind_array(self, arg, value, symbols, stream: int, values: dict, fixed: dict | None) -> Bound:
        sig, name = self._signature, arg.name
        expected = sig.shape(name, symbols)
        dtype = sig.dtypes[name]
        if tuple(getattr(value, "shape", ())) != expected:
            origin, given = sig.sizes_origin(name, values, symbols, fixed)
            keywords = (
                f", or correct the keyword(s) {', '.join(given)}, which disagree with the arrays" if given else ""
            )
            raise ArgumentError(
                f"{self.sdfg.name}: '{name}' has shape {getattr(value, 'shape', None)}, expected {expected} "
                f"({origin}). Fix: pass arrays whose sizes agree with the declared shapes{keywords}."
            )
        ptr = device_pointer(value)
        if ptr is None and not isinstance(value, np.ndarray):
            raise ArgumentError(
                f"{self.sdfg.name}: '{name}' is a {type(value).__name__}, not a NumPy or CuPy array. Fix: pass "
                f"np.asarray({name}, dtype=np.{dtype.name}) (or a CuPy array)."
            )
        have, contiguous = device_layout(value) if ptr is not None else (value.dtype, value.flags.c_contiguous)
        if have != dtype:
            raise ArgumentError(
                f"{self.sdfg.name}: '{name}' has dtype {have}, expected {dtype}. Fix: pass "
                f"{name}.astype(np.{dtype.name})"
                + (" (a copy: read the result the program writes from it)" if arg.written else "")
                + f", or declare the parameter as {have}."
            )
        symmetric = self._shmem is not None and name in self._symmetric
        if ptr is not None and self.backend == "emulate" and not symmetric:
            raise ArgumentError(
                f"{self.sdfg.name}: '{name}' is a device array; the host emulation backend takes NumPy "
                f"arrays. Fix: pass cupy.asnumpy({name}), or compile with backend='cuda' (or 'hip')."
            )
        if not contiguous:
            module = "np" if ptr is None else "cupy"
            raise ArgumentError(_not_contiguous(self.sdfg.name, name, value, module, arg.written))
        if symmetric:
            return self._bind_symmetric(arg, value, ptr)
        if ptr is not None:
            return Bound(ptr)
        if self.backend == "emulate":
            return Bound(value.ctypes.data)
        dev = self._lib.cpufree_malloc(max(value.nbytes, 1))
        if not dev:
            raise LaunchError(
                f"{self.sdfg.name}: could not allocate {value.nbytes} bytes on the device for '{arg.name}'."
            )
        self._check(
            self._lib.cpufree_memcpy(
                ctypes.c_void_p(dev), ctypes.c_void_p(value.ctypes.data), value.nbytes, 1, ctypes.c_void_p(stream)
            )
        )
        # copied back only where the program writes it: a read-only copy coming back could overwrite another
        # argument's result where the two share memory
        return Bound(dev, value if arg.written else None, dev)

    def _bind_symmetric(self, arg, value, ptr: int | None) -> Bound:
        """An argument on the symmetric heap (C-contiguous, checked by the caller): the user's array is copied into
        the PE's buffer and back."""
        src = ptr if ptr is not None else value.ctypes.data
        buf = self._shmem.buffer(self._lib, arg.name, max(value.nbytes, 1))
        self._shmem.copy(self._lib, buf, src, value.nbytes)
        label = getattr(self._shmem, "label", None)  # an emulated PE names its buffers in the reports of waits
        if label is not None:
            label(self._lib, buf, arg.name, value.itemsize)
        return Bound(buf, back=(src, buf, value.nbytes) if arg.written else None)

    def _read_back(self, owned: list[Bound], stream: int) -> None:
        symmetric = False
        for bound in owned:
            if bound.back is not None:
                self._shmem.copy(self._lib, *bound.back)
                symmetric = True
            if bound.host is not None:
                self._check(
                    self._lib.cpufree_memcpy(
                        ctypes.c_void_p(bound.host.ctypes.data),
                        ctypes.c_void_p(bound.device),
                        bound.host.nbytes,
                        0,
                        ctypes.c_void_p(stream),
                    )
                )
        if symmetric:  # device-to-device copies on the legacy default stream may still be under way
            self._check(self._lib.cpufree_stream_synchronize(ctypes.c_void_p(0)))
