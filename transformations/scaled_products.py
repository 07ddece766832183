"""Scaling after a product instead of before it.

NumPy code scales an operand of a product more often than its result: ``alpha * A @ x`` (gesummv, gemm, k2mm)
parses as ``(alpha * A) @ x``, a map that writes a scaled copy of the whole matrix, which the product then reads
back: three passes over a matrix where one would do. :class:`ScaleAfterProduct` moves the scalar to the product's
result, ``alpha * (A @ x)``, which touches only the result's elements.

Pattern, in one state: a ``MatMul`` node whose operand ``_a`` or ``_b`` is a transient ``T`` written by a map
whose one tasklet is ``T[idx] = s * X[idx]`` over the whole of ``T`` (``s`` a scalar that the program never
writes, ``X`` of ``T``'s shape and type, not written in the state), and read by nothing else anywhere; the product
writes the whole of its output ``C``. Effect: the product reads ``X``; it writes a new transient of ``C``'s shape,
which a map multiplies by ``s`` into ``C``; the scaling map and ``T`` are gone. The result is the same up to
rounding (``s * (A @ x)`` instead of ``(s * A) @ x``).
"""

from __future__ import annotations

import ast
from typing import Any

import dace
from dace import data as dt
from dace import nodes
from dace.libraries.blas.nodes.matmul import MatMul
from dace.transformation import pass_pipeline as ppl

from dace_cpufree.vocabulary import assigned_value, scalar_like


def _written_anywhere(sdfg: dace.SDFG, name: str) -> bool:
    for node, graph in sdfg.all_nodes_recursive():
        if isinstance(node, nodes.AccessNode) and node.data == name and graph.in_degree(node) > 0:
            return True
    return False


def occurrences(sdfg: dace.SDFG, name: str) -> int:
    """How many access nodes of container ``name`` there are in ``sdfg`` and its nested SDFGs."""
    return sum(1 for n, _ in sdfg.all_nodes_recursive() if isinstance(n, nodes.AccessNode) and n.data == name)


def _same_sizes(a, b) -> bool:
    """Whether two lists of sizes are the same expressions, by their text: DaCe makes a map's range symbols afresh,
    without the type a program gave the symbol (``dace.symbol("N", dtype=dace.int64)``), and sympy then tells them
    apart."""
    return len(a) == len(b) and all(str(x) == str(y) for x, y in zip(a, b))


def whole(subset, desc) -> bool:
    """Whether ``subset`` covers the whole of the container ``desc``, from its first element."""
    return subset is not None and _same_sizes(subset.size(), desc.shape) and all(b == 0 for b in subset.min_element())


def _scaling(state: dace.SDFGState, sdfg: dace.SDFG, t_node: nodes.AccessNode) -> dict | None:
    """``T = s * X`` written by one map into ``t_node``: the map's nodes, ``s`` and ``X`` (their outer edges)."""
    t_desc = sdfg.arrays[t_node.data]
    ins = state.in_edges(t_node)
    if len(ins) != 1 or not isinstance(ins[0].src, nodes.MapExit) or not whole(ins[0].data.subset, t_desc):
        return None
    exit_ = ins[0].src
    entry = state.entry_node(exit_)
    body = state.scope_subgraph(entry, include_entry=False, include_exit=False).nodes()
    if len(body) != 1 or not isinstance(body[0], nodes.Tasklet) or len(state.out_edges(exit_)) != 1:
        return None
    tasklet = body[0]
    product = assigned_value(tasklet.code.as_string)
    if not isinstance(product, ast.BinOp) or not isinstance(product.op, ast.Mult):
        return None
    if not all(isinstance(v, ast.Name) for v in (product.left, product.right)):
        return None
    inner = {e.dst_conn: e for e in state.in_edges(tasklet)}
    if set(inner) != {product.left.id, product.right.id} or len(inner) != 2:
        return None
    out = state.out_edges(tasklet)[0].data
    scale = operand = None
    for edge in inner.values():
        desc = sdfg.arrays[edge.data.data]
        if scalar_like(desc) and not _written_anywhere(sdfg, edge.data.data):
            scale = edge
        elif edge.data.subset == out.subset and _same_sizes(desc.shape, t_desc.shape):
            operand = edge
    if scale is None or operand is None or scale is operand:
        return None
    if sdfg.arrays[scale.data.data].dtype != t_desc.dtype or sdfg.arrays[operand.data.data].dtype != t_desc.dtype:
        return None
    outer = {e.dst_conn: e for e in state.in_edges(entry)}
    s_outer, x_outer = (outer.get("IN_" + e.src_conn[4:]) for e in (scale, operand))
    if s_outer is None or x_outer is None:
        return None
    x_name = x_outer.data.data
    if any(isinstance(n, nodes.AccessNode) and n.data == x_name and state.in_degree(n) for n in state.nodes()):
        return None  # X written in this state: reading it at the product's time could see another value
    return dict(entry=entry, exit=exit_, tasklet=tasklet, s=s_outer, x=x_outer)


