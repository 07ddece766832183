"""MoveUpdateLoopsIntoMap: a loop nest that updates each element of its output in place moves into the map.

NumPy programs accumulate over an index outside a whole-array update, e.g. a convolution::

    for p in range(K):
        for q in range(K):
            for c in range(C_in):
                out[:] = out + input[:, p:p + H_out, q:q + W_out, c, np.newaxis] * weights[p, q, c, :]

As written, every iteration is a grid-wide step and a grid sync (1200 of them for NPBench's paper size). Each
output element, though, only reads and writes itself across the loop, and everything else is only read: each map
point can run the whole loop nest on its own element, with no sync. DaCe's ``MoveLoopIntoMap`` moves one loop and
refuses this one (a read-only operand's index mixes the loop variable with a map parameter, ``i + p``); for data
the loop only reads, the order of reads is free. This transformation checks element ownership instead, moves a
perfect nest at once, and lets the map write in place where its result is a temporary copied back whole
(``out[:] = out + ...`` lowers to ``tmp = out + ...; out[:] = tmp``).

Conditions (``can_be_applied``): a perfect nest of loops with known ranges whose innermost body is one state holding
one map, with access nodes around it only; the map's range free of the loop variables; every container the map
writes is accessed inside it (read or written) at one single-element subset that uses every map parameter and no
loop variable, without write-conflict resolution; everything else is only read; the loop variables are not used
after the nest. The loop of a nest is moved at its outermost loop that qualifies. Each point then takes a block of
elements along the map's last dimension where that shares work (``owned_blocks.py``).
"""

from __future__ import annotations

import copy

import dace
import networkx as nx
from dace import symbolic
from dace.sdfg import nodes
from dace.sdfg.state import LoopRegion, SDFGState
from dace.transformation import helpers, transformation
from dace.transformation.interstate import MoveLoopIntoMap
from dace.transformation.passes.analysis import loop_analysis

from .owned_blocks import block_owned_elements


@transformation.explicit_cf_compatible
class MoveUpdateLoopsIntoMap(MoveLoopIntoMap):
    """Moves a perfect loop nest around a map that updates its outputs element by element into the map (module
    docstring)."""

    def can_be_applied(self, graph, expr_index, sdfg, permissive=False):
        if not _qualifies(_nest(self.loop), sdfg):
            return False
        parent = self.loop.parent_graph
        # the enclosing loop of a perfect nest moves the whole nest at once
        return not (isinstance(parent, LoopRegion) and len(parent.nodes()) == 1 and _qualifies(_nest(parent), sdfg))

    def apply(self, graph, sdfg):
        nest = _nest(self.loop)
        body = nest[-1].nodes()[0]
        _, exit_, copies = _shape(body, sdfg, _variables(nest))
        for tmp, dst in copies:  # the map writes the copy's destination in place: each point owns its elements
            node = next(n for n in body.data_nodes() if n.data == tmp)
            (copy,) = body.out_edges(node)
            (out,) = body.in_edges(node)
            for e in body.edges():
                if e.data.data == tmp:
                    e.data.data = dst
            body.add_edge(out.src, out.src_conn, copy.dst, None, out.data)
            body.remove_node(node)
            sdfg.remove_data(tmp, validate=False)
        outer = self.loop
        self.loop = nest[-1]
        try:
            super().apply(nest[-1].parent_graph, sdfg)  # the innermost loop, into the map (a nested SDFG)
        finally:
            self.loop = outer
        for loop in reversed(nest[:-1]):  # each loop around it, into that nested SDFG
            _wrap(loop, sdfg)
        (nsdfg,) = [n for n in body.nodes() if isinstance(n, nodes.NestedSDFG)]
        moved = nsdfg.sdfg.start_block
        for name in sorted({e.dst.data for e in body.out_edges(exit_)}):  # the map stays in the body
            _in_a_register(nsdfg.sdfg, moved, name)
        block_owned_elements(body, nsdfg)  # a point takes several elements along the last dimension
        sdfg.reset_cfg_list()


