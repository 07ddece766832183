"""NumPy's result types where DaCe's frontend gives others, fixed on the SDFG before simplification turns the
transients concerned into symbols or copies of their type (docs/dace-limitations.md; upstream DaCe alike):

- Python's true division of integers is a float. DaCe's ``np.mean`` divides the sum by the count in a Python
  tasklet (``__out = __inp / N``) that writes a transient of the input's type: for an integer array the mean was
  truncated (``np.mean([1, 2, 4, 7, 9])`` gave 4.0, not 4.6). The tasklet's code is Python, so its integer
  transient output is retyped float64.
- NumPy promotes integer arithmetic with such a float; DaCe's frontend typed it from the integer mean
  (``np.mean(a) * 2 + 1`` of an integer ``a`` gave an integer, ``(a - np.mean(a)) * 2`` was truncated before the
  product). The retyping follows everything computed from the retyped transients, and rewrites the frontend's integer
  casts of them in tasklet code (``promote_from_retyped``).
- Python rebinds a variable to a float: ``s = 0``, then ``s = s + x[i]``. The frontend keeps one container, typed
  int64 by the first assignment, and truncated the sum; such a scalar variable takes the float's type, and the
  retyping follows it the same way (``promote_from_retyped``, also where no mean is involved).
- A sum of booleans counts them. DaCe's ``np.sum(A > t)`` reduces into a bool transient, so the count was 1 (or 0);
  NumPy's is an int64. The reduction's bool output transient is retyped int64.
"""

from __future__ import annotations

import ast

import dace
from dace import dtypes
from dace.frontend.operations import detect_reduction_type
from dace.libraries.standard.nodes import Reduce
from dace.sdfg import nodes

from dace_cpufree.errors import NotPersistableError
from dace_cpufree.vocabulary import control_reads

from .float_promotion import is_integer, promote_from_retyped, retype


def retype_true_divisions(sdfg: dace.SDFG) -> list[str]:
    """Retypes, in ``sdfg`` and its nested SDFGs, every integer transient that a Python tasklet assigns a true
    division (``x = a / b``) to, and what the program computes from it with NumPy's promotion, with the scalar
    variables rebound to floats (``promote_from_retyped``, which runs also where there is no such division); returns
    the containers' names."""
    seeds = _retype_divisions(sdfg)
    return [name for _, name in seeds] + promote_from_retyped(sdfg, seeds)


def _retype_divisions(sdfg: dace.SDFG) -> list[tuple[dace.SDFG, str]]:
    retyped = []
    for node, state in sdfg.all_nodes_recursive():
        if not (isinstance(node, nodes.Tasklet) and node.language == dtypes.Language.Python):
            continue
        divided = {t.id for stmt in node.code.code if _divides(stmt) for t in stmt.targets if isinstance(t, ast.Name)}
        for edge in state.out_edges(node):
            if edge.src_conn not in divided or edge.data.data is None:
                continue
            desc = state.sdfg.arrays[edge.data.data]
            # an integer or a bool (np.mean(A > t), whose sum is counted, below); in a nested SDFG also a container
            # bound to a transient of its caller (a nested program's `return np.mean(x)`), which the promotion
            # follows outwards (one bound to an argument keeps the argument's type: NumPy's assignment)
            bound = desc.transient or _binds_transient(state.sdfg, edge.data.data)
            if bound and is_integer(desc, bools=True):
                retyped.append((state.sdfg, edge.data.data))
                retyped += retype(state.sdfg, edge.data.data, dtypes.float64)
    return retyped


def _binds_transient(sdfg: dace.SDFG, name: str) -> bool:
    """Whether container ``name`` of a nested SDFG is bound to a transient of its caller."""
    node, state = sdfg.parent_nsdfg_node, sdfg.parent
    if node is None or state is None:
        return False
    edges = [e for e in state.in_edges(node) if e.dst_conn == name] + [
        e for e in state.out_edges(node) if e.src_conn == name
    ]
    return any(e.data.data is not None and state.sdfg.arrays[e.data.data].transient for e in edges)


