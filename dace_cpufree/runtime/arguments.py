"""Arguments of a call as the launch takes them: a program's parameters read off the SDFG once
(:class:`Signature`), the general path's binding of a call with its checks, and what a call owns for an argument. The
common path is :mod:`.common_path`; the checks of single values are :mod:`.argument_values`."""

from __future__ import annotations

import difflib
import warnings
from dataclasses import dataclass

import dace
import numpy as np
from dace import data as dt

from dace_cpufree.errors import ArgumentError

from .argument_values import (
    array_span,
    array_value,
    device_layout,
    device_pointer,
    is_integer,
    overlap_error,
    producer_stream,
    scalar_value,
    shared_written_memory,
)
from .common_path import CommonPath

#: the value checks that the runtime and the tests import from here
__all__ = [
    "Bound",
    "IgnoredKeywordWarning",
    "Signature",
    "array_value",
    "device_layout",
    "device_pointer",
    "is_integer",
    "producer_stream",
    "scalar_value",
]


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


class Signature(CommonPath):
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
        self._ignored = set()  # the sets of unknown keywords ignored (and warned about) so far
        self._symbol_args = [a.name for a in host_args if a.kind == "symbol"]
        self._prepare_common(host_args, arrays, scalars, quick, check_sizes)

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
                span, by_pointer = array_span(value, self.device)
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
