"""C++ text of symbolic expressions, shared by the library (frontend, passes) and the code generator.

The library's expansions and the generator print sizes, offsets and strides the same way: through :func:`cexpr`,
whose integer roundings (:func:`~dace_cpufree.sizes.integer_rounding`) compute what the program means.
"""

from __future__ import annotations

import dace
from dace.codegen.common import sym2cpp

from dace_cpufree.sizes import integer_rounding

#: C++ type of an index, an offset or an iteration count
INDEX_T = "long long"


def cexpr(expr) -> str:
    """C++ text of a symbolic expression (sympy, int or string)."""
    if isinstance(expr, str):
        expr = dace.symbolic.pystr_to_symbolic(expr)
    return sym2cpp(integer_rounding(expr))  # DaCe prints ceil(M / 3 - 1 / 3): rounded term by term, a host function


def indent(lines: list[str], n: int = 1) -> list[str]:
    """``lines`` indented by ``n`` levels of four spaces."""
    return ["    " * n + line for line in lines]
