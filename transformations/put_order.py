"""Where a program's puts and waits run and in which order they complete (steps 3-5 of
:class:`~dace_cpufree.transformations.communication.PrepareCommunication`).

* concurrency: consecutive puts get blocks 0, 1, 2, ... (:func:`assign_blocks`); a put followed by other
  work before its wait is ``hidden`` (:func:`mark_hidden`);
* relaxed ordering: a put is non-blocking (``_nbi``) unless a later write to its source can come before a
  completion point; where the source is written again after a ``SignalWait``, a ``quiet`` by the put's
  own block goes right after the wait's block (:func:`relax_ordering`, :func:`add_quiet`);
* a PE-wide barrier before the first communication when the kernel initialises buffers that other PEs put
  into (:func:`fence_received_buffers`).
"""

from __future__ import annotations

import copy

import dace
from dace import subsets
from dace.sdfg import nodes
from dace.sdfg.state import ConditionalBlock, ControlFlowRegion
from dace_cpufree.frontend import Putmem, SignalWait
from dace_cpufree.frontend.putmem import put_layout
from dace_cpufree.frontend.shmem_api import APIS

from dace_cpufree.facts import CpufreeTasklet, placement

from .program_order import linear_states, nodes_after

#: The point-to-point library nodes (a put and the wait for its signal).
PUT_AND_WAIT = (Putmem, SignalWait)


def _src(state, put: Putmem):
    return next(iter(state.in_edges_by_connector(put, "_src"))).data


def _dest(state, put: Putmem):
    return next(iter(state.out_edges_by_connector(put, "_dest"))).data


def whole_memlet(sdfg, name: str) -> dace.Memlet:
    return dace.Memlet.from_array(name, sdfg.arrays[name])


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
        if e.data.is_empty() or (isinstance(e.src, PUT_AND_WAIT) and e.src_conn != "_flag_out"):
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


def fence_received_buffers(sdfg: dace.SDFG, impl: str) -> nodes.Tasklet | None:
    """A PE-wide barrier before the first communication when the kernel itself writes buffers that other
    PEs put into (``hn = np.zeros(...)``): without it a fast neighbour's first put can land before this
    PE's initialisation and be overwritten. The barrier reads and writes those buffers, so the kernel
    generator puts a ``grid.sync()`` on each side of it."""
    puts = [(n, s) for n, s in sdfg.all_nodes_recursive() if isinstance(n, Putmem)]
    dests = {_dest(s, p).data for p, s in puts}
    states = linear_states(sdfg)
    first = next((k for k, (st, _) in enumerate(states) if any(isinstance(n, PUT_AND_WAIT) for n in st.nodes())), None)
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
            if isinstance(n, nodes.AccessNode) and n.data in dests and _writes(st, n, whole_memlet(sdfg, n.data))
        }
    )
    if not written:
        return None
    api = APIS[impl]
    state = sdfg.add_state_before(top, "cpufree_fence_received", is_start_block=top is sdfg.start_block)
    ptr = lambda n: dace.pointer(sdfg.arrays[n].dtype)  # noqa: E731
    reads, writes = {f"_r_{n}": ptr(n) for n in written}, {f"_w_{n}": ptr(n) for n in written}
    tasklet = CpufreeTasklet("barrier_received", reads, writes, api.barrier_all, **placement(api.barrier_executor, 0))
    state.add_node(tasklet)
    for n in written:
        state.add_edge(state.add_read(n), None, tasklet, f"_r_{n}", whole_memlet(sdfg, n))
        state.add_edge(tasklet, f"_w_{n}", state.add_write(n), None, whole_memlet(sdfg, n))
    return tasklet


def add_quiet(sdfg: dace.SDFG, put: Putmem, put_state, quiet_state, impl: str) -> nodes.Tasklet:
    """A ``quiet`` by the put's block in ``quiet_state``, before later writes to the put's source.

    It reads the source (so the kernel generator orders later writes of it after the quiet) and
    names the destination as a remote pointer (a live output, not a local access).
    """
    src, dest = _src(put_state, put), _dest(put_state, put)
    api = APIS[impl]
    tasklet = CpufreeTasklet(
        f"quiet_{put.label}",
        {"_src": dace.pointer(sdfg.arrays[src.data].dtype)},
        {"_dest": dace.pointer(sdfg.arrays[dest.data].dtype)},
        f"if (threadIdx.x == 0) {api.quiet}\n__syncthreads();",
        **placement("block", put.block, ["_dest"]),
    )
    quiet_state.add_node(tasklet)
    quiet_state.add_edge(quiet_state.add_read(src.data), None, tasklet, "_src", copy.deepcopy(src))
    quiet_state.add_edge(tasklet, "_dest", quiet_state.add_write(dest.data), None, copy.deepcopy(dest))
    return tasklet
