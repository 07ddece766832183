"""Copies between containers of different types made conversions, before simplification makes them views.

``C[:] = np.sum(A, axis=0)`` with an integer ``A`` and a float ``C``: DaCe's frontend reduces into a transient of
``A``'s type and copies it into ``C``; its simplification then turns the transient into a view of ``C`` that keeps
the integer type, so the reduction's bits are written into ``C`` as they are (upstream DaCe's CPU build returns
denormals; ours failed to build). NumPy converts on assignment. :func:`convert_typed_copies` replaces each copy
between access nodes of different element types by a map of one assignment per element, which C++ converts, and
which no simplification turns into a view.
"""

from __future__ import annotations

import dace
from dace import data as dt
from dace import subsets
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
