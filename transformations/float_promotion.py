"""NumPy's promotion from containers retyped float64 (:func:`promote_from_retyped`): what the frontend typed from
their integer type takes NumPy's result type, with the scalar variables a program rebinds to a float; and the
retyping of one container with the descriptors nested SDFGs bind to it (:func:`retype`). See
:mod:`~dace_cpufree.transformations.numpy_types` for the cases."""

from __future__ import annotations

import ast

import dace
import numpy as np
from dace import dtypes
from dace.sdfg import nodes

from dace_cpufree.errors import NotPersistableError


def is_integer(desc, bools: bool = False) -> bool:
    """Whether ``desc`` holds integers (bools too where ``bools``: the promotion leaves bools, the results of
    comparisons and logical operations, as they are)."""
    return _is_number(desc) and np.dtype(desc.dtype.type).kind in ("biu" if bools else "iu")


def _is_number(desc) -> bool:
    """Whether ``desc`` holds plain numbers (not an argmax's (value, index) pair, not pointers)."""
    return not isinstance(desc.dtype, (dtypes.struct, dtypes.pointer)) and desc.dtype.type is not None


def _value_types(sdfg: dace.SDFG, names) -> list:
    """The NumPy scalar types of the containers among ``names`` that hold numbers other than integers and bools."""
    arrays = sdfg.arrays
    return [
        arrays[n].dtype.type
        for n in names
        if n in arrays and _is_number(arrays[n]) and not is_integer(arrays[n], bools=True)
    ]


def _take_type(sdfg: dace.SDFG, name: str, types: list) -> bool:
    """Retypes container ``name`` (with what nested SDFGs bind to it) to NumPy's result type of ``types`` (float64
    where there are none) where it holds integers or that type differs; whether it did. Retyping only on a change is
    what lets the promotion's loop end."""
    target = np.result_type(*types) if types else np.dtype(np.float64)
    desc = sdfg.arrays[name]
    if not is_integer(desc) and target == np.dtype(desc.dtype.type):
        return False
    retype(sdfg, name, dtypes.typeclass(target.type))
    return True


def _assigned_value(state, edge):
    """The node whose value an edge into a container carries: its source, or what the frontend's assignment tasklet
    (``x[...] = y``) reads."""
    src = _source(state, edge)
    if _kind(src) == "assign":
        src = next((_source(state, r) for r in state.in_edges(src) if r.data.data is not None), None)
    return src


def _kind(node) -> str:
    """How a node passes values on, for NumPy's promotion: ``assign`` (the frontend's ``x[...] = y`` tasklet),
    ``convert`` (``astype``: NumPy's cast), ``nested`` (a nested SDFG: followed through its connectors), ``compute``
    (any other tasklet or library node: its result is a float where an operand is), else ``other``."""
    if isinstance(node, nodes.NestedSDFG):
        return "nested"
    if isinstance(node, nodes.Tasklet):
        if node.label.startswith("_convert_to_"):
            return "convert"
        if node.label.startswith("assign_") and node.code.as_string.strip() == "__out = __inp":
            return "assign"
        return "compute"
    return "compute" if isinstance(node, nodes.LibraryNode) else "other"


def _source(state, edge):
    return state.memlet_path(edge)[0].src


def _sink(state, edge):
    return state.memlet_path(edge)[-1].dst


