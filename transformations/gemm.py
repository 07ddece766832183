"""Matrix products inside the persistent kernel: DaCe's ``Gemm`` library node expanded to one call of
``cpufree::gemm`` (``cpufree/gemm.cuh``: cuBLASDx block products over a grid-wide loop of output tiles) that every
thread of the grid makes together.

Registered as the ``"cpufree"`` implementation of :class:`dace.libraries.blas.Gemm`;
:class:`~.expand_libraries.ExpandLibraryNodesToDataflow` prefers it. It applies to a product at the top level of
the program (a call of all threads: not inside a map, whose iterations run on single threads) of ``float32`` or
``float64`` matrices whose rows are contiguous (NumPy's C order; transposed operands are read as such). Any other
product is expanded with DaCe's ``pure`` implementation, as before.
"""

from __future__ import annotations

import dace
from dace.codegen.common import sym2cpp
from dace.libraries.blas.nodes.gemm import ExpandGemmPure, Gemm
from dace.sdfg import nodes
from dace.transformation.transformation import ExpandTransformation

from dace_cpufree.vocabulary import CPUFreeMathDx


def _c(expr) -> str:
    """C++ text of a size or leading dimension."""
    return sym2cpp(dace.symbolic.pystr_to_symbolic(expr) if isinstance(expr, str) else expr)


#: Element types with a tensor-core path in gemm.cuh.
TYPES = (dace.float64, dace.float32)


def _operand(state: dace.SDFGState, sdfg: dace.SDFG, edge) -> tuple | None:
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


def _at_top_level(state: dace.SDFGState, node) -> bool:
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
    if not _at_top_level(state, node):
        return None
    ops = {}
    for e in state.in_edges(node):
        ops[e.dst_conn] = _operand(state, sdfg, e)
    for e in state.out_edges(node):
        ops["_out"] = _operand(state, sdfg, e)
    if any(v is None for v in ops.values()) or not {"_a", "_b", "_out"} <= set(ops):
        return None
    types = {sdfg.arrays[e.data.data].dtype for e in state.all_edges(node)}
    return ops if len(types) == 1 else None


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
        ctype = dtype.ctype
        beta = 0 if "_c" not in node.in_connectors else node.beta
        code = (
            f"cpufree::gemm<{ctype}>((long long)({_c(m)}), (long long)({_c(n)}), (long long)({_c(ka)}), "
            f"({ctype})({node.alpha}), _a, (long long)({_c(lda)}), {str(node.transA).lower()}, _b, "
            f"(long long)({_c(ldb)}), {str(node.transB).lower()}, ({ctype})({beta}), _c, (long long)({_c(ldc)}));"
        )
        pointer = dace.pointer(dtype)
        inputs = {c: pointer for c in node.in_connectors}
        tasklet = nodes.Tasklet(
            node.label,
            inputs=inputs,
            outputs={"_c": pointer},
            code=code,
            language=dace.Language.CPP,
            location={"cpufree_executor": "grid"},
        )
        return tasklet  # DaCe records the environment (CPUFreeMathDx) in the tasklet


Gemm.register_implementation("cpufree", ExpandGemmCpufree)
