"""Two matrix-vector products over one matrix in one call.

NumPy programs often multiply one matrix by a vector from both sides: bicg returns ``r @ A, A @ p``, mvt computes
``A @ y_1`` and ``y_2 @ A``. Each product is bound by reading ``A`` from memory; computed one after the other they
read it twice. :class:`PairMatVecProducts` replaces two such ``MatMul`` nodes by one tasklet that every thread of
the grid calls, ``cpufree::gemv_pair`` (``cpufree/gemv.cuh``), which reads ``A`` once for both. atax's
``(A @ x) @ A``, where the second product needs the first result whole, becomes ``cpufree::gemv_chain``: the same
streamed passes, one for each product, with one grid sync between them.

Pattern, in one state, at the top level of the program (not inside a map): ``MatMul`` nodes ``A @ x`` and
``y @ A`` whose matrix operands are the same window of the same container ``A`` (two dimensions, rows contiguous),
which nothing in the state writes; ``x``, ``y`` and both results are vectors (one dimension of more than one
element, contiguous); one element type, ``float32`` or ``float64``; the two results are different containers from
each other and from ``A`` and ``x``. Either ``y`` is the whole result of ``A @ x``, read from the access node that
product writes (a chain), or neither product reaches the other in the state and ``y`` is neither result (a pair).
Effect: the two nodes are gone; the tasklet reads ``A``, ``x`` (and ``y`` for a pair) and writes both results, with
the same memlets.

A product ``A @ x`` of the same kinds of operands left without a partner, in a state that no loop repeats (here or
around a nested SDFG), becomes ``cpufree::gemv_right``: the streamed pass with its one output (gesummv's two
products, ``A @ x`` and ``B @ x``). It costs a zeroing pass and a grid sync, paid once; in a loop the expansion's
tile per row (fused with the steps around it, no sync) is kept. Any other product is left to the library expansions
(:mod:`.gemm`, DaCe's ``pure``).
"""

from __future__ import annotations

from typing import Any

import dace
import networkx as nx
from dace.libraries.blas.nodes.matmul import MatMul
from dace.sdfg import nodes
from dace.transformation import pass_pipeline as ppl

from dace_cpufree.cpp import cexpr
from dace_cpufree.facts import CpufreeTasklet
from dace_cpufree.vocabulary import CPUFreeMatVec, in_loop

from .gemm import TYPES, at_top_level, matrix_operand


def _vector(sdfg: dace.SDFG, edge) -> object | None:
    """The length of a vector operand (one dimension of more than one element, contiguous), else ``None``."""
    desc = sdfg.arrays[edge.data.data]
    sizes = edge.data.subset.size()
    dims = [i for i, s in enumerate(sizes) if s != 1]
    if len(dims) != 1 or desc.strides[dims[0]] != 1:
        return None
    return sizes[dims[0]]


def _edges(state: dace.SDFGState, node: MatMul) -> dict:
    edges = {e.dst_conn: e for e in state.in_edges(node)}
    edges.update({e.src_conn: e for e in state.out_edges(node)})
    return edges


def _product(state: dace.SDFGState, sdfg: dace.SDFG, node: MatMul) -> tuple | None:
    """``(side, matrix edge, vector edge, result edge, (rows, cols, ld))`` of a matrix-vector product: side
    ``"right"`` for ``A @ x``, ``"left"`` for ``y @ A``; ``None`` for any other node."""
    edges = _edges(state, node)
    if set(edges) != {"_a", "_b", "_c"} or not at_top_level(state, node):
        return None
    if len({sdfg.arrays[e.data.data].dtype for e in edges.values()}) != 1:
        return None
    if sdfg.arrays[edges["_c"].data.data].dtype not in TYPES or _vector(sdfg, edges["_c"]) is None:
        return None
    for side, matrix, vector in (("right", "_a", "_b"), ("left", "_b", "_a")):
        shape = matrix_operand(sdfg, edges[matrix])
        if shape is not None and _vector(sdfg, edges[vector]) is not None:
            return side, edges[matrix], edges[vector], edges["_c"], shape
    return None


def _written(state: dace.SDFGState, name: str) -> bool:
    return any(isinstance(n, nodes.AccessNode) and n.data == name and state.in_degree(n) > 0 for n in state.nodes())


