"""PlaceOnSymmetricHeap: containers touched by GPU-initiated communication live on the symmetric heap.

NVSHMEM and ROC_SHMEM can only address remote memory that every PE allocated collectively with the
same size (``nvshmem_malloc``). The pass marks such containers with the registered storage type
``StorageType.CPUFree_Symmetric``; the launcher and the runtime allocate them there (transients in a
symmetric workspace, arguments in symmetric buffers that the user's arrays are copied into and out of),
so the user never allocates them by hand.
"""

from __future__ import annotations

from typing import Any

import dace
from dace import data as dt
from dace import dtypes
from dace.transformation import pass_pipeline as ppl
from dace_cpufree.frontend import Allreduce, Putmem, SignalWait

from dace_cpufree.errors import CommunicationError
from dace_cpufree.vocabulary import SYMMETRIC_STORAGE, is_symmetric  # noqa: F401  (is_symmetric: re-exported)

#: Storage types a user may have chosen that are compatible with the symmetric heap.
_MOVABLE = (dtypes.StorageType.Default, dtypes.StorageType.GPU_Global, SYMMETRIC_STORAGE)
#: The library nodes whose containers other PEs address.
_COMM = (Putmem, SignalWait, Allreduce)


def communicated_containers(sdfg: dace.SDFG) -> set[str]:
    """Containers that a ``Putmem``, ``SignalWait`` or ``Allreduce`` reads or writes (data, flags, the reduced
    buffer and its slots: the library's reductions need a symmetric buffer, the gather form symmetric slots)."""
    names = set()
    for node, state in sdfg.all_nodes_recursive():
        if isinstance(node, _COMM):
            names |= {e.data.data for e in state.all_edges(node) if not e.data.is_empty()}
    return names


class PlaceOnSymmetricHeap(ppl.Pass):
    """Marks every array that communication touches as ``CPUFree_Symmetric`` storage.

    Pattern: ``Putmem``/``SignalWait``/``Allreduce`` nodes. Precondition: the touched containers are arrays (not
    scalars, which are passed by value) in default or GPU global storage. Effect: their storage
    becomes ``CPUFree_Symmetric``. Scalars read as values (a PE number, a signal) are left alone.
    """

    CATEGORY = "dace-cpufree"

    def modifies(self) -> ppl.Modifies:
        return ppl.Modifies.Descriptors

    def should_reapply(self, modified: ppl.Modifies) -> bool:
        return False

    def apply_pass(self, sdfg: dace.SDFG, _: dict[str, Any]) -> int | None:
        marked = 0
        values = _value_inputs(sdfg)
        for name in sorted(communicated_containers(sdfg) - values):
            desc = sdfg.arrays[name]
            if isinstance(desc, dt.Scalar):
                continue
            if desc.storage not in _MOVABLE:
                raise CommunicationError(
                    f"'{name}' is used in GPU-initiated communication but its storage is {desc.storage.name}, "
                    "which other PEs cannot address. Fix: leave its storage at the default; dace-cpufree "
                    "places it on the symmetric heap."
                )
            if desc.storage != SYMMETRIC_STORAGE:
                desc.storage = SYMMETRIC_STORAGE
                marked += 1
        return marked or None


def _value_inputs(sdfg: dace.SDFG) -> set[str]:
    """Containers read by value (``_pe``, ``_signal``): they need no remote address."""
    names = set()
    for node, state in sdfg.all_nodes_recursive():
        if isinstance(node, _COMM):
            for e in state.in_edges(node):
                if e.dst_conn in ("_pe", "_signal"):
                    names.add(e.data.data)
    return names
