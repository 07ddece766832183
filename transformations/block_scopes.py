"""Block scopes (``@mapgridscope``): the block functions' nested SDFGs become states of the kernel, each state
marked with its function's :class:`~dace_cpufree.facts.BlockPart` (:func:`~dace_cpufree.facts.mark_state`).

The frontend gives every block function a nested SDFG that DaCe does not inline (``no_inline``), so that
simplification and map fusion cannot mix one function's steps with another's. Once the rest of the program is
prepared, :func:`flatten_block_scopes` moves each one into a state of its own, inlines it, and marks the states
it became. The block functions of one scope are
independent (checked by the frontend), so running them one after another is the program's meaning; the code
generator runs them side by side on their blocks.
"""

from __future__ import annotations

import dace
from dace.sdfg import nodes
from dace.transformation.interstate import InlineMultistateSDFG, InlineSDFG

from dace_cpufree.errors import NotPersistableError
from dace_cpufree.facts import BlockFunction, copy_state_mark, mark_state, state_part


def block_functions(sdfg: dace.SDFG) -> list[BlockFunction]:
    """The block functions' nested SDFGs, in program order; raises where one is not at the kernel's top level
    (inside a map, a data-dependent branch or another block function), where its blocks could not be split."""
    found = []
    for node, state in sdfg.all_nodes_recursive():
        if not isinstance(node, BlockFunction):
            continue
        if state.sdfg is not sdfg or state.entry_node(node) is not None:
            name = node.label.replace("__", ".", 1)
            raise NotPersistableError(
                f"block function '{name}' is called inside a map, a nested call or another block function; a "
                "grid function splits the whole grid, so it must be called at the top level of the program "
                "(in loops and branches on symbols is fine). Fix: call the grid function outside that scope."
            )
        found.append(node)
    return found


def prepare_block_scopes(sdfg: dace.SDFG) -> int:
    """Each block function simplified on its own, then inlined into states marked with its part; returns the
    number of scopes (0: none, or done before)."""
    functions = block_functions(sdfg)
    for node in functions:
        node.sdfg.simplify()
    return flatten_block_scopes(sdfg, functions) if functions else 0


def simplify(sdfg: dace.SDFG) -> None:
    """DaCe's simplification, without fusing states when block functions' states are marked: a fused state has
    one placement (the block functions' states hold their steps apart)."""
    parts = any(state_part(s) is not None for s in sdfg.states())
    sdfg.simplify(skip={"FuseStates"} if parts else None)


def flatten_block_scopes(sdfg: dace.SDFG, functions: list[BlockFunction]) -> int:
    """Inlines each block function into states of its own, marked with its part (scopes renumbered from 0 in
    program order). Returns the number of scopes."""
    scopes = {}
    for node in functions:
        scopes.setdefault(node.part.scope, len(scopes))
    for node in functions:
        part = node.part.renamed(scopes[node.part.scope], dict(node.symbol_mapping))
        state = _state_of(sdfg, node)
        if any(not isinstance(n, nodes.AccessNode) and n is not node for n in state.nodes()):
            state = _isolate(state, node)
        before = set(sdfg.states())
        node.no_inline = False
        applied = sdfg.apply_transformations_repeated([InlineSDFG, InlineMultistateSDFG])
        if not applied or any(n is node for n, _ in sdfg.all_nodes_recursive()):
            raise NotPersistableError(
                f"block function '{part.name.replace('__', '.', 1)}' could not be inlined into the kernel. Fix: "
                "keep its body to array statements, maps, loops and communication calls."
            )
        mine = [s for s in sdfg.states() if s not in before]
        if state in set(sdfg.states()):
            mine.append(state)
        for s in mine:
            mark_state(s, part)
    return len(scopes)


def _isolate(state: dace.SDFGState, node: nodes.NestedSDFG) -> dace.SDFGState:
    """Moves ``node`` (with what it depends on in its state, first) into a state of its own before ``state``;
    returns that state. Access nodes on the cut are duplicated: data pass between states through memory."""
    ancestors, todo = set(), [e.src for e in state.in_edges(node)]
    while todo:
        n = todo.pop()
        if n not in ancestors:
            ancestors.add(n)
            todo += [e.src for e in state.in_edges(n)]
    pre = {n for n in ancestors if not isinstance(n, nodes.AccessNode)}
    pre |= {e.src for n in pre for e in state.in_edges(n)} | {e.dst for n in pre for e in state.out_edges(n)}
    if any(not isinstance(n, nodes.AccessNode) for n in pre):
        _move(state, pre, "before_" + node.label)
    own = {node} | {e.src for e in state.in_edges(node)} | {e.dst for e in state.out_edges(node)}
    return _move(state, own, node.label)


def _move(state: dace.SDFGState, group: set, label: str) -> dace.SDFGState:
    """A new state before ``state`` holding ``group``; access nodes of the group that other nodes of ``state``
    also use are copied, the rest moved."""
    new = state.parent_graph.add_state_before(state, label)
    shared = {
        n
        for n in group
        if isinstance(n, nodes.AccessNode) and any(e.src not in group or e.dst not in group for e in state.all_edges(n))
    }
    inner = [e for e in state.edges() if e.src in group and e.dst in group]
    twin = {}
    for n in group:
        twin[n] = new.add_access(n.data) if n in shared else n
    for e in inner:
        state.remove_edge(e)
    for n in group - shared:
        state.remove_node(n)
        new.add_node(n)
    for e in inner:
        new.add_edge(twin[e.src], e.src_conn, twin[e.dst], e.dst_conn, e.data)
    for n in list(state.nodes()):  # what the move left behind unconnected
        if isinstance(n, nodes.AccessNode) and state.degree(n) == 0:
            state.remove_node(n)
    return new


def _state_of(sdfg: dace.SDFG, node) -> dace.SDFGState:
    for n, state in sdfg.all_nodes_recursive():
        if n is node:
            return state
    raise KeyError(node.label)


def mark_inlined_states(sdfg: dace.SDFG) -> int:
    """Marks the states that a later inlining (a library expansion's nested SDFG) put between two states of one block
    function with that function's part: a chain of unmarked states whose nearest states before and after belong to
    the same block function came from inside it. Returns how many states it marked."""
    return sum(_mark_runs(region) for region in sdfg.all_control_flow_regions())


def _mark_runs(region) -> int:
    """:func:`mark_inlined_states` in one control-flow region (the SDFG, a loop's body, a branch)."""
    marked = 0
    for state in list(region.nodes()):
        if not isinstance(state, dace.SDFGState) or state_part(state) is not None:
            continue
        run = [state]
        while region.in_degree(run[0]) == 1 and _unmarked(region.in_edges(run[0])[0].src):
            run.insert(0, region.in_edges(run[0])[0].src)
        while region.out_degree(run[-1]) == 1 and _unmarked(region.out_edges(run[-1])[0].dst):
            run.append(region.out_edges(run[-1])[0].dst)
        if region.in_degree(run[0]) != 1 or region.out_degree(run[-1]) != 1:
            continue
        before, after = region.in_edges(run[0])[0].src, region.out_edges(run[-1])[0].dst
        first = state_part(before) if isinstance(before, dace.SDFGState) else None
        last = state_part(after) if isinstance(after, dace.SDFGState) else None
        if first is None or last is None or (first.scope, first.index) != (last.scope, last.index):
            continue
        for s in run:
            copy_state_mark(before, s)
            marked += 1
    return marked


def _unmarked(block) -> bool:
    return isinstance(block, dace.SDFGState) and state_part(block) is None
