"""Python's true division of integers is a float: transients that DaCe's frontend typed as integers for it become
float64.

DaCe's ``np.mean`` divides the sum by the count in a Python tasklet (``__out = __inp / N``) that writes a transient
of the input's type: for an integer array the mean was truncated (``np.mean([1, 2, 4, 7, 9])`` gave 4.0, not 4.6;
upstream DaCe alike, docs/dace-limitations.md). The tasklet's code is Python, whose ``/`` gives a float, so its
integer transient output is retyped float64 before simplification turns it into a symbol or a copy of that type.
"""

from __future__ import annotations

import ast

import dace
from dace import dtypes
from dace.sdfg import nodes

_INTEGERS = {dtypes.int8, dtypes.int16, dtypes.int32, dtypes.int64, dtypes.uint8, dtypes.uint16, dtypes.uint32,
             dtypes.uint64}  # fmt: skip


def retype_true_divisions(sdfg: dace.SDFG) -> list[str]:
    """Retypes, in ``sdfg`` and its nested SDFGs, every integer transient that a Python tasklet assigns a true
    division (``x = a / b``) to; returns the containers' names."""
    retyped = []
    for node, state in sdfg.all_nodes_recursive():
        if not (isinstance(node, nodes.Tasklet) and node.language == dtypes.Language.Python):
            continue
        divided = {t.id for stmt in node.code.code if _divides(stmt) for t in stmt.targets if isinstance(t, ast.Name)}
        for edge in state.out_edges(node):
            if edge.src_conn not in divided or edge.data.data is None:
                continue
            desc = state.sdfg.arrays[edge.data.data]
            if desc.transient and desc.dtype in _INTEGERS:
                desc.dtype = dtypes.float64
                retyped.append(edge.data.data)
    return retyped


def _divides(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.BinOp) and isinstance(stmt.value.op, ast.Div)
