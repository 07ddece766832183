"""``np.var``, ``np.std``, ``np.average`` and ``np.tile`` inside a ``@dace.program``: grid-wide steps.

DaCe has no implementation of these functions (it calls NumPy on the host as a callback, which a persistent kernel
refuses). Registered here with DaCe's operator repository, each call becomes steps of the kernel:

- the statistics copy the array into ``R x n x C`` lines (``n`` the reduced axis, ``R`` and ``C`` the axes before
  and after it; ``R = C = 1`` without ``axis``), cast to NumPy's type of the result, and reduce every line in a
  nested program. ``np.var`` and ``np.std`` (and ``A.var()``, ``A.std()``) use NumPy's two passes: the mean, then
  the sum of squared deviations from it, divided by ``n - ddof`` (``std`` takes its square root while copying the
  result out). ``np.average`` is the mean without ``weights``, ``sum(a * w) / sum(w)`` with them (``weights`` of
  ``a``'s shape, or 1-D along ``axis``).
- ``np.tile`` is one map writing every copy of every element, with NumPy's rules for ``reps`` longer or shorter
  than the array's dimensions.

Types as NumPy's: integers and booleans give float64, floating-point types stay theirs; the variance of a complex
array is real (float32 of complex64). Refused with a fix: ``out=``, ``dtype=``, ``where=``, ``mean=``, tuples of
axes, a ``ddof`` or ``reps`` that is not a constant integer, ``returned=True``. The sums are added in the grid's
order: results agree with NumPy's to rounding.
"""

# No ``from __future__ import annotations``: DaCe reads the program's annotations, which name local types.

import functools
import numbers

import dace
import numpy as np
from dace.frontend.common import op_repository as oprepo
from dace.memlet import Memlet

from . import scans
from .scans import _c_order, _product

_R, _N, _C, _DDOF = "__cpufree_stat_rows", "__cpufree_stat_n", "__cpufree_stat_cols", "__cpufree_stat_ddof"


@functools.cache
def _lines_program(acc_type, kind: str) -> dace.SDFG:
    """The nested program reducing every ``(r, c)`` line of an ``R x n x C`` array ``_x`` into ``_out[r, c]``.

    :param acc_type: the type of ``_x`` (and ``_w``), the one the sums are added in.
    :param kind: "mean"; "weighted" (``sum(_x * _w) / sum(_w)``, ``_w`` of ``_x``'s shape); "var" (the mean, then
                 the sum of squared magnitudes of the deviations, divided by ``n - ddof``: ``_out`` is real).
    """
    rows, n, cols, ddof = dace.symbol(_R), dace.symbol(_N), dace.symbol(_C), dace.symbol(_DDOF)
    complex_in = np.dtype(acc_type.type).kind == "c"
    real_type = dace.dtypes.typeclass(np.empty(0, acc_type.type).real.dtype.type)

    if kind == "mean":

        @dace.program
        def lines(_x: acc_type[rows, n, cols], _out: acc_type[rows, cols]):
            _out[:] = np.sum(_x, axis=1) / n

    elif kind == "weighted":

        @dace.program
        def lines(_x: acc_type[rows, n, cols], _w: acc_type[rows, n, cols], _out: acc_type[rows, cols]):
            _out[:] = np.sum(_x * _w, axis=1) / np.sum(_w, axis=1)

    elif complex_in:

        @dace.program
        def lines(_x: acc_type[rows, n, cols], _out: real_type[rows, cols]):
            mean = np.sum(_x, axis=1) / n
            dev_re = np.empty((rows, n, cols), real_type)
            dev_im = np.empty((rows, n, cols), real_type)
            for r, i, c in dace.map[0:rows, 0:n, 0:cols]:
                dev_re[r, i, c] = np.real(_x[r, i, c]) - np.real(mean[r, c])
                dev_im[r, i, c] = np.imag(_x[r, i, c]) - np.imag(mean[r, c])
            _out[:] = np.sum(dev_re * dev_re + dev_im * dev_im, axis=1) / (n - ddof)

    else:

        @dace.program
        def lines(_x: acc_type[rows, n, cols], _out: acc_type[rows, cols]):
            mean = np.sum(_x, axis=1) / n
            dev = np.empty((rows, n, cols), acc_type)
            for r, i, c in dace.map[0:rows, 0:n, 0:cols]:
                dev[r, i, c] = _x[r, i, c] - mean[r, c]
            _out[:] = np.sum(dev * dev, axis=1) / (n - ddof)

    return lines.to_sdfg(simplify=True)


