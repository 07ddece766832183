"""Python calls inside a ``@dace.program`` that become SHMEM library nodes or symbols.

Registered with DaCe's operator repository under the qualified names of the functions in
:mod:`dace_cpufree.nvshmem` (how the frontend finds a called global function).
"""

from __future__ import annotations

import copy

import dace
from dace.frontend.common import op_repository as oprepo
from dace.memlet import Memlet

from dace_cpufree.errors import CommunicationError

from .allreduce import Allreduce, check_buffer, op_name
from .arguments import Region, call_site, check_flag, check_transfer, resolve_region, resolve_value
from .pe import N_PES_SYMBOL, PE_SYMBOL, pe_symbol
from .putmem import Putmem
from .signal_wait import SignalWait

MODULE = "dace_cpufree.nvshmem"


def _read(state, region: Region, node, conn: str) -> None:
    state.add_edge(
        state.add_read(region.data), None, node, conn, Memlet(data=region.data, subset=copy.deepcopy(region.subset))
    )


def _write(state, region: Region, node, conn: str) -> None:
    state.add_edge(
        node, conn, state.add_write(region.data), None, Memlet(data=region.data, subset=copy.deepcopy(region.subset))
    )


def _value(sdfg, state, value, call: str, role: str):
    """``(expression, container)``: the value as text, or the scalar that holds it.

    A scalar computed by the program (``(me + 1) % npes``) is read into a symbol on the edge into the
    call's state: DaCe's scalar-to-symbol promotion then folds its computation into symbolic
    expressions, so the value is a register of every thread instead of device memory written by one
    thread (which would need a grid synchronisation before every use).
    """
    expr, data = resolve_value(sdfg, value, call, role)
    parent = state.parent_graph
    edges = list(parent.in_edges(state)) if data is not None else []
    if len(edges) != 1:
        return expr, data
    name = sdfg.find_new_symbol(f"__cpufree_{role}")
    sdfg.add_symbol(name, sdfg.arrays[data].dtype)
    edges[0].data.assignments[name] = data
    return name, None


def _flag_region(state, node, conn: str, out: bool) -> Region | None:
    edges = state.out_edges_by_connector(node, conn) if out else state.in_edges_by_connector(node, conn)
    edge = next(iter(edges), None)
    return None if edge is None else Region(edge.data.data, edge.data.subset)


def _same_flag(a: Region, b: Region) -> bool:
    return a.data == b.data and dace.subsets.intersects(a.subset, b.subset) is not False


def _guard(wait_state, wait: SignalWait, dest: Region) -> None:
    """The wait writes the region that a put signalling its flag writes (see :mod:`.signal_wait`)."""
    if str(dest) in wait.guards:
        return
    conn = f"_guard{len(wait.guards)}"
    wait.add_out_connector(conn)
    wait.guards = list(wait.guards) + [str(dest)]
    _write(wait_state, dest, wait, conn)


def _link(sdfg: dace.SDFG, flag: Region, dest: Region | None, wait=None, wait_state=None) -> None:
    """Guards of waits on ``flag``: for a new put (``dest``), every wait so far; for a new wait, every put."""
    for node, state in sdfg.all_nodes_recursive():
        if dest is not None and isinstance(node, SignalWait):
            if _same_flag(_flag_region(state, node, "_flag", False), flag):
                _guard(state, node, dest)
        elif wait is not None and isinstance(node, Putmem) and node.signalled:
            if _same_flag(_flag_region(state, node, "_flag", True), flag):
                _guard(wait_state, wait, _flag_region(state, node, "_dest", True))


@oprepo.replaces(f"{MODULE}.Putmem")
def putmem(pv, sdfg: dace.SDFG, state: dace.SDFGState, dest, src, pe, flag=None, signal=None):
    call = call_site(pv, "Putmem")
    dest_r = resolve_region(pv, sdfg, dest, call, "dest")
    src_r = resolve_region(pv, sdfg, src, call, "src")
    check_transfer(sdfg, dest_r, src_r, call)
    if (flag is None) != (signal is None):
        raise CommunicationError(
            f"{call}: 'flag' and 'signal' go together (got only {'flag' if signal is None else 'signal'}). "
            "Fix: pass both, e.g. Putmem(dest, src, pe, flag=flags[0], signal=t + 1), or neither."
        )
    pe_expr, pe_data = _value(sdfg, state, pe, call, "pe")
    sig_expr, sig_data = (None, None) if signal is None else _value(sdfg, state, signal, call, "signal")
    flag_r = None
    if flag is not None:
        flag_r = resolve_region(pv, sdfg, flag, call, "flag")
        check_flag(sdfg, flag_r, call)
    line = getattr(pv, "current_lineinfo", None)
    add_put(sdfg, state, dest_r, src_r, (pe_expr, pe_data), flag_r, (sig_expr, sig_data), line)
    return []


