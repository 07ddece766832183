"""``np.linalg.cholesky``, ``np.linalg.solve`` and ``np.linalg.inv`` inside the persistent kernel.

DaCe turns these calls into its ``Cholesky``, ``Solve`` and ``Inv`` library nodes, whose implementations call
LAPACK or cuSOLVER from the host. Registered here as the ``"cpufree"`` implementation of each, which
:class:`~.expand_libraries.ExpandLibraryNodesToDataflow` prefers: the factorisation written as a NumPy program of
grid-wide steps (a loop over the columns, a map per update), parsed by DaCe and nested in place of the node, so
that the kernel generator schedules and synchronises it like any other part of the program.

- ``cholesky``: right-looking, column by column (``L[k, k] = sqrt(L[k, k])``, the column below it scaled, the
  trailing lower triangle updated), the upper triangle zeroed; complex matrices as Hermitian (NumPy's meaning).
- ``solve``: LU with partial pivoting (the first row of largest modulus below the diagonal, as NumPy's LAPACK
  picks the largest ``|re| + |im|``: the same rows for real matrices), the right-hand sides eliminated along, then
  back substitution. ``b`` of shape ``(n,)`` or ``(n, k)``. ``inv``: the same with the identity as right-hand side.

Not checked, unlike NumPy: a matrix that is not positive definite (``cholesky``) or is singular (``solve``,
``inv``) gives NaN or infinity in the result instead of raising ``LinAlgError``. The cost is a few grid syncs per
column (``n`` columns): made for the sizes of a kernel's working set, not a replacement for cuSOLVER on large
matrices.
"""

# ruff: noqa: F821, F841  (a DaCe explicit tasklet declares its connectors with << and >>)
# No ``from __future__ import annotations``: DaCe reads the programs' annotations, which name local types.

import functools

import dace
import numpy as np
from dace.libraries.linalg import Cholesky, Inv, Solve
from dace.transformation.transformation import ExpandTransformation

from dace_cpufree.errors import NotPersistableError

from .expand_libraries import source_line

#: the programs' own size symbols, replaced by the node's sizes when nested
_N, _M = "__cpufree_la_n", "__cpufree_la_m"
TYPES = (dace.float32, dace.float64, dace.complex64, dace.complex128)


def _real(dtype):
    return {dace.complex64: dace.float32, dace.complex128: dace.float64}.get(dtype, dtype)


@functools.cache
def _cholesky(dtype) -> dace.SDFG:
    n = dace.symbol(_N)
    hermitian = dtype in (dace.complex64, dace.complex128)

    # Index conditions are written as tasklets that keep the element (an ``if`` in a map becomes a nested SDFG
    # that reads and writes the matrix through different windows, which DaCe cannot inline).
    @dace.program
    def cholesky_lower(_a: dtype[n, n], _b: dtype[n, n]):
        _b[:] = _a
        for k in range(n):
            _b[k, k] = np.sqrt(_b[k, k])
            for i in dace.map[k + 1 : n]:
                _b[i, k] = _b[i, k] / _b[k, k]
            for i, j in dace.map[k + 1 : n, k + 1 : n]:
                with dace.tasklet:
                    lij << _b[i, j]
                    lik << _b[i, k]
                    ljk << _b[j, k]
                    out >> _b[i, j]
                    out = lij - lik * ljk if j <= i else lij
        for i, j in dace.map[0:n, 0:n]:
            with dace.tasklet:
                lij << _b[i, j]
                out >> _b[i, j]
                out = 0 if j > i else lij

    @dace.program
    def cholesky_hermitian(_a: dtype[n, n], _b: dtype[n, n]):
        column = np.empty((n,), dtype=dtype)  # the conjugate of column k
        _b[:] = _a
        for k in range(n):
            _b[k, k] = np.sqrt(np.real(_b[k, k]))
            for i in dace.map[k + 1 : n]:
                _b[i, k] = _b[i, k] / _b[k, k]
            column[:] = np.conj(_b[:, k])
            for i, j in dace.map[k + 1 : n, k + 1 : n]:
                with dace.tasklet:
                    lij << _b[i, j]
                    lik << _b[i, k]
                    ljk << column[j]
                    out >> _b[i, j]
                    out = lij - lik * ljk if j <= i else lij
        for i, j in dace.map[0:n, 0:n]:
            with dace.tasklet:
                lij << _b[i, j]
                out >> _b[i, j]
                out = 0 if j > i else lij

    return (cholesky_hermitian if hermitian else cholesky_lower).to_sdfg(simplify=True)


