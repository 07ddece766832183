"""The distribution stage: the split (:mod:`.distribute`), then the halo exchanges, as the hand-written SHMEM calls
of ``docs/multigpu.md`` would place them.

After every state that writes a split array with halos, an exchange state puts the array's owned edge elements into
both neighbours' halos (``Putmem`` with a signal: the lowest ``upper`` owned elements to the PE below, the highest
``lower`` ones to the PE above; the PEs form a ring, the halos that the first and last PE receive from across the
ring are never read) and waits for both of its own halos (``SignalWait``). A state that writes such an array and
reads it in the same dataflow is split first, so the reads come after the exchange. The signal is a counter of the
exchanges so far (the same on every PE: all run the same control flow), the flags an argument that the host zeroes
for each call. An exchange is dropped where the following states write the array again before anything reads its
halo. Where grid syncs go and how the puts are spread over blocks is decided by the same analyses as for hand-written
calls (:mod:`.communication`); that the puts cannot overwrite a halo still being read is proven by :mod:`.halo_order`.
The reductions of split arrays are :mod:`.split_reductions`.
"""

from __future__ import annotations

import dace
import sympy
from dace import nodes, symbolic
from dace.sdfg.graph import SubgraphView
from dace.transformation.helpers import state_fission
from dace_cpufree.frontend.arguments import Region
from dace_cpufree.frontend.calls import add_put, add_wait
from dace_cpufree.frontend.pe import N_PES_SYMBOL, PE_SYMBOL

from dace_cpufree.decomposition import (
    FLAGS_ARRAY,
    LOCAL_SYMBOL,
    Decomposition,
    Exchange,
    set_decomposition,
)
from dace_cpufree.errors import CpufreeError

from .distribute import align_arrays, check_other_uses, halo_widths, line_text, partial_reductions, split_arrays
from .halo_order import check_flow_control, reads_halo
from .split_reductions import library_reductions, map_reductions

#: the counter of halo exchanges, the value each exchange signals
COUNTER = "__cpufree_halo_count"


def distribute(sdfg: dace.SDFG, named: dict[str, int]) -> Decomposition:
    """Splits ``sdfg`` (in place) as ``named`` says and places its halo exchanges and reductions."""
    _check_named(sdfg, named)
    extents = {sdfg.arrays[n].shape[a] for n, a in named.items()}
    if len(extents) != 1:
        lengths = ", ".join(f"'{n}' axis {a}: {sdfg.arrays[n].shape[a]}" for n, a in named.items())
        raise CpufreeError(
            f"distribute={dict(named)}: the split axes have different lengths ({lengths}); the arrays named in "
            "distribute are cut into blocks of one length. Fix: name arrays whose split axes have one length (an "
            "axis all of them share, or leave out the arrays of another length: they are then computed on every PE)."
        )
    extent = extents.pop()
    align, scopes = align_arrays(sdfg, named)
    library = partial_reductions(sdfg, align)
    check_other_uses(sdfg, align, library)
    widths, halo_reads = halo_widths(sdfg, align, scopes)
    splits = split_arrays(sdfg, align, scopes, library, widths, named, extent)
    reductions = map_reductions(sdfg, align, scopes) + library_reductions(sdfg, library)
    exchanges = _exchanges(sdfg, {s.array: s for s in splits if s.halo}, halo_reads)
    decomposition = Decomposition(str(extent), splits, exchanges, reductions)
    set_decomposition(sdfg, decomposition)
    return decomposition


def _check_named(sdfg: dace.SDFG, named: dict[str, int]) -> None:
    args = [n for n in sdfg.arg_names if isinstance(sdfg.arrays.get(n), dace.data.Array)]
    for name, axis in named.items():
        desc = sdfg.arrays.get(name)
        if desc is None or desc.transient or not isinstance(desc, dace.data.Array):
            raise CpufreeError(
                f"distribute names '{name}', which is no array argument of '{sdfg.name}'. "
                f"Fix: name some of {', '.join(args)}."
            )
        if isinstance(axis, bool) or not isinstance(axis, int) or not 0 <= axis < len(desc.shape):
            raise CpufreeError(
                f"distribute={{'{name}': {axis!r}}}: '{name}' has {len(desc.shape)} axes. "
                f"Fix: give an axis from 0 to {len(desc.shape) - 1}."
            )


def _split_read_after_write(sdfg: dace.SDFG, halo: dict) -> None:
    """States that write an array with halos and read it afterwards in the same dataflow: the writing part moved
    into a state of its own before, so an exchange can go between them."""
    changed = True
    while changed:
        changed = False
        for state in list(sdfg.states()):
            for node in state.data_nodes():
                if node.data in halo and state.in_degree(node) > 0 and state.out_degree(node) > 0:
                    state_fission(SubgraphView(state, [node]), allow_isolated_nodes=False)
                    changed = True
                    break
            if changed:
                break


