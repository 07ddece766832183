"""Reductions of split arrays in a distributed program (see :mod:`.halo_exchange`): each PE reduces its owned part,
an ``Allreduce`` combines the PEs' parts.

- Library reductions (``np.sum``, ``np.max``, ``np.dot``, the norms: DaCe's ``Reduce`` and ``Dot``) write a fresh
  result from their identity: the ``Allreduce`` of that result follows them, before its first read.
- A map that accumulates into an array that is not split (``s[0] += A[i]`` in a ``dace.map``, a write-conflict
  resolution) would add the array's earlier value once per PE. Its accumulation goes into a temporary of the same
  shape, set to the operation's identity before the map; after the map the temporary is reduced across the PEs and
  then combined with the array once.
"""

from __future__ import annotations

import dace
import numpy as np
from dace.frontend.operations import detect_reduction_type
from dace.sdfg.graph import SubgraphView
from dace.transformation.helpers import state_fission
from dace_cpufree.frontend.allreduce import Allreduce

from dace_cpufree.decomposition import Reduction
from dace_cpufree.errors import NotPersistableError

from .distribute import REDUCTION_OPS, line_of

_COMBINE = {"sum": "o = a + b", "prod": "o = a * b", "max": "o = max(a, b)", "min": "o = min(a, b)"}


def _identity(op: str, dtype: dace.typeclass):
    kind = np.dtype(dtype.type)
    info = np.finfo(kind) if np.issubdtype(kind, np.floating) else np.iinfo(kind)
    return {"sum": 0, "prod": 1, "max": info.min, "min": info.max}[op]


def map_reductions(sdfg: dace.SDFG, align: dict, scopes) -> tuple[Reduction, ...]:
    """Aligned maps that reduce (WCR) into data that is not split, made to count the data's earlier value once."""
    found = []
    for sc in scopes:
        for e in list(sc.state.out_edges(sc.state.exit_node(sc.entry))):
            m = e.data
            if m.data is None or m.data in align:
                continue
            if m.wcr is None:
                raise NotPersistableError(
                    f"cannot distribute: the map at {line_of(sc.entry)} writes '{m.data}', which is not split, from "
                    "split data without a reduction. Fix: add it to distribute, or reduce into it (np.sum, +=)."
                )
            op = REDUCTION_OPS.get(detect_reduction_type(m.wcr))
            if op is None:
                raise NotPersistableError(
                    f"cannot distribute: the reduction into '{m.data}' at {line_of(sc.entry)} is not a sum, product, "
                    "max or min. Fix: write it as one of those."
                )
            source = next(a.data for a, _ in sc.accesses if a.data in align)
            _accumulate_apart(sdfg, sc, e, op)
            found.append(Reduction(source, op, line_of(sc.entry)))
    return tuple(found)


def _accumulate_apart(sdfg: dace.SDFG, sc, edge, op: str) -> None:
    """The map's accumulation into ``edge``'s data redirected into a temporary, reduced and combined after it."""
    state, data = sc.state, edge.data.data
    desc = sdfg.arrays[data]
    part, _ = sdfg.add_transient(f"__cpufree_part_{data}", desc.shape, desc.dtype, find_new_name=True)
    graph = state.scope_subgraph(sc.entry, include_entry=True, include_exit=True)
    for e in graph.edges():
        if e.data.data == data and e.data.wcr is not None:
            e.data.data = part
    target = edge.dst
    state.remove_edge(edge)
    node = state.add_access(part)
    edge.data.data = part
    state.add_edge(edge.src, edge.src_conn, node, None, edge.data)
    if state.degree(target) == 0:
        state.remove_node(target)
    elif state.out_degree(target) > 0:  # read later in the state: the combination goes in between
        state = state_fission(SubgraphView(state, [node]), allow_isolated_nodes=False)
    ranges = {f"__i{k}": f"0:{s}" for k, s in enumerate(desc.shape)}
    index = ", ".join(ranges)
    init = state.parent_graph.add_state_before(state, f"init_{part}")  # (the state that holds the map)
    init.add_mapped_tasklet(
        f"init_{part}", ranges, {}, f"o = {_identity(op, desc.dtype)!r}", {"o": dace.Memlet(f"{part}[{index}]")},
        external_edges=True,
    )
    reduced = _allreduce_after(sdfg, state, part, op)
    combine = reduced.parent_graph.add_state_after(reduced, f"combine_{data}")
    combine.add_mapped_tasklet(
        f"combine_{data}", ranges,
        {"a": dace.Memlet(f"{data}[{index}]"), "b": dace.Memlet(f"{part}[{index}]")},
        _COMBINE[op], {"o": dace.Memlet(f"{data}[{index}]")}, external_edges=True,
    )


def library_reductions(sdfg: dace.SDFG, found: list) -> tuple[Reduction, ...]:
    """An ``Allreduce`` of each library reduction's result, between it and the first read of that result."""
    out = []
    for _, node, op, inputs in found:
        state = next(s for s in sdfg.states() if node in s.nodes())  # earlier splits may have moved it
        (edge,) = state.out_edges(node)
        result = edge.dst
        if state.out_degree(result) > 0:
            state = state_fission(SubgraphView(state, [result]), allow_isolated_nodes=False)
        _allreduce_after(sdfg, state, result.data, op)
        out.append(Reduction(inputs[0], op, line_of(node) if node.debuginfo else line_of(edge.dst)))
    return tuple(out)


def _allreduce_after(sdfg: dace.SDFG, state: dace.SDFGState, data: str, op: str) -> dace.SDFGState:
    after = state.parent_graph.add_state_after(state, f"allreduce_{data}")
    node = Allreduce(f"allreduce_{data}", op=op, phase="all")
    after.add_node(node)
    whole = sdfg.arrays[data]
    after.add_edge(after.add_read(data), None, node, "_in", dace.Memlet.from_array(data, whole))
    after.add_edge(node, "_out", after.add_write(data), None, dace.Memlet.from_array(data, whole))
    return after


__all__ = ["library_reductions", "map_reductions"]
