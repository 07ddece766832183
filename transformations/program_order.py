"""What runs after a node: the states of an SDFG in program order, around enclosing loops.

Used by the communication passes to find, from a put, the next write to its source and the next wait; and
what a state reads and writes, for the passes that move or merge states.
Branches of a conditional are visited one after the other (either may run); loops wrap around once
(the next iteration), then continue after the loop.
"""

from __future__ import annotations

from collections.abc import Iterator

import dace
from dace import subsets
from dace.sdfg import nodes
from dace.sdfg.state import ConditionalBlock, ControlFlowRegion, LoopRegion, SDFGState

from dace_cpufree import memlets
from dace_cpufree.vocabulary import block_order


def linear_states(region: ControlFlowRegion, loops: tuple = ()) -> list[tuple[SDFGState, tuple]]:
    """Every state under ``region`` in program order, with the loops around it (outermost first)."""
    out = []
    for block in block_order(region):
        if isinstance(block, SDFGState):
            out.append((block, loops))
        elif isinstance(block, LoopRegion):
            out += linear_states(block, loops + (block,))
        elif isinstance(block, ConditionalBlock):
            for _, body in block.branches:
                out += linear_states(body, loops)
        elif isinstance(block, ControlFlowRegion):
            out += linear_states(block, loops)
    return out


def _span(states: list, loop) -> tuple[int, int]:
    idx = [k for k, (_, loops) in enumerate(states) if loop in loops]
    return idx[0], idx[-1]


def nodes_after(sdfg: dace.SDFG, state: SDFGState, node: nodes.Node) -> Iterator[tuple[SDFGState, nodes.Node]]:
    """``(state, node)`` pairs that may execute after ``node``, first ones first.

    The rest of ``node``'s state (its descendants), the rest of the innermost loop body, the same body
    again from its start (the next iteration), then outward loop by loop, then the rest of the program.
    """
    states = linear_states(sdfg)
    i = next(k for k, (s, _) in enumerate(states) if s is state)
    loops = states[i][1]
    topo = list(dace.sdfg.utils.dfs_topological_sort(state))
    after = {e.dst for e in state.dfs_edges(node)}
    yield from ((state, n) for n in topo if n in after and n is not node)
    lo, hi = i, i
    for loop in reversed(loops):
        a, b = _span(states, loop)
        for k in list(range(hi + 1, b + 1)) + list(range(a, lo)):
            yield from _all(states[k][0])
        if lo == i == hi:
            yield from ((state, n) for n in topo if n not in after and n is not node)
        lo, hi = a, b
    if not loops:
        lo = hi = i
    for k in range(hi + 1, len(states)):
        yield from _all(states[k][0])


def _all(state: SDFGState) -> Iterator[tuple[SDFGState, nodes.Node]]:
    for n in dace.sdfg.utils.dfs_topological_sort(state):
        yield state, n


def straight_after(region: ControlFlowRegion, block) -> Iterator:
    """The blocks that follow ``block`` in ``region`` one after the other, each the only successor of the one
    before over an unconditional edge without assignments (the run ends at the first that is not)."""
    while region.out_degree(block) == 1:
        edge = region.out_edges(block)[0]
        if not edge.data.is_unconditional() or edge.data.assignments:
            return
        block = edge.dst
        yield block


def states_of(block) -> list[SDFGState] | None:
    """The states of ``block``: itself, or every state of a conditional whose branches hold only states;
    None for anything else."""
    if isinstance(block, SDFGState):
        return [block]
    if not isinstance(block, ConditionalBlock):
        return None
    states = []
    for _, body in block.branches:
        if not all(isinstance(b, SDFGState) for b in body.nodes()):
            return None
        states += body.nodes()
    return states


def accesses(state: dace.SDFGState) -> list[tuple[str, str, subsets.Subset | None]]:
    """``(container, "R"/"W", subset)`` of every memlet that reads or writes an access node of ``state``
    (``None``: the subset is not known, the whole container)."""
    out = []
    for e in state.edges():
        if e.data.is_empty():
            continue
        if isinstance(e.src, nodes.AccessNode):
            out.append((e.src.data, "R", memlets.read_subset(state, e)))
        if isinstance(e.dst, nodes.AccessNode):
            out.append((e.dst.data, "W", memlets.written_subset(state, e)))
    return out


def conflict(a: list, b: list) -> bool:
    """Whether two lists of :func:`accesses` may touch one element with a write on either side (an unknown subset,
    or one DaCe cannot tell apart: yes)."""
    for name, mode, sub in a:
        for other, omode, osub in b:
            if name != other or (mode == "R" and omode == "R"):
                continue
            if sub is None or osub is None or subsets.intersects(sub, osub) is not False:
                return True
    return False