def _overwritten_first(state: dace.SDFGState, name: str, halo_reads: set) -> bool:
    """Whether the states after ``state`` (a straight chain of states in its region) write ``name`` again before
    anything could read its halo: then an exchange after ``state`` would only be overwritten by the next one."""
    region, current = state.parent_graph, state
    while True:
        following = region.successors(current)
        if len(following) != 1 or not isinstance(following[0], dace.SDFGState) or following[0] is state:
            return False
        current = following[0]
        if reads_halo(current, name, halo_reads):
            return False
        if any(n.data == name and current.in_degree(n) > 0 for n in current.data_nodes()):
            return True


def _exchanges(sdfg: dace.SDFG, halo: dict, halo_reads: set) -> tuple[Exchange, ...]:
    if not halo:
        return ()
    _split_read_after_write(sdfg, halo)
    sites = []
    for state in list(sdfg.states()):
        written = sorted(
            {
                n.data
                for n in state.data_nodes()
                if n.data in halo and state.in_degree(n) > 0 and not _overwritten_first(state, n.data, halo_reads)
            }
        )
        if written:
            sites.append((state, written))
    if not sites:
        return ()
    count = sum(len(w) for _, w in sites)
    sdfg.add_array(FLAGS_ARRAY, (2 * count,), dace.uint64)
    sdfg.arg_names = list(sdfg.arg_names) + [FLAGS_ARRAY]
    sdfg.add_symbol(COUNTER, dace.int64)
    sdfg.add_state_before(sdfg.start_block, "halo_count", is_start_block=True, assignments={COUNTER: "0"})
    local = symbolic.symbol(LOCAL_SYMBOL, dace.int64)
    pe, npes = symbolic.symbol(PE_SYMBOL, dace.int32), symbolic.symbol(N_PES_SYMBOL, dace.int32)
    counter = symbolic.symbol(COUNTER, dace.int64)
    out, placed, k = [], [], 0
    for state, written in sites:
        label = "_".join(written)
        # the count goes up between the puts and the waits: the puts follow their map's state over a plain edge, where
        # they can be moved among its pieces (:mod:`.early_puts`), and signal the count it reaches
        puts = state.parent_graph.add_state_after(state, f"halo_{label}")
        waits = puts.parent_graph.add_state_after(puts, f"halo_{label}_wait", assignments={COUNTER: f"{COUNTER} + 1"})
        info = _writer_line(state)
        where = line_text(info)
        for name in written:
            _exchange(sdfg, (puts, waits), halo[name], (2 * k, 2 * k + 1), local, pe, npes, counter, info)
            out.append(Exchange(name, state.label, where, (2 * k, 2 * k + 1)))
            placed.append((state, waits, halo[name], where))
            k += 1
    check_flow_control(sdfg, placed, halo_reads)
    return tuple(out)


def _writer_line(state: dace.SDFGState):
    """The ``DebugInfo`` of the program line of ``state``'s first step that has one, else ``None``."""
    for n in state.nodes():
        if isinstance(n, (nodes.MapEntry, nodes.Tasklet)) and getattr(n, "debuginfo", None) and n.debuginfo.filename:
            return n.debuginfo
    return None


def _exchange(sdfg, states, split, flags, local, pe, npes, counter, line) -> None:
    """The puts of ``split``'s edges into the first of ``states``, the waits for its halos into the second."""
    state, wait_state = states
    desc = sdfg.arrays[split.array]
    axis, lower, upper = split.axis, split.lower, split.upper

    def region(first, length):
        subset = dace.subsets.Range.from_array(desc)
        subset[axis] = (first, first + length - 1, 1)
        return Region(split.array, subset)

    def flag(k):
        return Region(FLAGS_ARRAY, dace.subsets.Range([(k, k, 1)]))

    signal = (counter + 1, None)
    up, down = sympy.Mod(pe + 1, npes), sympy.Mod(pe + npes - 1, npes)
    waits = []
    if lower:  # my highest owned elements into the lower halo of the PE above
        add_put(sdfg, state, region(0, lower), region(local, lower), (up, None), flag(flags[0]), signal, line)
        waits.append(flags[0])
    if upper:  # my lowest owned elements into the upper halo of the PE below
        dest, src = region(lower + local, upper), region(lower, upper)
        add_put(sdfg, state, dest, src, (down, None), flag(flags[1]), signal, line)
        waits.append(flags[1])
    for k in waits:
        add_wait(sdfg, wait_state, flag(k), (counter, None), line)
