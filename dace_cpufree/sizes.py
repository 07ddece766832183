"""Integer roundings of symbolic sizes, shared by the passes and the generator.

DaCe writes the size of the slice ``x[1:M:3]`` as ``ceiling(M/3 - 1/3)``. Printed as C++ (``ceil(M / 3 - 1 / 3)``)
or printed and parsed back by DaCe's expansions, its terms are divided as integers one by one: ``M / 3`` rounded
down, one element short for M = 5 or 8. As ``int_ceil(M - 1, 3)``, DaCe's own integer rounding of the whole
numerator, it prints, parses back and computes right.
"""

from __future__ import annotations

import dace
import sympy


def integer_rounding(expr):
    """``expr`` with every ``ceiling``/``floor`` of an integer over a constant as ``int_ceil``/``int_floor``
    (anything else is returned as it is)."""
    if not isinstance(expr, sympy.Basic) or not expr.has(sympy.ceiling, sympy.floor):
        return expr
    expr = expr.replace(sympy.ceiling, _rewrite(sympy.ceiling, dace.symbolic.int_ceil))
    return expr.replace(sympy.floor, _rewrite(sympy.floor, dace.symbolic.int_floor))


def _rewrite(rounding, integer):
    def rewrite(arg):
        numerator, denominator = sympy.fraction(sympy.together(arg))
        if denominator.is_Integer and denominator > 1 and numerator.is_integer:
            return integer(sympy.expand(numerator), denominator)
        return rounding(arg)

    return rewrite
