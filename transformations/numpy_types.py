"""NumPy's result types where DaCe's frontend gives others, fixed on the SDFG before simplification turns the
transients concerned into symbols or copies of their type (docs/dace-limitations.md; upstream DaCe alike):

- Python's true division of integers is a float. DaCe's ``np.mean`` divides the sum by the count in a Python
  tasklet (``__out = __inp / N``) that writes a transient of the input's type: for an integer array the mean was
  truncated (``np.mean([1, 2, 4, 7, 9])`` gave 4.0, not 4.6). The tasklet's code is Python, so its integer
  transient output is retyped float64.
- NumPy promotes integer arithmetic with such a float to float64; DaCe's frontend typed it from the integer mean
  (``np.mean(a) * 2 + 1`` of an integer ``a`` gave an integer, ``(a - np.mean(a)) * 2`` was truncated before the
  product). The retyping follows the frontend's operator tasklets and reductions from the retyped transients on
  (``promote_from_retyped``).
- A sum of booleans counts them. DaCe's ``np.sum(A > t)`` reduces into a bool transient, so the count was 1 (or 0);
  NumPy's is an int64. The reduction's bool output transient is retyped int64.
"""

from __future__ import annotations

import ast

import dace
import numpy as np
from dace import dtypes
from dace.frontend.operations import detect_reduction_type
from dace.sdfg import nodes

from dace_cpufree.errors import NotPersistableError


def retype_true_divisions(sdfg: dace.SDFG) -> list[str]:
    """Retypes, in ``sdfg`` and its nested SDFGs, every integer transient that a Python tasklet assigns a true
    division (``x = a / b``) to, and what the program computes from it with NumPy's promotion
    (``promote_from_retyped``); returns the containers' names."""
    seeds = _retype_divisions(sdfg)
    return [name for _, name in seeds] + promote_from_retyped(seeds)


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
            # an integer or a bool (np.mean(A > t), whose sum is counted, below)
            if desc.transient and np.dtype(desc.dtype.type).kind in "biu":
                retyped.append((state.sdfg, edge.data.data))
                retyped += _retype(state.sdfg, edge.data.data, dtypes.float64)
    return retyped


#: The frontend's tasklets of NumPy's arithmetic operators whose result type is the promotion of their operands'
#: (``_Add_``, ...); a float operand makes the result float64.
PROMOTING_OPERATORS = frozenset(f"_{op}_" for op in ("Add", "Sub", "Mult", "USub", "UAdd"))


def _is_integer(desc) -> bool:
    return np.dtype(desc.dtype.type).kind in "biu"


def promote_from_retyped(seeds: list[tuple[dace.SDFG, str]]) -> list[str]:
    """NumPy's promotion from containers retyped float64 (``seeds``: an SDFG and a container of it) through what the
    frontend typed from their integer type: an integer transient that an operator tasklet (``PROMOTING_OPERATORS``) or
    a reduction writes from a retyped container, and that only such nodes write, is retyped float64 (with the
    descriptors nested SDFGs bind to it, which are followed in turn), and so on from it. One that is only copied into
    integer arrays stays (NumPy casts the float to the array's type on that assignment: the same truncation); a view,
    or one both copied into an integer array and read otherwise, is refused with the fix. Returns the names of the
    containers retyped."""
    pending = list(seeds)
    floats: dict[int, set[str]] = {}
    retyped = []
    while pending:
        by_sdfg: dict[int, tuple[dace.SDFG, set[str]]] = {}
        for sdfg, name in pending:
            by_sdfg.setdefault(id(sdfg), (sdfg, set()))[1].add(name)
        pending = []
        for key, (sdfg, names) in by_sdfg.items():
            known = floats.setdefault(key, set())
            known |= names
            found, inner = _promote_in(sdfg, known)
            retyped += found
            pending += [(sd, n) for sd, n in inner if n not in floats.get(id(sd), ())]
    return retyped