def _refuse(pv, call: str, problem: str, fix: str):
    """The refusal of ``call`` at the line being parsed (the message of :func:`scans._refuse`)."""
    return scans._refuse(pv, problem, fix, call=call)


#: what to write instead of a call of a scalar
_SCALAR_FIXES = {
    "np.var": "the variance of a scalar is 0",
    "np.std": "the deviation of a scalar is 0",
    "np.average": "the average of a scalar is the scalar",
    "np.tile": "np.full(reps, x) repeats a scalar",
}


def _array(pv, sdfg: dace.SDFG, call: str, a) -> dace.data.Array:
    """The descriptor of the array argument ``a`` of ``call``, refused when it is not an array."""
    if not isinstance(a, str) or a not in sdfg.arrays or isinstance(sdfg.arrays[a], dace.data.Scalar):
        raise _refuse(pv, call, "needs an array argument", f"pass an array ({_SCALAR_FIXES[call]})")
    return sdfg.arrays[a]


def _constant_int(value) -> bool:
    """Whether ``value`` is an integer known when the program is parsed (a literal or a closure constant)."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _axis(pv, call: str, axis, ndim: int):
    """``axis`` normalised to ``0..ndim-1`` (or None), refused when it is a tuple, not constant or out of range."""
    if axis is None:
        return None
    if not _constant_int(axis):
        raise _refuse(pv, call, f"with axis={axis!r} is not supported inside the kernel",
                      "pass one constant axis, or None; for several axes, reduce them one at a time")  # fmt: skip
    if not -ndim <= axis < ndim:
        raise _refuse(pv, call, f"axis {axis} of a {ndim}-D array does not exist", f"use an axis in 0..{ndim - 1}")
    return axis % ndim


def _keepdims(pv, call: str, keepdims) -> bool:
    """``keepdims``, refused when it is not known when the program is parsed."""
    if not isinstance(keepdims, (bool, np.bool_)) and not _constant_int(keepdims):
        raise _refuse(pv, call, f"with keepdims={keepdims!r} (not a constant) is not supported inside the kernel",
                      "pass keepdims=True or False")  # fmt: skip
    return bool(keepdims)


def _no_extras(pv, call: str, **extras) -> None:
    """Refuse the arguments of ``call`` that the kernel does not implement (those not None)."""
    fixes = {
        "out": "assign the result: b[:] = {call}(a)",
        "dtype": "cast the input first: {call}(a.astype(np.float64))",
        "where": "select the elements first (np.where) or reduce a slice",
        "mean": "let the call compute the mean",
        "returned": "compute the sum of the weights apart: np.sum(w)",
    }
    for name, value in extras.items():
        if value is not None and value is not False:
            raise _refuse(pv, call, f"with {name}= is not supported inside the kernel", fixes[name].format(call=call))


def _numpy_mean_type(dtype) -> dace.typeclass:
    """NumPy's type of a mean: float64 of integers and booleans, the type itself otherwise."""
    return dace.float64 if np.dtype(dtype.type).kind in "biu" else dtype


def _line_index(shape, axis, index: list[str]) -> tuple[str, str, str]:
    """The ``(r, i, c)`` line coordinates of the element at ``index`` of an array of ``shape``."""
    if axis is None:
        return "0", _c_order(shape, index) or "0", "0"
    r = _c_order(shape[:axis], index[:axis]) or "0"
    c = _c_order(shape[axis + 1 :], index[axis + 1 :]) or "0"
    return r, index[axis], c


def _line_shape(shape, axis) -> tuple:
    """``(R, n, C)`` of an array of ``shape`` reduced along ``axis`` (all of it for None)."""
    if axis is None:
        return 1, _product(shape), 1
    return _product(shape[:axis]), shape[axis], _product(shape[axis + 1 :])


