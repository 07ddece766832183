"""``np.linalg.norm`` inside a ``@dace.program``: a reduction of the grid.

DaCe has no implementation of ``np.linalg.norm`` (it calls NumPy on the host as a callback, which a persistent
kernel refuses). Registered here with DaCe's operator repository, the call becomes a nested program over the
array's elements in C order: NumPy's ``sqrt`` of the sum of squared magnitudes for ``ord=None`` (vectors: the
2-norm, matrices: Frobenius), ``2`` and ``"fro"``, and for vectors the sum of magnitudes (``ord=1``), their largest
(``np.inf``) and smallest (``-np.inf``). The result is real: float32 for float32 and complex64 arrays, float64 for
the rest, as NumPy's. Refused with a fix: ``axis=``, ``keepdims=``, other orders (the matrix 1-, 2- and inf-norms need
a singular value or column sums). The sums are added in the grid's order: results agree with NumPy's to rounding.
"""

# ruff: noqa: F821  (DaCe programs: the size is a symbol)
# No ``from __future__ import annotations``: DaCe reads the program's annotations, which name local types.

import functools

import dace
import numpy as np
from dace.frontend.common import op_repository as oprepo
from dace.frontend.python.common import StringLiteral
from dace.memlet import Memlet

from dace_cpufree.errors import NotPersistableError

from . import scans
from .scans import _flattened, _product

_N = "__cpufree_norm_n"
#: the kinds of a vector's norm, by NumPy's ``ord`` (a matrix's: "two" only, from None and "fro")
_KINDS = {None: "two", 2: "two", 1: "one", np.inf: "largest", -np.inf: "smallest"}


@functools.cache
def _norm(in_type, out_type, kind: str) -> dace.SDFG:
    """The norm ``kind`` of a 1-D array of ``in_type`` (floating-point or complex) into ``out_type``."""
    n = dace.symbol(_N)
    complex_in = np.dtype(in_type.type).kind == "c"

    if kind == "two" and complex_in:

        @dace.program
        def norm(_in: in_type[n], _out: out_type[1]):
            _out[0] = np.sqrt(np.sum(np.real(_in) * np.real(_in) + np.imag(_in) * np.imag(_in)))

    elif kind == "two":

        @dace.program
        def norm(_in: in_type[n], _out: out_type[1]):
            _out[0] = np.sqrt(np.sum(_in * _in))

    elif kind == "one":

        @dace.program
        def norm(_in: in_type[n], _out: out_type[1]):
            _out[0] = np.sum(np.abs(_in))

    elif kind == "largest":

        @dace.program
        def norm(_in: in_type[n], _out: out_type[1]):
            _out[0] = np.max(np.abs(_in))

    else:

        @dace.program
        def norm(_in: in_type[n], _out: out_type[1]):
            _out[0] = np.min(np.abs(_in))

    return norm.to_sdfg(simplify=True)


def _real(dtype) -> dace.typeclass:
    """NumPy's type of a norm: float32 of float32 and complex64, float64 of everything else."""
    return dace.float32 if np.dtype(dtype.type) in (np.float32, np.complex64) else dace.float64


def _refuse(pv, problem: str, fix: str) -> NotPersistableError:
    return scans._refuse(pv, problem, fix, call="np.linalg.norm")


@oprepo.replaces("numpy.linalg.norm")
def _linalg_norm(pv, sdfg: dace.SDFG, state: dace.SDFGState, x, ord=None, axis=None, keepdims=False):
    if not isinstance(x, str) or x not in sdfg.arrays:
        raise _refuse(pv, "needs an array argument", "pass an array (the norm of a scalar is abs(x))")
    if axis is not None or keepdims:
        raise _refuse(pv, "with axis= or keepdims= is not supported inside the kernel",
                      "compute it per row with a reduction: np.sqrt(np.sum(A * A, axis=1))")  # fmt: skip
    ord = ord.value if isinstance(ord, StringLiteral) else ord
    desc = sdfg.arrays[x]
    ndim = len(desc.shape)
    # NumPy: "fro" of matrices only; a matrix's None is Frobenius, its other orders need column sums or singular values
    if ndim == 1:
        kind = _KINDS.get(ord, "other")
    else:
        kind = "two" if ord in (None, "fro") else "other"
    if kind == "other":
        raise _refuse(pv, f"of ord={ord!r} for a {ndim}-D array is not supported inside the kernel",
                      "use ord=None, 1, 2, np.inf or -np.inf for vectors, None or 'fro' for matrices")  # fmt: skip
    out_type = _real(desc.dtype)
    # integers and booleans are summed as float64, as NumPy converts them; floats and complex numbers as they are
    in_type = desc.dtype if np.dtype(desc.dtype.type).kind in "fc" else dace.float64
    size = _product(desc.shape)
    source = state.add_read(x) if ndim == 1 and in_type == desc.dtype else _flattened(sdfg, state, x, size, in_type)
    inner = dace.SDFG.from_json(_norm(in_type, out_type, kind).to_json())  # the cached parse stays untouched
    node = state.add_nested_sdfg(inner, {"_in"}, {"_out"}, symbol_mapping={_N: size})
    state.add_edge(source, None, node, "_in", Memlet.from_array(source.data, sdfg.arrays[source.data]))
    result, _ = sdfg.add_transient(f"{x}_norm", [1], out_type, storage=desc.storage, find_new_name=True)
    state.add_edge(node, "_out", state.add_write(result), None, Memlet.from_array(result, sdfg.arrays[result]))
    return result