def _in_a_register(inner, nest: LoopRegion, name: str) -> None:
    """The element the thread updates through the loop nest lives in a scalar: loaded before the nest, stored after
    it (the compiler cannot keep it in a register itself: the element's stores might alias the operands' loads).
    Every access to ``name`` in ``nest`` (the loops moved into ``inner``) is the same element."""
    states = [b for b in nest.all_control_flow_blocks() if isinstance(b, SDFGState)]
    edges = [e for state in states for e in state.edges() if e.data.data == name]
    if not edges or len({str(e.data.subset) for e in edges}) != 1:
        return  # e.g. the whole array passed on to a nested SDFG: left in memory
    if any(isinstance(n, nodes.NestedSDFG) for e in edges for n in (e.src, e.dst)):
        return
    subset = copy.deepcopy(edges[0].data.subset)
    local = inner.add_scalar("cpufree_element", inner.arrays[name].dtype, transient=True, find_new_name=True)[0]
    for e in edges:
        e.data.data, e.data.subset = local, dace.subsets.Range.from_string("0")
    for state in states:
        for n in state.data_nodes():
            if n.data == name:
                n.data = local
    load = inner.add_state_before(nest, "load_element")
    memlet = dace.Memlet(data=name, subset=copy.deepcopy(subset), other_subset="0")
    load.add_edge(load.add_read(name), None, load.add_write(local), None, memlet)
    store = inner.add_state_after(nest, "store_element")
    store.add_edge(
        store.add_read(local),
        None,
        store.add_write(name),
        None,
        dace.Memlet(data=local, subset="0", other_subset=copy.deepcopy(subset)),
    )


def _nest(loop) -> list | None:
    """The loops of a perfect nest from ``loop`` down (each the only block of the one around it) whose innermost
    body is one state, each with a known range; ``None`` otherwise."""
    nest = []
    while isinstance(loop, LoopRegion):
        if loop.loop_variable is None or None in (
            loop_analysis.get_init_assignment(loop),
            loop_analysis.get_loop_end(loop),
            loop_analysis.get_loop_stride(loop),
        ):
            return None
        nest.append(loop)
        if len(loop.nodes()) != 1:
            return None
        loop = loop.nodes()[0]
    return nest if isinstance(loop, SDFGState) else None


def _variables(nest: list) -> set[str]:
    return {str(loop.loop_variable) for loop in nest}


def _qualifies(nest: list | None, sdfg) -> bool:
    if nest is None:
        return False
    names = _variables(nest)
    body = nest[-1].nodes()[0]
    found = _shape(body, sdfg, names)
    if found is None:
        return False
    entry, exit_, copies = found
    inside = set(body.scope_subgraph(entry).nodes())
    renamed = dict(copies)
    updated = {e.dst.data for e in body.out_edges(exit_)} | set(renamed.values())
    params = {str(p) for p in entry.map.params}
    subsets = {}  # updated container -> the one subset every access to it inside the map uses
    for e in body.edges():
        if e.src not in inside or e.dst not in inside or e.data.data is None:
            continue
        name = renamed.get(e.data.data, e.data.data)
        if name not in updated:
            continue  # only read: any index
        if e.data.wcr is not None or not _own_element(e.data.subset, params, names):
            return False
        if subsets.setdefault(name, str(e.data.subset)) != str(e.data.subset):
            return False
    return all(_unused_after(sdfg, nest[0], loop.loop_variable) for loop in nest)