def _pair(state: dace.SDFGState, sdfg: dace.SDFG) -> tuple | None:
    """The first two products of the pattern (module doc) in ``state``: ``(kind, A @ x facts, y @ A facts)``, kind
    ``"pair"`` (independent products) or ``"chain"`` (``y`` is the first product's result)."""
    found = [(n, _product(state, sdfg, n)) for n in state.nodes() if isinstance(n, MatMul)]
    found = [(n, f) for n, f in found if f is not None]
    for right, fr in found:
        for left, fl in found:
            if fr[0] != "right" or fl[0] != "left":
                continue
            a_r, a_l = fr[1].data, fl[1].data
            if a_r.data != a_l.data or a_r.subset != a_l.subset or _written(state, a_r.data):
                continue
            results = {fr[3].data.data, fl[3].data.data}
            operands = {a_r.data, fr[2].data.data}
            if len(results) != 2 or results & operands:
                continue
            if fl[2].src is fr[3].dst and fl[2].data.subset == fr[3].data.subset:
                return "chain", (right, fr), (left, fl)  # y @ A reads the whole result of A @ x
            if fl[2].data.data in results:
                continue
            if nx.has_path(state.nx, right, left) or nx.has_path(state.nx, left, right):
                continue
            return "pair", (right, fr), (left, fl)
    return None


def _alone(state: dace.SDFGState, sdfg: dace.SDFG) -> tuple | None:
    """The first ``A @ x`` of the pattern left in ``state`` (no partner: :func:`_pair` has taken every pair), where no
    loop repeats the state: ``(node, A @ x facts)``."""
    if in_loop(state, across_nested=True):
        return None
    for node in state.nodes():
        facts = _product(state, sdfg, node) if isinstance(node, MatMul) else None
        if facts is None or facts[0] != "right":
            continue
        matrix, result = facts[1].data.data, facts[3].data.data
        if not _written(state, matrix) and result not in (matrix, facts[2].data.data):
            return node, facts
    return None


def _replace(state: dace.SDFGState, sdfg: dace.SDFG, kind: str, right, left=None) -> None:
    """The products replaced by one call: ``kind`` ``"pair"`` or ``"chain"`` (``right`` and ``left``), ``"right"``
    (``right`` alone)."""
    rnode, (_, matrix, x, ax, (rows, cols, ld)) = right
    dtype = sdfg.arrays[ax.data.data].dtype
    pointer = dace.pointer(dtype)
    outputs = {ax: "_Ax"}
    if kind == "right":
        inputs, vectors = {"_A": matrix, "_x": x}, "_x, _Ax"
    else:
        lnode, (_, other, y, ya, _) = left
        outputs[ya] = "_yA"
        inputs = {"_A": matrix, "_x": x} if kind == "chain" else {"_A": matrix, "_x": x, "_y": y}
        vectors = "_x, _Ax, _yA" if kind == "chain" else "_x, _y, _Ax, _yA"
    code = (
        f"cpufree::gemv_{kind}<{dtype.ctype}>((long long)({cexpr(rows)}), (long long)({cexpr(cols)}), _A, "
        f"(long long)({cexpr(ld)}), {vectors});"
    )
    ins, outs = {c: pointer for c in inputs}, {c: pointer for c in outputs.values()}
    tasklet = CpufreeTasklet(f"{rnode.label}_{kind}", ins, outs, code, executor="grid")
    state.add_node(tasklet)
    tasklet.environments = {CPUFreeMatVec.full_class_path()}
    if kind == "chain" and sdfg.arrays[ax.data.data].transient:
        # Read by nothing after the call now, the first result would be taken for dead by DaCe's dead-dataflow pass
        # (which then fails on its symbolic size, TypeError); its memory is the call's workspace, kept as such.
        sdfg.arrays[ax.data.data].lifetime = dace.dtypes.AllocationLifetime.Persistent
    for conn, edge in inputs.items():
        state.add_edge(edge.src, edge.src_conn, tasklet, conn, dace.Memlet.from_memlet(edge.data))
    for edge, conn in outputs.items():
        state.add_edge(tasklet, conn, edge.dst, edge.dst_conn, dace.Memlet.from_memlet(edge.data))
    state.remove_node(rnode)
    if kind != "right":
        source = other.src
        state.remove_node(lnode)
        if state.degree(source) == 0:
            state.remove_node(source)


class PairMatVecProducts(ppl.Pass):
    """``A @ x`` and ``y @ A`` (or ``(A @ x) @ A``) in one state become one ``cpufree::gemv_pair`` (or
    ``gemv_chain``) call, ``A @ x`` alone outside loops one ``cpufree::gemv_right`` call (module doc)."""

    CATEGORY = "dace-cpufree"

    def modifies(self) -> ppl.Modifies:
        return ppl.Modifies.Nodes | ppl.Modifies.Edges

    def should_reapply(self, modified: ppl.Modifies) -> bool:
        return bool(modified & ppl.Modifies.Nodes)

    def apply_pass(self, sdfg: dace.SDFG, _: dict[str, Any]) -> int | None:
        paired = 0
        for graph in sdfg.all_sdfgs_recursive():
            for state in graph.states():
                while (pair := _pair(state, graph)) is not None:
                    _replace(state, graph, *pair)
                    paired += 1
                while (alone := _alone(state, graph)) is not None:
                    _replace(state, graph, "right", alone)
                    paired += 1
        return paired or None
