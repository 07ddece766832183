"""PrepareCommunication: places GPU-initiated communication in a persistent kernel and expands it.

Runs before :class:`FusePersistentKernel`, on the program's ``Putmem``/``SignalWait`` nodes:

1. placement: a node inside a map (every thread would call it) is an error; a map followed by puts of its
   edge cells is split so that the puts go out before its interior is computed (:mod:`.early_puts`);
2. symmetric heap: the containers they touch become ``CPUFree_Symmetric`` (:mod:`.symmetric`);
3. concurrency: consecutive puts (no other work between them) get blocks 0, 1, 2, ... so that each is
   issued by a different thread block at the same time, block-cooperatively; every block waits for itself;
   a put followed by other work before its wait is ``hidden`` (its latency is covered: fewer blocks issue it);
4. relaxed ordering: a put is non-blocking (``_nbi``) unless a later write to its source can come
   before a completion point. Completion points are the end of the kernel (the launcher quiets and
   synchronises the PEs after it) and a ``SignalWait``: there a ``quiet`` by the put's own block is
   inserted when the source is written again later (it runs on the block that issued the put, after
   it in that block's program order, so the put is issued before it is completed), in a state right
   after the wait's block in the innermost region holding both, so that no branch skips it;
5. a PE-wide barrier before the first communication when the kernel initialises buffers that other PEs
   put into (a neighbour's first put must not land before this PE's ``np.zeros``);
6. expansion to the backend's SHMEM calls (``NVSHMEM`` for CUDA, or ``NVSHMEM_P2P``, its direct-store form for
   one node: see :func:`~dace_cpufree.frontend.shmem_api.implementation`; ``ROCSHMEM`` for HIP).

``Allreduce`` nodes are placed on block 0 (where the program's scalar work runs); those in the gather form get
their symmetric slots, flags and round counter (:func:`add_gather_buffers`). With ``backend="emulate"`` the
program is specialised for one PE instead (:func:`specialize_for_one_pe`): reductions are the identity there.

The flag-to-region mapping (which regions a wait makes complete) is built by the frontend as the
waits' ``_guard`` edges; see :mod:`dace_cpufree.frontend.signal_wait`.

Steps 3 to 5 (which block issues a put, blocking or ``_nbi``, the quiets and the fence) are in
:mod:`.put_order`; this module holds the pass, the placement check, the ``Allreduce`` buffers and the one-PE
specialisation.
"""

from __future__ import annotations

from typing import Any

import dace
from dace.properties import Property, make_properties
from dace.transformation import pass_pipeline as ppl
from dace_cpufree.frontend import Allreduce
from dace_cpufree.frontend.shmem_api import APIS, implementation

from dace_cpufree.errors import CommunicationError, NotPersistableError
from dace_cpufree.facts import copy_state_mark
from dace_cpufree.vocabulary import N_PES_SYMBOL, PE_SYMBOL, PE_SYMBOLS, SYMMETRIC_STORAGE

from .block_scopes import simplify
from .early_puts import SplitForEarlyPuts, fuse_maps
from .put_order import (
    PUT_AND_WAIT,
    add_quiet,
    assign_blocks,
    fence_received_buffers,
    mark_hidden,
    relax_ordering,
    whole_memlet,
)
from .symmetric import PlaceOnSymmetricHeap

#: Every library node that communicates (puts and waits, and the collective ``Allreduce``).
_SHMEM = (*PUT_AND_WAIT, Allreduce)

__all__ = [
    "PrepareCommunication",
    "add_gather_buffers",
    "add_quiet",
    "assign_blocks",
    "check_placement",
    "fence_received_buffers",
    "mark_hidden",
    "relax_ordering",
    "specialize_for_one_pe",
]


def check_placement(sdfg: dace.SDFG) -> None:
    """Communication runs at the top level of the program, never per element inside a map."""
    for node, state in sdfg.all_nodes_recursive():
        if not isinstance(node, _SHMEM):
            continue
        scope, graph = state.entry_node(node), state
        while scope is None and graph.sdfg.parent_nsdfg_node is not None:
            outer = graph.sdfg.parent
            scope, graph = outer.entry_node(graph.sdfg.parent_nsdfg_node), outer
        if scope is not None:
            what = type(node).__name__
            raise NotPersistableError(
                f"{what} '{node.label}' is inside map '{scope.map.label}': it would run once per element, and a "
                "wait must be reached by one thread of a persistent kernel, outside any parallel loop. "
                f"Fix: call nvshmem.{what}(...) at the top level of the program (inside time loops is fine)."
            )


