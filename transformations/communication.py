"""PrepareCommunication: places GPU-initiated communication in a persistent kernel and expands it.

Runs before :class:`FusePersistentKernel`, on the program's ``Putmem``/``SignalWait`` nodes:

1. placement: a node inside a map (every thread would call it) is an error;
2. symmetric heap: the containers they touch become ``CPUFree_Symmetric`` (:mod:`.symmetric`);
3. concurrency: consecutive puts (no other work between them) get blocks 0, 1, 2, ... so that each is
   issued by a different thread block at the same time, block-cooperatively; waits run on block 0;
4. relaxed ordering: a put is non-blocking (``_nbi``) unless a later write to its source can come
   before a completion point. Completion points are the end of the kernel (the launcher quiets and
   synchronises the PEs after it) and a ``SignalWait``: there a ``quiet`` by the put's own block is
   inserted when the source is written again later (it runs on the block that issued the put, after
   it in that block's program order, so the put is issued before it is completed);
5. expansion to the backend's SHMEM calls (``NVSHMEM`` for CUDA, ``ROCSHMEM`` for HIP).

The flag-to-region mapping (which regions a wait makes complete) is built by the frontend as the
waits' ``_guard`` edges; see :mod:`dace_cpufree.frontend.signal_wait`.
"""

from __future__ import annotations

import copy
from typing import Any

import dace
from dace import subsets
from dace.properties import Property, make_properties
from dace.sdfg import nodes
from dace.transformation import pass_pipeline as ppl
from dace_cpufree.frontend import Putmem, SignalWait
from dace_cpufree.frontend.putmem import location
from dace_cpufree.frontend.shmem_api import APIS, IMPLEMENTATION

from dace_cpufree.errors import CommunicationError, NotPersistableError

from .program_order import linear_states, nodes_after
from .symmetric import PlaceOnSymmetricHeap

_COMM = (Putmem, SignalWait)


def _src(state, put: Putmem):
    return next(iter(state.in_edges_by_connector(put, "_src"))).data


def _dest(state, put: Putmem):
    return next(iter(state.out_edges_by_connector(put, "_dest"))).data


def check_placement(sdfg: dace.SDFG) -> None:
    """Communication runs at the top level of the program, never per element inside a map."""
    for node, state in sdfg.all_nodes_recursive():
        if not isinstance(node, _COMM):
            continue
        scope, graph = state.entry_node(node), state
        while scope is None and graph.sdfg.parent_nsdfg_node is not None:
            outer = graph.sdfg.parent
            scope, graph = outer.entry_node(graph.sdfg.parent_nsdfg_node), outer
        if scope is not None:
            what = "SignalWait" if isinstance(node, SignalWait) else "Putmem"
            raise NotPersistableError(
                f"{what} '{node.label}' is inside map '{scope.map.label}': it would run once per element, and a "
                "wait must be reached by one thread of a persistent kernel, outside any parallel loop. "
                f"Fix: call nvshmem.{what}(...) at the top level of the program (inside time loops is fine)."
            )


def assign_blocks(sdfg: dace.SDFG) -> None:
    """Consecutive puts run on different blocks, hence concurrently; every wait on block 0.

    Waiting in parallel gains nothing (a run of waits ends when the last flag arrives), and one thread
    that waits for all flags in program order needs no grid synchronisation between the waits.
    """
    count = 0
    for state, _ in linear_states(sdfg):
        for node in dace.sdfg.utils.dfs_topological_sort(state):
            if isinstance(node, nodes.AccessNode):
                continue
            if isinstance(node, Putmem):
                node.block, count = count, count + 1
            else:
                count = 0
                if isinstance(node, SignalWait):
                    node.block = 0


def _writes(state, node, region) -> bool:
    """Whether ``node`` (an access node) is written, on a subset that may overlap ``region``."""
    if not isinstance(node, nodes.AccessNode) or node.data != region.data:
        return False
    for e in state.in_edges(node):
        if e.data.is_empty() or (isinstance(e.src, _COMM) and e.src_conn != "_flag_out"):
            continue  # a put's remote write or a wait's guard: not a local store
        sub = e.data.dst_subset or e.data.subset
        if sub is None or subsets.intersects(sub, region.subset) is not False:
            return True
    return False


