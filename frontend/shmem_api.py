"""The device API of each SHMEM library, as the expansions spell it.

ROC_SHMEM is not a renamed NVSHMEM: block-cooperative calls end in ``_wg`` (work-group), there is no
strided put (``iput``) and no ``signal_op``/``signal_wait_until``, so a strided put becomes element
puts (``rocshmem_<T>_p``) by the work-group's threads, the signal a remote ``uint64`` atomic set after
``rocshmem_quiet()``, and the wait a ``rocshmem_ulonglong_wait_until``.
"""

from __future__ import annotations

from dataclasses import dataclass

import dace

from dace_cpufree.errors import CommunicationError


@dataclass(frozen=True)
class ShmemAPI:
    """Names of one SHMEM library's device API."""

    name: str  # implementation name of the library nodes
    prefix: str  # "nvshmem" / "rocshmem"
    putmem: str  # block-cooperative contiguous put, "{nbi}" marks where "_nbi" goes
    putmem_signal: str  # block-cooperative contiguous put with signal
    putmem_warp: str  # warp/wavefront-cooperative contiguous put, "{nbi}" marks where "_nbi" goes
    signal_op: str  # one thread sets a remote flag: format(flag=, value=, pe=)
    signal_set: str  # the SET signal operator
    cmp_ge: str  # the >= comparison
    quiet: str
    barrier_all: str  # one thread's PE-wide barrier (completes its updates too)
    type_names: dict  # dace typeclass -> type name in typed calls (nvshmem_<T>_iput, rocshmem_<T>_p)

    def type_name(self, dtype) -> str:
        if dtype not in self.type_names:
            raise CommunicationError(
                f"{self.name}: no typed put for {dtype.to_string()}. "
                f"Fix: use one of {', '.join(t.to_string() for t in self.type_names)}."
            )
        return self.type_names[dtype]


NVSHMEM_API = ShmemAPI(
    name="NVSHMEM",
    prefix="nvshmem",
    putmem="nvshmemx_putmem{nbi}_block",
    putmem_signal="nvshmemx_putmem_signal{nbi}_block",
    putmem_warp="nvshmemx_putmem{nbi}_warp",
    signal_op="nvshmemx_signal_op({flag}, {value}, NVSHMEM_SIGNAL_SET, {pe});",
    signal_set="NVSHMEM_SIGNAL_SET",
    cmp_ge="NVSHMEM_CMP_GE",
    quiet="nvshmem_quiet();",
    barrier_all="nvshmem_barrier_all();",
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
    prefix="rocshmem",
    putmem="rocshmem_putmem{nbi}_wg",
    putmem_signal="rocshmem_putmem_signal{nbi}_wg",
    putmem_warp="rocshmem_putmem{nbi}_wave",
    signal_op="rocshmem_uint64_atomic_set({flag}, {value}, {pe});",
    signal_set="ROCSHMEM_SIGNAL_SET",
    cmp_ge="ROCSHMEM_CMP_GE",
    quiet="rocshmem_quiet();",
    barrier_all="rocshmem_barrier_all();",
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

#: Implementation name per code-generation backend.
IMPLEMENTATION = {"cuda": "NVSHMEM", "emulate": "NVSHMEM", "hip": "ROCSHMEM"}
APIS = {"NVSHMEM": NVSHMEM_API, "ROCSHMEM": ROCSHMEM_API}