def _shape(body: SDFGState, sdfg, names: set[str]):
    """``(map entry, map exit, [(temporary, destination)])`` where ``body`` is one map with access nodes around it
    whose outputs are stored, or copied whole from a temporary used nowhere else; ``None`` otherwise."""
    if len(list(nx.weakly_connected_components(body._nx))) != 1:
        return None
    maps = [n for n in body.nodes() if isinstance(n, nodes.MapEntry)]
    if len(maps) != 1 or names & {str(s) for s in maps[0].map.range.free_symbols}:
        return None
    entry = maps[0]
    exit_ = body.exit_node(entry)
    inside = set(body.scope_subgraph(entry).nodes())
    copies = []
    for n in body.nodes():
        if n in inside:
            continue
        if not isinstance(n, nodes.AccessNode):
            return None
        ins, outs = body.in_edges(n), body.out_edges(n)
        if not ins and all(e.dst is entry for e in outs):
            continue  # read by the map
        if len(ins) == 1 and isinstance(ins[0].src, nodes.AccessNode) and not outs:
            continue  # the destination of a copy: checked from its source
        if len(ins) != 1 or ins[0].src is not exit_:
            return None
        if not outs:
            continue  # written by the map
        if len(outs) != 1 or not _whole_copy(body, sdfg, n, ins[0], outs[0]):
            return None
        copies.append((n.data, outs[0].dst.data))
    return entry, exit_, copies


def _whole_copy(body: SDFGState, sdfg, node, written, copy) -> bool:
    """The map's output ``node`` is a temporary copied, as the map wrote it, to a container of its shape."""
    dst = copy.dst
    desc = sdfg.arrays[node.data]
    if not isinstance(dst, nodes.AccessNode) or not desc.transient or body.out_edges(dst) or body.in_degree(dst) != 1:
        return False
    if sdfg.arrays[dst.data].shape != desc.shape or str(copy.data.subset) != str(written.data.subset):
        return False
    if copy.data.other_subset is not None and str(copy.data.other_subset) != str(written.data.subset):
        return False
    return not any(n.data == node.data for s in sdfg.states() if s is not body for n in s.data_nodes())


def _own_element(subset, params: set[str], names: set[str]) -> bool:
    """A single element, no loop variable in its indices, every map parameter in them: map points own distinct
    elements."""
    used = set()
    for lo, hi, _ in subset.ndrange():
        if lo != hi:
            return False
        free = {str(s) for s in symbolic.pystr_to_symbolic(lo).free_symbols}
        if free & names:
            return False
        used |= free
    return params <= used


def _unused_after(sdfg, loop, var) -> bool:
    """The loop variable is read nowhere outside the nest (it is no symbol of the SDFG after the move)."""
    inner = {id(b) for b in loop.all_control_flow_blocks()} | {id(loop)}
    for edge in sdfg.all_interstate_edges():
        if not (id(edge.src) in inner and id(edge.dst) in inner) and var in edge.data.free_symbols:
            return False
    for block in sdfg.all_control_flow_blocks():
        if id(block) not in inner and isinstance(block, SDFGState) and var in block.free_symbols:
            return False
    return True


def _wrap(loop: LoopRegion, sdfg) -> None:
    """``loop``'s body is a state whose map holds a nested SDFG (the loops moved in before): ``loop`` moves into it
    around its start block, and the state takes the loop's place."""
    graph = loop.parent_graph
    body = loop.nodes()[0]
    (nsdfg,) = [n for n in body.nodes() if isinstance(n, nodes.NestedSDFG)]
    inner = nsdfg.sdfg.start_block
    moved = LoopRegion(
        loop.label,
        loop.loop_condition,
        loop.loop_variable,
        loop.init_statement,
        loop.update_statement,
        loop.inverted,
        nsdfg.sdfg,
        loop.update_before_condition,
    )
    nsdfg.sdfg.remove_node(inner)
    moved.add_node(inner, is_start_block=True)
    nsdfg.sdfg.add_node(moved, is_start_block=True)
    graph.add_node(body, is_start_block=graph.start_block is loop)
    for e in graph.in_edges(loop):
        graph.add_edge(e.src, body, e.data)
    for e in graph.out_edges(loop):
        graph.add_edge(body, e.dst, e.data)
    graph.remove_node(loop)
    var = loop.loop_variable
    nsdfg.symbol_mapping.pop(var, None)
    if var not in nsdfg.sdfg.symbols:
        nsdfg.sdfg.add_symbol(var, sdfg.symbols.get(var, dace.int64))
    if var in sdfg.symbols and helpers.is_symbol_unused(sdfg, var):
        sdfg.remove_symbol(var)
