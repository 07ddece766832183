"""Arguments of a call as the launch takes them: scalar values checked against the declared types, device
pointers of CuPy-like arrays, and what a call owns for an argument."""

from __future__ import annotations

import difflib
import math
import sys
import warnings
from dataclasses import dataclass

import dace
import numpy as np
from dace import data as dt

from dace_cpufree.errors import ArgumentError


class IgnoredKeywordWarning(UserWarning):
    """A call passed keywords that are neither parameters nor size symbols of the program: they are ignored."""


def _close_name(key: str, missing: list[str]) -> str:
    """``'key' is no parameter: did you mean 'name'?`` with the missing parameter closest to ``key``, if any."""
    close = difflib.get_close_matches(key, missing, n=1, cutoff=0.6)
    return f"'{key}' is no parameter: did you mean '{close[0]}'?" if close else f"'{key}' is no parameter"


@dataclass
class Bound:
    """An argument as the launch passes it, and what the call owns or copies back for it."""

    pointer: int
    host: np.ndarray | None = None  # a NumPy array copied to the device and back
    device: int | None = None  # device buffer owned by this call
    back: tuple[int, int, int] | None = None  # (destination, symmetric buffer, bytes) copied back after the run


@dataclass(frozen=True)
class _Sizes:
    """For one layout of the input arrays (each one's shape and C-contiguous strides, in the order of
    ``Signature._arrays``): the launch values with the symbol arguments' filled in, each returned array's slot, shape,
    dtype."""

    call: tuple  # the launch values, the symbol arguments' filled in
    nbytes: tuple  # each input array's bytes
    returns: tuple
    symbols: dict  # the size symbols read off the shapes


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
    expected = _c_strides(shape, dtype.itemsize)
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


# ---- the program's parameters, read off the SDFG once -------------------------------------------------------

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