def relax_ordering(sdfg: dace.SDFG) -> list[tuple]:
    """Chooses blocking or ``_nbi`` per put; returns ``(put, put state, wait state)`` needing a quiet."""
    quiets = []
    for put, state in [(n, s) for n, s in sdfg.all_nodes_recursive() if isinstance(n, Putmem)]:
        src = _src(state, put)
        wait_state, blocking = None, False
        for other_state, node in nodes_after(sdfg, state, put):
            if isinstance(node, SignalWait) and wait_state is None:
                wait_state = other_state
            elif _writes(other_state, node, src):
                blocking = wait_state is None
                break
        else:
            wait_state = None  # no later write: the end of the kernel completes the put
        put.blocking = blocking
        if not blocking and wait_state is not None:
            quiets.append((put, state, wait_state))
    return quiets


def add_quiet(sdfg: dace.SDFG, put: Putmem, put_state, wait_state, backend: str) -> nodes.Tasklet:
    """A ``quiet`` by the put's block in the wait's state, before later writes to the put's source.

    It reads the source (so the kernel generator orders later writes of it after the quiet) and
    names the destination as a remote pointer (a live output, not a local access).
    """
    src, dest = _src(put_state, put), _dest(put_state, put)
    api = APIS[IMPLEMENTATION[backend]]
    tasklet = wait_state.add_tasklet(
        f"quiet_{put.label}",
        {"_src": dace.pointer(sdfg.arrays[src.data].dtype)},
        {"_dest": dace.pointer(sdfg.arrays[dest.data].dtype)},
        f"if (threadIdx.x == 0) {api.quiet}\n__syncthreads();",
        language=dace.Language.CPP,
        location=location("block", put.block, ["_dest"]),
    )
    wait_state.add_edge(wait_state.add_read(src.data), None, tasklet, "_src", copy.deepcopy(src))
    wait_state.add_edge(tasklet, "_dest", wait_state.add_write(dest.data), None, copy.deepcopy(dest))
    if wait_state is put_state:
        wait_state.add_edge(put, None, tasklet, None, dace.Memlet())  # after the put in the block's order
    return tasklet


@make_properties
class PrepareCommunication(ppl.Pass):
    """Places ``Putmem``/``SignalWait`` nodes in the persistent kernel and expands them (see module doc).

    Pattern: a program with SHMEM library nodes. Preconditions: none of them inside a map. Effect:
    symmetric storage, block and ordering decisions, then CPP tasklets with the backend's calls.
    """

    CATEGORY = "dace-cpufree"

    backend = Property(dtype=str, default="cuda", desc="cuda (NVSHMEM) or hip (ROC_SHMEM)", category="General")

    def __init__(self, backend: str = "cuda"):
        super().__init__()
        if backend not in IMPLEMENTATION:
            raise CommunicationError(f"no SHMEM library for backend '{backend}'. Fix: use 'cuda' or 'hip'.")
        self.backend = backend

    def modifies(self) -> ppl.Modifies:
        return ppl.Modifies.Everything

    def should_reapply(self, modified: ppl.Modifies) -> bool:
        return False

    def apply_pass(self, sdfg: dace.SDFG, _: dict[str, Any]) -> int | None:
        found = [(n, s) for n, s in sdfg.all_nodes_recursive() if isinstance(n, _COMM)]
        if not found:
            return None
        check_placement(sdfg)
        PlaceOnSymmetricHeap().apply_pass(sdfg, {})
        assign_blocks(sdfg)
        quiets = relax_ordering(sdfg)
        for put, put_state, wait_state in quiets:
            add_quiet(sdfg, put, put_state, wait_state, self.backend)
        for node, state in found:
            node.prepared = True
            node.implementation = IMPLEMENTATION[self.backend]
            node.expand(state)
        return len(found)
