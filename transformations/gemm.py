"""Matrix products inside the persistent kernel: DaCe's ``Gemm`` library node expanded to one call of
``cpufree::gemm`` (``cpufree/gemm.cuh``: a grid-wide loop of output tiles, FP64 on CUTLASS's block product, FP32 on
cuBLASDx's) that every thread of the grid makes together.

Registered as the ``"cpufree"`` implementation of :class:`dace.libraries.blas.Gemm` and of ``BatchedMatMul``
(where the batch shares its right-hand matrix and its left matrices and results are blocks of stacked rows: one
product of all the rows); :class:`~.expand_libraries.ExpandLibraryNodesToDataflow` prefers it. It applies to a
product at the top level of the program (a call of all threads: not inside a map, whose iterations run on single
threads) of ``float32`` or ``float64`` matrices whose rows are contiguous (NumPy's C order; transposed operands are
read as such). Any other product is expanded with DaCe's ``pure`` implementation, as before.
"""

from __future__ import annotations

import dataclasses

import dace
from dace.libraries.blas.nodes.batched_matmul import BatchedMatMul, ExpandBatchedMatMulPure
from dace.libraries.blas.nodes.gemm import ExpandGemmPure, Gemm
from dace.sdfg import nodes
from dace.transformation.transformation import ExpandTransformation

from dace_cpufree.cpp import cexpr
from dace_cpufree.facts import CpufreeTasklet, LaunchNeeds, ProductCall
from dace_cpufree.vocabulary import CPUFreeMathDx

#: Element types with a tensor-core path in gemm.cuh.
TYPES = (dace.float64, dace.float32)


def matrix_operand(sdfg: dace.SDFG, edge) -> tuple | None:
    """``(rows, cols, leading dimension)`` of a matrix operand given as a 2-D window with contiguous rows."""
    desc = sdfg.arrays[edge.data.data]
    subset = edge.data.subset
    dims = [i for i, s in enumerate(subset.size()) if s != 1]
    if len(dims) != 2 or desc.dtype not in TYPES:
        return None
    rows, cols = (subset.size()[i] for i in dims)
    if desc.strides[dims[1]] != 1:
        return None
    return rows, cols, desc.strides[dims[0]]


def at_top_level(state: dace.SDFGState, node) -> bool:
    """Whether ``node`` runs once for the whole grid: outside every map, also through nested SDFGs."""
    graph = state
    if graph.entry_node(node) is not None:
        return False
    sdfg = graph.sdfg
    while sdfg.parent_nsdfg_node is not None:
        if sdfg.parent.entry_node(sdfg.parent_nsdfg_node) is not None:
            return False
        sdfg = sdfg.parent.sdfg
    return True


def applies(node: Gemm, state: dace.SDFGState, sdfg: dace.SDFG) -> dict | None:
    """The operands of ``node`` when the in-kernel product can compute it, else ``None``."""
    if not at_top_level(state, node):
        return None
    ops = {}
    for e in state.in_edges(node):
        ops[e.dst_conn] = matrix_operand(sdfg, e)
    for e in state.out_edges(node):
        ops["_out"] = matrix_operand(sdfg, e)
    if any(v is None for v in ops.values()) or not {"_a", "_b", "_out"} <= set(ops):
        return None
    types = {sdfg.arrays[e.data.data].dtype for e in state.all_edges(node)}
    return ops if len(types) == 1 else None


def product_call(node: nodes.Tasklet) -> ProductCall | None:
    """The call a product tasklet of :func:`product_tasklet` makes (a copy, to change and give back with
    :func:`set_product_call`), else ``None``."""
    call = node.product if isinstance(node, CpufreeTasklet) else None
    return None if call is None else dataclasses.replace(call)


def set_product_call(node: CpufreeTasklet, call: ProductCall) -> None:
    """Makes ``node`` (a product tasklet) make ``call``."""
    node.code = dace.properties.CodeBlock(call.code(), dace.Language.CPP)
    node.product = dataclasses.replace(call)


def product_tasklet(label, dtype, m, n, k, alpha, beta, lda, trans_a, ldb, trans_b, ldc, inputs) -> nodes.Tasklet:
    """The tasklet of one grid-wide ``cpufree::gemm`` call, with what it needs of the launch as its facts."""
    ctype = dtype.ctype
    call = ProductCall(
        ctype,
        cexpr(m),
        cexpr(n),
        cexpr(k),
        str(alpha),
        str(beta),
        cexpr(lda),
        bool(trans_a),
        cexpr(ldb),
        bool(trans_b),
        cexpr(ldc),
    )
    pointer = dace.pointer(dtype)
    # its output tiles, for the launcher's choice of build (codegen/host.py kernel_builds), and the symbols that
    # count them, which the launcher must have; whether a block size runs its tile (configure() warns where not)
    launch = LaunchNeeds(
        block_threads=f"cpufree::gemm_threads<{ctype}>()",
        block_fits=f"cpufree::gemm_block_fits<{ctype}>",
        dynamic_shared=f"cpufree::gemm_shared_bytes<{ctype}>()",
        tiles=f"cpufree::gemm_tiles<{ctype}>((long long)({cexpr(m)}), (long long)({cexpr(n)}))",
        tile_symbols=tuple(sorted(str(x) for x in dace.symbolic.symlist(m * n))),
    )
    node = CpufreeTasklet(
        label, {c: pointer for c in inputs}, {"_c": pointer}, executor="grid", launch=launch
    )  # DaCe records the environment (CPUFreeMathDx) in the tasklet
    set_product_call(node, call)  # its code and its fact, from the call
    return node