def _add_symmetric(sdfg: dace.SDFG, name: str, shape: list, dtype) -> str:
    return sdfg.add_array(name, shape, dtype, storage=SYMMETRIC_STORAGE, transient=True, find_new_name=True)[0]


def add_gather_buffers(sdfg: dace.SDFG) -> int:
    """The symmetric containers of the gather form of ``Allreduce`` (non-blocking halves, and every reduction
    with direct stores): per reduced container, ``[2, n_pes, n]`` slots, ``[2, n_pes]`` flags and a round counter
    (transients: zeroed before each launch). A ``start`` writes them (the flags of the other PEs: remote), a
    ``wait`` reads them; a blocking reduction does both. Returns the number of nodes connected."""
    made, count = {}, 0
    for node, state in [(n, s) for n, s in sdfg.all_nodes_recursive() if isinstance(n, Allreduce) and n.gather]:
        if node.phase == "start" and not node.waited:
            raise CommunicationError(
                f"Allreduce '{node.label}' (nonblocking=True) is never completed. "
                "Fix: call nvshmem.AllreduceWait(buffer) before the buffer is used."
            )
        inner = state.sdfg
        buf = next(iter(state.in_edges_by_connector(node, "_in"))).data
        key = (id(inner), buf.data)
        if key not in made:
            for sym in PE_SYMBOLS:
                if sym not in inner.symbols:
                    inner.add_symbol(sym, dace.int32)
            npes, dtype = dace.symbolic.symbol(N_PES_SYMBOL, dace.int32), inner.arrays[buf.data].dtype
            made[key] = {
                "_slots": _add_symmetric(
                    inner, f"__cpufree_{buf.data}_slots", [2, npes, buf.subset.num_elements()], dtype
                ),
                "_flags": _add_symmetric(inner, f"__cpufree_{buf.data}_flags", [2, npes], dace.uint64),
                "_round": _add_symmetric(inner, f"__cpufree_{buf.data}_round", [1], dace.uint64),
            }
        for conn, name in made[key].items():
            out = node.phase != "wait"
            if out:
                node.add_out_connector(conn)
                state.add_edge(node, conn, state.add_write(name), None, whole_memlet(inner, name))
            else:
                node.add_in_connector(conn)
                state.add_edge(state.add_read(name), None, node, conn, whole_memlet(inner, name))
        count += 1
    return count


def _drop_identity(state, node: Allreduce) -> None:
    """Removes a reduction that is the identity, keeping what the state reads from its result."""
    read = next(iter(state.in_edges_by_connector(node, "_in"))).src
    write = next(iter(state.out_edges_by_connector(node, "_out"))).dst
    state.remove_node(node)
    for e in list(state.out_edges(write)):
        state.add_edge(read, None, e.dst, e.dst_conn, e.data)
    for e in list(state.in_edges(write)):
        state.add_edge(e.src, e.src_conn, read, None, e.data)
    state.remove_node(write)
    if state.degree(read) == 0:
        state.remove_node(read)


def specialize_for_one_pe(sdfg: dace.SDFG) -> None:
    """The program as it runs on one PE (the host emulation): ``my_pe() = 0``, ``n_pes() = 1``, every
    ``Allreduce`` the identity; branches that only other PEs take are removed. Puts and waits that remain
    (a put to itself) cannot be emulated and are an error."""
    for node, state in [(n, s) for n, s in sdfg.all_nodes_recursive() if isinstance(n, Allreduce)]:
        _drop_identity(state, node)
    sdfg.replace_dict({PE_SYMBOL: "0", N_PES_SYMBOL: "1"})
    for sub in sdfg.all_sdfgs_recursive():
        for sym in PE_SYMBOLS:
            if sym in sub.symbols:
                sub.remove_symbol(sym)
        if sub.parent_nsdfg_node is not None:
            for sym in PE_SYMBOLS:
                sub.parent_nsdfg_node.symbol_mapping.pop(sym, None)
    simplify(sdfg)
    left = sorted({type(n).__name__ for n, _ in sdfg.all_nodes_recursive() if isinstance(n, PUT_AND_WAIT)})
    if left:
        raise CommunicationError(
            f"'{sdfg.name}' still calls {' and '.join(left)} with one PE (a put to itself, or a wait outside a "
            "branch on my_pe()/n_pes()), which the host emulation cannot run. Fix: guard them with the PE "
            "numbers (if me > 0: ...), or run the program on GPUs (backend='cuda')."
        )


