"""Which subset of a memlet belongs to which end of its edge.

A memlet names one container (``memlet.data``) and holds two subsets: ``subset`` of that container and
``other_subset`` of the container at the edge's other end. When both ends are the same container (a copy
from one region of an array to another, ``p[0, :] = p[1, :]``) the names alone cannot tell source from
destination; DaCe records the direction on the memlet and exposes it as ``src_subset`` / ``dst_subset``
once the memlet knows its edge. Every stage of this package that asks "what does this edge read, what does
it write" asks here, so that no stage reads ``subset`` as the source where DaCe says otherwise.
"""

from __future__ import annotations

import dace
from dace import subsets
from dace.sdfg import nodes


def ends(state: dace.SDFGState, edge) -> tuple[str, subsets.Subset | None, str, subsets.Subset | None]:
    """``(source container, its subset, destination container, its subset)`` of a copy edge whose memlet path
    starts and ends at access nodes (the edge itself may cross scopes). A subset is ``None`` where the memlet
    does not say (the whole container)."""
    path = state.memlet_path(edge)
    src = edge.src.data if isinstance(edge.src, nodes.AccessNode) else path[0].src.data
    dst = edge.dst.data if isinstance(edge.dst, nodes.AccessNode) else path[-1].dst.data
    memlet = edge.data
    if src == dst:
        # one container at both ends: DaCe's recorded direction decides (initialised from the edge when unset)
        src_sub, dst_sub = memlet.get_src_subset(edge, state), memlet.get_dst_subset(edge, state)
        src_sub = src_sub if src_sub is not None else dst_sub
        dst_sub = dst_sub if dst_sub is not None else src_sub
    elif memlet.data == src:
        src_sub = memlet.subset
        dst_sub = memlet.other_subset if memlet.other_subset is not None else memlet.subset
    else:
        dst_sub = memlet.subset
        src_sub = memlet.other_subset if memlet.other_subset is not None else memlet.subset
    return src, src_sub, dst, dst_sub


def read_subset(state: dace.SDFGState, edge) -> subsets.Subset | None:
    """The subset of ``edge.src`` (an access node) that ``edge`` reads; ``None``: unknown (the whole container)."""
    memlet = edge.data
    if isinstance(edge.dst, nodes.AccessNode) and edge.dst.data == edge.src.data:
        return memlet.get_src_subset(edge, state)
    return memlet.subset if memlet.data == edge.src.data else memlet.other_subset


def written_subset(state: dace.SDFGState, edge) -> subsets.Subset | None:
    """The subset of ``edge.dst`` (an access node) that ``edge`` writes; ``None``: unknown (the whole container)."""
    memlet = edge.data
    if isinstance(edge.src, nodes.AccessNode) and edge.src.data == edge.dst.data:
        dst = memlet.get_dst_subset(edge, state)
        return dst if dst is not None else memlet.get_src_subset(edge, state)
    return memlet.subset if memlet.data == edge.dst.data else memlet.other_subset
