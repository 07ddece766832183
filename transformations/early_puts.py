"""SplitForEarlyPuts: computes what the puts send first, issues the puts, then computes the rest.

In the plain form of a halo exchange (``B[1:-1] = f(A)``, then ``Putmem`` of B's edge cells, then the
waits) every put waits for the whole map and for the grid synchronisation after it: the transfer is on
the critical path. This pass splits such a map by the regions its puts read: the faces of the map's
iteration space that produce those regions run first (one state each), the puts follow, and the rest
of the map (the interior) runs after the puts, while the data travels, before the waits. Each put sends
into a contiguous buffer of its own, unpacked into its halo right after the wait on its flag
(:func:`stage_in_buffer`). It is what an overlapped form does by hand.

Clamped ranges. A distributed program's maps run over owned ranges such as ``Max(1, pe * local - 1)`` to
``Min(N - 2, (pe + 1) * local - 2)`` (:mod:`.distribute`), whose faces have no width known against the range's ends.
A face is then the range up to the far end of the put's region (``Min(end, last sent)``), the next piece starts past
it (``Max(start, last sent + 1)``): the pieces hold every cell once whatever the clamps' values, and every cell of
the region that the map writes is in the face. Orders between such bounds are proven by :mod:`dace_cpufree.bounds`.

Safety. The pieces write disjoint parts of the map's output, so the puts read exactly what the map
would have written. Moving the interior past the puts changes two orders:

- on this PE, the interior runs after the puts: the puts read only the faces, and the interior neither
  writes what the puts read nor anything they write;
- across PEs, a neighbour now receives the flag before this PE has computed its interior, so the
  neighbour may already send its next data while the interior still runs. Remote puts land only in
  the destination regions of the program's puts (every PE runs the same program), so the interior
  must not read or write any of them. Where that cannot be shown (an intersection that DaCe cannot
  decide), the map is left whole.
"""

from __future__ import annotations

import copy
from typing import Any

import dace
import sympy
from dace import subsets
from dace.properties import Property, make_properties
from dace.sdfg import nodes, propagation
from dace.sdfg.state import ControlFlowRegion
from dace.transformation import pass_pipeline as ppl
from dace.transformation.passes import FullMapFusion
from dace_cpufree.frontend import Putmem, SignalWait
from dace_cpufree.frontend.arguments import Region
from dace_cpufree.frontend.putmem import _edge

from dace_cpufree.bounds import bounded_by, disjoint
from dace_cpufree.facts import copy_state_mark

from .block_scopes import simplify
from .communication_apart import communication_apart
from .program_order import accesses, states_of, straight_after


def _puts_of(block) -> list[tuple[Putmem, dace.SDFGState]] | None:
    """The puts in ``block`` when it holds nothing else (a state, or a conditional of such states)."""
    states = states_of(block)
    if states is None:
        return None
    found = []
    for st in states:
        for n in st.nodes():
            if isinstance(n, Putmem):
                found.append((n, st))
            elif not isinstance(n, nodes.AccessNode):
                return None
    return found or None


def fuse_maps(sdfg: dace.SDFG) -> None:
    """Fuses producer/consumer maps (as :class:`~dace_cpufree.transformations.FusePersistentKernel` does), so
    that a stencil written as NumPy expressions is one map; puts and waits that the simplification's state fusion
    joined to a map's state go back into states of their own (:mod:`.communication_apart`)."""
    FullMapFusion(perform_horizontal_map_fusion=False).apply_pass(sdfg, {})
    simplify(sdfg)
    communication_apart(sdfg)


def _the_map(state: dace.SDFGState) -> nodes.MapEntry | None:
    """The state's one top-level map, when the state holds nothing else (no tasklet, copy or second map)."""
    sdict = state.scope_dict()
    top = [n for n in state.nodes() if sdict[n] is None and not isinstance(n, nodes.AccessNode)]
    entries = [n for n in top if isinstance(n, nodes.MapEntry)]
    if len(entries) != 1 or len(top) != 1:  # (a map's exit belongs to its scope)
        return None
    if any(isinstance(e.src, nodes.AccessNode) and isinstance(e.dst, nodes.AccessNode) for e in state.edges()):
        return None
    return entries[0]