def _c_strides(shape: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    strides, step = [], itemsize
    for size in reversed(shape):
        strides.append(step)
        step *= size
    return tuple(reversed(strides))


def _span(value, device: bool) -> tuple[tuple[int, int] | None, bool]:
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


class Signature:
    """A program's parameters as its launch takes them, read off the SDFG once (DaCe's property access and sympy
    are slow per call).

    :meth:`quick` binds a call whose arguments are all of the common kind (every parameter named, with or without
    size symbols beside them that equal what the shapes give, as NPBench calls a program; or every one given in
    order; arrays of the program's rank, dtype and C-contiguous strides, on the device for a GPU backend
    or NumPy arrays for the host emulation; scalars of a built-in or NumPy scalar type) with plain comparisons and
    what it worked out for the same sizes before: each new set of sizes is checked once (``check_sizes``). Any
    other call returns ``None`` from :meth:`quick` and takes the general path (:meth:`bind_names`,
    :meth:`check_values`, :meth:`infer_symbols`), which accepts more and words every refusal.

    :param device: arrays live on the device (not the host emulation).
    :param quick: whether :meth:`quick` applies at all (not for symmetric arrays, which are copied per call).
    :param copied: names of arrays the launch copies in and back whatever their type (symmetric arrays).
    """

    def __init__(self, sdfg, host_args: list, device: bool, quick: bool, check_sizes=None, copied=frozenset()):
        self.program = sdfg.name
        self.copied = copied  # arrays the launch always copies in and back (symmetric ones)
        self.names = list(sdfg.arg_names)
        self.symbol_names = set(map(str, sdfg.symbols))
        self.host_args = host_args
        self.kinds = {a.name: a for a in host_args}
        self.declared_shapes = {n: d.shape for n, d in sdfg.arrays.items() if isinstance(d, dt.Array)}
        # which symbol each array dimension carries (None: not one)
        self.dims = {
            name: [str(d) if dace.symbolic.issymbolic(d) and str(d) in self.symbol_names else None for d in shape]
            for name, shape in self.declared_shapes.items()
        }
        arrays = [a for a in host_args if a.kind == "array"]
        scalars = [a for a in host_args if a.kind == "scalar"]
        self.dtypes = {a.name: np.dtype(a.desc.dtype.as_numpy_dtype()) for a in arrays}
        self.facts = {  # per array: its declared type (for errors) and rank
            a.name: (f"{a.desc.dtype.to_string()}{list(a.desc.shape)}", len(self.dims.get(a.name, ()))) for a in arrays
        }
        self.returns = [
            (n, np.dtype(d.dtype.as_numpy_dtype()))
            for n, d in sdfg.arrays.items()
            if n.startswith("__return") and not d.transient
        ]
        self._shapes = {}  # symbol values -> {container: shape}
        self._last_key, self._last_shapes = None, None
        self.device = device
        # the common path's facts
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
        self._ignored = set()  # the sets of unknown keywords ignored (and warned about) so far
        self._scalars = [(slots[a.name], a.name, _scalar_types(self.kinds[a.name])) for a in scalars]
        self._sizes = {}  # the input arrays' shapes and strides -> what the common path needs for them (_for_sizes)
        self._kind = None  # the type of array the common path takes, once known (_array_type)
        self._check_sizes = check_sizes
        self._symbol_args = [a.name for a in host_args if a.kind == "symbol"]
        # the symbols that the declared shapes of the input and returned arrays need, and the symbol arguments
        shaped = [a.name for a in inputs] + [n for n, _ in self.returns]
        dims = [d for n in shaped for d in self.declared_shapes[n] if dace.symbolic.issymbolic(d)]
        self._needed = {str(s) for d in dims for s in d.free_symbols} | set(self._symbol_args)

    # ---- the common path --------------------------------------------------------------------------------------

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
            if len(shape) != len(stride) or tuple(stride) != _c_strides(shape, dtype.itemsize):
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

    # ---- the general path -------------------------------------------------------------------------------------

    def bind_names(self, args: tuple, kwargs: dict) -> dict:
        """The call's values by parameter (and size symbol) name; an :class:`ArgumentError` for a missing or doubled
        one, naming the unknown keyword that is close to a missing parameter (a misspelt name). With every parameter
        given, a keyword that is neither a parameter nor a size symbol (NPBench passes every value of a benchmark's
        preset, ``nbody``'s ``tEnd`` too) is ignored, as upstream DaCe ignores it, with one warning per set of such
        keywords (:class:`IgnoredKeywordWarning`)."""
        names = self.names
        if len(args) > len(names):
            raise ArgumentError(
                f"{self.program} takes {len(names)} arguments ({', '.join(names)}), got {len(args)}. Fix: leave out "
                "the extra ones (size symbols are read off the arrays' shapes, or given by name)."
            )
        values, unknown = dict(zip(names, args)), []
        for key, value in kwargs.items():
            if key in values:
                raise ArgumentError(
                    f"{self.program}: argument '{key}' given twice (in order and by name). Fix: give it once."
                )
            if key in self._name_set or key in self.symbol_names:
                values[key] = value
            else:
                unknown.append(key)
        missing = [n for n in names if n not in values]
        if missing:
            hints = "; ".join(_close_name(key, missing) for key in unknown)
            raise ArgumentError(
                f"{self.program}: missing argument(s) {', '.join(missing)}{f' ({hints})' if hints else ''}. Fix: pass "
                f"every parameter, in order or by name: {self.program}({', '.join(names)})."
            )
        if unknown and frozenset(unknown) not in self._ignored:
            self._ignored.add(frozenset(unknown))
            several = len(unknown) > 1
            what = "are neither parameters nor size symbols" if several else "is neither a parameter nor a size symbol"
            warnings.warn(
                f"{self.program}: keyword{'s' if several else ''} {', '.join(map(repr, unknown))} {what} of the "
                "program; ignored, as upstream DaCe ignores them.",
                IgnoredKeywordWarning,
                stacklevel=4,
            )
        return values

    def check_values(self, values: dict) -> dict:
        """Arrays and scalars as the kernel takes them (:func:`array_value`, :func:`scalar_value`), or an
        :class:`ArgumentError` naming the parameter, what it expects and the fix."""
        for name, value in values.items():
            arg = self.kinds.get(name)
            if arg is None or arg.kind == "symbol":
                continue
            if arg.kind == "array":
                declared, rank = self.facts[name]
                values[name] = array_value(self.program, arg, value, rank, declared, self.dtypes[name])
            else:
                values[name] = scalar_value(self.program, arg, value)
        spans = []
        for name, value in values.items():
            if name in self.kinds and self.kinds[name].kind == "array":
                span, by_pointer = _span(value, self.device)
                spans.append((name, span, self.kinds[name].written, by_pointer and name not in self.copied))
        shared = shared_written_memory(spans)
        if shared is not None:
            raise overlap_error(self.program, shared)
        return values

    def infer_symbols(self, values: dict, fixed: dict | None = None) -> dict:
        """The size symbols: given as keywords, ``fixed`` (the PE's), else read off the arrays' shapes."""
        symbols = {k: v for k, v in values.items() if k in self.symbol_names}
        for name, value in symbols.items():
            if not is_integer(value):
                raise ArgumentError(
                    f"{self.program}: size '{name}' is {value!r} ({type(value).__name__}); sizes are integers. "
                    f"Fix: pass {name} as an int (int({name}) if the value is whole)."
                )
        symbols.update(fixed or {})
        for name, value in values.items():
            plan = self.dims.get(name)  # the symbol each dimension carries (None: not one)
            if plan is not None and hasattr(value, "shape"):
                if len(value.shape) != len(plan):
                    raise ArgumentError(
                        f"{self.program}: '{name}' has {len(value.shape)} dimensions, the program expects "
                        f"{len(plan)} (shape {self.declared_shapes[name]}). Fix: pass an array of {len(plan)} "
                        f"dimensions ({name}.reshape(...)), or declare the parameter with {len(value.shape)} "
                        "dimension(s)."
                    )
                for sym, size in zip(plan, value.shape):
                    if sym is not None:
                        symbols.setdefault(sym, int(size))
        missing = [n for n in self._symbol_args if n not in symbols]
        if missing:
            raise ArgumentError(f"{self.program}: cannot infer symbol(s) {', '.join(missing)}; pass them as keywords.")
        return symbols

    def sizes_origin(self, name: str, values: dict, symbols: dict, fixed: dict | None = None) -> tuple[str, list]:
        """Where the sizes in the declared shape of ``name`` came from, for an error: ``("declared (N, M): N = 8 read
        off 'x', M = 3 given", ["M"])`` with the names given as keywords. The precedence is
        :meth:`infer_symbols`'s: the PE's values (``fixed``), then keywords, then the first array in the call's order
        whose shape carries the symbol."""
        declared = tuple(self.declared_shapes[name])
        used = dict.fromkeys(
            str(s)
            for d in declared
            if dace.symbolic.issymbolic(d)
            for s in sorted(d.free_symbols, key=str)
            if str(s) in self.symbol_names
        )
        parts, given = [], []
        for sym in used:
            if fixed and sym in fixed:
                origin = "set by the PE"
            elif sym in values:
                origin = "given"
                given.append(sym)
            else:
                source = next(
                    (n for n, v in values.items() if hasattr(v, "shape") and sym in (self.dims.get(n) or ())), None
                )
                origin = f"read off '{source}'"
            parts.append(f"{sym} = {symbols.get(sym)} {origin}")
        shown = "(" + ", ".join(map(str, declared)) + ("," if len(declared) == 1 else "") + ")"
        return f"declared {shown}" + (": " + ", ".join(parts) if parts else ""), given

    def shape(self, name: str, symbols: dict) -> tuple[int, ...]:
        """The shape the program declares for ``name`` at these sizes (sympy evaluation, kept per sizes)."""
        if symbols == self._last_key:
            shapes = self._last_shapes
        else:
            shapes = self._shapes.setdefault(tuple(sorted(symbols.items())), {})
            self._last_key, self._last_shapes = dict(symbols), shapes
        if name not in shapes:
            shapes[name] = tuple(int(dace.symbolic.evaluate(s, symbols)) for s in self.declared_shapes[name])
        return shapes[name]

    def new_returns(self, values: dict, symbols: dict) -> list[str]:
        """Allocates the returned arrays into ``values`` (CuPy arrays when an argument is on the device) and returns
        their names."""
        if not self.returns:
            return []
        like_gpu = any(device_pointer(v) is not None for v in values.values())
        for name, dtype in self.returns:
            shape = self.shape(name, symbols)
            if like_gpu:
                import cupy

                values[name] = cupy.empty(shape, dtype=dtype)
            else:
                values[name] = np.empty(shape, dtype=dtype)
        return [name for name, _ in self.returns]
