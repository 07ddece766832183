"""The device API of each SHMEM library, as the expansions spell it.

ROC_SHMEM is not a renamed NVSHMEM: block-cooperative calls end in ``_wg`` (work-group), there is no
strided put (``iput``) and no ``signal_op``/``signal_wait_until``, so a strided put becomes element
puts (``rocshmem_<T>_p``) by the work-group's threads, the signal a remote ``uint64`` atomic set after
``rocshmem_quiet()``, and the wait a ``rocshmem_ulonglong_wait_until``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import dace

from dace_cpufree.errors import CommunicationError


@dataclass(frozen=True)
class ShmemAPI:
    """Names of one SHMEM library's device API."""

    name: str  # implementation name of the library nodes
    putmem: str  # block-cooperative contiguous put, "{nbi}" marks where "_nbi" goes
    putmem_signal: str  # block-cooperative contiguous put with signal
    putmem_warp: str  # warp/wavefront-cooperative contiguous put, "{nbi}" marks where "_nbi" goes
    signal_op: str  # one thread sets a remote flag: format(flag=, value=, pe=)
    signal_set: str  # the SET signal operator
    quiet: str
    barrier_all: str  # the PE-wide barrier (completes its updates too), called by barrier_executor
    barrier_executor: str  # who calls it: one thread ("thread") or all threads of block 0 ("block")
    iput: str  # one thread's strided put, format(t=type name); empty: the library has none
    wait: str  # one thread waits until the local flag is >= value: format(flag=, value=)
    type_names: dict  # dace typeclass -> type name in typed calls (nvshmem_<T>_iput, rocshmem_<T>_p)
    direct: bool = False  # puts are the kernel's own stores (cpufree::shmem::p2p), not library calls

    def type_name(self, dtype) -> str:
        if dtype not in self.type_names:
            raise CommunicationError(
                f"{self.name}: no typed put for {dtype.to_string()}. "
                f"Fix: use one of {', '.join(t.to_string() for t in self.type_names)}."
            )
        return self.type_names[dtype]


NVSHMEM_API = ShmemAPI(
    name="NVSHMEM",
    putmem="nvshmemx_putmem{nbi}_block",
    putmem_signal="nvshmemx_putmem_signal{nbi}_block",
    putmem_warp="nvshmemx_putmem{nbi}_warp",
    signal_op="nvshmemx_signal_op({flag}, {value}, NVSHMEM_SIGNAL_SET, {pe});",
    signal_set="NVSHMEM_SIGNAL_SET",
    quiet="nvshmem_quiet();",
    # with the device <-> host channel a barrier a PE can leave (cpufree/channel.cuh): a stopped PE leaves none in it
    barrier_all="\n".join(
        [
            "#if defined(CPUFREE_CHANNEL_SHMEM)",
            "cpufree::channel::barrier_all();",
            "#else",
            "nvshmem_barrier_all();",
            "#endif",
        ]
    ),
    barrier_executor="thread",
    iput="nvshmem_{t}_iput",
    wait="nvshmem_signal_wait_until({flag}, NVSHMEM_CMP_GE, {value});",
    type_names={
        dace.float64: "double",
        dace.float32: "float",
        dace.int64: "int64",
        dace.int32: "int32",
        dace.int16: "int16",
        dace.int8: "int8",
        dace.uint64: "uint64",
        dace.uint32: "uint32",
        dace.uint16: "uint16",
        dace.uint8: "uint8",
    },
)

ROCSHMEM_API = ShmemAPI(
    name="ROCSHMEM",
    putmem="rocshmem_putmem{nbi}_wg",
    putmem_signal="rocshmem_putmem_signal{nbi}_wg",
    putmem_warp="rocshmem_putmem{nbi}_wave",
    signal_op="rocshmem_uint64_atomic_set({flag}, {value}, {pe});",
    signal_set="ROCSHMEM_SIGNAL_SET",
    quiet="rocshmem_quiet();",
    barrier_all="rocshmem_wg_barrier_all();",  # rocSHMEM's device barrier is a work-group collective
    barrier_executor="block",
    iput="",
    wait="rocshmem_ulonglong_wait_until((unsigned long long *){flag}, ROCSHMEM_CMP_GE, {value});",
    type_names={
        dace.float64: "double",
        dace.float32: "float",
        dace.int64: "longlong",
        dace.int32: "int",
        dace.int16: "short",
        dace.int8: "schar",
        dace.uint64: "ulonglong",
        dace.uint32: "uint",
        dace.uint16: "ushort",
        dace.uint8: "uchar",
    },
)

# NVSHMEM with every peer reachable by load/store (one node): puts, quiets and signals are the kernel's own
# stores and fences through nvshmem_ptr (cpufree/shmem.cuh, namespace cpufree::shmem::p2p), so NVSHMEM's
# proxy transport is not linked into the kernel (NVSHMEM's wait, a local poll, also calls into it); the
# PE-wide barrier before a time loop stays NVSHMEM's. Every put, whatever its layout, is one copy loop shared
# by the blocks of its lane (frontend/putmem.py), so the library's put names are not used.
NVSHMEM_P2P_API = dataclasses.replace(
    NVSHMEM_API,
    name="NVSHMEM_P2P",
    putmem="",
    putmem_signal="",
    putmem_warp="",
    signal_op="cpufree::shmem::p2p::signal_set({flag}, {value}, {pe});",
    quiet="cpufree::shmem::p2p::quiet();",
    iput="",
    wait="cpufree::shmem::p2p::wait_until_ge({flag}, {value});",
    direct=True,
)

APIS = {"NVSHMEM": NVSHMEM_API, "NVSHMEM_P2P": NVSHMEM_P2P_API, "ROCSHMEM": ROCSHMEM_API}


def implementation(backend: str, transport: str = "p2p") -> str:
    """The library-node implementation for ``backend`` and a decided ``transport`` (``CompileOptions.resolve``
    decides ``"auto"``).

    ``"proxy"``: NVSHMEM's calls, which reach peers on this node and on others; ``"p2p"``: the kernel stores
    to its peers directly (one node, see ``NVSHMEM_P2P_API``; the launcher checks at start that every peer
    is reachable and names ``"proxy"`` when one is not). Measured on 4 H200s (docs/multigpu.md): direct stores
    let the kernel keep full blocks (NVSHMEM's proxy code linked into it cost 76 registers per thread, so half
    the threads per SM), which made Jacobi 2-D at 4096^2 per GPU 1.5x faster on 4 GPUs; at small tiles
    (1024^2, 128^3 per GPU) NVSHMEM's calls were 3-23 % faster. ROC_SHMEM (``"hip"``) has its calls only.
    """
    if transport not in ("p2p", "proxy"):
        raise CommunicationError(
            f"shmem_transport={transport!r}. Fix: use one of auto, p2p, proxy (auto is decided by "
            "dace_cpufree.compile from the launcher's placement)."
        )
    if backend == "hip":
        if transport == "p2p":
            raise CommunicationError(
                "shmem_transport='p2p' is implemented for NVSHMEM only. Fix: use 'auto' or 'proxy' with backend='hip'."
            )
        return "ROCSHMEM"
    if backend not in ("cuda", "emulate"):
        raise CommunicationError(f"no SHMEM library for backend '{backend}'. Fix: use 'cuda' or 'hip'.")
    return "NVSHMEM_P2P" if transport == "p2p" else "NVSHMEM"
