"""FusePersistentKernel: prepares a whole SDFG to run as one persistent cooperative kernel."""

from __future__ import annotations

import ast
import copy
import os
from typing import Any

import dace
from dace import data as dt
from dace import dtypes
from dace.properties import Property, make_properties
from dace.sdfg import nodes
from dace.sdfg.infer_types import infer_connector_types
from dace.sdfg.state import ConditionalBlock, LoopRegion, ReturnBlock
from dace.transformation import pass_pipeline as ppl
from dace.transformation import transformation
from dace.transformation.dataflow import MapFusionHorizontal
from dace.transformation.interstate import InlineMultistateSDFG, InlineSDFG
from dace.transformation.passes import FullMapFusion

from dace_cpufree.errors import NotPersistableError
from dace_cpufree.vocabulary import block_chain

from .block_scopes import prepare_block_scopes, simplify
from .expand_libraries import ExpandLibraryNodesToDataflow
from .loop_into_map import MoveUpdateLoopsIntoMap
from .loop_reductions import LoopAccumulationToMap, inside
from .map_names import rename_map_parameters_named_like_data
from .matvec_pairs import PairMatVecProducts
from .product_coefficients import FoldScalingIntoProduct
from .program_order import accesses, conflict
from .scaled_products import ScaleAfterProduct
from .schedule import PERSISTENT_SCHEDULE


@make_properties
@transformation.explicit_cf_compatible
class FuseParallelMaps(MapFusionHorizontal):
    """DaCe's horizontal map fusion, except for maps that reduce.

    Pattern and effect: those of :class:`~dace.transformation.dataflow.MapFusionHorizontal` (two
    independent maps over the same space become one). Precondition added: neither map has a
    write-conflict-resolved output. A reduction fused with an unrelated element-wise map (gesummv's
    ``B @ x`` with ``alpha * A``) is no longer a pure reduction: it loses its row reduction and writes
    with one atomic per element instead.
    """

    def can_be_applied(self, graph, expr_index, sdfg, permissive=False) -> bool:
        for entry in (self.first_parallel_map_entry, self.second_parallel_map_entry):
            if any(e.data.wcr is not None for e in graph.in_edges(graph.exit_node(entry))):
                return False
        return super().can_be_applied(graph, expr_index, sdfg, permissive)