def _to_lines(sdfg: dace.SDFG, state: dace.SDFGState, a: str, axis, dtype):
    """An ``R x n x C`` copy of ``a`` of ``dtype`` (:func:`_line_shape`): its access node."""
    desc = sdfg.arrays[a]
    lines, _ = sdfg.add_transient(f"{a}_lines", _line_shape(desc.shape, axis), dtype, storage=desc.storage,
                                  find_new_name=True)  # fmt: skip
    index = [f"__stat_i{d}" for d in range(len(desc.shape))]
    r, i, c = _line_index(desc.shape, axis, index)
    _, _, exit_node = state.add_mapped_tasklet(
        f"{a}_to_lines",
        {i: f"0:{dace.symbolic.symstr(extent)}" for i, extent in zip(index, desc.shape)},
        {"_v": Memlet(data=a, subset=", ".join(index))},
        "_o = _v",
        {"_o": Memlet(data=lines, subset=f"{r}, {i}, {c}")},
        external_edges=True,
    )
    return state.out_edges(exit_node)[0].dst


def _broadcast_lines(sdfg: dace.SDFG, state: dace.SDFGState, w: str, lines_shape, dtype):
    """An ``R x n x C`` array of ``dtype`` holding the 1-D ``w`` (of ``n`` elements) along every line: its access
    node."""
    lines, _ = sdfg.add_transient(f"{w}_lines", lines_shape, dtype, storage=sdfg.arrays[w].storage, find_new_name=True)
    ranges = {i: f"0:{dace.symbolic.symstr(e)}" for i, e in zip(("__stat_r", "__stat_i", "__stat_c"), lines_shape)}
    _, _, exit_node = state.add_mapped_tasklet(
        f"{w}_to_lines",
        ranges,
        {"_v": Memlet(data=w, subset="__stat_i")},
        "_o = _v",
        {"_o": Memlet(data=lines, subset="__stat_r, __stat_i, __stat_c")},
        external_edges=True,
    )
    return state.out_edges(exit_node)[0].dst


def _from_lines(sdfg: dace.SDFG, state: dace.SDFGState, reduced, shape, axis, keepdims: bool, dtype, code: str):
    """The result of a reduction of an array of ``shape`` along ``axis``, NumPy's shape (with ``keepdims``) and
    ``dtype``, from its ``R x C`` lines at access node ``reduced``; ``code`` computes ``_o`` from ``_v``."""
    if axis is None:
        kept = [1] * len(shape) if keepdims else [1]
        r, c = "0", "0"
    elif keepdims:
        kept = [1 if d == axis else e for d, e in enumerate(shape)]
    else:
        kept = list(shape[:axis]) + list(shape[axis + 1 :])
    result, _ = sdfg.add_transient(f"{reduced.data}_result", kept, dtype, storage=sdfg.arrays[reduced.data].storage,
                                   find_new_name=True)  # fmt: skip
    index = [f"__stat_o{d}" for d in range(len(kept))]
    if axis is not None:
        full = index if keepdims else index[:axis] + ["0"] + index[axis:]
        r, _, c = _line_index(shape, axis, full)
    entry, exit_node = state.add_map(f"{result}_from_lines",
                                     {i: f"0:{dace.symbolic.symstr(e)}" for i, e in zip(index, kept)})  # fmt: skip
    tasklet = state.add_tasklet(f"{result}_from_lines", {"_v"}, {"_o"}, code)
    state.add_memlet_path(reduced, entry, tasklet, dst_conn="_v", memlet=Memlet(data=reduced.data, subset=f"{r}, {c}"))
    state.add_memlet_path(tasklet, exit_node, state.add_write(result), src_conn="_o",
                          memlet=Memlet(data=result, subset=", ".join(index)))  # fmt: skip
    return result


