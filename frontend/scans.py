"""``np.cumsum`` inside a ``@dace.program``: a three-level scan of grid-wide steps.

DaCe has no implementation of ``np.cumsum`` or ``ndarray.cumsum`` (it calls NumPy on the host as a callback, and
refuses the method). Registered here with DaCe's operator repository, either call becomes a nested program: inclusive
scans of chunks of :data:`CHUNK` elements (one thread each), exclusive scans of the chunk totals (:data:`CHUNK` per
thread), one thread for the ``n / CHUNK**2`` totals of those, and a map adding each element's two offsets. ``O(n)``
work, three grid syncs, ``CHUNK`` sequential additions per thread in the first two steps; the emulation's race
checker sees its accesses like any other program's.

Supported: arrays of any shape, flattened (``axis=None``, C order) or along ``axis`` (each line scanned on its own;
the array is copied to flat C order and back), any numeric type; ``dtype=`` as NumPy (default: NumPy's
accumulator type, ``int64`` for smaller integers and booleans). Refused with a fix: ``out=``. The sums are added in a
different order than NumPy's sequential loop: floating-point results agree to rounding, not bitwise.
"""

# ruff: noqa: F821  (DaCe programs: the sizes are symbols)
# No ``from __future__ import annotations``: DaCe reads the program's annotations, which name local types.

import functools

import dace
import numpy as np
from dace.frontend.common import op_repository as oprepo
from dace.memlet import Memlet

from dace_cpufree.errors import NotPersistableError

#: elements per thread in the first two levels
CHUNK = 256
_L, _P1, _P2 = "__cpufree_scan_n", "__cpufree_scan_p1", "__cpufree_scan_p2"
_R, _C = "__cpufree_scan_rows", "__cpufree_scan_cols"