def _write_offsets(state, entry: nodes.MapEntry) -> tuple[str, list[int], list] | None:
    """``(array, parameter per dimension, offset per dimension)`` when the map writes one array, one element
    per iteration, at ``X[p_a + c_0, p_b + c_1, ...]`` (each dimension one parameter, each parameter once)."""
    exit_ = state.exit_node(entry)
    outs = state.out_edges(exit_)
    if len(outs) != 1 or outs[0].data.wcr is not None or not isinstance(outs[0].dst, nodes.AccessNode):
        return None
    name = outs[0].dst.data
    params = list(entry.map.params)
    if any(s != 1 for _, _, s in entry.map.range) or len(params) != len(state.sdfg.arrays[name].shape):
        return None
    form = None
    for e in state.in_edges(exit_):
        sub = e.data.subset
        if e.data.data != name or sub is None or sub.num_elements() != 1:
            return None
        which, offs = [], []
        for lo, _, _ in sub:
            lo = sympy.sympify(lo)
            hits = [s for s in lo.free_symbols if str(s) in params]
            if len(hits) != 1:
                return None
            off = sympy.simplify(lo - hits[0])
            if any(str(s) in params for s in off.free_symbols):
                return None
            which.append(params.index(str(hits[0])))
            offs.append(off)
        if len(set(which)) != len(which) or (form is not None and form != (which, offs)):
            return None
        form = (which, offs)
    return (name, *form) if form else None


def _const(x) -> int | None:
    """``x`` as a number where it is one (a clamped expression only where it cancels: sympy's simplification of
    clamps is slow and proves no more here)."""
    x = sympy.expand(x)
    if not x.is_Integer and not x.has(sympy.Max, sympy.Min):
        x = sympy.simplify(x)
    return int(x) if x.is_Integer else None


def _face(region: subsets.Range, which, offs, rng) -> tuple[int, str, Any] | None:
    """``(parameter, "lo" | "hi", bound)``: the face of the iteration space ``rng`` that produces the region; ``bound``
    is the face's last parameter value ("lo") or its first ("hi"). A face of constant width at a known end, or, for a
    range clamped by ``Max``/``Min`` (a distributed program's owned range), the region whose end the clamp holds: the
    face piece is then the range up to (from) the region's far end, which holds every cell of the region that the map
    writes whatever the clamp's value."""
    for dim, (lo, hi, _) in enumerate(region):
        p = which[dim]
        plo, phi = lo - offs[dim], hi - offs[dim]
        mlo, mhi = rng[p][0], rng[p][1]
        if _const(plo - mlo) == 0 and _const(phi - mhi) == 0:
            continue
        width = _const(phi - plo)
        if width is None or width < 0:
            continue
        if _const(plo - mlo) == 0 or (_const(plo - mlo) is None and bounded_by(mlo, plo)):
            return p, "lo", phi
        if _const(phi - mhi) == 0 or (_const(phi - mhi) is None and bounded_by(mhi, phi)):
            return p, "hi", plo
    return None


def _widest(faces: dict, key, bound) -> None:
    """Records a face bound, keeping the widest face of that side (a larger "lo" bound, a smaller "hi" one)."""
    old = faces.get(key)
    if old is None:
        faces[key] = bound
        return
    d = _const(bound - old)
    if d is None:
        faces[key] = (sympy.Max if key[1] == "lo" else sympy.Min)(old, bound)
    elif (d > 0) == (key[1] == "lo"):
        faces[key] = bound


def _pieces(rng: list, faces: dict) -> tuple[list[list], list]:
    """The face pieces (disjoint, an onion: each parameter's faces span what the earlier parameters'
    faces left) and the interior, as lists of ``(lo, hi, step)``. Two opposite faces one cell wide are one
    piece (a step from one to the other) when their distance is a known positive number: one step of the
    kernel instead of two that the same threads would run one after the other. A face whose width is not a
    known number (a clamped range) is the range up to its bound, and the faces after it start past it."""
    inner = [tuple(r) for r in rng]
    out = []
    for p in range(len(rng)):
        lo, hi, _ = inner[p]
        b_lo, b_hi = faces.get((p, "lo")), faces.get((p, "hi"))
        w_lo = 0 if b_lo is None else _const(b_lo - lo + 1)
        w_hi = 0 if b_hi is None else _const(hi - b_hi + 1)
        if w_lo is None or w_hi is None:
            if b_lo is not None:
                out.append(inner[:p] + [(lo, sympy.Min(hi, b_lo), 1)] + inner[p + 1 :])
                lo = sympy.Max(lo, b_lo + 1)
            if b_hi is not None:
                out.append(inner[:p] + [(sympy.Max(lo, b_hi), hi, 1)] + inner[p + 1 :])
                hi = sympy.Min(hi, b_hi - 1)
            inner[p] = (lo, hi, 1)
            continue
        gap = _const(hi - lo)
        if w_lo == w_hi == 1 and gap is not None and gap > 0:
            out.append(inner[:p] + [(lo, hi, gap)] + inner[p + 1 :])
        else:
            if w_lo:
                out.append(inner[:p] + [(lo, lo + w_lo - 1, 1)] + inner[p + 1 :])
            if w_hi:
                out.append(inner[:p] + [(hi - w_hi + 1, hi, 1)] + inner[p + 1 :])
        inner[p] = (lo + w_lo, hi - w_hi, 1)
    return out, inner


