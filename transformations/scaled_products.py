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

After the products are expanded and the maps fused, :class:`FoldScalingIntoProduct` moves the map that scales a
product's result and adds a multiple of the output to it (``C = alpha * P + beta * C``: NumPy's gemm and the
second product of 2mm, ``T = alpha * P``: 2mm's first) into the product's call (``cpufree::gemm``'s alpha and beta;
:class:`~.gemm.ProductCall`): the map's pass over the output, its grid sync and the transient ``P`` are gone.

Pattern, in one state: a product tasklet (:func:`~.gemm.product_tasklet`, alpha 1, beta 0) writes the whole of a
transient ``P`` that nothing else uses; one map, and nothing else, reads it, over the whole of a 2-D output ``C``
of ``P``'s shape and type (rows contiguous), and its tasklets compute ``C[i] = a * P[i]`` or
``a * P[i] + b * C[i]`` (either term in either order, ``a`` and ``b`` numbers or scalars of the element type that
nothing in the state writes, or absent: 1); the map reads nothing else; ``C`` is accessed nowhere else in the state
and is not an operand of the product; no view is involved. Effect: the product writes ``C`` with alpha ``a`` and
beta ``b``. With a ``b * C`` term the call keeps NumPy's meaning of it where ``b`` is 0 (``cpufree::gemm_numpy``:
``0 * NaN`` is NaN).
"""

from __future__ import annotations

import ast
from typing import Any

import dace
from dace import data as dt
from dace import nodes
from dace.libraries.blas.nodes.matmul import MatMul
from dace.transformation import pass_pipeline as ppl

from dace_cpufree.vocabulary import assigned_value, control_reads, scalar_like

from .gemm import cxx, product_call, set_product_call


def _written_anywhere(sdfg: dace.SDFG, name: str) -> bool:
    for node, graph in sdfg.all_nodes_recursive():
        if isinstance(node, nodes.AccessNode) and node.data == name and graph.in_degree(node) > 0:
            return True
    return False


def _occurrences(sdfg: dace.SDFG, name: str) -> int:
    return sum(1 for n, _ in sdfg.all_nodes_recursive() if isinstance(n, nodes.AccessNode) and n.data == name)


def _same_sizes(a, b) -> bool:
    """Whether two lists of sizes are the same expressions, by their text: DaCe makes a map's range symbols afresh,
    without the type a program gave the symbol (``dace.symbol("N", dtype=dace.int64)``), and sympy then tells them
    apart."""
    return len(a) == len(b) and all(str(x) == str(y) for x, y in zip(a, b))


def _whole(subset, desc) -> bool:
    return subset is not None and _same_sizes(subset.size(), desc.shape) and all(b == 0 for b in subset.min_element())


def _scaling(state: dace.SDFGState, sdfg: dace.SDFG, t_node: nodes.AccessNode) -> dict | None:
    """``T = s * X`` written by one map into ``t_node``: the map's nodes, ``s`` and ``X`` (their outer edges)."""
    t_desc = sdfg.arrays[t_node.data]
    ins = state.in_edges(t_node)
    if len(ins) != 1 or not isinstance(ins[0].src, nodes.MapExit) or not _whole(ins[0].data.subset, t_desc):
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
    if not _whole(out.data.subset, c_desc) or not isinstance(out.dst, nodes.AccessNode):
        return False
    for edge in state.in_edges(node):
        t_node = edge.src
        if edge.dst_conn not in ("_a", "_b") or not isinstance(t_node, nodes.AccessNode):
            continue
        t_desc = sdfg.arrays[t_node.data]
        if not t_desc.transient or isinstance(t_desc, dt.View) or _occurrences(sdfg, t_node.data) != 1:
            continue
        if state.out_degree(t_node) != 1 or not _whole(edge.data.subset, t_desc):
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


class _ProductRewrite(ppl.Pass):
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


class ScaleAfterProduct(_ProductRewrite):
    """``(s * A) @ B`` becomes ``s * (A @ B)`` (see the module doc)."""

    @staticmethod
    def _takes(node) -> bool:
        return isinstance(node, MatMul)

    _rewrite = staticmethod(_apply_one)


# ---- the scaling and sum after a product, into its call ---------------------------------------------------------

_ARRAY, _SCALAR = "array:", "scalar:"  # leaf names of a map's expression: an element at the map's point, a scalar