def _divides(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.BinOp) and isinstance(stmt.value.op, ast.Div)


def retype_bool_sums(sdfg: dace.SDFG) -> list[str]:
    """Retypes, in ``sdfg`` and its nested SDFGs, every bool transient that a sum or product ``Reduce`` of booleans
    writes to int64 (NumPy's type of ``np.sum`` of a bool array); returns the containers' names."""
    counting = (dtypes.ReductionType.Sum, dtypes.ReductionType.Product)
    retyped = []
    for node, state in sdfg.all_nodes_recursive():
        if not isinstance(node, Reduce) or detect_reduction_type(node.wcr) not in counting:
            continue
        for edge in state.out_edges(node):
            desc = state.sdfg.arrays[edge.data.data] if edge.data.data else None
            if desc is not None and desc.transient and desc.dtype == dtypes.bool_:
                retype(state.sdfg, edge.data.data, dtypes.int64)
                retyped.append(edge.data.data)
    return retyped


def _mean_division(node) -> bool:
    """The division of ``np.mean``'s expansion: DaCe's elementwise tasklet ``__out = (__inp / n)`` (a division the
    program writes is a ``_Div_`` tasklet of ``__in1``)."""
    if not (isinstance(node, nodes.Tasklet) and node.label.startswith("_elementwise_")):
        return False
    stmts = node.code.code
    return (
        len(stmts) == 1
        and _divides(stmts[0])
        and isinstance(stmts[0].value.left, ast.Name)
        and stmts[0].value.left.id == "__inp"
    )


def check_mean_bindings(sdfg: dace.SDFG) -> None:
    """Refuses ``m = np.mean(...)`` read inside a ``dace.map`` body (or a nested program called inside one) or in a
    condition or loop bound. DaCe's frontend reduces the sum into a container named ``m`` and divides it into another
    (``m_0``), which the name ``m`` stands for in the program's dataflow; in a nested scope and in control flow,
    though, ``m`` binds to the container of that name: the sum (upstream DaCe on the CPU gives the same wrong result).
    Signature: a reduction's output that the mean's division reads and a nested SDFG or the control flow reads too
    (a sum the program divides itself, ``s / n``, is another tasklet: not refused)."""
    controls = {}
    for node, state in sdfg.all_nodes_recursive():
        if not (isinstance(state, dace.SDFGState) and isinstance(node, Reduce)):
            continue
        for out in state.out_edges(node):
            name, owner = out.data.data, state.sdfg
            readers = [
                leaf.dst
                for st in owner.states()
                for access in st.data_nodes()
                if access.data == name
                for edge in st.out_edges(access)
                for leaf in st.memlet_tree(edge).leaves()
            ]
            if not any(_mean_division(r) for r in readers):
                continue
            nested = [r for r in readers if isinstance(r, nodes.NestedSDFG)]
            if id(owner) not in controls:
                controls[id(owner)] = control_reads(owner)
            if not nested and name not in controls[id(owner)]:
                continue
            # the map's line; control flow has none (and the reduction's is inside DaCe's frontend)
            info = nested[0].debuginfo if nested else None
            line = f" at {info.filename}:{info.start_line}" if info is not None and info.filename else ""
            place = f"inside a dace.map{line}" if nested else "in a condition or loop bound of the program"
            raise NotPersistableError(
                f"'{name}' (a np.mean result) is read {place}: DaCe's frontend binds '{name}' there to the sum, "
                f"not the mean (a wrong result; upstream DaCe alike). Fix: write '{name} = np.mean(...) + 0.0' or "
                f"'{name} = np.sum(...) / n', or use '{name}' only in array expressions outside maps."
            )


def numpy_result_types(sdfg: dace.SDFG) -> list[str]:
    """Both retypings above; the containers retyped."""
    return retype_true_divisions(sdfg) + retype_bool_sums(sdfg)