@make_properties
class PrepareCommunication(ppl.Pass):
    """Places ``Putmem``/``SignalWait`` nodes in the persistent kernel and expands them (see module doc).

    Pattern: a program with SHMEM library nodes. Preconditions: none of them inside a map. Effect:
    symmetric storage, block and ordering decisions, then CPP tasklets with the backend's calls.
    """

    CATEGORY = "dace-cpufree"

    backend = Property(
        dtype=str,
        default="cuda",
        desc="cuda (NVSHMEM), hip (ROC_SHMEM) or emulate (one PE: the program specialised, nothing expanded)",
        category="General",
    )
    transport = Property(
        dtype=str,
        default="p2p",
        choices=("p2p", "proxy"),
        desc="NVSHMEM: 'p2p' (direct stores to peers on one node) or 'proxy' (NVSHMEM's calls, any node); "
        "CompileOptions.resolve decides 'auto'",
        category="General",
    )
    early_puts = Property(
        dtype=bool,
        default=True,
        desc="Split a map followed by puts of its edge cells: edges, puts, then the interior (SplitForEarlyPuts)",
        category="General",
    )

    def __init__(self, backend: str = "cuda", transport: str | None = None, early_puts: bool = True):
        super().__init__()
        self.early_puts = early_puts
        self.transport = transport or ("proxy" if backend == "hip" else "p2p")
        self._implementation = implementation(backend, self.transport)  # raises on an unknown backend
        self.backend = backend

    def modifies(self) -> ppl.Modifies:
        return ppl.Modifies.Everything

    def should_reapply(self, modified: ppl.Modifies) -> bool:
        return False

    def apply_pass(self, sdfg: dace.SDFG, _: dict[str, Any]) -> int | None:
        found = [(n, s) for n, s in sdfg.all_nodes_recursive() if isinstance(n, _SHMEM)]
        if not found:
            return None
        check_placement(sdfg)
        if self.backend == "emulate":
            specialize_for_one_pe(sdfg)
            return len(found)
        if self.early_puts:
            fuse_maps(sdfg)  # a stencil is one map
            split = SplitForEarlyPuts()
            split.fuse_first = False
            split.apply_pass(sdfg, {})
        found = [(n, s) for n, s in sdfg.all_nodes_recursive() if isinstance(n, _SHMEM)]
        for node, _ in found:
            if isinstance(node, Allreduce):
                node.gather = node.phase != "all" or APIS[self._implementation].direct
        add_gather_buffers(sdfg)
        PlaceOnSymmetricHeap().apply_pass(sdfg, {})
        assign_blocks(sdfg)
        mark_hidden(sdfg)
        quiets = relax_ordering(sdfg)
        if APIS[self._implementation].direct:
            # Direct stores need no later quiet: a store that has been issued has read its source, and each
            # block of the put fences before it counts itself done (frontend/putmem.py).
            quiets = []
        after = {}  # one state of quiets after each block that holds waits
        for put, put_state, (region, block) in quiets:
            if id(block) not in after:
                after[id(block)] = region.add_state_after(block, f"quiet_after_{block.label}")
                if isinstance(block, dace.SDFGState):
                    copy_state_mark(block, after[id(block)])
            add_quiet(sdfg, put, put_state, after[id(block)], self._implementation)
        fence_received_buffers(sdfg, self._implementation)
        for node, state in found:
            node.prepared = True
            node.implementation = self._implementation
            node.expand(state)
        return len(found)
