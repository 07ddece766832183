"""Accumulation loops as parallel reductions.

A loop that only folds values into one scalar,

    trace = 0.0
    for i in range(N):
        trace = trace + np.tanh(a[i, i])

runs on one thread of the persistent kernel, one dependent iteration after another (NPBench's ``go_fast``: half a
microsecond an iteration). Its iterations are independent but for the fold, so :class:`LoopAccumulationToMap`
makes the loop a map over ``i`` whose result is added into ``trace`` (a write-conflict resolution, which the kernel
generator turns into a grid-wide reduction). DaCe's own ``LoopToReduce`` lifts only folds of array elements as
they are (``s = s + a[i]``), not of values computed from them.

Pattern: a ``LoopRegion`` with a loop variable, a constant positive stride and one state as its body. In that
state one scalar ``acc`` is read once, by a tasklet that computes ``acc <op> x`` (``+``, ``*``, ``min``, ``max``;
``x`` does not depend on ``acc``), whose result reaches the one write of ``acc`` through transient scalars and
copy tasklets only (``out = in``). Every other container the state writes is a transient scalar written once and
read only in the state (per iteration values); nothing it reads is written in the loop. Effect: the state replaces
the loop; its computations sit in a map over the loop's range; the tasklet reads the operation's identity instead
of ``acc`` (``max(x, x)`` for ``max(acc, x)``); the write of ``acc`` resolves conflicts with the operation. The
value of ``acc`` is the same up to the order of the fold (floating-point sums may then differ in the last bits, as
NumPy's pairwise sums do).
"""

from __future__ import annotations

import ast
from typing import Any

import dace
from dace import nodes
from dace.sdfg.state import LoopRegion
from dace.transformation import pass_pipeline as ppl

from dace_cpufree.vocabulary import assigned_value, loop_range, scalar_like

#: operation of the folding tasklet -> (write-conflict resolution, identity; None: max/min, x <op> x == x)
_FOLDS = {
    "add": ("lambda a, b: a + b", "0"),
    "mult": ("lambda a, b: a * b", "1"),
    "max": ("lambda a, b: max(a, b)", None),
    "min": ("lambda a, b: min(a, b)", None),
}


def _fold(code: str, acc: str) -> tuple[str, str] | None:
    """``(kind, other connector)`` when ``code`` is ``out = acc <op> other`` (either order) or ``max``/``min``."""
    value = assigned_value(code)
    names = None
    kind = None
    if isinstance(value, ast.BinOp) and isinstance(value.op, (ast.Add, ast.Mult)):
        kind = "add" if isinstance(value.op, ast.Add) else "mult"
        names = (value.left, value.right)
    elif isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id in ("max", "min"):
        if len(value.args) == 2 and not value.keywords:
            kind, names = value.func.id, tuple(value.args)
    if names is None or not all(isinstance(n, ast.Name) for n in names):
        return None
    ids = [n.id for n in names]
    if ids.count(acc) != 1:
        return None
    other = ids[1 - ids.index(acc)]
    return kind, other


def _is_copy(tasklet: nodes.Tasklet) -> bool:
    """Whether the tasklet is ``out = in`` (one input, one output)."""
    if len(tasklet.in_connectors) != 1 or len(tasklet.out_connectors) != 1:
        return False
    value = assigned_value(tasklet.code.as_string)
    return isinstance(value, ast.Name) and value.id == next(iter(tasklet.in_connectors))


