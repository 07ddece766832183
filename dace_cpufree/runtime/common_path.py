"""The common path of a call: arguments of the common kind (see :class:`~dace_cpufree.runtime.arguments.Signature`)
bound with plain comparisons and what was worked out for the same sizes before."""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass

import dace
import numpy as np

from .argument_values import c_strides, is_integer


@dataclass(frozen=True)
class _Sizes:
    """For one layout of the input arrays (each one's shape and C-contiguous strides, in the order of
    ``Signature._arrays``): the launch values with the symbol arguments' filled in, each returned array's slot, shape,
    dtype."""

    call: tuple  # the launch values, the symbol arguments' filled in
    nbytes: tuple  # each input array's bytes
    returns: tuple
    symbols: dict  # the size symbols read off the shapes


#: Scalar types a call may pass by the common path; which of them a parameter takes follows :func:`scalar_value`.
_SCALAR_TYPES = (bool, int, float, complex, np.bool_, np.float16, np.float32, np.float64, np.complex64, np.complex128)
_SCALAR_TYPES += tuple(np.dtype(c).type for c in "bhilqBHILQ")
_INT_RANGE = (-(1 << 63), 1 << 64)  # Python ints NumPy reads as a fixed-size integer (others: object arrays)
_KEPT_SIZES = 256  # sets of shapes (and orders of keywords) the common path keeps what it worked out for, at most


def _scalar_types(arg) -> dict:
    """The types of :data:`_SCALAR_TYPES` that :func:`scalar_value` accepts for the scalar parameter ``arg``, each
    with how the common path passes it: ``np.generic`` (its ``item()``, as :func:`scalar_value` does), ``int``
    (as it is, once within the integers NumPy reads as fixed-size ones) or ``True`` (as it is: a built-in scalar,
    or a NumPy one that is a built-in float or complex too, such as ``np.float64``)."""
    dtype = np.dtype(arg.desc.dtype.as_numpy_dtype())
    takes = "iub" if dtype.kind in "iub" else "iubf" + ("c" if dtype.kind == "c" else "")
    passes = {
        t: int if t is int else True if issubclass(t, (float, complex)) or t is bool else np.generic
        for t in _SCALAR_TYPES
    }
    return {t: how for t, how in passes.items() if np.dtype(t).kind in takes}


