"""Copies between containers of different types made conversions, before simplification makes them views.

``C[:] = np.sum(A, axis=0)`` with an integer ``A`` and a float ``C``: DaCe's frontend reduces into a transient of
``A``'s type and copies it into ``C``; its simplification then turns the transient into a view of ``C`` that keeps
the integer type, so the reduction's bits are written into ``C`` as they are (upstream DaCe's CPU build returns
denormals; ours failed to build). NumPy converts on assignment. :func:`convert_typed_copies` replaces each copy
between access nodes of different element types by a map of one assignment per element, which C++ converts, and
which no simplification turns into a view.

The same simplification breaks ``y[:-1] = np.max(A[:-1, :-1] + np.sqrt(y[1:]), axis=1)``: the reduction's result
becomes a view of ``y``, and once the reduction is expanded its initial values are written into ``y`` with no order
after the reads of ``y[1:]`` (the emulation's race checker sees it; upstream DaCe alike). :func:`keep_assignments_apart`
makes such a copy a map too, so the reduction writes a transient of its own.
"""

from __future__ import annotations

import dace
from dace import data as dt
from dace import subsets
from dace.libraries.standard.nodes import Reduce
from dace.memlet import Memlet
from dace.sdfg import nodes

from dace_cpufree import memlets


def _indices(subset: subsets.Range, params: list[str]) -> str | None:
    """The element of ``subset`` at the map's ``params`` (one a dimension of size other than one, in order)."""
    index, k = [], 0
    for (begin, _, step), size in zip(subset.ranges, subset.size()):
        if size == 1:
            index.append(str(begin))
            continue
        if k == len(params):
            return None
        index.append(f"{begin} + ({step}) * {params[k]}")
        k += 1
    return ", ".join(index) if k == len(params) else None


def _convert(sdfg: dace.SDFG, state: dace.SDFGState, edge) -> bool:
    src, src_sub, dst, dst_sub = memlets.ends(state, edge)
    src_sub = src_sub or subsets.Range.from_array(sdfg.arrays[src])
    dst_sub = dst_sub or subsets.Range.from_array(sdfg.arrays[dst])
    shape = [s for s in dst_sub.size() if s != 1]
    if [s for s in src_sub.size() if s != 1] != shape:
        return False  # a copy that reshapes: left as DaCe made it
    params = [f"__cv{k}" for k in range(len(shape))]
    read, write = _indices(src_sub, params), _indices(dst_sub, params)
    if read is None or write is None:
        return False
    ranges = {p: f"0:{s}" for p, s in zip(params, shape)} or {"__cv0": "0:1"}
    state.add_mapped_tasklet(
        "convert",
        ranges,
        {"__in": Memlet(f"{src}[{read}]")},
        "__out = __in",
        {"__out": Memlet(f"{dst}[{write}]")},
        input_nodes={src: edge.src},
        output_nodes={dst: edge.dst},
        external_edges=True,
    )
    state.remove_edge(edge)
    return True


def _upstream_reads(state: dace.SDFGState, node, containers: set[str]) -> bool:
    """Whether a node upstream of ``node`` in ``state`` is an access node of one of ``containers``."""
    seen, todo = set(), [node]
    while todo:
        for e in state.in_edges(todo.pop()):
            if e.src in seen:
                continue
            seen.add(e.src)
            if isinstance(e.src, nodes.AccessNode) and e.src.data in containers:
                return True
            todo.append(e.src)
    return False


def _derived(sdfg: dace.SDFG, target: str) -> set[str]:
    """The containers whose values are computed, through any chain of states and views, from ``target``."""
    derived, changed = {target}, True
    while changed:
        changed = False
        for state in sdfg.states():
            for node in state.data_nodes():
                if node.data not in derived and state.in_degree(node) and _upstream_reads(state, node, derived):
                    derived.add(node.data)
                    changed = True
    return derived


def _reduction_outputs(sdfg: dace.SDFG) -> set[str]:
    """The containers a reduction writes."""
    return {
        node.data
        for state in sdfg.states()
        for node in state.data_nodes()
        if any(isinstance(e.src, Reduce) for e in state.in_edges(node))
    }


def keep_assignments_apart(sdfg: dace.SDFG) -> int:
    """Replaces, in ``sdfg`` and its nested SDFGs, by a copying map every copy into an array of a transient that a
    reduction writes, where its value was computed from that array (``y[:-1] = np.max(A + y[1:], axis=1)``) or where
    the region copied to has other strides than the transient (:func:`_same_layout`); returns how many. NumPy
    computes the right-hand side before it assigns; DaCe's simplification would make the transient a view of the
    array, and the reduction's initial values, once expanded and inlined, are written with no order after the reads
    of the array (upstream DaCe alike)."""
    done = 0
    for sd in sdfg.all_sdfgs_recursive():
        derived, reduced = {}, _reduction_outputs(sd)
        for state in sd.states():
            for edge in list(state.edges()):
                if not (isinstance(edge.src, nodes.AccessNode) and isinstance(edge.dst, nodes.AccessNode)):
                    continue
                a, b = sd.arrays[edge.src.data], sd.arrays[edge.dst.data]
                if not a.transient or isinstance(a, dt.View) or isinstance(b, dt.View) or edge.data.is_empty():
                    continue
                if edge.src.data not in reduced:
                    continue
                if not _same_layout(sd, state, edge):
                    done += _convert(sd, state, edge)
                    continue
                if edge.dst.data not in derived:
                    derived[edge.dst.data] = _derived(sd, edge.dst.data)
                if edge.src.data in derived[edge.dst.data]:
                    done += _convert(sd, state, edge)
    return done


def _same_layout(sdfg: dace.SDFG, state: dace.SDFGState, edge) -> bool:
    """Whether the copy's source (a contiguous transient) has the strides of the region it is copied to, so that it
    can be that region's view: DaCe's simplification makes it one keeping the transient's own strides
    (``B[:, 1:] = np.sum(A, axis=0)`` wrote ``B`` as if its rows were one element shorter; upstream DaCe alike)."""
    _, src_sub, dst, dst_sub = memlets.ends(state, edge)
    if dst_sub is None:
        return True
    target = sdfg.arrays[dst]
    kept = [stride for stride, size in zip(target.strides, dst_sub.size()) if size != 1]
    source = [
        stride
        for stride, size in zip(sdfg.arrays[edge.src.data].strides, sdfg.arrays[edge.src.data].shape)
        if size != 1
    ]
    return len(kept) == len(source) and all(dace.symbolic.equal(a, b) is True for a, b in zip(kept, source))


def convert_typed_copies(sdfg: dace.SDFG) -> int:
    """Replaces, in ``sdfg`` and its nested SDFGs, every copy between two access nodes of containers (arrays or
    scalars, not views) of different element types by a converting map; returns how many."""
    done = 0
    for sd in sdfg.all_sdfgs_recursive():
        for state in sd.states():
            for edge in list(state.edges()):
                if not (isinstance(edge.src, nodes.AccessNode) and isinstance(edge.dst, nodes.AccessNode)):
                    continue
                a, b = sd.arrays[edge.src.data], sd.arrays[edge.dst.data]
                if isinstance(a, dt.View) or isinstance(b, dt.View) or a.dtype == b.dtype or edge.data.is_empty():
                    continue
                done += _convert(sd, state, edge)
    return done
