"""Orders of index expressions built from ``Max``/``Min`` and constant shifts, proven from their structure.

The owned ranges of a distributed program (:mod:`.distribute`) are clamps such as ``Max(1, pe * local - 1)``: DaCe's
and sympy's comparisons cannot decide whether two of them may meet. These helpers prove ``x >= y`` the way one does by
hand: ``Max(a, b) + c`` is at least ``a + c`` and at least ``b + c``; ``Min(a, b) + c`` is at most either; two
expressions whose difference is a known integer compare by it, or whose difference cannot be negative given what the
compiler's own symbols are (a PE number is at least 0, the number of PEs and a distributed program's block length at
least 1). They answer "proven" or "not proven", never a guess.
"""

from __future__ import annotations

import functools

import sympy

from dace_cpufree.decomposition import LOCAL_SYMBOL
from dace_cpufree.vocabulary import N_PES_SYMBOL, PE_SYMBOL

#: the least value of each of the compiler's symbols that has one
LEAST = {PE_SYMBOL: 0, N_PES_SYMBOL: 1, LOCAL_SYMBOL: 1}


_CLAMPS = (sympy.Max, sympy.Min)


def _const(x) -> int | None:
    x = sympy.expand(x)
    return int(x) if x.is_Integer else None


def _leaves(x, kind) -> list:
    """``x`` and the expressions it is bounded by through ``kind`` (``sympy.Max``: below; ``sympy.Min``: above): a
    clamp's arguments, each plus the rest of a sum the clamp is a term of."""
    x = sympy.sympify(x)
    out = [x]
    if isinstance(x, kind):
        for a in x.args:
            out += _leaves(a, kind)
    elif isinstance(x, sympy.Add):
        clamps = [t for t in x.args if isinstance(t, kind)]
        if len(clamps) == 1:
            rest = x - clamps[0]
            for a in clamps[0].args:
                out += _leaves(a + rest, kind)
    return out


@functools.lru_cache(maxsize=8192)
def _nonnegative(d) -> bool:
    """Whether ``d >= 0`` is proven: a number, or a clamp-free expression that cannot be negative given the least
    values of the compiler's symbols in it."""
    d = sympy.expand(d)
    if d.is_Integer:
        return bool(d >= 0)
    known = {s: sympy.Dummy(nonnegative=True, integer=True) + LEAST[str(s)] for s in d.free_symbols if str(s) in LEAST}
    if not known or d.has(*_CLAMPS):
        return False
    return sympy.expand(d.xreplace(known)).is_nonnegative is True


def at_least(x, y) -> bool:
    """Whether ``x >= y`` is proven (for every value of the symbols)."""
    return any(_nonnegative(a - b) for a in _leaves(x, sympy.Max) for b in _leaves(y, sympy.Min))


def bounded_by(bound, x) -> bool:
    """Whether ``x`` is one of the terms that clamp ``bound`` (``bound = Max(..., x + 0, ...)`` or ``Min``), or
    ``bound`` itself: the end of a clamped range that ``x`` would be without the clamp."""
    return any(_const(a - x) == 0 for kind in _CLAMPS for a in _leaves(bound, kind))


def _clamped(x) -> bool:
    """Whether ``x`` holds a clamp or one of the compiler's symbols (else DaCe's own comparisons decide as much)."""
    x = sympy.sympify(x)
    return x.has(*_CLAMPS) or any(str(s) in LEAST for s in x.free_symbols)


def disjoint(a, b) -> bool:
    """Whether the ranges ``a`` and ``b`` (DaCe subsets of one array) provably share no element; ranges without clamps
    and the compiler's symbols are left to DaCe (``False`` here)."""
    if not any(_clamped(v) for r in (a, b) for lo, hi, _ in r for v in (lo, hi)):
        return False
    return any(
        at_least(lo_a - 1, hi_b) or at_least(lo_b - 1, hi_a) for (lo_a, hi_a, _), (lo_b, hi_b, _) in zip(a, b)
    )
