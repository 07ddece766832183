"""Map points that run a loop nest on their own element take several consecutive elements each.

After :class:`~dace_cpufree.transformations.loop_into_map.MoveUpdateLoopsIntoMap`, each point of a map runs the
whole loop nest on its one element, the element in a register. A convolution's point ``(n, i, j, o)`` then loads
``input[n, i + p, j + q, c]`` and ``weights[p, q, c, o]`` for one multiply-add per iteration, and the input
element is loaded again by every output channel's point. With the map's last dimension taken ``factor`` points at a
time, one point runs the nest's body once per element of its block, in the same iteration: what does not depend on
that dimension (the input element, the index arithmetic, the loop control) is done once for the block, and the
block's sums are ``factor`` registers.

The block's copies are made in the nested SDFG of the point: each state's dataflow is repeated with the dimension's
index ``o`` replaced by ``min(o + v, last)`` for copy ``v`` and every transient of the nested SDFG renamed per copy.
Where the extent is not a multiple of the factor, the copies past the end are clamped to the last element: they
compute that element exactly as the copy that owns it does (every value that depends on the index goes through the
clamped index, so the operations are the same, in the same order) and store the same value to it, from the same
thread. That holds when the nested SDFG writes memory outside its own transients only in its last state, from its
transients, and reads there nothing else (the load, loop nest, store shape that ``MoveUpdateLoopsIntoMap`` makes),
its control flow is a chain of states and loops that the index does not enter, and the index appears nowhere but in
memlets. A copy per element also needs something to share: the block is made only where a read inside the loops does
not depend on the index.
"""

from __future__ import annotations

import copy

import dace
import sympy
from dace import symbolic
from dace.sdfg import nodes
from dace.sdfg.state import LoopRegion, SDFGState

from dace_cpufree.vocabulary import block_chain

# Elements a point takes when the extent is not known at compile time (a symbol); a known extent of up to
# MAX_FACTOR is taken whole, a larger one MAX_FACTOR at a time. 8 keeps the waste small where the extent is small
# (3 of 8 copies clamped at an extent of 5) and the registers few (a sum and an operand per copy).
FACTOR = 8
MAX_FACTOR = 16


def block_owned_elements(state: SDFGState, nsdfg: nodes.NestedSDFG) -> int:
    """Makes each point of the map around ``nsdfg`` (the moved loop nest of one element) take a block of elements
    along the map's last dimension (module docstring). Returns the block's size, 1 where nothing changed."""
    entry = state.entry_node(nsdfg)
    param = entry.map.params[-1]
    start, end, step = entry.map.range[-1]
    index = next((k for k, v in nsdfg.symbol_mapping.items() if str(v) == param), None)
    if step != 1 or index is None or _enters_otherwise(state, nsdfg, param, index) or not _blockable(nsdfg.sdfg, index):
        return 1
    extent = symbolic.pystr_to_symbolic(end - start + 1)
    factor = min(int(extent), MAX_FACTOR) if extent.is_Integer else FACTOR
    if factor < 2:
        return 1
    inner = nsdfg.sdfg
    last = inner.find_new_symbol("cpufree_last")
    inner.add_symbol(last, dace.int64)
    nsdfg.symbol_mapping[last] = end
    transients = [name for name, desc in inner.arrays.items() if desc.transient]
    copies = range(1, factor)  # copy 0 is the nest as it is
    renamed = [
        {t: inner.add_datadesc(f"{t}_{v}", copy.deepcopy(inner.arrays[t]), find_new_name=True) for t in transients}
        for v in copies
    ]
    symbol, bound = symbolic.pystr_to_symbolic(index), symbolic.pystr_to_symbolic(last)
    for body in inner.states():
        _repeat(body, [{symbol: sympy.Min(symbol + v, bound)} for v in copies], renamed)
    ranges = list(entry.map.range)
    ranges[-1] = (start, end, factor)
    entry.map.range = dace.subsets.Range(ranges)
    return factor


def _enters_otherwise(state: SDFGState, nsdfg: nodes.NestedSDFG, param: str, index: str) -> bool:
    """Whether the map's parameter reaches the nested SDFG other than as the symbol ``index``: in another symbol's
    value, or in the subset of a memlet into or out of it (a slice per point, which the copies would not shift)."""
    for name, value in nsdfg.symbol_mapping.items():
        if name != index and param in {str(s) for s in symbolic.pystr_to_symbolic(value).free_symbols}:
            return True
    edges = state.in_edges(nsdfg) + state.out_edges(nsdfg)
    return any(not e.data.is_empty() and param in {str(s) for s in e.data.subset.free_symbols} for e in edges)


def _blockable(inner: dace.SDFG, index: str) -> bool:
    blocks = list(inner.all_control_flow_blocks())
    if not all(isinstance(b, (SDFGState, LoopRegion)) for b in blocks):
        return False
    if any(not e.data.is_unconditional() or e.data.assignments for e in inner.all_interstate_edges()):
        return False
    chain = block_chain(inner)
    if chain is None or not isinstance(chain[-1], SDFGState):
        return False
    names = {index} | set(inner.arrays)
    for loop in (b for b in blocks if isinstance(b, LoopRegion)):
        control = (loop.loop_condition, loop.init_statement, loop.update_statement)
        if any(c is not None and names & {str(s) for s in c.get_free_symbols()} for c in control):
            return False
    if any(index in {str(s) for s in desc.free_symbols} for desc in inner.arrays.values()):
        return False
    shared = False
    for body in inner.states():
        for n in body.nodes():
            if isinstance(n, nodes.Tasklet):
                if index in n.free_symbols:
                    return False
            elif not isinstance(n, nodes.AccessNode):
                return False
            elif not inner.arrays[n.data].transient:
                if body.in_degree(n) and (
                    body is not chain[-1] or not all(_transient(inner, e.src) for e in body.in_edges(n))
                ):
                    return False  # memory outside the point's registers: stored in the last state only, from them
                if body.out_degree(n) and body is chain[-1]:
                    return False
        if isinstance(body.parent_graph, LoopRegion):
            shared |= any(
                isinstance(e.src, nodes.AccessNode)
                and not _transient(inner, e.src)
                and e.data.data == e.src.data
                and index not in map(str, e.data.subset.free_symbols)
                for e in body.edges()
            )
    return shared


def _transient(inner: dace.SDFG, node) -> bool:
    return isinstance(node, nodes.AccessNode) and inner.arrays[node.data].transient


def _repeat(body: SDFGState, substitutions: list[dict], renamed: list[dict]) -> None:
    """Adds a copy of ``body``'s dataflow per substitution, the index replaced and the transients renamed."""
    originals, edges = list(body.nodes()), list(body.edges())
    for replace, names in zip(substitutions, renamed):
        twin = {}
        for n in originals:
            twin[n] = copy.deepcopy(n)
            if isinstance(n, nodes.AccessNode):
                twin[n].data = names.get(n.data, n.data)
            body.add_node(twin[n])
        for e in edges:
            memlet = copy.deepcopy(e.data)
            memlet.data = names.get(memlet.data, memlet.data)
            for subset in (memlet.subset, memlet.other_subset):
                if subset is not None:
                    subset.replace(replace)
            body.add_edge(twin[e.src], e.src_conn, twin[e.dst], e.dst_conn, memlet)
