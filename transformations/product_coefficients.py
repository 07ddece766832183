"""The scaling and sum after a product, into its call.

After the products are expanded and the maps fused, :class:`FoldScalingIntoProduct` moves the map that scales a
product's result and adds a multiple of the output to it (``C = alpha * P + beta * C``: NumPy's gemm and the
second product of 2mm, ``T = alpha * P``: 2mm's first) into the product's call (``cpufree::gemm``'s alpha and beta;
:class:`~dace_cpufree.facts.ProductCall`): the map's pass over the output, its grid sync and the transient ``P`` are
gone.

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

import dace
from dace import data as dt
from dace import nodes

from dace_cpufree.cpp import cexpr
from dace_cpufree.vocabulary import assigned_value, control_reads, scalar_like

from .gemm import product_call, set_product_call
from .scaled_products import ProductRewrite, occurrences, whole

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


def _scaling_map(state: dace.SDFGState, sdfg: dace.SDFG, product: nodes.Tasklet, call) -> tuple | None:
    """``(P, the map's entry, its one inner and outer edge into C, C)`` where the product (alpha 1, beta 0) writes the
    whole of a transient ``P`` that nothing else uses and one map reads it, writing the whole of a 2-D output ``C`` of
    ``P``'s shape and type at the map's point; else ``None``."""
    outs = state.out_edges(product)
    if call is None or call.alpha != "1" or call.beta != "0" or call.numpy_beta or "_c" in product.in_connectors:
        return None
    if len(outs) != 1 or not isinstance(outs[0].dst, nodes.AccessNode) or outs[0].data.wcr is not None:
        return None
    p_node = outs[0].dst
    p_name, p_desc = p_node.data, sdfg.arrays[p_node.data]
    if not p_desc.transient or isinstance(p_desc, dt.View) or occurrences(sdfg, p_name) != 1:
        return None
    if p_name in control_reads(sdfg):  # P read by a condition (no access node): it must stay
        return None
    if state.in_degree(p_node) != 1 or state.out_degree(p_node) != 1:
        return None
    entry = state.out_edges(p_node)[0].dst
    if not isinstance(entry, nodes.MapEntry) or state.entry_node(entry) is not None:
        return None
    exit_ = state.exit_node(entry)
    params = list(entry.map.params)
    if len(state.in_edges(exit_)) != 1 or len(state.out_edges(exit_)) != 1:
        return None
    inner, outer = state.in_edges(exit_)[0], state.out_edges(exit_)[0]
    c_node = outer.dst
    if not isinstance(c_node, nodes.AccessNode) or not isinstance(inner.src, nodes.Tasklet):
        return None
    c_name, c_desc = c_node.data, sdfg.arrays[c_node.data]
    if (
        isinstance(c_desc, dt.View)
        or len(c_desc.shape) != 2
        or tuple(c_desc.shape) != tuple(p_desc.shape)
        or c_desc.dtype != p_desc.dtype
        or c_desc.strides[1] != 1
        or not whole(outer.data.subset, c_desc)
        or inner.data.data != c_name
        or not _identity(inner.data.subset, params)
        or list(entry.map.range.size()) != list(c_desc.shape)
        or any(b != 0 for b in entry.map.range.min_element())
    ):
        return None
    if state.in_degree(c_node) != 1 or any(e.data.wcr is not None or e.data.dynamic for e in (inner, outer)):
        return None
    return p_node, entry, inner, outer, c_node


def _coefficients(state, sdfg, entry, tasklet, p_name: str, c_name: str) -> dict | None:
    """The coefficient of ``P`` and of ``C`` (where the map adds a multiple of it) in what the map's tasklet assigns
    (:func:`_term`: a leaf, a number or ``None`` for 1), by array name; ``None`` where it is anything else."""
    value = _tasklet_value(state, sdfg, entry, tasklet, list(entry.map.params))
    terms = None if value is None else _terms(value)
    if terms is None:
        return None
    by_array = {}
    for coefficient, name in terms:
        if name in by_array or name not in (p_name, c_name):
            return None
        by_array[name] = coefficient
    return by_array if p_name in by_array else None


def _map_inputs(state, sdfg, entry, p_node, c_name: str, by_array: dict):
    """The access node of ``C`` the map reads (``None`` without a ``C`` term) where the map reads only ``P``, ``C``
    and the coefficients' scalars (of the element type, written nowhere in the state); else ``False``."""
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
    p_dtype = sdfg.arrays[p_node.data].dtype
    for name in scalars:
        desc = sdfg.arrays[name]
        if desc.dtype != p_dtype or any(
            isinstance(n, nodes.AccessNode) and n.data == name and state.in_degree(n) > 0 for n in state.nodes()
        ):
            return False
    return c_read


def _c_apart(state, sdfg, product, c_node, c_read) -> bool:
    """Whether ``C`` is accessed nowhere else in the state, no view is involved and ``C`` is no operand of the
    product."""
    c_name = c_node.data
    operands = [e.data.data for e in state.in_edges(product) if not e.data.is_empty()]
    for n in state.nodes():
        if isinstance(n, nodes.AccessNode) and (isinstance(sdfg.arrays[n.data], dt.View)):
            return False  # a view could alias C
        if isinstance(n, nodes.AccessNode) and n.data == c_name and n not in (c_node, c_read):
            return False
    return c_name not in operands


def _fold_one(state: dace.SDFGState, sdfg: dace.SDFG, product: nodes.Tasklet) -> bool:
    """Moves the map that scales ``product``'s result (and adds a multiple of its output) into the product's call,
    where the pattern of the module doc holds; whether it did."""
    call = product_call(product)
    found = _scaling_map(state, sdfg, product, call)
    if found is None:
        return False
    p_node, entry, inner, _, c_node = found
    by_array = _coefficients(state, sdfg, entry, inner.src, p_node.data, c_node.data)
    if by_array is None:
        return False
    c_read = _map_inputs(state, sdfg, entry, p_node, c_node.data, by_array)
    if c_read is False or not _c_apart(state, sdfg, product, c_node, c_read):
        return False
    _into_call(state, sdfg, product, call, (p_node, entry, c_node, c_read), by_array)
    return True


def _into_call(state, sdfg, product, call, found: tuple, by_array: dict) -> None:
    """The rewrite: the map, its body and ``P`` go; the product writes ``C`` (and reads it, with a ``C`` term) with
    the map's coefficients as its alpha and beta. ``found`` is ``(P, the map's entry, C, the C the map reads)``."""
    p_node, entry, c_node, c_read = found
    p_name, c_name = p_node.data, c_node.data
    c_desc = sdfg.arrays[c_name]
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
    call.ldc = cexpr(c_desc.strides[0])
    set_product_call(product, call)


class FoldScalingIntoProduct(ProductRewrite):
    """``C = a * (A @ B) + b * C`` computed by the product's call (see the module doc)."""

    @staticmethod
    def _takes(node) -> bool:
        return isinstance(node, nodes.Tasklet) and product_call(node) is not None

    _rewrite = staticmethod(_fold_one)