@make_properties
class FusePersistentKernel(ppl.Pass):
    """Turns every state, loop and map of an SDFG into parts of one persistent kernel.

    Pattern: a whole SDFG (the program), with any control flow. Preconditions: after expanding
    library nodes and inlining nested SDFGs, only maps, tasklets, access nodes and copies remain,
    and no container is a stream or a reference. Effect: library nodes become maps and tasklets;
    adjacent maps are fused (their intermediates become registers), independent ones too unless one
    reduces (:class:`FuseParallelMaps`); every top-level map gets the
    ``CPUFree_Persistent`` schedule (a grid-stride loop over the cooperative grid), nested maps the
    sequential one. Storage types are left as they are: DaCe's validator only accepts GPU storage
    under its own GPU schedules, and the code generator places all non-register data in device
    memory itself. The control flow is kept: the code generator places it inside the kernel and
    inserts ``grid.sync()`` only where a data dependency crosses threads.
    """

    CATEGORY = "dace-cpufree"

    fuse_maps = Property(dtype=bool, default=True, desc="Fuse producer/consumer maps first", category="General")

    def __init__(self, fuse_maps: bool = True):
        super().__init__()
        self.fuse_maps = fuse_maps

    def modifies(self) -> ppl.Modifies:
        return ppl.Modifies.Everything

    def should_reapply(self, modified: ppl.Modifies) -> bool:
        return True

    def apply_pass(self, sdfg: dace.SDFG, _: dict[str, Any]) -> int:
        prepare_block_scopes(sdfg)  # @mapgridscope: block functions inlined as marked states (done once)
        check_loop_variables(sdfg)
        self._fuse(sdfg)
        check_persistable(sdfg)
        infer_connector_types(sdfg)
        marked = 0
        for state in sdfg.states():
            sdict = state.scope_dict()
            for node in state.nodes():
                if isinstance(node, nodes.MapEntry):
                    node.map.schedule = PERSISTENT_SCHEDULE if sdict[node] is None else dtypes.ScheduleType.Sequential
                    marked += sdict[node] is None
        return marked

    def _fuse(self, sdfg: dace.SDFG) -> None:
        """Library nodes expanded, maps fused, nested SDFGs inlined."""
        ScaleAfterProduct().apply_pass(sdfg, {})
        PairMatVecProducts().apply_pass(sdfg, {})  # before the products are expanded one by one
        ExpandLibraryNodesToDataflow().apply_pass(sdfg, {})
        simplify(sdfg)
        if LoopAccumulationToMap().apply_pass(sdfg, {}):
            simplify(sdfg)
        if self.fuse_maps:
            FullMapFusion(perform_horizontal_map_fusion=False).apply_pass(sdfg, {})
            if sdfg.apply_transformations_repeated(FuseParallelMaps):
                FullMapFusion(perform_horizontal_map_fusion=False).apply_pass(sdfg, {})
            simplify(sdfg)
            if FoldScalingIntoProduct().apply_pass(sdfg, {}):  # the fused map after a product, into its call
                simplify(sdfg)
        sdfg.apply_transformations_repeated([InlineSDFG, InlineMultistateSDFG])
        # A nested SDFG fed by views (a matrix product on a slice inside a loop) is not inlined by
        # InlineMultistateSDFG; as one state, InlineSDFG takes it. Merge its state chain and retry.
        for node, _ in list(sdfg.all_nodes_recursive()):
            if isinstance(node, nodes.NestedSDFG):
                merge_state_chain(node.sdfg, node.symbol_mapping)
        sdfg.apply_transformations_repeated([InlineSDFG, InlineMultistateSDFG])
        if self.fuse_maps and sdfg.apply_transformations_repeated(FuseParallelMaps):
            # maps that met in one state by the inlining (a call whose arguments are views)
            FullMapFusion(perform_horizontal_map_fusion=False).apply_pass(sdfg, {})
        # loops of in-place updates run inside the map, each point on its own elements (no grid sync per iteration)
        sdfg.apply_transformations_repeated(MoveUpdateLoopsIntoMap)
        rename_map_parameters_named_like_data(sdfg)  # an inlined expansion's map over i beside an array i


def merge_state_chain(sdfg: dace.SDFG, symbols: dict | None = None) -> bool:
    """Merges an SDFG whose control flow is a plain chain of states (no conditions, assignments or
    other regions) into its first state, ordering each state after the previous one with empty
    (dependency) memlets from every sink of the merged part to the first computations of the next state,
    unless the two touch no element in common with a write on either side (``symbols``, the nested SDFG's
    symbol mapping, decides subsets such as ``Y[1]`` against ``Y[LX - 2]``). Returns whether it merged; the
    program order, and hence the result, is unchanged."""
    blocks = list(sdfg.nodes())
    if len(blocks) < 2 or not all(isinstance(b, dace.SDFGState) for b in blocks):
        return False
    order = block_chain(sdfg)
    if order is None:
        return False
    first = order[0]
    numbers = {dace.symbol(k): v for k, v in (symbols or {}).items() if not dace.symbolic.issymbolic(v)}
    mine = _accesses(first, numbers)  # of the merged part
    for state in order[1:]:
        theirs = _accesses(state, numbers)
        independent = mine is not None and theirs is not None and not conflict(mine, theirs)
        mine = None if mine is None or theirs is None else mine + theirs
        sinks = [] if independent else first.sink_nodes()
        # the first computations of the next state (not its source access nodes, which must keep
        # no incoming edges for the inlining to map them to the outer containers)
        sources = []
        for node in state.source_nodes():
            succ = [e.dst for e in state.out_edges(node)] if isinstance(node, nodes.AccessNode) else [node]
            sources += [n for n in succ if n not in sources]
        for node in state.nodes():
            first.add_node(node)
        for e in state.edges():
            first.add_edge(e.src, e.src_conn, e.dst, e.dst_conn, e.data)
        for src in sinks:
            for dst in sources:
                first.add_nedge(src, dst, dace.Memlet())
    for state in order[1:]:
        sdfg.remove_node(state)
    return True


