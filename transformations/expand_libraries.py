"""Expansion of library nodes into dataflow that can live inside a persistent kernel."""

from __future__ import annotations

from typing import Any

import dace
from dace.libraries.standard.nodes import Reduce
from dace.sdfg import nodes
from dace.transformation import pass_pipeline as ppl

from dace_cpufree.errors import NotPersistableError

from .connector_names import rename_connectors_named_like_outer_data

#: Implementations that run inside a persistent kernel, in order of preference: ours (a grid-wide library call,
#: e.g. matrix products: :mod:`.gemm`; it falls back to ``pure`` where it does not apply), then plain maps and
#: tasklets.
DEVICE_IMPLEMENTATIONS = ("cpufree", "pure", "specialize")


def source_line(node: nodes.Node, state: dace.SDFGState) -> str:
    """`` at file:line`` of the program statement that made ``node``, or ``""``. DaCe's frontend leaves the
    debug information of the library nodes its NumPy replacements create empty; the containers they read or write
    in the same state carry the statement's."""
    for info in (
        [node.debuginfo]
        + [e.src.debuginfo for e in state.in_edges(node)]
        + [e.dst.debuginfo for e in state.out_edges(node)]
    ):
        if info is not None and info.filename and info.start_line:
            return f" at {info.filename}:{info.start_line}"
    return ""


class ExpandLibraryNodesToDataflow(ppl.Pass):
    """Expands every library node into maps and tasklets, recursively.

    Library calls such as cuBLAS cannot be made from inside a persistent kernel, so each node is
    expanded with our device implementation where there is one (``cpufree``), else its ``pure`` (or
    ``specialize``) implementation, until none is left. A node with
    no such implementation is rejected with an error that names it. The expansions' tasklets are then made
    inlinable: a connector named like a container or symbol of an enclosing SDFG (``gemv_init``'s ``out`` in a
    program with an argument ``out``) is renamed (:mod:`.connector_names`).
    """

    CATEGORY = "dace-cpufree"

    def modifies(self) -> ppl.Modifies:
        return ppl.Modifies.Everything

    def should_reapply(self, modified: ppl.Modifies) -> bool:
        return True

    def apply_pass(self, sdfg: dace.SDFG, _: dict[str, Any]) -> int | None:
        expanded = 0
        while True:
            pending = [(n, g) for n, g in sdfg.all_nodes_recursive() if isinstance(n, nodes.LibraryNode)]
            if not pending:
                if expanded:
                    rename_connectors_named_like_outer_data(sdfg)
                return expanded or None
            for node, state in pending:
                impl = next((i for i in DEVICE_IMPLEMENTATIONS if i in node.implementations), None)
                if impl is None:
                    where = source_line(node, state)
                    raise NotPersistableError(
                        f"{type(node).__name__} ('{node.label}'){where} has no implementation that runs inside a "
                        f"persistent kernel (DaCe offers {', '.join(node.implementations)}: host or host-launched "
                        "libraries). Fix: compute it before calling the program, or write it with NumPy expressions."
                    )
                node.implementation = impl
                _and_starts_true(node)
                node.expand(state)
                expanded += 1


def _and_starts_true(node: nodes.LibraryNode) -> None:
    """DaCe's ``np.all`` makes a logical-and ``Reduce`` whose identity is 0, so every result was False (upstream DaCe
    alike; docs/dace-limitations.md). The identity of ``and`` is True: a reduction of no elements, and the start of
    every other, is True, as NumPy's ``np.all`` is."""
    if isinstance(node, Reduce) and node.identity is not None and not node.identity:
        if dace.frontend.operations.detect_reduction_type(node.wcr) == dace.dtypes.ReductionType.Logical_And:
            node.identity = True