def add_put(sdfg, state, dest: Region, src: Region, pe, flag: Region | None, signal, line=None) -> Putmem:
    """A ``Putmem`` node of ``src`` into ``dest`` on PE ``pe``, signalling ``flag`` (``None``: no signal) with
    ``signal``; ``pe`` and ``signal`` are ``(expression, container)`` pairs (one of them ``None``). ``line``: the
    program line's ``DebugInfo``, which later errors name."""
    (pe_expr, pe_data), (sig_expr, sig_data) = pe, signal
    node = Putmem(
        "putmem",
        pe=pe_expr if pe_data is None else 0,
        signal=sig_expr if sig_data is None and sig_expr is not None else 0,
        signalled=flag is not None,
        pe_in=pe_data is not None,
        signal_in=sig_data is not None,
    )
    node.debuginfo = copy.deepcopy(line)
    state.add_node(node)
    _read(state, src, node, "_src")
    _write(state, dest, node, "_dest")
    if pe_data is not None:
        _read(state, Region(pe_data, dace.subsets.Range.from_array(sdfg.arrays[pe_data])), node, "_pe")
    if flag is not None:
        _write(state, flag, node, "_flag")
        _link(sdfg, flag, dest)
        if sig_data is not None:
            _read(state, Region(sig_data, dace.subsets.Range.from_array(sdfg.arrays[sig_data])), node, "_signal")
    return node


@oprepo.replaces(f"{MODULE}.SignalWait")
def signal_wait(pv, sdfg: dace.SDFG, state: dace.SDFGState, flag, signal):
    call = call_site(pv, "SignalWait")
    flag_r = resolve_region(pv, sdfg, flag, call, "flag")
    check_flag(sdfg, flag_r, call)
    add_wait(sdfg, state, flag_r, _value(sdfg, state, signal, call, "signal"), getattr(pv, "current_lineinfo", None))
    return []


def add_wait(sdfg, state, flag: Region, signal, line=None) -> SignalWait:
    """A ``SignalWait`` node for ``flag`` to reach ``signal`` (an ``(expression, container)`` pair), guarding the
    regions of the puts that signal that flag (see :func:`add_put`); ``line``: as there."""
    sig_expr, sig_data = signal
    node = SignalWait("signal_wait", signal=sig_expr if sig_data is None else 0, signal_in=sig_data is not None)
    node.debuginfo = copy.deepcopy(line)
    state.add_node(node)
    _read(state, flag, node, "_flag")
    _write(state, flag, node, "_flag_out")
    _link(sdfg, flag, None, node, state)
    if sig_data is not None:
        _read(state, Region(sig_data, dace.subsets.Range.from_array(sdfg.arrays[sig_data])), node, "_signal")
    return node


def _pending_start(sdfg: dace.SDFG, data: str):
    """The non-blocking ``Allreduce`` of ``data`` that no ``AllreduceWait`` has completed yet, if any."""
    for node, state in sdfg.all_nodes_recursive():
        if isinstance(node, Allreduce) and node.phase == "start" and not node.waited:
            if _flag_region(state, node, "_in", False).data == data:
                return node
    return None


def _in_place(state, region: Region, node) -> None:
    _read(state, region, node, "_in")
    _write(state, region, node, "_out")


@oprepo.replaces(f"{MODULE}.Allreduce")
def allreduce(pv, sdfg: dace.SDFG, state: dace.SDFGState, buffer, op, nonblocking=False):
    call = call_site(pv, "Allreduce")
    region = resolve_region(pv, sdfg, buffer, call, "buffer")
    check_buffer(sdfg, region, call)
    name = op_name(op, call)
    if not isinstance(nonblocking, bool):
        raise CommunicationError(f"{call}: 'nonblocking' must be True or False (a constant), got {nonblocking!r}.")
    if _pending_start(sdfg, region.data) is not None:
        raise CommunicationError(
            f"{call}: a non-blocking Allreduce of '{region.data}' is still in flight. "
            f"Fix: call nvshmem.AllreduceWait({region.data}) before reducing it again."
        )
    node = Allreduce(
        "allreduce_start" if nonblocking else "allreduce", op=name, phase="start" if nonblocking else "all"
    )
    node.debuginfo = copy.deepcopy(getattr(pv, "current_lineinfo", None))  # later errors name this line
    state.add_node(node)
    _in_place(state, region, node)
    return []


@oprepo.replaces(f"{MODULE}.AllreduceWait")
def allreduce_wait(pv, sdfg: dace.SDFG, state: dace.SDFGState, buffer):
    call = call_site(pv, "AllreduceWait")
    region = resolve_region(pv, sdfg, buffer, call, "buffer")
    start = _pending_start(sdfg, region.data)
    if start is None:
        raise CommunicationError(
            f"{call}: no non-blocking Allreduce of '{region.data}' to wait for. "
            f"Fix: start one first with nvshmem.Allreduce({region.data}, op, nonblocking=True)."
        )
    start.waited = True
    node = Allreduce("allreduce_wait", op=start.op, phase="wait")
    node.debuginfo = copy.deepcopy(getattr(pv, "current_lineinfo", None))  # later errors name this line
    state.add_node(node)
    _in_place(state, region, node)
    return []


@oprepo.replaces(f"{MODULE}.my_pe")
def my_pe(pv, sdfg: dace.SDFG, state: dace.SDFGState):
    return pe_symbol(sdfg, PE_SYMBOL)


@oprepo.replaces(f"{MODULE}.n_pes")
def n_pes(pv, sdfg: dace.SDFG, state: dace.SDFGState):
    return pe_symbol(sdfg, N_PES_SYMBOL)


__all__ = ["add_put", "add_wait", "putmem", "signal_wait", "allreduce", "allreduce_wait", "my_pe", "n_pes"]