def _promote_in(sdfg: dace.SDFG, floats: set[str]) -> tuple[list[str], list[tuple[dace.SDFG, str]]]:
    """``promote_from_retyped`` within one SDFG; returns the names retyped and the nested SDFGs' containers retyped
    with them."""
    from dace.libraries.standard.nodes import Reduce

    def computes(node) -> bool:
        return isinstance(node, Reduce) or (isinstance(node, nodes.Tasklet) and node.label in PROMOTING_OPERATORS)

    writers: dict[str, list] = {}  # container -> the nodes that write it (through map scopes)
    copies: dict[str, set[str]] = {}  # container -> the containers it is copied into
    other_reads: set[str] = set()  # containers read by anything but a copy
    for state in sdfg.states():
        for node in state.data_nodes():
            for edge in state.in_edges(node):
                if edge.data.data is not None:
                    writers.setdefault(node.data, []).append(state.memlet_path(edge)[0].src)
            for edge in state.out_edges(node):
                if isinstance(edge.dst, nodes.AccessNode):
                    copies.setdefault(node.data, set()).add(edge.dst.data)
                elif edge.data.data is not None:
                    other_reads.add(node.data)
    retyped, inner = [], []
    changed = True
    while changed:
        changed = False
        for state in sdfg.states():
            for node in state.nodes():
                if not computes(node):
                    continue
                reads = {state.memlet_path(e)[0].src for e in state.in_edges(node) if e.data.data is not None}
                if not any(isinstance(r, nodes.AccessNode) and r.data in floats for r in reads):
                    continue
                for edge in state.out_edges(node):
                    name = edge.data.data
                    if name is None or name in floats or not _is_integer(sdfg.arrays[name]):
                        continue
                    desc = sdfg.arrays[name]
                    into_integers = any(_is_integer(sdfg.arrays[c]) and c not in floats for c in copies.get(name, ()))
                    if not desc.transient or not all(computes(w) for w in writers.get(name, [])):
                        continue  # an array the program declared: NumPy keeps its type
                    view = isinstance(desc, dace.data.View)
                    if into_integers and name not in other_reads and not view:
                        continue  # staged for an integer array: truncated there, as NumPy's assignment does
                    if view or into_integers:
                        raise NotPersistableError(
                            f"'{name}' is computed from the mean of an integer array (NumPy: a float64), but DaCe's "
                            f"frontend typed it {desc.dtype.to_string()} and it is "
                            f"{'a view' if view else 'both copied into an integer array and read as a value'}, so it "
                            f"cannot be retyped here (a wrong, truncated result). Fix: take the mean of "
                            f"'a.astype(np.float64)', or write the expression into a float64 array first."
                        )
                    inner += _retype(sdfg, name, dtypes.float64)
                    floats.add(name)
                    retyped.append(name)
                    changed = True
    return retyped, inner


def _divides(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.BinOp) and isinstance(stmt.value.op, ast.Div)


def retype_bool_sums(sdfg: dace.SDFG) -> list[str]:
    """Retypes, in ``sdfg`` and its nested SDFGs, every bool transient that a sum or product ``Reduce`` of booleans
    writes to int64 (NumPy's type of ``np.sum`` of a bool array); returns the containers' names."""
    from dace.libraries.standard.nodes import Reduce

    counting = (dtypes.ReductionType.Sum, dtypes.ReductionType.Product)
    retyped = []
    for node, state in sdfg.all_nodes_recursive():
        if not isinstance(node, Reduce) or detect_reduction_type(node.wcr) not in counting:
            continue
        for edge in state.out_edges(node):
            desc = state.sdfg.arrays[edge.data.data] if edge.data.data else None
            if desc is not None and desc.transient and desc.dtype == dtypes.bool_:
                _retype(state.sdfg, edge.data.data, dtypes.int64)
                retyped.append(edge.data.data)
    return retyped


def _retype(sdfg: dace.SDFG, name: str, dtype) -> list[tuple[dace.SDFG, str]]:
    """Retypes container ``name`` of ``sdfg`` and, recursively, the containers that nested SDFGs bind to it through
    their connectors (a map body reading ``m`` has a descriptor ``m`` of its own, which must agree); returns those
    inner (SDFG, container) pairs."""
    sdfg.arrays[name].dtype = dtype
    inner = []
    for state in sdfg.states():
        for node in state.nodes():
            if not isinstance(node, nodes.NestedSDFG):
                continue
            bound = [(e.dst_conn, node.in_connectors) for e in state.in_edges(node) if e.data.data == name]
            bound += [(e.src_conn, node.out_connectors) for e in state.out_edges(node) if e.data.data == name]
            for conn, connectors in bound:
                if conn not in node.sdfg.arrays or node.sdfg.arrays[conn].dtype == dtype:
                    continue
                if isinstance(connectors.get(conn), dtypes.typeclass) and connectors[conn] != dtypes.typeclass(None):
                    connectors[conn] = dtype
                inner.append((node.sdfg, conn))
                inner += _retype(node.sdfg, conn, dtype)
    return inner


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


def _control_reads(sdfg: dace.SDFG) -> set[str]:
    """The names the control flow of ``sdfg`` (not its nested SDFGs) reads: its blocks' code (branch and loop
    conditions, loop statements) and its interstate edges."""
    names = {str(x) for edge in sdfg.all_interstate_edges() for x in edge.data.read_symbols()}
    for block in sdfg.all_control_flow_blocks():
        for code in block.get_meta_codeblocks() if hasattr(block, "get_meta_codeblocks") else ():
            names |= {str(x) for x in code.get_free_symbols()}
    return names


def check_mean_bindings(sdfg: dace.SDFG) -> None:
    """Refuses ``m = np.mean(...)`` read inside a ``dace.map`` body (or a nested program called inside one) or in a
    condition or loop bound. DaCe's frontend reduces the sum into a container named ``m`` and divides it into another
    (``m_0``), which the name ``m`` stands for in the program's dataflow; in a nested scope and in control flow,
    though, ``m`` binds to the container of that name: the sum (upstream DaCe on the CPU gives the same wrong result).
    Signature: a reduction's output that the mean's division reads and a nested SDFG or the control flow reads too
    (a sum the program divides itself, ``s / n``, is another tasklet: not refused)."""
    from dace.libraries.standard.nodes import Reduce

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
                controls[id(owner)] = _control_reads(owner)
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
