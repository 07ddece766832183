"""``np.cumsum`` inside a ``@dace.program``: a three-level scan of grid-wide steps.

DaCe has no implementation of ``np.cumsum`` (it would call NumPy on the host as a callback). Registered here with
DaCe's operator repository, the call becomes a nested program: inclusive scans of chunks of :data:`CHUNK`
elements (one thread each), exclusive scans of the chunk totals (:data:`CHUNK` per thread), one thread for the
``n / CHUNK**2`` totals of those, and a map adding each element's two offsets. ``O(n)`` work, three grid syncs,
``CHUNK`` sequential additions per thread in the first two steps; the emulation's race checker sees its accesses
like any other program's.

Supported: a 1-D array (``axis`` ``None``, 0 or -1) or an array of any shape with ``axis=None`` (flattened, C
order), any numeric type; ``dtype=`` as NumPy (default: NumPy's accumulator type, ``int64`` for smaller integers
and booleans). Refused with a fix: ``axis`` of an array of several dimensions, ``out=``. The sums are added in a
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


@functools.cache
def _scan(in_type, out_type) -> dace.SDFG:
    n, p1, p2 = dace.symbol(_L), dace.symbol(_P1), dace.symbol(_P2)
    zero = out_type.type(0)
    k = CHUNK

    @dace.program
    def cumsum_1d(_in: in_type[n], _out: out_type[n]):
        tot1 = np.empty((p1,), dtype=out_type)
        ex1 = np.empty((p1,), dtype=out_type)
        tot2 = np.empty((p2,), dtype=out_type)
        off2 = np.empty((p2,), dtype=out_type)
        for p in dace.map[0:p1]:  # inclusive scans of chunks, one thread each
            s = zero
            for i in range(p * k, min(p * k + k, n)):
                s = s + _in[i]
                _out[i] = s
            tot1[p] = s
        for p in dace.map[0:p2]:  # exclusive scans of the chunk totals
            s = zero
            for q in range(p * k, min(p * k + k, p1)):
                ex1[q] = s
                s = s + tot1[q]
            tot2[p] = s
        for _z in dace.map[0:1]:  # the n / k^2 totals of those, on one thread
            s = zero
            for q in range(p2):
                off2[q] = s
                s = s + tot2[q]
        for i in dace.map[0:n]:
            _out[i] = off2[i // (k * k)] + ex1[i // k] + _out[i]

    return cumsum_1d.to_sdfg(simplify=True)


def _accumulator(dtype) -> dace.typeclass:
    """NumPy's result type of ``np.cumsum`` without ``dtype=``: integers and booleans narrower than 64 bits
    accumulate in ``int64`` (unsigned: ``uint64``), other types in their own."""
    np_type = np.dtype(dtype.type)
    if np_type.kind == "b" or (np_type.kind == "i" and np_type.itemsize < 8):
        return dace.int64
    if np_type.kind == "u" and np_type.itemsize < 8:
        return dace.uint64
    return dtype


def _refuse(pv, problem: str, fix: str) -> NotPersistableError:
    where = f" at {pv.filename}:{pv.current_lineinfo.start_line}" if getattr(pv, "current_lineinfo", None) else ""
    return NotPersistableError(f"np.cumsum(...){where} {problem}. Fix: {fix}")


def _flattened(sdfg: dace.SDFG, state: dace.SDFGState, a: str, size):
    """A 1-D copy of ``a`` in C order (the scan's nested program takes one dimension): its access node."""
    desc = sdfg.arrays[a]
    flat, _ = sdfg.add_transient(f"{a}_flat", [size], desc.dtype, storage=desc.storage, find_new_name=True)
    index = [f"__i{d}" for d in range(len(desc.shape))]
    offset = " + ".join(f"{i} * ({dace.symbolic.symstr(functools.reduce(lambda x, y: x * y, desc.shape[d + 1 :], 1))})"
                        for d, i in enumerate(index))  # fmt: skip
    _, _, exit_node = state.add_mapped_tasklet(
        f"{a}_flatten",
        {i: f"0:{dace.symbolic.symstr(extent)}" for i, extent in zip(index, desc.shape)},
        {"_v": Memlet(data=a, subset=", ".join(index))},
        "_o = _v",
        {"_o": Memlet(data=flat, subset=offset)},
        external_edges=True,
    )
    return state.out_edges(exit_node)[0].dst


@oprepo.replaces("numpy.cumsum")
def _cumsum(pv, sdfg: dace.SDFG, state: dace.SDFGState, a, axis=None, dtype=None, out=None):
    if not isinstance(a, str) or a not in sdfg.arrays:
        raise _refuse(pv, "needs an array argument", "pass an array (np.cumsum of a scalar is the scalar)")
    desc = sdfg.arrays[a]
    if out is not None:
        raise _refuse(pv, "with out= is not supported inside the kernel", "assign the result: b[:] = np.cumsum(a)")
    if len(desc.shape) > 1 and axis is not None:
        raise _refuse(
            pv,
            f"along axis {axis} of a {len(desc.shape)}-D array is not supported inside the kernel",
            "scan each row or column as a 1-D array in a loop, or scan the whole array with axis=None",
        )
    if len(desc.shape) == 1 and axis not in (None, 0, -1):
        raise _refuse(pv, f"axis {axis} of a 1-D array does not exist", "drop axis, or use axis=0")
    out_type = dace.dtypes.typeclass(np.dtype(dtype).type) if dtype is not None else _accumulator(desc.dtype)
    size = functools.reduce(lambda x, y: x * y, desc.shape, 1)
    result, _ = sdfg.add_transient(pv.get_target_name() if hasattr(pv, "get_target_name") else "cumsum", [size],
                                   out_type, storage=desc.storage, find_new_name=True)  # fmt: skip
    source = state.add_read(a) if len(desc.shape) == 1 else _flattened(sdfg, state, a, size)
    inner = _scan(desc.dtype, out_type)
    inner = dace.SDFG.from_json(inner.to_json())  # the cached parse stays untouched by nesting
    p1 = dace.symbolic.int_ceil(size, CHUNK)
    mapping = {_L: size, _P1: p1, _P2: dace.symbolic.int_ceil(p1, CHUNK)}
    node = state.add_nested_sdfg(inner, {"_in"}, {"_out"}, symbol_mapping=mapping)
    state.add_edge(source, None, node, "_in", Memlet.from_array(source.data, sdfg.arrays[source.data]))
    state.add_edge(node, "_out", state.add_write(result), None, Memlet.from_array(result, sdfg.arrays[result]))
    return result