def _accesses(state: dace.SDFGState, numbers: dict) -> list | None:
    """:func:`~.program_order.accesses` of ``state`` with the symbols in ``numbers`` replaced by their values;
    None when the state has a view or a reference, whose name is not that of the memory it touches."""
    if any(isinstance(n.desc(state.sdfg), (dt.View, dt.Reference)) for n in state.data_nodes()):
        return None
    out = []
    for name, mode, sub in accesses(state):
        if sub is not None:
            sub = copy.deepcopy(sub)
            sub.replace(numbers)
        out.append((name, mode, sub))
    return out


def _where(node) -> str:
    """`` at file:line`` of a node from DaCe's debug information (a nested SDFG: its first node that has it)."""
    candidates = [node]
    if isinstance(node, nodes.NestedSDFG):
        candidates += [n for n, _ in node.sdfg.all_nodes_recursive()]
    for n in candidates:
        info = getattr(n, "debuginfo", None)
        if info is not None and info.filename and info.start_line:
            return f" at {info.filename}:{info.start_line}"
    return ""


def _user_where(tasklet: nodes.Tasklet, state: dace.SDFGState) -> str:
    """`` at file:line`` in the user's program of a construct that DaCe expanded from its own library code (its
    nodes carry DaCe's lines): the first node from the construct's state on, in state order, whose line is outside
    DaCe's package, which is the statement that uses the result; the tasklet's own line if there is none."""
    package = os.path.dirname(dace.__file__)
    states = list(state.sdfg.states())
    for later in states[states.index(state) :] if state in states else []:
        for node in later.nodes():
            info = getattr(node, "debuginfo", None)
            if info is not None and info.filename and info.start_line and not info.filename.startswith(package):
                return f" at {info.filename}:{info.start_line}"
    return _where(tasklet)


def _pair_reduction(tasklet: nodes.Tasklet, state: dace.SDFGState) -> bool:
    """Whether the tasklet's result is combined into a struct (DaCe's argmax/argmin reduce (value, index))."""
    arrays = state.sdfg.arrays
    return any(
        e.data.wcr is not None and e.data.data in arrays and isinstance(arrays[e.data.data].dtype, dace.dtypes.struct)
        for e in state.out_edges(tasklet)
    )


def _callee(tasklet: nodes.Tasklet) -> str:
    """The function a callback tasklet calls, as the program wrote it (``print``)."""
    code = tasklet.code.code if isinstance(tasklet.code.code, list) else []
    for stmt in code:
        for sub in ast.walk(stmt):
            if isinstance(sub, ast.Call):
                return ast.unparse(sub.func)
    return tasklet.label


def _nested_construct(nsdfg: nodes.NestedSDFG) -> str:
    """What a nested SDFG that could not be inlined stands for in the program."""
    blocks = list(nsdfg.sdfg.all_control_flow_blocks())
    if any(isinstance(b, ConditionalBlock) for b in blocks):
        return "a data-dependent branch (an `if` on array values, np.where(..., where=) or a masked update)"
    if any(isinstance(b, LoopRegion) for b in blocks):
        return "a loop whose bounds or exit depend on array values"
    return f"a nested call ('{nsdfg.label}')"


def _per_thread(nsdfg: nodes.NestedSDFG, state) -> bool:
    """Whether a nested SDFG runs as one thread's sequential code: it sits inside a map (or inside another such
    nested SDFG), and its control flow is made of states, branches and loops without a return."""
    inside = state.entry_node(nsdfg) is not None
    outer = state.sdfg.parent_nsdfg_node
    if not inside and outer is not None:
        inside = _per_thread(outer, state.sdfg.parent)
    if not inside:
        return False
    return not any(isinstance(b, ReturnBlock) for b in nsdfg.sdfg.all_control_flow_blocks())