def promote_from_retyped(sdfg: dace.SDFG, seeds: list[tuple[dace.SDFG, str]]) -> list[str]:
    """NumPy's promotion, in ``sdfg`` and its nested SDFGs, from containers retyped float64 (``seeds``: an SDFG and a
    container of it) through what the frontend typed from their integer type. The values computed from them (by any
    tasklet or library node but an assignment or ``astype``, through views, element reads and nested SDFGs'
    connectors; not a comparison's or logical operation's bool) are floats in NumPy; each integer transient holding
    such values takes NumPy's result type of what is written to it (float64, complex where a complex value enters),
    with the descriptors nested SDFGs bind to it, and the frontend's integer casts of their values in tasklet code
    become float64 casts. A scalar variable that the program rebinds to a float (``s = 0``, then ``s = s + x[i]``: the
    frontend keeps one integer container for both, and upstream DaCe gives the truncated sum) takes the float's type
    as in Python, and is followed the same way. What NumPy keeps an integer stays one: arrays the program takes as
    arguments or initialised itself (a copy or assignment into one converts each element, truncating as NumPy's
    assignment does), ``astype``. Refused with the fix: an integer array whose every write is such a float (NumPy's
    type for it depends on how it was made), an argmax of such values, a container an integer computation writes too.
    Returns the names of the containers retyped."""
    sdfgs = list(sdfg.all_sdfgs_recursive())
    floats: dict[int, set[str]] = {id(sd): set() for sd in sdfgs}
    for sd, name in seeds:
        floats[id(sd)].add(name)
    retyped = []
    while True:
        while any([_spread(sd, floats) for sd in sdfgs]):
            pass
        decided = [name for sd in sdfgs for name in _decide(sd, floats)]
        rebound = [(sd, name) for sd in sdfgs for name in _rebind_scalars(sd)]
        retyped += decided
        for sd, name in rebound:
            floats[id(sd)].add(name)
            retyped.append(name)
        if not decided and not rebound:
            break
    for sd in sdfgs:
        _refuse_made_arrays(sd, floats[id(sd)])
        _check_bindings(sd, floats)
        _float_casts(sd, floats[id(sd)])
    return retyped


def _rebind_scalars(sdfg: dace.SDFG) -> list[str]:
    """Retypes the integer scalar variables (transient scalars) of ``sdfg`` that an assignment or copy gives a float
    or complex value to the type of that value (NumPy's result type of all such values); returns their names."""
    found = {}
    for state in sdfg.states():
        for node in state.data_nodes():
            desc = sdfg.arrays[node.data]
            if not (desc.transient and isinstance(desc, dace.data.Scalar) and is_integer(desc)):
                continue
            for e in state.in_edges(node):
                src = _assigned_value(state, e)
                if _is_access(src):
                    found.setdefault(node.data, []).extend(_value_types(sdfg, [src.data]))
    return [name for name, types in found.items() if types and _take_type(sdfg, name, types)]


def _spread(sdfg: dace.SDFG, floats: dict[int, set[str]]) -> bool:
    """One pass of the spread of NumPy-float values in ``sdfg``; whether it found more."""
    mine, before = floats[id(sdfg)], sum(len(v) for v in floats.values())
    for state in sdfg.states():
        for node in state.nodes():
            kind = _kind(node)
            if kind == "compute":
                if any(_source(state, e).data in mine for e in state.in_edges(node) if _is_access(_source(state, e))):
                    # a bool result (a comparison, a logical operation) is a bool in NumPy too
                    outs = {_sink(state, e).data for e in state.out_edges(node) if _is_access(_sink(state, e))}
                    for o in outs:
                        if not _is_number(sdfg.arrays[o]):
                            # an argmax's (value, index) pair, whose value field the frontend typed as an integer:
                            # the comparisons would see truncated values
                            _refuse(
                                o,
                                "an argmax or argmin reduces them in pairs whose value the frontend typed as an "
                                "integer",
                            )
                    mine |= {o for o in outs if sdfg.arrays[o].dtype != dtypes.bool_}
            elif kind == "nested":
                inner = floats[id(node.sdfg)]
                for e in state.in_edges(node):
                    src = _source(state, e)
                    if _is_access(src) and src.data in mine and e.dst_conn in node.sdfg.arrays:
                        inner.add(e.dst_conn)
                for e in state.out_edges(node):
                    if e.src_conn in inner and _is_access(_sink(state, e)):
                        mine.add(_sink(state, e).data)
            elif isinstance(node, nodes.AccessNode):
                for e in state.out_edges(node):
                    if not isinstance(e.dst, nodes.AccessNode):
                        continue
                    # a view and what it views are one container: floats in either are floats in both
                    views = isinstance(sdfg.arrays[node.data], dace.data.View) or isinstance(
                        sdfg.arrays[e.dst.data], dace.data.View
                    )
                    if views and (node.data in mine or e.dst.data in mine):
                        mine |= {node.data, e.dst.data}
                    # an element read (out[i] = d[j]) stages the element in a scalar of the frontend's
                    dst = sdfg.arrays[e.dst.data]
                    if node.data in mine and dst.transient and isinstance(dst, dace.data.Scalar):
                        mine.add(e.dst.data)
    return sum(len(v) for v in floats.values()) > before


