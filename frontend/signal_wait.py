"""The ``SignalWait`` library node: wait until a local flag reaches a value.

``SignalWait(flag, signal)`` blocks one thread of every thread block until ``flag >= signal``: each block
waits for itself, so the consumers of what it guards need a block barrier, not a grid synchronisation. It
is the point at which the data that remote puts signalled on ``flag`` has arrived, so the communication
passes give it a write edge to every region that those puts write (``_guard<k>``, the flag's *guarded
regions*): consumers of a received halo are then ordered after the wait by the kernel generator's usual
read-after-write analysis, and nothing else needs to know about remote writes.

With the device <-> host channel (``CPUFREE_CHANNEL_SHMEM``, see ``cpufree/channel.cuh``) the wait polls and is
left when this PE or a peer stops, and in debug mode (``debug_waits``) one that lasts too long is reported through
the channel: the tasklet carries the wait's facts for that (its ``wait``: number, flag, program line).

Debugging hangs without the channel: built with ``-DCPUFREE_WAIT_TIMEOUT_NS=<ns>``
(``DACE_CPUFREE_WAIT_TIMEOUT_MS`` in the environment at build time), the wait polls instead, and after the timeout
prints the PE, the flag (name, index and address), its value and the expected one, and traps.
"""

from __future__ import annotations

import dace
from dace import library
from dace.properties import ListProperty, Property, SymbolicProperty
from dace.sdfg import nodes
from dace.transformation.transformation import ExpandTransformation

from dace_cpufree.channel_marks import wait_fact as channel_wait_fact
from dace_cpufree.facts import CpufreeTasklet, WaitMark, placement

from .environments import NVSHMEM, ROCSHMEM
from .putmem import _check_prepared, _edge, expression_symbols, value_text
from .shmem_api import NVSHMEM_API, NVSHMEM_P2P_API, ROCSHMEM_API, ShmemAPI


def wait_fact(node, state) -> dict:
    """The wait's facts for the channel's hang reports (:func:`dace_cpufree.channel_marks.wait_fact`)."""
    flag = _edge(state, node, "_flag", False).data
    info = node.debuginfo
    source = f"{info.filename}:{info.start_line}" if info is not None and info.filename and info.start_line else ""
    return channel_wait_fact(f"{flag.data}[{flag.subset}]", source)


def wait_code(node, state, api: ShmemAPI) -> str:
    """The C++ body of the wait tasklet: the library's wait, the channel's wait that can be left, or the polling
    debug wait."""
    flag = _edge(state, node, "_flag", False).data
    sig = f"(uint64_t)({value_text(node, 'signal', '_signal')})"
    wait = api.wait.format(flag="_flag", value=sig)
    return "\n".join(
        [
            "#if defined(CPUFREE_CHANNEL_SHMEM)",
            f"cpufree::shmem::wait_ge(_flag, {sig}, {wait_fact(node, state)['id']}u);",
            "#elif defined(CPUFREE_WAIT_TIMEOUT_NS)",
            f'cpufree::shmem::wait_or_trap(_flag, {sig}, "{flag.data}[{flag.subset}]", CPUFREE_WAIT_TIMEOUT_NS);',
            "#else",
            wait,
            "#endif",
        ]
    )


def _expand(node, state, sdfg, api: ShmemAPI) -> nodes.Tasklet:
    _check_prepared(node)
    inputs = {"_flag": dace.pointer(dace.uint64)}
    if "_signal" in node.in_connectors:
        inputs["_signal"] = sdfg.arrays[_edge(state, node, "_signal", False).data.data].dtype
    outputs = {c: dace.pointer(sdfg.arrays[_edge(state, node, c, True).data.data].dtype) for c in node.out_connectors}
    mark = WaitMark(**wait_fact(node, state))
    return CpufreeTasklet(
        node.label, inputs, outputs, wait_code(node, state, api), **placement("each", node.block), wait=mark
    )


@library.expansion
class ExpandSignalWaitNVSHMEM(ExpandTransformation):
    environments = [NVSHMEM]

    @staticmethod
    def expansion(node, parent_state, parent_sdfg, **kwargs):
        return _expand(node, parent_state, parent_sdfg, NVSHMEM_API)


@library.expansion
class ExpandSignalWaitNVSHMEMP2P(ExpandTransformation):
    environments = [NVSHMEM]

    @staticmethod
    def expansion(node, parent_state, parent_sdfg, **kwargs):
        return _expand(node, parent_state, parent_sdfg, NVSHMEM_P2P_API)


@library.expansion
class ExpandSignalWaitROCSHMEM(ExpandTransformation):
    environments = [ROCSHMEM]

    @staticmethod
    def expansion(node, parent_state, parent_sdfg, **kwargs):
        return _expand(node, parent_state, parent_sdfg, ROCSHMEM_API)


@library.node
class SignalWait(nodes.LibraryNode):
    """Waits until the flag (connector ``_flag``, one ``uint64``) is at least ``signal``.

    Outputs: ``_flag_out`` (the flag, written by the remote signal) and ``_guard<k>``, one per region
    that the puts signalling this flag write; added by :class:`~dace_cpufree.transformations.PrepareCommunication`.
    """

    implementations = {
        "NVSHMEM": ExpandSignalWaitNVSHMEM,
        "NVSHMEM_P2P": ExpandSignalWaitNVSHMEMP2P,
        "ROCSHMEM": ExpandSignalWaitROCSHMEM,
    }
    default_implementation = "NVSHMEM"

    signal = SymbolicProperty(default=0, desc="value to wait for (an expression); unused with _signal")
    block = Property(dtype=int, default=0, desc="warp (modulo the block) whose thread 0 waits, in every block")
    guards = ListProperty(element_type=str, default=[], desc="regions written by the puts that signal the flag")
    prepared = Property(dtype=bool, default=False, desc="placed in a persistent kernel by PrepareCommunication")

    def __init__(self, name, signal="0", signal_in=False, **kwargs):
        inputs = {"_flag"} | ({"_signal"} if signal_in else set())
        super().__init__(name, inputs=inputs, outputs={"_flag_out"}, **kwargs)
        self.signal = signal

    @property
    def free_symbols(self) -> set[str]:
        return super().free_symbols | expression_symbols(self.signal)
