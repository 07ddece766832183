"""Flow control of a distributed program's halo exchanges, proven or refused (see :mod:`.halo_exchange`).

A put into a neighbour's halo must not land while the neighbour still reads that halo from the previous exchange.
The exchanges carry no acknowledgement of their own; the order comes from the other exchanges: my put of ``D``'s top
edge into the lower halo of the PE above is safe when, after that PE's last read of its halo of ``D``, it sent me
something (a put into my upper halo, with its signal) that I waited for before my put. The PEs run the same program,
so this is read off the program order: walking back from the step that writes ``D`` (itself included), an exchange's
waits with the needed direction (from above for my puts up, from below for my puts down) come before any step that
reads ``D``'s halo. In a loop the walk wraps around to the end of the body (the previous iteration); the first
iteration then also needs the walk from before the loop. Where the walk meets a branch, a merge or a nested block, or
reads first, the program is refused (an in-place stencil, ``u[1:-1] = f(u)``, is the common case): a program whose
exchanges could race would be a wrong answer, found only by chance.
"""

from __future__ import annotations

import dace
from dace import nodes
from dace.sdfg.state import LoopRegion
from dace_cpufree.frontend.putmem import Putmem

from dace_cpufree.errors import NotPersistableError

#: direction names: "above" (a put from the PE above, into my upper halo), "below" (into my lower halo)
ABOVE, BELOW = "above", "below"


def reads_halo(state: dace.SDFGState, name: str, halo_reads: set) -> bool:
    """Whether a step of ``state`` may read ``name`` beyond its owned block (maps: as the split found; anything else
    that reads it, except the exchanges' own puts of the owned edges: conservatively yes)."""
    for n in state.data_nodes():
        if n.data != name:
            continue
        for e in state.out_edges(n):
            if isinstance(e.dst, Putmem):
                continue
            if not isinstance(e.dst, nodes.MapEntry) or (e.dst, name) in halo_reads:
                return True
    return False


def _walk(sdfg, region, start, name: str, need: set, halo_reads: set, provides: dict) -> bool:
    """Whether, walking back from ``start`` in ``region``, the waits of ``need``'s directions come before any read
    of ``name``'s halo (see the module doc)."""
    need, current = set(need), start
    wrapped = None  # once the walk wrapped around a loop: the directions still needed then
    while True:
        if not isinstance(current, dace.SDFGState):
            return False  # a nested loop or branch: not followed
        if reads_halo(current, name, halo_reads):
            return False
        need -= provides.get(current, set())
        if not need:  # the waits found after wrapping come after the first iteration's put: look before the loop
            return wrapped is None or _before_loop(sdfg, region, name, wrapped, halo_reads, provides)
        before = region.predecessors(current)
        if len(before) > 1:
            return False  # a merge of paths
        if before:
            current = before[0]
            if current is start:
                return False
            continue
        if not isinstance(region, LoopRegion):
            return region is sdfg  # the program's start: nothing before read the halo
        ends = region.sink_nodes()
        if wrapped is not None or len(ends) != 1:
            return False
        current, wrapped = ends[0], set(need)


def _before_loop(sdfg, loop, name: str, need: set, halo_reads: set, provides: dict) -> bool:
    """The first iteration: the walk from before ``loop`` in its parent region."""
    parent = loop.parent_graph
    before = parent.predecessors(loop)
    if not before:
        return parent is sdfg
    if len(before) != 1:
        return False
    return _walk(sdfg, parent, before[0], name, need, halo_reads, provides)


def check_flow_control(sdfg: dace.SDFG, sites: list, halo_reads: set) -> None:
    """Refuses the program unless every exchange's puts are ordered after the neighbours' reads of that halo.
    ``sites``: ``(writing state, waits state, split, program line)`` of every exchange."""
    provides: dict = {}
    for _, waits, split, _ in sites:
        provides.setdefault(waits, set()).update(
            ({ABOVE} if split.upper else set()) | ({BELOW} if split.lower else set())
        )
    for state, _, split, line in sites:
        need = ({ABOVE} if split.lower else set()) | ({BELOW} if split.upper else set())
        if not _walk(sdfg, state.parent_graph, state, split.array, need, halo_reads, provides):
            raise NotPersistableError(
                f"cannot distribute '{split.array}': its halo exchange after the step at {line} could overwrite a "
                f"neighbour's halo of '{split.array}' while that neighbour still reads it (no other exchange orders "
                "those reads before the next put; an in-place stencil such as u[1:-1] = f(u) does this). Fix: write "
                "the new values into a second array and alternate (B[1:-1] = f(A); A[1:-1] = f(B)), as NPBench's "
                "stencils do."
            )