def _set_range(state: dace.SDFGState, rng: list) -> None:
    entry = _the_map(state)
    entry.map.range = subsets.Range(rng)
    propagation.propagate_memlets_state(state.sdfg, state)


def _touches(state: dace.SDFGState, landing: list) -> bool:
    """Whether anything the state reads or writes may overlap a region where remote puts land."""
    return any(
        name == data and (sub is None or (subsets.intersects(sub, region) is not False and not disjoint(sub, region)))
        for data, _, sub in accesses(state)
        for name, region in landing
    )


def _clone(region: ControlFlowRegion, template: dace.SDFGState, after, label: str, rng: list) -> dace.SDFGState:
    """A state after ``after`` holding a copy of ``template``'s map over ``rng``."""
    piece = region.add_state_after(after, label)
    copy_state_mark(template, piece)  # a block function's part stays with its pieces
    src = copy.deepcopy(template)
    for n in src.nodes():
        piece.add_node(n)
    for e in src.edges():
        piece.add_edge(e.src, e.src_conn, e.dst, e.dst_conn, e.data)
    _set_range(piece, rng)
    return piece


def split_for_puts(sdfg: dace.SDFG, state: dace.SDFGState, puts: list, last, landing: list) -> bool:
    """Splits ``state``'s map for the ``puts`` that follow it, up to block ``last``, and stages the puts of its
    output (see the module doc); ``landing``: ``(array, subset)`` of every put's destination. Returns whether
    it split."""
    entry = _the_map(state)
    form = _write_offsets(state, entry) if entry is not None else None
    if form is None:
        return False
    name, which, offs = form
    rng = [tuple(r) for r in entry.map.range]
    faces: dict = {}
    plans = []
    for put, st in puts:
        src = _edge(st, put, "_src", False).data
        if src.data != name:
            continue
        face = _face(src.subset, which, offs, rng)
        if face is None:
            return False  # a put reads more than a face: the map stays whole
        _widest(faces, face[:2], face[2])
        plan = _staging_plan(sdfg, put, st)
        if plan is None:
            return False  # a put into the halo itself while the receiver streams its interior: measured slow
        plans.append((put, st, plan))
    if not faces:
        return False
    edges, inner = _pieces(rng, faces)
    probe = copy.deepcopy(state)
    probe.sdfg = sdfg
    _set_range(probe, inner)
    if _touches(probe, landing):
        return False
    region = state.parent_graph
    _clone(region, state, last, f"{state.label}_interior", inner)
    prev = state
    for k, rng_k in enumerate(edges[1:], 1):
        prev = _clone(region, state, prev, f"{state.label}_face{k}", rng_k)
    _set_range(state, edges[0])
    for put, st, plan in plans:
        stage_in_buffer(sdfg, put, st, plan)
    return True


def _same(a: dace.Memlet, b: dace.Memlet) -> bool:
    return a.data == b.data and str(a.subset) == str(b.subset)


def _staging_plan(sdfg: dace.SDFG, put: Putmem, state: dace.SDFGState):
    """``(dest edge, wait, wait state, guard edge)`` when the put can be staged (one put and one wait on its
    flag, and the wait guards the put's destination), else None."""
    if not put.signalled:
        return None
    flag = _edge(state, put, "_flag", True)
    dest = _edge(state, put, "_dest", True)
    waits = [
        (n, s)
        for n, s in sdfg.all_nodes_recursive()
        if isinstance(n, SignalWait) and _same(_edge(s, n, "_flag", False).data, flag.data)
    ]
    senders = [
        n
        for n, s in sdfg.all_nodes_recursive()
        if isinstance(n, Putmem) and n.signalled and _same(_edge(s, n, "_flag", True).data, flag.data)
    ]
    if len(waits) != 1 or len(senders) != 1:
        return None
    wait, wait_state = waits[0]
    guards = [e for e in wait_state.out_edges(wait) if e.src_conn != "_flag_out"]
    guard = next((e for e in guards if _same(e.data, dest.data)), None)
    return None if guard is None else (dest, wait, wait_state, guard)