@functools.cache
def _scan(in_type, out_type) -> dace.SDFG:
    """The scan along the middle axis of an ``R x n x C`` array stored flat (C order): every ``(r, c)`` line is
    scanned on its own; ``R = C = 1`` for a 1-D or flattened array."""
    n, p1, p2 = dace.symbol(_L), dace.symbol(_P1), dace.symbol(_P2)
    rows, cols = dace.symbol(_R), dace.symbol(_C)
    zero = out_type.type(0)
    k = CHUNK

    @dace.program
    def cumsum_lines(_in: in_type[rows * n * cols], _out: out_type[rows * n * cols]):
        tot1 = np.empty((rows, p1, cols), dtype=out_type)
        ex1 = np.empty((rows, p1, cols), dtype=out_type)
        tot2 = np.empty((rows, p2, cols), dtype=out_type)
        off2 = np.empty((rows, p2, cols), dtype=out_type)
        for r, p, c in dace.map[0:rows, 0:p1, 0:cols]:  # inclusive scans of chunks, one thread each
            s = zero
            for i in range(p * k, min(p * k + k, n)):
                s = s + _in[(r * n + i) * cols + c]
                _out[(r * n + i) * cols + c] = s
            tot1[r, p, c] = s
        for r, p, c in dace.map[0:rows, 0:p2, 0:cols]:  # exclusive scans of the chunk totals
            s = zero
            for q in range(p * k, min(p * k + k, p1)):
                ex1[r, q, c] = s
                s = s + tot1[r, q, c]
            tot2[r, p, c] = s
        for r, c in dace.map[0:rows, 0:cols]:  # the n / k^2 totals of those, one thread per line
            s = zero
            for q in range(p2):
                off2[r, q, c] = s
                s = s + tot2[r, q, c]
        for r, i, c in dace.map[0:rows, 0:n, 0:cols]:
            _out[(r * n + i) * cols + c] = off2[r, i // (k * k), c] + ex1[r, i // k, c] + _out[(r * n + i) * cols + c]

    return cumsum_lines.to_sdfg(simplify=True)


def _accumulator(dtype) -> dace.typeclass:
    """NumPy's result type of ``np.cumsum`` without ``dtype=``: integers and booleans narrower than 64 bits
    accumulate in ``int64`` (unsigned: ``uint64``), other types in their own."""
    np_type = np.dtype(dtype.type)
    if np_type.kind == "b" or (np_type.kind == "i" and np_type.itemsize < 8):
        return dace.int64
    if np_type.kind == "u" and np_type.itemsize < 8:
        return dace.uint64
    return dtype


def _refuse(pv, problem: str, fix: str, call: str = "np.cumsum") -> NotPersistableError:
    """The refusal of a ``call`` registered here (``np.cumsum``, ``np.linalg.norm``), at the line being parsed."""
    where = f" at {pv.filename}:{pv.current_lineinfo.start_line}" if getattr(pv, "current_lineinfo", None) else ""
    return NotPersistableError(f"{call}(...){where} {problem}. Fix: {fix}")


def _product(extents):
    return functools.reduce(lambda x, y: x * y, extents, 1)


def _c_order(shape, index: list[str]) -> str:
    """The flat C-order offset of ``index`` in an array of ``shape``."""
    return " + ".join(f"{i} * ({dace.symbolic.symstr(_product(shape[d + 1 :]))})" for d, i in enumerate(index))


def _flattened(sdfg: dace.SDFG, state: dace.SDFGState, a: str, size, dtype=None):
    """A 1-D copy of ``a`` in C order (the scan's nested program takes one dimension), of ``dtype`` (default: its
    own): its access node."""
    desc = sdfg.arrays[a]
    dtype = dtype or desc.dtype
    flat, _ = sdfg.add_transient(f"{a}_flat", [size], dtype, storage=desc.storage, find_new_name=True)
    index = [f"__i{d}" for d in range(len(desc.shape))]
    _, _, exit_node = state.add_mapped_tasklet(
        f"{a}_flatten",
        {i: f"0:{dace.symbolic.symstr(extent)}" for i, extent in zip(index, desc.shape)},
        {"_v": Memlet(data=a, subset=", ".join(index))},
        "_o = _v",
        {"_o": Memlet(data=flat, subset=_c_order(desc.shape, index))},
        external_edges=True,
    )
    return state.out_edges(exit_node)[0].dst


def _copy_flat(state: dace.SDFGState, flat, shape, result: str) -> None:
    """``result`` (of ``shape``) from the flat C-order array at access node ``flat``."""
    index = [f"__i{d}" for d in range(len(shape))]
    entry, exit_node = state.add_map(
        f"{result}_unflatten", {i: f"0:{dace.symbolic.symstr(e)}" for i, e in zip(index, shape)}
    )
    tasklet = state.add_tasklet(f"{result}_unflatten", {"_v"}, {"_o"}, "_o = _v")
    state.add_memlet_path(
        flat, entry, tasklet, dst_conn="_v", memlet=Memlet(data=flat.data, subset=_c_order(shape, index))
    )
    state.add_memlet_path(tasklet, exit_node, state.add_write(result), src_conn="_o",
                          memlet=Memlet(data=result, subset=", ".join(index)))  # fmt: skip


@oprepo.replaces_method("Array", "cumsum")
@oprepo.replaces_method("View", "cumsum")
def _cumsum_method(pv, sdfg: dace.SDFG, state: dace.SDFGState, a: str, axis=None, dtype=None, out=None):
    """``a.cumsum(...)``, as ``np.cumsum(a, ...)``."""
    return _cumsum(pv, sdfg, state, a, axis=axis, dtype=dtype, out=out)


@oprepo.replaces("numpy.cumsum")
def _cumsum(pv, sdfg: dace.SDFG, state: dace.SDFGState, a, axis=None, dtype=None, out=None):
    if not isinstance(a, str) or a not in sdfg.arrays:
        raise _refuse(pv, "needs an array argument", "pass an array (np.cumsum of a scalar is the scalar)")
    desc = sdfg.arrays[a]
    if out is not None:
        raise _refuse(pv, "with out= is not supported inside the kernel", "assign the result: b[:] = np.cumsum(a)")
    ndim = len(desc.shape)
    if axis is not None and not -ndim <= axis < ndim:
        raise _refuse(pv, f"axis {axis} of a {ndim}-D array does not exist", f"use an axis in 0..{ndim - 1}, or none")
    out_type = dace.dtypes.typeclass(np.dtype(dtype).type) if dtype is not None else _accumulator(desc.dtype)
    size = _product(desc.shape)
    if axis is None or ndim == 1:
        rows, length, cols = 1, size, 1
    else:
        axis %= ndim
        rows, length, cols = _product(desc.shape[:axis]), desc.shape[axis], _product(desc.shape[axis + 1 :])
    flat, _ = sdfg.add_transient(f"{a}_cumsum", [size], out_type, storage=desc.storage, find_new_name=True)
    source = state.add_read(a) if ndim == 1 else _flattened(sdfg, state, a, size)
    inner = _scan(desc.dtype, out_type)
    inner = dace.SDFG.from_json(inner.to_json())  # the cached parse stays untouched by nesting
    p1 = dace.symbolic.int_ceil(length, CHUNK)
    mapping = {_L: length, _P1: p1, _P2: dace.symbolic.int_ceil(p1, CHUNK), _R: rows, _C: cols}
    node = state.add_nested_sdfg(inner, {"_in"}, {"_out"}, symbol_mapping=mapping)
    state.add_edge(source, None, node, "_in", Memlet.from_array(source.data, sdfg.arrays[source.data]))
    written = state.add_write(flat)
    state.add_edge(node, "_out", written, None, Memlet.from_array(flat, sdfg.arrays[flat]))
    if axis is None or ndim == 1:
        return flat
    result, _ = sdfg.add_transient(f"{a}_cumsum", desc.shape, out_type, storage=desc.storage, find_new_name=True)
    _copy_flat(state, written, desc.shape, result)
    return result