def _is_access(node) -> bool:
    return isinstance(node, nodes.AccessNode)


def _refuse(name: str, why: str):
    raise NotPersistableError(
        f"'{name}' holds floats that DaCe's frontend typed as integers (computed from the mean of an integer array, "
        f"or from a variable rebound to a float), but {why}, so it cannot be retyped consistently (a wrong, truncated "
        f"result). Fix: take the mean of 'a.astype(np.float64)' (start a float variable at 0.0), or write the "
        f"expression into a float64 array first; astype(np.int64) where an integer is meant."
    )


def _decide(sdfg: dace.SDFG, floats: dict[int, set[str]]) -> list[str]:
    """Retypes the integer transients of ``sdfg`` that hold NumPy-float values (``floats``, per SDFG) float64 (views
    with what they view); refuses the ones that also hold integer values."""
    mine = floats[id(sdfg)]
    # container -> (kind of writer, whether it writes such values, the float types it reads, whether it reads data)
    writers: dict[str, list[tuple[str, bool, list, bool]]] = {}
    for state in sdfg.states():
        for node in state.data_nodes():
            for e in state.in_edges(node):
                if e.data.data is None:
                    continue
                src = _source(state, e)
                if isinstance(src, nodes.AccessNode):
                    value = ("copy", src.data in mine, _value_types(sdfg, [src.data]), True)
                    writers.setdefault(node.data, []).append(value)
                    continue
                reads = [_source(state, r).data for r in state.in_edges(src) if _is_access(_source(state, r))]
                types = _value_types(sdfg, reads)
                from_floats = any(r in mine for r in reads) or bool(types)
                if _kind(src) == "nested" and e.src_conn in floats[id(src.sdfg)]:
                    from_floats, types = True, types + _value_types(src.sdfg, [e.src_conn])
                writers.setdefault(node.data, []).append((_kind(src), from_floats, types, bool(reads)))
    retyped = []
    views = []
    for name in sorted(mine):
        desc = sdfg.arrays.get(name)
        if desc is None or not desc.transient or desc.dtype == dtypes.bool_ or not _is_number(desc):
            continue  # an argument: NumPy's assignment casts into its type; a bool: a comparison's result
        if isinstance(desc, dace.data.View):
            views.append(name)
            continue
        ws = writers.get(name, [])
        # an assignment, copy or constant into an array converts into its type; a computation writing integer results
        # into the same container as such floats would need both types (a scalar variable is rebound: its last type)
        mixed = any(k == "compute" and not f and has_reads for k, f, _, has_reads in ws)
        if is_integer(desc) and not isinstance(desc, dace.data.Scalar) and mixed:
            _refuse(name, "the same container also holds integer results")
        types = [t for _, _, ts, _ in ws for t in ts] + ([] if is_integer(desc) else [desc.dtype.type])
        if _take_type(sdfg, name, types):  # integers, or a float a complex value widens
            retyped.append(name)
    for name in views:
        linked = {
            other
            for state in sdfg.states()
            for node in state.data_nodes()
            if node.data == name
            for e in state.all_edges(node)
            if isinstance(e.src, nodes.AccessNode) and isinstance(e.dst, nodes.AccessNode)
            for other in (e.src.data, e.dst.data)
            if other != name
        }
        types = _value_types(sdfg, linked)
        if types and _take_type(sdfg, name, types):
            retyped.append(name)
    return retyped


