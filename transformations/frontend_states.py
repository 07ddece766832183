"""States that DaCe's frontend adds to the wrong control-flow region, moved where the program put them.

``np.mean`` (and ``ndarray.mean``, ``np.argmax``/``np.argmin`` along an axis) are built by the frontend's
``NestedCall``, which adds its states (the sum, then the division) to the SDFG itself, not to the region of the
statement. Inside a ``for`` loop or a branch the states of such a call end up split: the chain from the call's first
state through the sum to the division is an island in the SDFG's top-level region, while the first and last states
also stay in the loop body, where they no longer connect (the body runs into a dead end). DaCe's simplification then
stops with "Ambiguous or undefined starting block" (upstream DaCe alike, also for float arrays); a graph that got past
it would compute the sum outside the loop. ``rehome_nested_call_states`` moves each such island into the region that
shares its blocks, which reconnects the body in program order. In a ``while`` condition the frontend also copies the
condition's states into the loop body before the island is moved, and the copy lacks the sum: refused with a fix.
"""

from __future__ import annotations

import dace
import networkx as nx

from dace_cpufree.errors import NotPersistableError


def rehome_nested_call_states(sdfg: dace.SDFG) -> int:
    """Moves, in ``sdfg`` and its nested SDFGs, every island of the top-level region that shares a block with an
    inner region (a loop body, a branch) into that region, with its edges; returns the number of blocks the islands
    held. Refuses (``NotPersistableError``) an island shared with several regions and a region left with several
    start states (a ``while`` condition's)."""
    moved = 0
    for sd in sdfg.all_sdfgs_recursive():
        moved += _rehome(sd)
        for region in sd.all_control_flow_regions():
            sources = [b for b in region.nodes() if region.in_degree(b) == 0]
            if len(sources) > 1:
                # a while condition is prepared twice, before the loop and in its body: the body's copy was taken
                # while the call's sum was still at the top level, so it has none
                raise NotPersistableError(
                    f"DaCe's frontend built the control flow of '{sd.label}' with a region that starts at several "
                    f"states ({', '.join(sorted(b.label for b in sources))}): np.mean (or ndarray.mean, np.argmax, "
                    f"np.argmin along an axis) in a while condition is built this way. Fix: compute the condition's "
                    f"value with np.sum(a) / a.size."
                )
    return moved


def _rehome(sdfg: dace.SDFG) -> int:
    inner = [r for r in sdfg.all_control_flow_regions() if r is not sdfg]
    home = {}  # a block of an inner region -> that region
    for region in inner:
        for block in region.nodes():
            home[block] = region
    shared = [b for b in sdfg.nodes() if b in home]
    if not shared:
        return 0
    graph = nx.Graph()
    graph.add_nodes_from(sdfg.nodes())
    graph.add_edges_from((e.src, e.dst) for e in sdfg.edges())
    moved = 0
    for island in list(nx.connected_components(graph)):
        regions = {home[b] for b in island if b in home}
        if not regions:
            continue
        if len(regions) > 1 or sdfg.start_block in island:
            raise NotPersistableError(
                f"DaCe's frontend built SDFG '{sdfg.label}' with states shared between control-flow regions "
                f"({', '.join(sorted(b.label for b in island))}) in a way this package cannot repair. Fix: compute "
                f"the mean as np.sum(a) / a.size (np.mean inside a loop or branch is built this way)."
            )
        target = regions.pop()
        edges = [e for e in sdfg.edges() if e.src in island and e.dst in island]
        for block in island:
            if block not in home:
                target.add_node(block)
        for e in edges:
            target.add_edge(e.src, e.dst, e.data)
        for block in island:
            sdfg.remove_node(block)
        for block in island:
            block.parent_graph = target
        moved += len(island)
    return moved