def check_loop_variables(sdfg: dace.SDFG) -> None:
    """Raises :class:`NotPersistableError` where a program reads a ``for`` loop's variable after the loop: Python
    leaves it at the last value, DaCe's loop (upstream DaCe's code and the kernel alike) one step past it, so the
    result would differ from NumPy without a word. A variable the program also assigns itself is left alone. Also
    refused: nested loops with one variable (``for _ in``, twice), which DaCe runs as one variable, so the inner
    loop moves the outer one's and the outer loop runs fewer iterations than in Python (upstream DaCe alike)."""
    for sd in sdfg.all_sdfgs_recursive():
        assigned = {k for e in sd.all_interstate_edges() for k in e.data.assignments}
        loops = [r for r in sd.all_control_flow_regions() if isinstance(r, LoopRegion) and r.loop_variable]
        _check_nested_loop_variables(loops)
        for var in {str(loop.loop_variable) for loop in loops} - assigned:
            owners = [loop for loop in loops if str(loop.loop_variable) == var]
            for state in sd.states():
                if any(inside(state, loop) for loop in owners) or var not in map(str, state.free_symbols):
                    continue
                ends = [n for e in state.edges() if var in map(str, e.data.free_symbols) for n in (e.dst, e.src)]
                where = next((w for w in map(_where, ends) if w), "")
                raise NotPersistableError(
                    f"the loop variable '{var}' is read after its loop{where}: Python leaves it at the last value, "
                    f"the compiled loop one step past it. Fix: keep the value inside the loop (last = {var}), or "
                    "compute it from the loop's bounds."
                )


def _check_nested_loop_variables(loops: list) -> None:
    for loop in loops:
        var = str(loop.loop_variable)
        for inner in loop.all_control_flow_regions():
            if inner is loop or not isinstance(inner, LoopRegion) or str(inner.loop_variable) != var:
                continue
            where = next((w for w in map(_where, (n for n, _ in inner.all_nodes_recursive())) if w), "")
            raise NotPersistableError(
                f"a loop over '{var}'{where} is nested in another loop over '{var}': DaCe runs both with one "
                "variable, so the inner loop moves the outer one's and the outer loop runs fewer iterations than in "
                "Python. Fix: give the inner loop a variable of its own (for u in range(...))."
            )


def check_persistable(sdfg: dace.SDFG) -> None:
    """Raises :class:`NotPersistableError` naming the first construct a persistent kernel cannot hold, where the
    program has it, and a fix."""
    for node, parent in sdfg.all_nodes_recursive():
        if isinstance(node, nodes.NestedSDFG) and _per_thread(node, parent):
            continue  # sequential code of the map's thread (codegen/nested.py)
        if isinstance(node, nodes.NestedSDFG):
            inside = " inside a parallel loop" if isinstance(parent, dace.SDFGState) and parent.entry_node(node) else ""
            raise NotPersistableError(
                f"{_nested_construct(node)}{inside}{_where(node)} cannot be made part of the persistent kernel "
                "(DaCe keeps it as a nested SDFG that could not be inlined). Fix: compute it with whole-array "
                "NumPy operations (np.where(cond, a, b) without where=, arithmetic masks), or move it out of the "
                "parallel loop."
            )
        if isinstance(node, nodes.LibraryNode):
            raise NotPersistableError(
                f"{type(node).__name__} ('{node.label}'){_where(node)} has no expansion that runs inside a "
                "persistent kernel. Fix: compute it before calling the program, or write it with NumPy operations."
            )
        if isinstance(node, nodes.Tasklet) and node.language not in (dace.Language.Python, dace.Language.CPP):
            raise NotPersistableError(
                f"tasklet '{node.label}'{_where(node)} is written in {node.language.name}. Fix: write it in Python "
                "(or C++)."
            )
        if isinstance(node, nodes.Tasklet) and isinstance(parent, dace.SDFGState) and _pair_reduction(node, parent):
            raise NotPersistableError(
                f"np.argmax / np.argmin{_user_where(node, parent)} reduces (value, index) pairs in a form that "
                "the kernel does not split into two reductions (transformations/arg_reductions.py takes the map "
                "DaCe makes of a whole array or one axis). Fix: take the extreme value, then its first index with "
                "whole-array operations (arrays without NaN): m = np.max(A); "
                "i = np.min(np.where(A == m, np.arange(N), np.full(N, N, dtype=np.int64)))."
            )
        if isinstance(node, nodes.Tasklet) and node.side_effects:
            raise NotPersistableError(
                f"the call {_callee(node)}(...){_where(node)} runs on the host (a Python callback), which a "
                "persistent kernel reaches only through the device <-> host channel. Fix: compile the program with "
                "dace_cpufree.compile / persistent_sdfg (they route print and Python callbacks through it), or move "
                "the call out of the program."
            )
    for name, desc in sdfg.arrays.items():
        if isinstance(desc, (dt.Stream, dt.Reference)):
            raise NotPersistableError(
                f"container '{name}' is a {type(desc).__name__}; persistent kernels need arrays. Fix: use arrays."
            )