def _reduce(sdfg: dace.SDFG, state: dace.SDFGState, kind: str, a: str, axis, keepdims: bool, ddof=0, weights=None):
    """A reduction of ``a`` as NumPy's result (shape and type): the name of a new transient.

    :param kind: "mean", "weighted" (needs ``weights``), "var" or "std".
    :param a: the array reduced.
    :param axis: the axis reduced, normalised to ``0..ndim-1``, or None for all of them.
    :param keepdims: whether the reduced axes stay, of extent 1.
    :param ddof: NumPy's delta degrees of freedom of "var" and "std".
    :param weights: an array of ``a``'s shape, or 1-D along ``axis``.
    """
    desc = sdfg.arrays[a]
    acc_type = _numpy_mean_type(desc.dtype)
    if weights is not None:  # NumPy: result_type(a, w), and float64 at least for integers and booleans
        acc_type = dace.dtypes.typeclass(np.result_type(acc_type.type, sdfg.arrays[weights].dtype.type).type)
    lines_shape = _line_shape(desc.shape, axis)
    inputs = {"_x": _to_lines(sdfg, state, a, axis, acc_type)}
    if weights is not None and tuple(sdfg.arrays[weights].shape) == tuple(desc.shape):
        inputs["_w"] = _to_lines(sdfg, state, weights, axis, acc_type)
    elif weights is not None:
        inputs["_w"] = _broadcast_lines(sdfg, state, weights, lines_shape, acc_type)
    inner = _lines_program(acc_type, "var" if kind == "std" else kind)
    inner = dace.SDFG.from_json(inner.to_json())  # the cached parse stays untouched by nesting
    mapping = {_R: lines_shape[0], _N: lines_shape[1], _C: lines_shape[2], _DDOF: ddof}
    node = state.add_nested_sdfg(inner, dict.fromkeys(inputs), {"_out": None}, symbol_mapping=mapping)
    for conn, source in inputs.items():
        state.add_edge(source, None, node, conn, Memlet.from_array(source.data, sdfg.arrays[source.data]))
    out_type = inner.arrays["_out"].dtype
    reduced, _ = sdfg.add_transient(f"{a}_{kind}", [lines_shape[0], lines_shape[2]], out_type, storage=desc.storage,
                                    find_new_name=True)  # fmt: skip
    written = state.add_write(reduced)
    state.add_edge(node, "_out", written, None, Memlet.from_array(reduced, sdfg.arrays[reduced]))
    code = "_o = sqrt(_v)" if kind == "std" else "_o = _v"
    return _from_lines(sdfg, state, written, desc.shape, axis, keepdims, out_type, code)


def _ddof(pv, call: str, ddof, correction) -> int:
    """NumPy's ``ddof`` (or its alias ``correction``), refused when it is not a constant integer."""
    if correction is not None and ddof != 0:
        raise _refuse(pv, call, "with both ddof= and correction= is ambiguous", "pass one of them")
    ddof = correction if correction is not None else ddof
    if not _constant_int(ddof):
        raise _refuse(pv, call, f"with ddof={ddof!r} (not a constant integer) is not supported inside the kernel",
                      "pass a constant: ddof=1")  # fmt: skip
    return ddof


def _variance(pv, sdfg, state, kind: str, a, axis, dtype, out, ddof, keepdims, where, mean, correction) -> str:
    call = f"np.{kind}"
    desc = _array(pv, sdfg, call, a)
    _no_extras(pv, call, out=out, dtype=dtype, where=where, mean=mean)
    ddof = _ddof(pv, call, ddof, correction)
    return _reduce(sdfg, state, kind, a, _axis(pv, call, axis, len(desc.shape)), _keepdims(pv, call, keepdims), ddof)


@oprepo.replaces("numpy.var")
def _var(pv, sdfg: dace.SDFG, state: dace.SDFGState, a, axis=None, dtype=None, out=None, ddof=0, keepdims=False,
         *, where=None, mean=None, correction=None):  # fmt: skip
    """``np.var(a, ...)``: NumPy's two passes, the mean then the squared deviations from it."""
    return _variance(pv, sdfg, state, "var", a, axis, dtype, out, ddof, keepdims, where, mean, correction)


@oprepo.replaces("numpy.std")
def _std(pv, sdfg: dace.SDFG, state: dace.SDFGState, a, axis=None, dtype=None, out=None, ddof=0, keepdims=False,
         *, where=None, mean=None, correction=None):  # fmt: skip
    """``np.std(a, ...)``: the square root of :func:`_var`'s result."""
    return _variance(pv, sdfg, state, "std", a, axis, dtype, out, ddof, keepdims, where, mean, correction)


@oprepo.replaces_method("Array", "var")
@oprepo.replaces_method("View", "var")
def _var_method(pv, sdfg: dace.SDFG, state: dace.SDFGState, a: str, axis=None, dtype=None, out=None, ddof=0,
                keepdims=False, *, where=None, mean=None, correction=None):  # fmt: skip
    """``a.var(...)``, as ``np.var(a, ...)``."""
    return _variance(pv, sdfg, state, "var", a, axis, dtype, out, ddof, keepdims, where, mean, correction)