class CommonPath:
    """The common path of :class:`~dace_cpufree.runtime.arguments.Signature`: :meth:`quick` and the facts it reads,
    which :meth:`_prepare_common` works out once from the parameters the signature read off the SDFG."""

    def _prepare_common(self, host_args: list, arrays: list, scalars: list, quick: bool, check_sizes) -> None:
        """Works out the common path's facts: ``arrays`` and ``scalars`` are the launch's array and scalar
        arguments; ``quick`` and ``check_sizes`` as :class:`~dace_cpufree.runtime.arguments.Signature` takes them."""
        self._name_set = frozenset(self.names)
        returned = {n for n, _ in self.returns}
        slots = {a.name: i for i, a in enumerate(host_args)}
        inputs = [a for a in arrays if a.name not in returned]
        # not where a parameter is a size symbol (its value is given, not read off the shapes) or an array the launch
        # does not take (the general path still reads sizes off it)
        given = [n for n in self.names if n in self.symbol_names or (n in self.declared_shapes and n not in self.kinds)]
        self._quick = quick and not given and all(a.name in self._name_set for a in inputs + scalars)
        self._arrays = [(a.name, self.dtypes[a.name]) for a in inputs]
        self._array_slots = [slots[a.name] for a in inputs]
        self._written = [i for i, a in enumerate(inputs) if a.written]
        # the pairs of input arrays of which at least one is written: where their memory overlaps, the common path
        # leaves the call to the general one, which refuses it (shared_written_memory)
        self._written_pairs = [
            (i, j)
            for i in range(len(inputs))
            for j in range(i + 1, len(inputs))
            if inputs[i].written or inputs[j].written
        ]
        self._given = {}  # keyword names in call order -> the size names among them (False: not the common kind)
        self._scalars = [(slots[a.name], a.name, _scalar_types(self.kinds[a.name])) for a in scalars]
        self._sizes = {}  # the input arrays' shapes and strides -> what the common path needs for them (_for_sizes)
        self._kind = None  # the type of array the common path takes, once known (_array_type)
        self._check_sizes = check_sizes
        # the symbols that the declared shapes of the input and returned arrays need, and the symbol arguments
        shaped = [a.name for a in inputs] + [n for n, _ in self.returns]
        dims = [d for n in shaped for d in self.declared_shapes[n] if dace.symbolic.issymbolic(d)]
        self._needed = {str(s) for d in dims for s in d.free_symbols} | set(self._symbol_args)

    def _array_type(self):
        """The type of array the common path takes: CuPy's (once imported) for a GPU backend, NumPy's for the host
        emulation; ``None`` where there is none yet."""
        if not self.device:
            return np.ndarray
        cupy = sys.modules.get("cupy")
        return None if cupy is None else cupy.ndarray

    def quick(self, args: tuple, kwargs: dict):
        """``(launch values in the launcher's order, arrays returned)`` of a call of the common kind (see the class),
        else ``None``. Raises only what checking a new set of sizes raises (``check_sizes``)."""
        if not self._quick:
            return None
        if kwargs:
            if args:
                return None
            keys = tuple(kwargs)
            sizes_given = self._given.get(keys)
            if sizes_given is None:
                sizes_given = self._given_for(keys)
            if sizes_given is False:
                return None
            values = kwargs
        elif len(args) == len(self.names):
            values, sizes_given = dict(zip(self.names, args)), ()
        else:
            return None
        kind = self._kind or self._array_type()
        if kind is None:
            return None
        self._kind = kind
        device = self.device
        arrays, layout, starts = [], [], []
        for name, dtype in self._arrays:  # one pass: type, dtype, then shape and strides as the key of the sizes
            value = values[name]
            if type(value) is not kind or value.dtype != dtype:
                return None
            arrays.append(value)
            layout.append(value.shape)
            layout.append(value.strides)
            starts.append(value.data.ptr if device else value.ctypes.data)
        layout = tuple(layout)
        sizes = self._sizes.get(layout)
        if sizes is None:
            sizes = self._for_sizes(layout)
            if sizes is None:
                return None
        for name in sizes_given:  # each the value the shapes give it, else the general path says why
            value = kwargs[name]
            if not is_integer(value) or sizes.symbols.get(name) != value:
                return None
        call = list(sizes.call)
        for slot, start in zip(self._array_slots, starts):
            call[slot] = start
        if not device:
            for i in self._written:
                if not arrays[i].flags.writeable:
                    return None
        nbytes = sizes.nbytes
        for i, j in self._written_pairs:  # memory shared with a written array: the general path refuses the call
            if starts[i] < starts[j] + nbytes[j] and starts[j] < starts[i] + nbytes[i]:
                return None
        for slot, name, takes in self._scalars:
            value = values[name]
            item = takes.get(type(value))
            if item is None or (item is int and not _INT_RANGE[0] <= value < _INT_RANGE[1]):
                return None
            call[slot] = value.item() if item is np.generic else value
        returned = []
        if sizes.returns:
            if device and not arrays:
                return None  # no device array to place the returned ones beside
            new = sys.modules["cupy"].empty if device else np.empty
            for slot, shape, dtype in sizes.returns:
                out = new(shape, dtype=dtype)
                returned.append(out)
                call[slot] = out.data.ptr if device else out.ctypes.data
        return call, returned

    def _given_for(self, keys: tuple):
        """The names among a call's keywords ``keys`` that are not parameters (sizes beside them, as NPBench passes
        them; checked against the shapes by :meth:`quick`), or ``False`` where the keywords do not name every
        parameter (kept per order of keywords)."""
        given = tuple(k for k in keys if k not in self._name_set)
        if len(keys) - len(given) != len(self._name_set):
            given = False
        else:
            unknown = frozenset(k for k in given if k not in self.symbol_names)
            if unknown and unknown not in self._ignored:
                return False  # the general path warns once that it ignores them (bind_names)
            given = tuple(k for k in given if k in self.symbol_names)
        if len(self._given) >= _KEPT_SIZES:
            self._given.clear()
        self._given[keys] = given
        return given

    def _for_sizes(self, layout: tuple):
        """What the common path needs for the input arrays' ``layout`` (each one's shape and strides; kept): the launch
        values that follow from the shapes, each returned array's slot, shape and dtype; ``None`` where the shapes do
        not fit the program or an array is not C-contiguous (the general path says why). New sizes are checked by
        ``check_sizes``."""
        shapes, strides = layout[0::2], layout[1::2]
        for shape, stride, (_, dtype) in zip(shapes, strides, self._arrays):
            if len(shape) != len(stride) or tuple(stride) != c_strides(shape, dtype.itemsize):
                return None
        symbols = {}
        for (name, _), shape in zip(self._arrays, shapes):
            dims = self.dims[name]
            if len(shape) != len(dims):
                return None
            for sym, size in zip(dims, shape):
                if sym is not None:
                    symbols.setdefault(sym, int(size))
        if not self._needed <= symbols.keys():
            return None
        if any(self.shape(name, symbols) != shape for (name, _), shape in zip(self._arrays, shapes)):
            return None
        if self._check_sizes is not None:
            self._check_sizes(symbols)
        call = [symbols.get(a.name) if a.kind == "symbol" else None for a in self.host_args]
        slots = {a.name: i for i, a in enumerate(self.host_args)}
        sizes = _Sizes(
            call=tuple(call),
            nbytes=tuple(math.prod(shape) * dtype.itemsize for shape, (_, dtype) in zip(shapes, self._arrays)),
            returns=tuple((slots[n], self.shape(n, symbols), dtype) for n, dtype in self.returns),
            symbols=symbols,
        )
        if len(self._sizes) >= _KEPT_SIZES:
            self._sizes.clear()
        self._sizes[layout] = sizes
        return sizes