def _identity(subset, params) -> bool:
    """Whether ``subset`` is the element ``[p0, p1, ...]`` of the map's parameters, in order."""
    ranges = list(subset.ranges) if hasattr(subset, "ranges") else None
    if ranges is None or len(ranges) != len(params):
        return False
    return all(b == e and str(b) == p and st == 1 for (b, e, st), p in zip(ranges, params))


class _Resolve(ast.NodeTransformer):
    """Replaces a tasklet's input connectors by the expressions of what they carry (:func:`_carried`)."""

    def __init__(self, carried):
        self.carried, self.failed = carried, False

    def visit_Name(self, node):
        value = self.carried.get(node.id)
        if value is None:
            self.failed = True
            return node
        return value


def _tasklet_value(state, sdfg, entry, tasklet, params, depth=0) -> ast.expr | None:
    """What a tasklet of the map body assigns, as an expression over the map's inputs (leaves ``array:X``: X at the
    map's point, ``scalar:s``), or ``None`` where it is anything else."""
    if depth > 16 or tasklet.language != dace.Language.Python or len(state.out_edges(tasklet)) != 1:
        return None
    value = assigned_value(tasklet.code.as_string)
    if value is None:
        return None
    carried = {}
    for edge in state.in_edges(tasklet):
        leaf = _carried(state, sdfg, entry, edge, params, depth + 1)
        if leaf is None:
            return None
        carried[edge.dst_conn] = leaf
    resolve = _Resolve(carried)
    value = resolve.visit(value)
    return None if resolve.failed else value


def _carried(state, sdfg, entry, edge, params, depth) -> ast.expr | None:
    if edge.data.is_empty():
        return None
    if edge.src is entry:
        desc = sdfg.arrays[edge.data.data]
        if scalar_like(desc):
            return ast.Name(id=_SCALAR + edge.data.data)
        return ast.Name(id=_ARRAY + edge.data.data) if _identity(edge.data.subset, params) else None
    src = edge.src
    if isinstance(src, nodes.AccessNode) and state.in_degree(src) == 1:  # a value the map's tasklets pass on
        src = state.in_edges(src)[0].src
    if isinstance(src, nodes.Tasklet):
        return _tasklet_value(state, sdfg, entry, src, params, depth)
    return None


def _term(e: ast.expr):
    """``(coefficient, array leaf)`` of ``X``, ``k * X`` or ``X * k`` (``k`` a scalar leaf or a real number; ``None``
    for 1), else ``None``."""

    def leaf(x, kind):
        return isinstance(x, ast.Name) and x.id.startswith(kind)

    def number(x):
        return isinstance(x, ast.Constant) and type(x.value) in (int, float)

    if leaf(e, _ARRAY):
        return None, e.id[len(_ARRAY) :]
    if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Mult):
        for k, x in ((e.left, e.right), (e.right, e.left)):
            if leaf(x, _ARRAY) and (leaf(k, _SCALAR) or number(k)):
                return k, x.id[len(_ARRAY) :]
    return None


def _terms(e: ast.expr) -> list | None:
    if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Add):
        left, right = _terms(e.left), _terms(e.right)
        return None if left is None or right is None else left + right
    t = _term(e)
    return None if t is None else [t]