@functools.cache
def _solve(dtype, form: str) -> dace.SDFG:
    """``form``: ``"matrix"`` (``b`` of shape ``(n, k)``), ``"vector"`` (``(n,)``) or ``"inverse"``."""
    n, m = dace.symbol(_N), dace.symbol(_M)
    real = _real(dtype)

    @dace.program
    def lu_solve(_ain: dtype[n, n], _bin: dtype[n, m], _bout: dtype[n, m]):
        lu = np.copy(_ain)
        _bout[:] = _bin
        row = np.empty((n,), dtype=dtype)
        rhs = np.empty((m,), dtype=dtype)
        size = np.empty((n,), dtype=real)
        largest = np.empty((1,), dtype=real)
        piv = np.empty((n,), dtype=np.int64)
        for k in range(n):
            # the pivot: the first row at or below k of largest modulus in column k
            for i in dace.map[0:n]:
                with dace.tasklet:
                    v << lu[i, k]
                    mod >> size[i]
                    mod = abs(v) if i >= k else -1
            largest[0] = np.max(size)
            piv[k] = n
            for i in dace.map[0:n]:
                with dace.tasklet:
                    v << size[i]
                    top << largest[0]
                    first >> piv(1, lambda x, y: min(x, y))[k]
                    first = i if v == top else n
            p = piv[k]
            row[:] = lu[k, :]
            lu[k, :] = lu[p, :]
            lu[p, :] = row
            rhs[:] = _bout[k, :]
            _bout[k, :] = _bout[p, :]
            _bout[p, :] = rhs
            for i in dace.map[k + 1 : n]:
                lu[i, k] = lu[i, k] / lu[k, k]
            for i, j in dace.map[k + 1 : n, k + 1 : n]:
                lu[i, j] = lu[i, j] - lu[i, k] * lu[k, j]
            for i, j in dace.map[k + 1 : n, 0:m]:
                _bout[i, j] = _bout[i, j] - lu[i, k] * _bout[k, j]
        for k in range(n - 1, -1, -1):
            for j in dace.map[0:m]:
                _bout[k, j] = _bout[k, j] / lu[k, k]
            for i, j in dace.map[0:k, 0:m]:
                _bout[i, j] = _bout[i, j] - lu[i, k] * _bout[k, j]

    @dace.program
    def lu_inverse(_ain: dtype[n, n], _aout: dtype[n, n]):
        eye = np.zeros((n, n), dtype=dtype)
        for i in dace.map[0:n]:
            eye[i, i] = 1
        lu_solve(_ain, eye, _aout)

    @dace.program
    def lu_solve_vector(_ain: dtype[n, n], _bin: dtype[n], _bout: dtype[n]):
        rhs = np.empty((n, 1), dtype=dtype)
        out = np.empty((n, 1), dtype=dtype)
        rhs[:, 0] = _bin
        lu_solve(_ain, rhs, out)
        _bout[:] = out[:, 0]

    return {"matrix": lu_solve, "vector": lu_solve_vector, "inverse": lu_inverse}[form].to_sdfg(simplify=True)


def _operand(node, state, sdfg, connector: str, inputs: bool = True):
    edges = state.in_edges(node) if inputs else state.out_edges(node)
    edge = next(e for e in edges if (e.dst_conn if inputs else e.src_conn) == connector)
    return sdfg.arrays[edge.data.data], edge.data.subset.size()


def _refuse(node, state, what: str) -> NotPersistableError:
    where = source_line(node, state)
    return NotPersistableError(
        f"np.linalg.{type(node).__name__.lower()}{where}: {what}. Fix: compute it before calling the program "
        "(NumPy or CuPy), or pass the operands as 2-D float32/float64/complex64/complex128 arrays."
    )


def _check_type(node, state, dtype) -> None:
    if dtype not in TYPES:
        raise _refuse(node, state, f"element type {dtype} (supported: float32, float64, complex64, complex128)")


def _nest(inner: dace.SDFG, sizes: dict, sdfg: dace.SDFG) -> dace.SDFG:
    """``inner`` (a cached parse) copied, its size symbols replaced by the node's sizes."""
    inner = dace.SDFG.from_json(inner.to_json())
    inner.replace_dict({name: size for name, size in sizes.items()})
    for name in sizes:
        inner.symbols.pop(name, None)
    for size in sizes.values():
        for symbol in getattr(dace.symbolic.pystr_to_symbolic(size), "free_symbols", ()):
            if str(symbol) not in inner.symbols:
                inner.add_symbol(str(symbol), sdfg.symbols.get(str(symbol), dace.int64))
    return inner


@dace.library.expansion
class ExpandCholeskyCpufree(ExpandTransformation):
    """``np.linalg.cholesky`` as grid-wide steps (see the module doc)."""

    environments = []

    @staticmethod
    def expansion(node: Cholesky, state: dace.SDFGState, sdfg: dace.SDFG, **kwargs):
        desc, size = _operand(node, state, sdfg, "_a")
        if len(size) != 2 or not node.lower:
            raise _refuse(node, state, "only the lower factor of one square matrix is computed inside the kernel")
        _check_type(node, state, desc.dtype)
        return _nest(_cholesky(desc.dtype), {_N: size[0]}, sdfg)


@dace.library.expansion
class ExpandSolveCpufree(ExpandTransformation):
    """``np.linalg.solve`` by LU with partial pivoting as grid-wide steps (see the module doc)."""

    environments = []

    @staticmethod
    def expansion(node: Solve, state: dace.SDFGState, sdfg: dace.SDFG, **kwargs):
        a, a_size = _operand(node, state, sdfg, "_ain")
        b, b_size = _operand(node, state, sdfg, "_bin")
        if len(a_size) != 2 or len(b_size) not in (1, 2) or a.dtype != b.dtype:
            raise _refuse(node, state, "the right-hand side must be an array of the matrix's type, shape (n,) or (n,k)")
        _check_type(node, state, a.dtype)
        if len(b_size) == 1:
            return _nest(_solve(a.dtype, "vector"), {_N: a_size[0]}, sdfg)
        return _nest(_solve(a.dtype, "matrix"), {_N: a_size[0], _M: b_size[1]}, sdfg)


@dace.library.expansion
class ExpandInvCpufree(ExpandTransformation):
    """``np.linalg.inv`` as ``solve`` with the identity (see the module doc)."""

    environments = []

    @staticmethod
    def expansion(node: Inv, state: dace.SDFGState, sdfg: dace.SDFG, **kwargs):
        a, size = _operand(node, state, sdfg, "_ain")
        if len(size) != 2:
            raise _refuse(node, state, "only one square matrix is inverted inside the kernel")
        _check_type(node, state, a.dtype)
        return _nest(_solve(a.dtype, "inverse"), {_N: size[0]}, sdfg)


Cholesky.register_implementation("cpufree", ExpandCholeskyCpufree)
Solve.register_implementation("cpufree", ExpandSolveCpufree)
Inv.register_implementation("cpufree", ExpandInvCpufree)