def stage_in_buffer(sdfg: dace.SDFG, put: Putmem, state: dace.SDFGState, plan: tuple) -> None:
    """Sends a put of a split map into a contiguous buffer of its own, unpacked into its destination right
    after the one wait on its flag (in that wait's branch). Measured on H200s: remote stores
    into a strided halo of an array that the receiver is streaming through (its interior) held the
    sending blocks' fences for ~80 us per half-step; into a contiguous buffer they do not (the overlapped
    forms' halo buffers).

    Safe when the program without buffers is race-free: the receiver unpacks before anything after the
    wait reads the halo and before its next put, so the sender's next put into the buffer, which the
    program orders after the receiver's reads of the halo, comes after the unpacking. ``plan``: from
    :func:`_staging_plan`."""
    dest, wait, wait_state, guard = plan
    x = sdfg.arrays[dest.data.data]
    name, buf = sdfg.add_array(
        f"__cpufree_halo_{dest.data.data}", dest.data.subset.size(), x.dtype, transient=True, find_new_name=True
    )
    whole = dace.Memlet.from_array(name, buf)
    state.remove_edge(dest)
    if state.degree(dest.dst) == 0:
        state.remove_node(dest.dst)
    state.add_edge(put, "_dest", state.add_write(name, debuginfo=put.debuginfo), None, copy.deepcopy(whole))
    wait_state.remove_edge(guard)
    if wait_state.degree(guard.dst) == 0:
        wait_state.remove_node(guard.dst)
    received = wait_state.add_write(name, debuginfo=wait.debuginfo)
    wait_state.add_edge(wait, guard.src_conn, received, None, copy.deepcopy(whole))
    old = str(Region(dest.data.data, dest.data.subset))  # as the frontend listed it
    wait.guards = [name if g == old else g for g in wait.guards]
    unpack = wait_state.parent_graph.add_state_after(wait_state, f"unpack_{name}")
    copy_state_mark(wait_state, unpack)
    unpack.add_nedge(
        unpack.add_read(name, debuginfo=wait.debuginfo),  # the copy's program line: the wait's
        unpack.add_write(dest.data.data, debuginfo=wait.debuginfo),
        dace.Memlet(data=name, subset=copy.deepcopy(whole.subset), other_subset=copy.deepcopy(dest.data.subset)),
    )


@make_properties
class SplitForEarlyPuts(ppl.Pass):
    """Splits a map so that the cells its following puts send are computed first (see the module doc).

    Pattern: a state holding one map that writes one array element by element (``X[p + c, ...]``),
    followed in its region by blocks that hold only puts (``if pe > 0: Putmem(...)``). Preconditions:
    every put of ``X`` reads a face of the map's iteration space (a slab of constant width at one end of
    one parameter, anything in the others); the interior reads and writes no region where remote puts
    land; every such put can be staged (one put and one wait on its flag). Effect: the faces (one state
    each, disjoint) before the puts, the interior in a new state after them, each put into a buffer of its
    own, unpacked after its wait. Maps are fused first (as
    :class:`~dace_cpufree.transformations.FusePersistentKernel` does), so that a stencil written as NumPy
    expressions is one map.
    """

    CATEGORY = "dace-cpufree"

    fuse_first = Property(dtype=bool, default=True, desc="Fuse producer/consumer maps first", category="General")

    def modifies(self) -> ppl.Modifies:
        return ppl.Modifies.Everything

    def should_reapply(self, modified: ppl.Modifies) -> bool:
        return False

    def apply_pass(self, sdfg: dace.SDFG, _: dict[str, Any]) -> int | None:
        puts = [(n, s) for n, s in sdfg.all_nodes_recursive() if isinstance(n, Putmem)]
        if not puts:
            return None
        if self.fuse_first:
            fuse_maps(sdfg)
            puts = [(n, s) for n, s in sdfg.all_nodes_recursive() if isinstance(n, Putmem)]
        landing = [(e.data.data, e.data.subset) for p, s in puts for e in s.out_edges_by_connector(p, "_dest")]
        done = 0
        for region in list(sdfg.all_control_flow_regions()):
            for state in [b for b in region.nodes() if isinstance(b, dace.SDFGState)]:
                following, last = [], None
                for block in straight_after(region, state):
                    found = _puts_of(block)
                    if found is None:
                        break
                    following += found
                    last = block
                if following and split_for_puts(sdfg, state, following, last, landing):
                    done += 1
        return done or None