def _refuse_made_arrays(sdfg: dace.SDFG, mine: set[str]) -> None:
    """Refuses an integer array the program made (not an argument, a view or a scalar variable) whose every write is
    a copy or assignment of such a float: NumPy's type for it depends on how it was made (np.empty(n, np.int64) keeps
    it, np.copy of the float does not), which the SDFG does not tell. An array also written otherwise (np.zeros's
    initialisation) is the program's integer array: the assignment converts, as NumPy's does."""
    for name, desc in sdfg.arrays.items():
        if name in mine or not desc.transient or isinstance(desc, (dace.data.View, dace.data.Scalar)):
            continue
        if not is_integer(desc):
            continue
        values = [
            _assigned_value(st, e)
            for st in sdfg.states()
            for n in st.data_nodes()
            if n.data == name
            for e in st.in_edges(n)
            if e.data.data is not None
        ]
        floated = [v for v in values if _is_access(v) and v.data in mine and _value_types(sdfg, [v.data])]
        if floated and len(floated) == len(values):
            why = (
                f"it is assigned to '{name}', an integer array the program made (NumPy's type for it depends on how "
                "it was made: np.empty(n, np.int64) keeps it, np.copy of the float does not)"
            )
            _refuse(floated[0].data, why)


def _check_bindings(sdfg: dace.SDFG, floats: dict[int, set[str]]) -> None:
    """Refuses a nested SDFG that binds a container holding such values as one of another type (its descriptor is the
    same memory: after the retyping they no longer agree). Copies between containers need no check: the copy converts
    each element (a float into an integer array truncates, as NumPy's assignment does)."""
    mine = floats[id(sdfg)]
    for state in sdfg.states():
        for e in state.edges():
            for node, conn in ((e.dst, e.dst_conn), (e.src, e.src_conn)):
                if not isinstance(node, nodes.NestedSDFG) or conn not in node.sdfg.arrays or e.data.data is None:
                    continue
                inner = node.sdfg.arrays[conn]
                if inner.dtype != sdfg.arrays[e.data.data].dtype and (
                    e.data.data in mine or conn in floats[id(node.sdfg)]
                ):
                    why = f"a nested program binds it as '{conn}' of another type"
                    _refuse(e.data.data, why)


#: The frontend's casts to integer types in tasklet code (``dace.int64(x)``).
_INTEGER_CASTS = frozenset(("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"))


def _float_casts(sdfg: dace.SDFG, mine: set[str]) -> None:
    """In tasklets reading a container of the promotion (``mine``, a float now), the frontend's integer casts of that
    value (``dace.int64(__in1)`` in ``__out = (dace.int64(__in1) * 2)``, written for the integer type it had) become
    float64 casts; casts of other values (a program's own tasklet code) stay."""
    for state in sdfg.states():
        for node in state.nodes():
            if _kind(node) != "compute" or not isinstance(node, nodes.Tasklet):
                continue
            floating = {
                e.dst_conn
                for e in state.in_edges(node)
                if _is_access(_source(state, e))
                and _source(state, e).data in mine
                and not is_integer(sdfg.arrays[_source(state, e).data], bools=True)
            }
            if not floating or node.language != dtypes.Language.Python:
                continue
            rewriter = _CastsToFloat(floating)
            code = [rewriter.visit(stmt) for stmt in node.code.code]
            if rewriter.changed:
                node.code.code = [ast.fix_missing_locations(stmt) for stmt in code]


class _CastsToFloat(ast.NodeTransformer):
    def __init__(self, names: set[str]):
        self.names, self.changed = names, False

    def visit_Call(self, call: ast.Call):
        self.generic_visit(call)
        func = call.func
        if (
            isinstance(func, ast.Attribute)
            and isinstance(func.value, ast.Name)
            and func.value.id == "dace"
            and func.attr in _INTEGER_CASTS
            and len(call.args) == 1
            and isinstance(call.args[0], ast.Name)
            and call.args[0].id in self.names
        ):
            func.attr = "float64"
            self.changed = True
        return call


def retype(sdfg: dace.SDFG, name: str, dtype) -> list[tuple[dace.SDFG, str]]:
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
                typed = connectors.get(conn)
                if isinstance(typed, dtypes.pointer):
                    connectors[conn] = dtypes.pointer(dtype)
                elif isinstance(typed, dtypes.typeclass) and typed != dtypes.typeclass(None):
                    connectors[conn] = dtype
                inner.append((node.sdfg, conn))
                inner += retype(node.sdfg, conn, dtype)
    return inner
