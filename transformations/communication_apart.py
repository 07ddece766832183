"""Puts and waits that DaCe's state fusion joined to the steps around them, moved back into states of their own: the
puts after the step that computes what they send, the waits before the step that reads what they guard. A map's state
then holds the map alone, and :mod:`.early_puts` can place its pieces around the puts.
"""

from __future__ import annotations

import dace
from dace.sdfg import nodes
from dace_cpufree.frontend import Putmem, SignalWait

from dace_cpufree.facts import copy_state_mark


def _movable(state: dace.SDFGState, node, after: bool) -> bool:
    """Whether ``node`` (a put or a wait) can run after (``after``) or before everything else of ``state``: it
    accesses containers only, and nothing else in the state accesses what it writes, nor writes what it reads."""
    ins, outs = state.in_edges(node), state.out_edges(node)
    if not all(isinstance(e.src, nodes.AccessNode) for e in ins) or not all(
        isinstance(e.dst, nodes.AccessNode) for e in outs
    ):
        return False
    if after:  # nothing reads what it writes; nothing but it writes what it reads, other than before it
        return all(state.out_degree(e.dst) == 0 for e in outs) and not any(
            n.data == e.src.data and n is not e.src and any(not isinstance(w.src, Putmem) for w in state.in_edges(n))
            for e in ins
            for n in state.data_nodes()
        )
    # before: nothing writes what it reads; what it writes is read only after it (through its own output nodes)
    return all(state.in_degree(e.src) == 0 for e in ins) and not any(
        n.data == e.dst.data and n is not e.dst and state.in_degree(n) > 0 for e in outs for n in state.data_nodes()
    )


def _move(state: dace.SDFGState, target: dace.SDFGState, node) -> None:
    """``node`` moved from ``state`` into ``target``, with copies of the containers it accesses; the containers
    left in ``state`` keep their other edges."""
    target.add_node(node)
    ins, outs = state.in_edges(node), state.out_edges(node)
    for e in ins:
        target.add_edge(target.add_access(e.src.data, debuginfo=e.src.debuginfo), e.src_conn, node, e.dst_conn, e.data)
    for e in outs:
        target.add_edge(node, e.src_conn, target.add_access(e.dst.data, debuginfo=e.dst.debuginfo), e.dst_conn, e.data)
    ends = [e.src for e in ins] + [e.dst for e in outs]
    state.remove_node(node)
    for n in ends:
        if n in state.nodes() and state.degree(n) == 0:
            state.remove_node(n)


def communication_apart(sdfg: dace.SDFG) -> int:
    """Moves the puts of every state that holds other steps too into a new state right after it, and its waits into
    a new state before it (with copies of the containers they access): a map's state then holds the map alone, and
    its pieces can go around the puts (:func:`.early_puts.split_for_puts`). Returns how many states were split."""
    done = 0
    for state in [s for s, _ in sdfg.all_nodes_recursive() if isinstance(s, dace.SDFGState)]:
        if all(isinstance(n, (Putmem, SignalWait, nodes.AccessNode)) for n in state.nodes()):
            continue
        for kind, after, suffix in ((Putmem, True, "puts"), (SignalWait, False, "waits")):
            moving = [n for n in state.nodes() if isinstance(n, kind)]
            if not moving or not all(_movable(state, n, after) for n in moving):
                continue
            add = state.parent_graph.add_state_after if after else state.parent_graph.add_state_before
            target = add(state, f"{state.label}_{suffix}")
            copy_state_mark(state, target)
            for n in moving:
                _move(state, target, n)
            done += 1
    return done
