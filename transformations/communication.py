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
"""

from __future__ import annotations

import copy
from typing import Any

import dace
from dace import subsets
from dace.properties import Property, make_properties
from dace.sdfg import nodes
from dace.sdfg.state import ConditionalBlock, ControlFlowRegion
from dace.transformation import pass_pipeline as ppl
from dace_cpufree.frontend import Allreduce, Putmem, SignalWait
from dace_cpufree.frontend.putmem import location, put_layout
from dace_cpufree.frontend.shmem_api import APIS, implementation

from dace_cpufree.errors import CommunicationError, NotPersistableError
from dace_cpufree.vocabulary import N_PES_SYMBOL, PE_SYMBOL, PE_SYMBOLS, SYMMETRIC_STORAGE

from .block_scopes import simplify
from .early_puts import SplitForEarlyPuts, fuse_maps
from .program_order import linear_states, nodes_after
from .symmetric import PlaceOnSymmetricHeap

_COMM = (Putmem, SignalWait)
#: Every library node that communicates (puts and waits, and the collective ``Allreduce``).
_SHMEM = (Putmem, SignalWait, Allreduce)


def _src(state, put: Putmem):
    return next(iter(state.in_edges_by_connector(put, "_src"))).data


def _dest(state, put: Putmem):
    return next(iter(state.out_edges_by_connector(put, "_dest"))).data


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


def assign_blocks(sdfg: dace.SDFG) -> None:
    """Consecutive puts run on different blocks, hence concurrently. A run of ``k`` puts gets lanes 0..k-1
    (``Putmem.block``) and ``Putmem.lanes = k``: a put spread over blocks takes every ``k``-th block of the
    grid from its lane on.

    Every block waits for itself (executor ``"each"``), so that what the waits guard needs a block barrier
    before it, not a grid synchronisation; consecutive waits get warps 0, 1, 2, ... (``SignalWait.block``),
    so that a block's polls of already-set flags overlap instead of following one another.
    """
    run: list[Putmem] = []
    waits = 0

    def close():
        for put in run:
            put.lanes = len(run)
        run.clear()

    for state, _ in linear_states(sdfg):
        for node in dace.sdfg.utils.dfs_topological_sort(state):
            if isinstance(node, nodes.AccessNode):
                continue
            if isinstance(node, Putmem):
                node.block = len(run)
                run.append(node)
                waits = 0
            else:
                close()
                if isinstance(node, SignalWait):
                    node.block = waits
                    waits += 1
                else:
                    waits = 0
    close()


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


def _regions(block) -> list:
    """The control-flow regions around ``block``, innermost first (not a conditional's own block)."""
    out, g = [], block.parent_graph
    while g is not None:
        if isinstance(g, ControlFlowRegion) and not isinstance(g, ConditionalBlock):
            out.append(g)
        g = g.parent_graph
    return out


def _child_in(region, block):
    while block is not None and block.parent_graph is not region:
        block = block.parent_graph
    return block


def _quiet_point(put_state, wait_state, src):
    """Where the quiet for a put goes: right after the block that holds the wait, in the innermost region
    that holds both the put and the wait, so that it runs whichever branches were taken (a wait inside
    ``if pe > 0:`` may be skipped on some PEs; the put's completion may not). ``(region, block)``, or None
    when that block also writes the source (then the put stays blocking)."""
    around_put = _regions(put_state)
    region = next((r for r in _regions(wait_state) if any(r is q for q in around_put)), None)
    block = _child_in(region, wait_state) if region is not None else None
    if block is None:
        return None
    states = [block] if isinstance(block, dace.SDFGState) else [st for st, _ in linear_states(block)]
    if any(_writes(st, n, src) for st in states for n in st.nodes()):
        return None
    return region, block


def mark_hidden(sdfg: dace.SDFG) -> None:
    """A put is ``hidden`` when other work (a map, a copy, a tasklet) comes after it before the next wait:
    that work covers its latency, so the put should hold up as few blocks as it can (see
    :func:`~dace_cpufree.frontend.putmem._direct_stores`)."""
    for put, state in [(n, s) for n, s in sdfg.all_nodes_recursive() if isinstance(n, Putmem)]:
        put.hidden = False
        for other_state, node in nodes_after(sdfg, state, put):
            if isinstance(node, SignalWait):
                break
            if isinstance(node, (nodes.MapEntry, nodes.Tasklet, nodes.LibraryNode)) and not isinstance(node, Putmem):
                put.hidden = True
                break
            if isinstance(node, nodes.AccessNode) and any(
                isinstance(e.src, nodes.AccessNode) for e in other_state.in_edges(node)
            ):
                put.hidden = True  # a copy
                break


def relax_ordering(sdfg: dace.SDFG) -> list[tuple]:
    """Chooses blocking or ``_nbi`` per put; returns ``(put, put state, (region, block))`` needing a quiet
    after ``block``."""
    quiets = []
    for put, state in [(n, s) for n, s in sdfg.all_nodes_recursive() if isinstance(n, Putmem)]:
        if put_layout(put, state, state.sdfg).shared_rows:
            put.blocking = True  # every block completes its part before it goes on: nothing to quiet later
            continue
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
        point = _quiet_point(state, wait_state, src) if not blocking and wait_state is not None else None
        put.blocking = blocking or (wait_state is not None and point is None)
        if point is not None:
            quiets.append((put, state, point))
    return quiets


def _whole(sdfg, name: str) -> dace.Memlet:
    return dace.Memlet.from_array(name, sdfg.arrays[name])


def fence_received_buffers(sdfg: dace.SDFG, impl: str) -> nodes.Tasklet | None:
    """A PE-wide barrier before the first communication when the kernel itself writes buffers that other
    PEs put into (``hn = np.zeros(...)``): without it a fast neighbour's first put can land before this
    PE's initialisation and be overwritten. The barrier reads and writes those buffers, so the kernel
    generator puts a ``grid.sync()`` on each side of it."""
    puts = [(n, s) for n, s in sdfg.all_nodes_recursive() if isinstance(n, Putmem)]
    dests = {_dest(s, p).data for p, s in puts}
    states = linear_states(sdfg)
    first = next((k for k, (st, _) in enumerate(states) if any(isinstance(n, _COMM) for n in st.nodes())), None)
    if first is None:
        return None
    top = _child_in(sdfg, states[first][0])
    inside = {id(st) for st, _ in linear_states(top)} if not isinstance(top, dace.SDFGState) else {id(top)}
    written = sorted(
        {
            n.data
            for st, _ in states[:first]
            if id(st) not in inside
            for n in st.nodes()
            if isinstance(n, nodes.AccessNode) and n.data in dests and _writes(st, n, _whole(sdfg, n.data))
        }
    )
    if not written:
        return None
    api = APIS[impl]
    state = sdfg.add_state_before(top, "cpufree_fence_received", is_start_block=top is sdfg.start_block)
    ptr = lambda n: dace.pointer(sdfg.arrays[n].dtype)  # noqa: E731
    tasklet = state.add_tasklet(
        "barrier_received",
        {f"_r_{n}": ptr(n) for n in written},
        {f"_w_{n}": ptr(n) for n in written},
        api.barrier_all,
        language=dace.Language.CPP,
        location=location("thread", 0),
    )
    for n in written:
        state.add_edge(state.add_read(n), None, tasklet, f"_r_{n}", _whole(sdfg, n))
        state.add_edge(tasklet, f"_w_{n}", state.add_write(n), None, _whole(sdfg, n))
    return tasklet


def add_quiet(sdfg: dace.SDFG, put: Putmem, put_state, quiet_state, impl: str) -> nodes.Tasklet:
    """A ``quiet`` by the put's block in ``quiet_state``, before later writes to the put's source.

    It reads the source (so the kernel generator orders later writes of it after the quiet) and
    names the destination as a remote pointer (a live output, not a local access).
    """
    src, dest = _src(put_state, put), _dest(put_state, put)
    api = APIS[impl]
    tasklet = quiet_state.add_tasklet(
        f"quiet_{put.label}",
        {"_src": dace.pointer(sdfg.arrays[src.data].dtype)},
        {"_dest": dace.pointer(sdfg.arrays[dest.data].dtype)},
        f"if (threadIdx.x == 0) {api.quiet}\n__syncthreads();",
        language=dace.Language.CPP,
        location=location("block", put.block, ["_dest"]),
    )
    quiet_state.add_edge(quiet_state.add_read(src.data), None, tasklet, "_src", copy.deepcopy(src))
    quiet_state.add_edge(tasklet, "_dest", quiet_state.add_write(dest.data), None, copy.deepcopy(dest))
    return tasklet


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
                state.add_edge(node, conn, state.add_write(name), None, _whole(inner, name))
            else:
                node.add_in_connector(conn)
                state.add_edge(state.add_read(name), None, node, conn, _whole(inner, name))
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
    left = sorted({type(n).__name__ for n, _ in sdfg.all_nodes_recursive() if isinstance(n, _COMM)})
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
                    after[id(block)].location = dict(block.location)
            add_quiet(sdfg, put, put_state, after[id(block)], self._implementation)
        fence_received_buffers(sdfg, self._implementation)
        for node, state in found:
            node.prepared = True
            node.implementation = self._implementation
            node.expand(state)
        return len(found)
