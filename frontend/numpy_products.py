"""``np.prod`` inside a ``@dace.program``.

DaCe 2.0.0b1 implements the method ``a.prod(axis=...)`` (the ``multiply`` ufunc's reduction) but not the function
``np.prod``, which it calls on the host as a Python callback (a persistent kernel refuses those). Registered here
with DaCe's operator repository, ``np.prod(a, axis=..., keepdims=...)`` is the same reduction the method makes, so
it runs as a reduction of the grid like ``np.sum``.
"""

from __future__ import annotations

from dace.frontend.common import op_repository as oprepo
from dace.frontend.python.replacements.ufunc import implement_ufunc_reduce

from dace_cpufree.errors import NotPersistableError

from .arguments import call_site


@oprepo.replaces("numpy.prod")
def _prod(pv, sdfg, state, a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
    """``np.prod`` as DaCe's ``a.prod(...)``: ``axis`` (None, an int or a tuple) and ``keepdims``; ``dtype``, ``out``,
    ``initial`` and ``where`` are refused with a fix."""
    for name, value, fix in (
        ("dtype", dtype, "convert first: np.prod(a.astype(np.float64))"),
        ("out", out, "assign the result: b[:] = np.prod(a, axis=0)"),
        ("initial", initial, "multiply the result by it"),
        ("where", where, "use np.prod(np.where(mask, a, 1))"),
    ):
        if value is not None:
            raise NotPersistableError(f"{call_site(pv, 'np.prod(...)')}: {name}= is not supported. Fix: {fix}.")
    if not isinstance(a, str) or a not in sdfg.arrays:
        raise NotPersistableError(
            f"{call_site(pv, 'np.prod(...)')}: the argument is not an array or scalar of the program. Fix: multiply "
            "the values directly."
        )
    return implement_ufunc_reduce(pv, None, sdfg, state, "multiply", [a], {"axis": axis, "keepdims": keepdims})[0]