def _fold_one(state: dace.SDFGState, sdfg: dace.SDFG, product: nodes.Tasklet) -> bool:
    call = product_call(product)
    outs = state.out_edges(product)
    if call is None or call.alpha != "1" or call.beta != "0" or call.numpy_beta or "_c" in product.in_connectors:
        return False
    if len(outs) != 1 or not isinstance(outs[0].dst, nodes.AccessNode) or outs[0].data.wcr is not None:
        return False
    p_node = outs[0].dst
    p_name, p_desc = p_node.data, sdfg.arrays[p_node.data]
    if not p_desc.transient or isinstance(p_desc, dt.View) or _occurrences(sdfg, p_name) != 1:
        return False
    if p_name in control_reads(sdfg):  # P read by a condition (no access node): it must stay
        return False
    if state.in_degree(p_node) != 1 or state.out_degree(p_node) != 1:
        return False
    entry = state.out_edges(p_node)[0].dst
    if not isinstance(entry, nodes.MapEntry) or state.entry_node(entry) is not None:
        return False
    exit_ = state.exit_node(entry)
    params = list(entry.map.params)
    if len(state.in_edges(exit_)) != 1 or len(state.out_edges(exit_)) != 1:
        return False
    inner, outer = state.in_edges(exit_)[0], state.out_edges(exit_)[0]
    c_node = outer.dst
    if not isinstance(c_node, nodes.AccessNode) or not isinstance(inner.src, nodes.Tasklet):
        return False
    c_name, c_desc = c_node.data, sdfg.arrays[c_node.data]
    if (
        isinstance(c_desc, dt.View)
        or len(c_desc.shape) != 2
        or tuple(c_desc.shape) != tuple(p_desc.shape)
        or c_desc.dtype != p_desc.dtype
        or c_desc.strides[1] != 1
        or not _whole(outer.data.subset, c_desc)
        or inner.data.data != c_name
        or not _identity(inner.data.subset, params)
        or list(entry.map.range.size()) != list(c_desc.shape)
        or any(b != 0 for b in entry.map.range.min_element())
    ):
        return False
    if state.in_degree(c_node) != 1 or any(e.data.wcr is not None or e.data.dynamic for e in (inner, outer)):
        return False
    value = _tasklet_value(state, sdfg, entry, inner.src, params)
    terms = None if value is None else _terms(value)
    if terms is None:
        return False
    by_array = {}
    for coefficient, name in terms:
        if name in by_array or name not in (p_name, c_name):
            return False
        by_array[name] = coefficient
    if p_name not in by_array:
        return False
    # what the map reads: P, C (with a C term), the scalars of the coefficients; C nowhere else in the state
    c_read = None
    scalars = {k.id[len(_SCALAR) :] for k in by_array.values() if isinstance(k, ast.Name)}
    for edge in state.in_edges(entry):
        src = edge.src
        if edge.data.is_empty() or not isinstance(src, nodes.AccessNode):
            return False
        if src.data == c_name and c_name in by_array and state.in_degree(src) == 0 and state.out_degree(src) == 1:
            c_read = src
        elif src is not p_node and src.data not in scalars:
            return False
    if (c_name in by_array) != (c_read is not None):
        return False
    for name in scalars:
        desc = sdfg.arrays[name]
        if desc.dtype != p_desc.dtype or any(
            isinstance(n, nodes.AccessNode) and n.data == name and state.in_degree(n) > 0 for n in state.nodes()
        ):
            return False
    operands = [e.data.data for e in state.in_edges(product) if not e.data.is_empty()]
    for n in state.nodes():
        if isinstance(n, nodes.AccessNode) and (isinstance(sdfg.arrays[n.data], dt.View)):
            return False  # a view could alias C
        if isinstance(n, nodes.AccessNode) and n.data == c_name and n not in (c_node, c_read):
            return False
    if c_name in operands:
        return False

    # the map, its body and P go; the product writes C (and reads it, with a C term)
    scalar_nodes = [e.src for e in state.in_edges(entry) if e.src is not p_node and e.src is not c_read]
    body = state.scope_subgraph(entry, include_entry=True, include_exit=True).nodes()
    for n in body:
        state.remove_node(n)
    state.remove_node(p_node)
    sdfg.remove_data(p_name, validate=False)
    for n in scalar_nodes:
        if n in state.nodes() and state.degree(n) == 0:
            state.remove_node(n)
    whole_c = dace.Memlet.from_array(c_name, c_desc)
    state.add_edge(product, "_c", c_node, None, whole_c)

    def coefficient(key, connector):
        k = by_array.get(key)
        if k is None:
            return "1"
        if isinstance(k, ast.Constant):
            return repr(k.value)
        name = k.id[len(_SCALAR) :]
        product.add_in_connector(connector, sdfg.arrays[name].dtype)
        state.add_edge(state.add_read(name), None, product, connector, dace.Memlet(f"{name}[0]"))
        return connector

    call.alpha = coefficient(p_name, "_alpha")
    if c_read is not None:
        call.beta = coefficient(c_name, "_beta")
        call.numpy_beta = True
        product.add_in_connector("_cin", dace.pointer(c_desc.dtype))  # C read (through the output's pointer)
        state.add_edge(c_read, None, product, "_cin", dace.Memlet.from_array(c_name, c_desc))
    call.ldc = cxx(c_desc.strides[0])
    set_product_call(product, call)
    return True


class FoldScalingIntoProduct(_ProductRewrite):
    """``C = a * (A @ B) + b * C`` computed by the product's call (see the module doc)."""

    @staticmethod
    def _takes(node) -> bool:
        return isinstance(node, nodes.Tasklet) and product_call(node) is not None

    _rewrite = staticmethod(_fold_one)