@dace.library.expansion
class ExpandGemmCpufree(ExpandTransformation):
    """``C = alpha * op(A) @ op(B) + beta * C`` as one grid-wide ``cpufree::gemm`` call (see the module doc)."""

    environments = [CPUFreeMathDx]

    @staticmethod
    def expansion(node: Gemm, state: dace.SDFGState, sdfg: dace.SDFG, **kwargs):
        ops = applies(node, state, sdfg)
        if ops is None:
            return ExpandGemmPure.expansion(node, state, sdfg)
        (m, ka, lda), (kb, n, ldb), (_, _, ldc) = ops["_a"], ops["_b"], ops["_out"]
        if node.transA:
            m, ka = ka, m
        if node.transB:
            kb, n = n, kb
        dtype = sdfg.arrays[next(iter(state.out_edges(node))).data.data].dtype
        beta = 0 if "_c" not in node.in_connectors else node.beta
        return product_tasklet(
            node.label, dtype, m, n, ka, node.alpha, beta, lda, node.transA, ldb, node.transB, ldc, node.in_connectors
        )


Gemm.register_implementation("cpufree", ExpandGemmCpufree)


def _stacked_rows(desc, subset) -> tuple | None:
    """``(rows, cols, leading dimension)`` of an operand window of 2 or more dimensions whose matrices lie one after
    another with one row pitch (a C-ordered block: ``A[0:R, 0:Q, 0:P]`` read as ``R * Q`` rows of ``P``), else
    ``None``."""
    sizes = subset.size()
    if len(sizes) < 2 or desc.strides[-1] != 1:
        return None
    for d in range(len(sizes) - 2):  # each batch step moves by its inner dimensions' extent
        if dace.symbolic.simplify(desc.strides[d] - desc.strides[d + 1] * sizes[d + 1]) != 0:
            return None
    rows = sizes[0]
    for size in sizes[1:-1]:
        rows = rows * size
    return rows, sizes[-1], desc.strides[-2]


def batched_applies(node: BatchedMatMul, state: dace.SDFGState, sdfg: dace.SDFG) -> dict | None:
    """Operands of a batched product with one right-hand matrix shared by the batch (``A @ B`` with ``A`` of 3 or
    more dimensions, ``B`` 2-D) whose batch of left matrices and of results are each one block of stacked rows:
    then it is one matrix product of ``batch * M`` rows. ``None`` otherwise."""
    if not at_top_level(state, node) or node.transA or node.transB:
        return None
    edges = {e.dst_conn: e for e in state.in_edges(node)}
    edges["_c"] = next(iter(state.out_edges(node)))
    if set(edges) != {"_a", "_b", "_c"}:
        return None
    descs = {k: sdfg.arrays[e.data.data] for k, e in edges.items()}
    if len({d.dtype for d in descs.values()}) != 1 or descs["_a"].dtype not in TYPES:
        return None
    b = matrix_operand(sdfg, edges["_b"])
    a = _stacked_rows(descs["_a"], edges["_a"].data.subset)
    c = _stacked_rows(descs["_c"], edges["_c"].data.subset)
    if b is None or a is None or c is None or len(edges["_a"].data.subset.size()) < 3:
        return None
    return {"_a": a, "_b": b, "_c": c}


@dace.library.expansion
class ExpandBatchedMatMulCpufree(ExpandTransformation):
    """A batched product whose right-hand matrix is shared by the batch, as one grid-wide ``cpufree::gemm`` over
    the stacked rows (NumPy's ``A @ B`` with ``A`` 3-D, doitgen's form); any other as DaCe's pure expansion."""

    environments = [CPUFreeMathDx]

    @staticmethod
    def expansion(node: BatchedMatMul, state: dace.SDFGState, sdfg: dace.SDFG, **kwargs):
        ops = batched_applies(node, state, sdfg)
        if ops is None:
            return ExpandBatchedMatMulPure.expansion(node, state, sdfg)
        (m, k, lda), (_, n, ldb), (_, _, ldc) = ops["_a"], ops["_b"], ops["_c"]
        dtype = sdfg.arrays[next(iter(state.out_edges(node))).data.data].dtype
        return product_tasklet(node.label, dtype, m, n, k, 1, 0, lda, False, ldb, False, ldc, ("_a", "_b"))


BatchedMatMul.register_implementation("cpufree", ExpandBatchedMatMulCpufree)