def match(loop: LoopRegion, sdfg: dace.SDFG) -> dict | None:
    """What :func:`apply` needs, or ``None`` where the loop is not a pure accumulation."""
    if loop.loop_variable is None or len(loop.nodes()) != 1 or not isinstance(loop.nodes()[0], dace.SDFGState):
        return None
    found = loop_range(loop)
    if found is None:
        return None
    start, end, stride = found
    try:
        if not bool(stride > 0):
            return None
    except TypeError:
        return None
    if _used_outside_loop(sdfg, str(loop.loop_variable)):
        return None  # the variable's last value is read after the loop: a map leaves none
    state = loop.nodes()[0]
    access = [n for n in state.nodes() if isinstance(n, nodes.AccessNode)]
    written = {n.data for n in access if state.in_degree(n) > 0}
    read = {n.data for n in access if state.out_degree(n) > 0}
    if any(not isinstance(n, (nodes.AccessNode, nodes.Tasklet)) for n in state.nodes()):
        return None
    # the accumulator: the one non-per-iteration container that is both read and written
    candidates = [d for d in written & read if scalar_like(sdfg.arrays[d])]
    for acc in candidates:
        found = _match_acc(state, sdfg, acc, written)
        if found is not None:
            found.update(state=state, start=start, end=end, stride=stride, variable=loop.loop_variable)
            return found
    return None


def _match_acc(state: dace.SDFGState, sdfg: dace.SDFG, acc: str, written: set) -> dict | None:
    reads = [n for n in state.nodes() if isinstance(n, nodes.AccessNode) and n.data == acc and state.out_degree(n)]
    writes = [n for n in state.nodes() if isinstance(n, nodes.AccessNode) and n.data == acc and state.in_degree(n)]
    if len(reads) != 1 or len(writes) != 1 or reads[0] is writes[0]:
        return None
    acc_read, acc_write = reads[0], writes[0]
    if state.in_degree(acc_read) or state.out_degree(acc_write) or state.out_degree(acc_read) != 1:
        return None
    edge = state.out_edges(acc_read)[0]
    fold_tasklet = edge.dst
    if not isinstance(fold_tasklet, nodes.Tasklet) or fold_tasklet.language != dace.Language.Python:
        return None
    fold = _fold(fold_tasklet.code.as_string, edge.dst_conn)
    if fold is None:
        return None
    kind, other = fold
    # what the fold reads instead of acc: the operation's identity, or for max/min the other operand itself
    identity = _FOLDS[kind][1] or other
    # from the fold to the write of acc: transient scalars and copy tasklets only, one path
    node = fold_tasklet
    while node is not acc_write:
        outs = state.out_edges(node)
        if len(outs) != 1:
            return None
        node = outs[0].dst
        if isinstance(node, nodes.AccessNode) and node is not acc_write:
            desc = sdfg.arrays[node.data]
            if not (desc.transient and scalar_like(desc)) or state.in_degree(node) != 1:
                return None
        elif isinstance(node, nodes.Tasklet) and not _is_copy(node):
            return None
    # everything else written: per-iteration transient scalars, written once here and used nowhere else
    for data in written - {acc}:
        desc = sdfg.arrays[data]
        if not (desc.transient and scalar_like(desc)):
            return None
        if sum(1 for n in state.data_nodes() if n.data == data) != 1:  # one node: no read of the previous value
            return None
        if _used_outside(sdfg, state, data):
            return None
    return dict(
        acc=acc,
        acc_read=acc_read,
        acc_write=acc_write,
        fold=fold_tasklet,
        connector=edge.dst_conn,
        kind=kind,
        identity=identity,
    )


def inside(block, region) -> bool:
    """Whether a control-flow block lies in ``region`` (or is it)."""
    while block is not None:
        if block is region:
            return True
        block = block.parent_graph
    return False


def _used_outside_loop(sdfg: dace.SDFG, var: str) -> bool:
    """Whether the loop variable ``var`` is used anywhere but in the loops that define a variable of that name (their
    uses are theirs; a read after a loop is refused before this pass, ``check_loop_variables``)."""
    owners = [r for r in sdfg.all_control_flow_regions() if isinstance(r, LoopRegion) and str(r.loop_variable) == var]
    for block in sdfg.all_control_flow_blocks():
        if any(inside(block, owner) for owner in owners):
            continue
        if isinstance(block, dace.SDFGState):
            if var in map(str, block.free_symbols):
                return True
        elif hasattr(block, "get_meta_codeblocks"):
            for code in block.get_meta_codeblocks():
                if var in map(str, code.get_free_symbols()):
                    return True
    return any(var in map(str, e.data.free_symbols) or var in e.data.assignments for e in sdfg.all_interstate_edges())