def _apply_one(state: dace.SDFGState, sdfg: dace.SDFG, node: MatMul) -> bool:
    out_edges = state.out_edges(node)
    if len(out_edges) != 1:
        return False
    out = out_edges[0]
    c_desc = sdfg.arrays[out.data.data]
    if not whole(out.data.subset, c_desc) or not isinstance(out.dst, nodes.AccessNode):
        return False
    for edge in state.in_edges(node):
        t_node = edge.src
        if edge.dst_conn not in ("_a", "_b") or not isinstance(t_node, nodes.AccessNode):
            continue
        t_desc = sdfg.arrays[t_node.data]
        if not t_desc.transient or isinstance(t_desc, dt.View) or occurrences(sdfg, t_node.data) != 1:
            continue
        if state.out_degree(t_node) != 1 or not whole(edge.data.subset, t_desc):
            continue
        found = _scaling(state, sdfg, t_node)
        if found is None:
            continue
        s_node, x_node = found["s"].src, found["x"].src
        s_name, x_name = found["s"].data.data, found["x"].data.data
        # the product reads X
        state.remove_node(found["tasklet"])
        state.remove_node(found["entry"])
        state.remove_node(found["exit"])
        state.remove_node(t_node)
        for n in (s_node, x_node):
            if n in state.nodes() and state.degree(n) == 0:
                state.remove_node(n)
        sdfg.remove_data(t_node.data, validate=False)
        x_read = state.add_read(x_name)
        state.add_edge(x_read, None, node, edge.dst_conn, dace.Memlet.from_array(x_name, sdfg.arrays[x_name]))
        # ... into a new transient, which a map scales into C
        unscaled, _ = sdfg.add_transient(
            f"{out.data.data}_unscaled", c_desc.shape, c_desc.dtype, find_new_name=True, storage=c_desc.storage
        )
        c_node = out.dst
        state.remove_edge(out)
        mid = state.add_access(unscaled)
        state.add_edge(node, out.src_conn, mid, None, dace.Memlet.from_array(unscaled, sdfg.arrays[unscaled]))
        params = {f"__s{i}": f"0:{dace.symbolic.symstr(d)}" for i, d in enumerate(c_desc.shape)}
        index = ", ".join(params)
        state.add_mapped_tasklet(
            f"{node.label}_scale",
            params,
            {"__p": dace.Memlet(f"{unscaled}[{index}]"), "__k": dace.Memlet(f"{s_name}[0]")},
            "__out = __k * __p",
            {"__out": dace.Memlet(f"{out.data.data}[{index}]")},
            input_nodes={unscaled: mid, s_name: state.add_read(s_name)},
            output_nodes={out.data.data: c_node},
            external_edges=True,
        )
        return True
    return False


class ProductRewrite(ppl.Pass):
    """A rewrite of single nodes in their state, applied to every node it may take (``_takes``) until it changes
    nothing more there (``_rewrite``: whether it changed the graph)."""

    CATEGORY = "dace-cpufree"

    def modifies(self) -> ppl.Modifies:
        return ppl.Modifies.Nodes | ppl.Modifies.Memlets | ppl.Modifies.Descriptors

    def should_reapply(self, modified: ppl.Modifies) -> bool:
        return bool(modified & ppl.Modifies.Nodes)

    def apply_pass(self, sdfg: dace.SDFG, _: dict[str, Any]) -> int | None:
        count = 0
        for node, state in list(sdfg.all_nodes_recursive()):
            if isinstance(state, dace.SDFGState) and self._takes(node):
                while self._rewrite(state, state.sdfg, node):
                    count += 1
        return count or None


class ScaleAfterProduct(ProductRewrite):
    """``(s * A) @ B`` becomes ``s * (A @ B)`` (see the module doc)."""

    @staticmethod
    def _takes(node) -> bool:
        return isinstance(node, MatMul)

    _rewrite = staticmethod(_apply_one)
