"""HideWaits: the waits at the end of a step go before the last part of the map that precedes them.

In the overlapped form of a halo exchange (and in the plain form after :class:`SplitForEarlyPuts`) a step
ends with the interior map, then the waits and the halo unpacking, then a grid sync. The flags arrived long
before (the puts went out before the interior), yet every block pays the wait's poll, the block barrier
after it and the unpacking copy's load and store one after another, with nothing else to run: their
latencies add up on the critical path of every step. This pass moves a tail of the map (its last slabs
along the first parameter, :data:`TAIL` of it) after the waits and the unpacking, so that each block still
has map work to run while its copies' loads are in flight.

Safety: only the tail changes place, and only past blocks that hold waits and copies. The tail must not
read or write anything those blocks write, nor write anything they read (checked region by region on the
propagated memlets; where DaCe cannot decide an intersection the map stays whole). Across PEs nothing
changes: the waits only read local flags, and the tail touches no region where a put lands that the map as
a whole did not touch before.
"""

from __future__ import annotations

import copy
import os
from typing import Any

import dace
from dace.sdfg import nodes
from dace.sdfg.state import ConditionalBlock
from dace.transformation import pass_pipeline as ppl
from dace_cpufree.frontend import SignalWait

from .early_puts import _clone, _set_range, _the_map
from .program_order import accesses, conflict, states_of, straight_after

ENV = "DACE_CPUFREE_HIDE_WAITS"

#: The tail is 1/TAIL of the map's first parameter (at least one index); ``DACE_CPUFREE_HIDE_WAITS=K`` turns
#: the pass on in :class:`PrepareCommunication` with TAIL = K. Off by default: on 4 H200s (session 10, call 33)
#: it changed the Jacobi steps by -1.2 to +1.1 us (of ~200), no more than the spread between runs.
TAIL = 8
#: Maps whose first parameter has fewer indices are left whole.
MIN_EXTENT = 8


def tail_parts() -> int:
    """The number in ``DACE_CPUFREE_HIDE_WAITS`` (the tail is 1/K of the map), 0 (off) when unset."""
    value = os.environ.get(ENV, "").strip() or "0"
    if not value.isdigit():
        raise ValueError(f"{ENV}={value!r}: expected 0 (off) or the tail's part of the map (e.g. 8 for 1/8)")
    return int(value)


def enabled_by_default() -> bool:
    """Off unless ``DACE_CPUFREE_HIDE_WAITS`` is a positive number."""
    return tail_parts() != 0


def _waits_and_copies(states: list[dace.SDFGState]) -> bool | None:
    """Whether the states hold a wait (True), only copies (False), or anything else (None)."""
    waits = False
    for st in states:
        for n in st.nodes():
            if isinstance(n, SignalWait):
                waits = True
            elif not isinstance(n, nodes.AccessNode):
                return None
    return waits


def hide_waits(sdfg: dace.SDFG, state: dace.SDFGState, chain: list, last, parts: int = TAIL) -> bool:
    """Moves the tail of ``state``'s map (``1/parts`` of its first parameter) after ``last``, the end of ``chain``
    (the blocks of waits and copies that follow it), when the tail commutes with them. Returns whether it did."""
    entry = _the_map(state)
    if entry is None:
        return False
    rng = [tuple(r) for r in entry.map.range]
    lo, hi, step = rng[0]
    try:
        extent = int(hi - lo + 1)
    except TypeError:
        return False  # a symbolic extent: the intersections below could not be decided
    if step != 1 or extent < MIN_EXTENT:
        return False
    width = max(1, extent // parts)
    tail = [(hi - width + 1, hi, 1)] + rng[1:]
    probe = copy.deepcopy(state)
    probe.sdfg = sdfg
    _set_range(probe, tail)
    mine = accesses(probe)
    written = {name for name, mode, _ in mine if mode == "W"}
    for block in chain:
        if isinstance(block, ConditionalBlock):
            if any(c is not None and written & {str(s) for s in c.get_free_symbols()} for c, _ in block.branches):
                return False  # a branch decided by data the tail writes
        if conflict(mine, [a for st in states_of(block) for a in accesses(st)]):
            return False
    _clone(state.parent_graph, state, last, f"{state.label}_tail", tail)
    _set_range(state, [(lo, hi - width, 1)] + rng[1:])
    return True


class HideWaits(ppl.Pass):
    """Runs the last part of a map after the waits and copies that follow it (see the module doc).

    Pattern: a state holding one map, followed in its region (unconditional edges, no assignments) by
    blocks that hold only waits and copies (states, or conditionals of such states), at least one wait.
    Preconditions: the map's first parameter has a constant extent of at least :data:`MIN_EXTENT`; its tail
    (the last :data:`TAIL`-th of that extent) neither reads nor writes what those blocks write, nor writes
    what they read. Effect: the map keeps the head of its range; a new state after the last of those blocks
    runs the tail. Run after the maps are fused (:func:`~.early_puts.fuse_maps`; :class:`PrepareCommunication` does).
    """

    CATEGORY = "dace-cpufree"

    def __init__(self, parts: int | None = None):
        super().__init__()
        self.parts = parts or tail_parts() or TAIL

    def modifies(self) -> ppl.Modifies:
        return ppl.Modifies.States | ppl.Modifies.Nodes | ppl.Modifies.Edges | ppl.Modifies.Memlets

    def should_reapply(self, modified: ppl.Modifies) -> bool:
        return False

    def apply_pass(self, sdfg: dace.SDFG, _: dict[str, Any]) -> int | None:
        done = 0
        for region in list(sdfg.all_control_flow_regions()):
            for state in [b for b in region.nodes() if isinstance(b, dace.SDFGState)]:
                if _the_map(state) is None:
                    continue
                chain, waits = [], False
                for block in straight_after(region, state):
                    states = states_of(block)
                    kind = None if states is None else _waits_and_copies(states)
                    if kind is None:
                        break
                    chain.append(block)
                    waits = waits or kind
                if waits and hide_waits(sdfg, state, chain, chain[-1], self.parts):
                    done += 1
        return done or None