def _used_outside(sdfg: dace.SDFG, state: dace.SDFGState, data: str) -> bool:
    for other in sdfg.states():
        if other is not state and any(n.data == data for n in other.data_nodes()):
            return True
    return any(data in e.data.free_symbols for e in sdfg.all_interstate_edges())


def apply(loop: LoopRegion, sdfg: dace.SDFG, m: dict) -> None:
    """Replaces ``loop`` by its body state with the computations in a map (see the module doc)."""
    state: dace.SDFGState = m["state"]
    parent = loop.parent_graph
    # the body state takes the loop's place in its parent
    loop.remove_node(state)
    parent.add_node(state)
    for e in parent.in_edges(loop):
        parent.add_edge(e.src, state, e.data)
    for e in parent.out_edges(loop):
        parent.add_edge(state, e.dst, e.data)
    was_start = parent.start_block is loop
    parent.remove_node(loop)
    if was_start:
        parent.start_block = parent.node_id(state)

    # the fold reads the identity, not acc
    fold: nodes.Tasklet = m["fold"]
    state.remove_node(m["acc_read"])
    fold.remove_in_connector(m["connector"])
    tree = ast.parse(fold.code.as_string)

    class Substitute(ast.NodeTransformer):
        def visit_Name(self, node):
            if node.id == m["connector"]:
                return ast.copy_location(ast.parse(m["identity"], mode="eval").body, node)
            return node

    fold.code = dace.properties.CodeBlock(ast.unparse(Substitute().visit(tree)), dace.Language.Python)

    # the map over the loop's range around every computation
    v = m["variable"]
    entry, exit_ = state.add_map(f"{m['acc']}_fold", {v: dace.subsets.Range([(m["start"], m["end"], m["stride"])])})
    inside = [n for n in state.nodes() if n not in (entry, exit_)]
    sources = [n for n in inside if isinstance(n, nodes.AccessNode) and state.in_degree(n) == 0]
    acc_write = m["acc_write"]
    for src in sources:  # the arrays read: through the map entry
        for e in list(state.out_edges(src)):
            state.remove_edge(e)
            state.add_memlet_path(src, entry, e.dst, memlet=e.data, dst_conn=e.dst_conn)
    for e in list(state.in_edges(acc_write)):  # the result: through the map exit, folded
        state.remove_edge(e)
        memlet = dace.Memlet(data=m["acc"], subset=e.data.subset if e.data.data == m["acc"] else e.data.dst_subset)
        memlet.wcr = _FOLDS[m["kind"]][0]
        state.add_memlet_path(e.src, exit_, acc_write, memlet=memlet, src_conn=e.src_conn)
    # tasklets without inputs (constants) still belong to the map
    for n in inside:
        if isinstance(n, nodes.Tasklet) and state.in_degree(n) == 0:
            state.add_nedge(entry, n, dace.Memlet())
    dace.sdfg.propagation.propagate_memlets_state(sdfg, state)
    if v in sdfg.symbols and v not in sdfg.free_symbols:  # the loop's variable is now the map's parameter
        sdfg.remove_symbol(v)


class LoopAccumulationToMap(ppl.Pass):
    """Accumulation loops become maps whose result folds into the accumulator (see the module doc)."""

    CATEGORY = "dace-cpufree"

    def modifies(self) -> ppl.Modifies:
        return ppl.Modifies.CFG | ppl.Modifies.Nodes | ppl.Modifies.Memlets

    def should_reapply(self, modified: ppl.Modifies) -> bool:
        return bool(modified & ppl.Modifies.CFG)

    def apply_pass(self, sdfg: dace.SDFG, _: dict[str, Any]) -> int | None:
        count = 0
        for cfg in list(sdfg.all_control_flow_regions()):
            if isinstance(cfg, LoopRegion) and cfg.parent_graph is not None:
                owner = cfg.sdfg
                found = match(cfg, owner)
                if found is not None:
                    apply(cfg, owner, found)
                    count += 1
        return count or None