@oprepo.replaces_method("Array", "std")
@oprepo.replaces_method("View", "std")
def _std_method(pv, sdfg: dace.SDFG, state: dace.SDFGState, a: str, axis=None, dtype=None, out=None, ddof=0,
                keepdims=False, *, where=None, mean=None, correction=None):  # fmt: skip
    """``a.std(...)``, as ``np.std(a, ...)``."""
    return _variance(pv, sdfg, state, "std", a, axis, dtype, out, ddof, keepdims, where, mean, correction)


@oprepo.replaces("numpy.average")
def _average(pv, sdfg: dace.SDFG, state: dace.SDFGState, a, axis=None, weights=None, returned=False, *,
             keepdims=False):  # fmt: skip
    """``np.average(a, ...)``: the mean, or ``sum(a * w) / sum(w)`` (no check that the weights' sum is nonzero:
    NumPy raises ``ZeroDivisionError``, the kernel gives inf or NaN)."""
    call = "np.average"
    desc = _array(pv, sdfg, call, a)
    _no_extras(pv, call, returned=returned)
    axis, keepdims = _axis(pv, call, axis, len(desc.shape)), _keepdims(pv, call, keepdims)
    if weights is None:
        return _reduce(sdfg, state, "mean", a, axis, keepdims)
    wdesc = _array(pv, sdfg, call, weights)
    if tuple(wdesc.shape) != tuple(desc.shape):
        if axis is None or len(wdesc.shape) != 1:
            raise _refuse(pv, call, f"weights of shape {tuple(wdesc.shape)} differ from a's {tuple(desc.shape)}",
                          "pass weights of a's shape, or 1-D weights with axis=")  # fmt: skip
        if dace.symbolic.simplify(wdesc.shape[0] - desc.shape[axis]) != 0:
            raise _refuse(pv, call, f"1-D weights of length {wdesc.shape[0]} differ from axis {axis}'s length "
                          f"{desc.shape[axis]}", "size the weights as that axis")  # fmt: skip
    return _reduce(sdfg, state, "weighted", a, axis, keepdims, weights=weights)


@oprepo.replaces("numpy.tile")
def _tile(pv, sdfg: dace.SDFG, state: dace.SDFGState, A, reps):
    """``np.tile(A, reps)``: one map over every copy of every element. As NumPy's: ``reps`` shorter than ``A``'s
    dimensions repeats the last ones, longer adds leading dimensions."""
    call = "np.tile"
    desc = _array(pv, sdfg, call, A)
    reps = tuple(reps) if isinstance(reps, (tuple, list)) else (reps,)
    if not reps or not all(_constant_int(r) and r >= 1 for r in reps):
        raise _refuse(pv, call, f"with reps={reps!r} is not supported inside the kernel",
                      "pass a positive constant integer or a tuple of them, e.g. np.tile(A, (2, 3))")  # fmt: skip
    ndim = max(len(reps), len(desc.shape))
    reps = (1,) * (ndim - len(reps)) + reps
    shape = (1,) * (ndim - len(desc.shape)) + tuple(desc.shape)
    ranges, read, write = {}, [], []
    for d, (rep, extent) in enumerate(zip(reps, shape)):
        size = dace.symbolic.symstr(extent)
        if d >= ndim - len(desc.shape):
            ranges[f"__stat_i{d}"] = f"0:{size}"
            read.append(f"__stat_i{d}")
        if rep > 1:
            ranges[f"__stat_r{d}"] = f"0:{rep}"
        copy = f"__stat_r{d} * ({size})" if rep > 1 else "0"
        element = f"__stat_i{d}" if d >= ndim - len(desc.shape) else "0"
        write.append(f"{copy} + {element}")
    result, _ = sdfg.add_transient(f"{A}_tile", [r * e for r, e in zip(reps, shape)], desc.dtype,
                                   storage=desc.storage, find_new_name=True)  # fmt: skip
    state.add_mapped_tasklet(
        f"{A}_tile",
        ranges,
        {"_v": Memlet(data=A, subset=", ".join(read))},
        "_o = _v",
        {"_o": Memlet(data=result, subset=", ".join(write))},
        external_edges=True,
    )
    return result
