"""The SHMEM session of a process: bootstrap, device selection, symmetric buffers, finalisation.

One process per GPU, started by an existing launcher::

    mpirun -np 4 python prog.py                     # one node
    mpirun -np 8 -H node1:4,node2:4 python prog.py  # several nodes: the launcher's usual host options

The process's rank, the number of processes and its rank on the node come from the launcher's
environment (Open MPI, MPICH/Hydra, Slurm); without one, the process is PE 0 of 1. NVSHMEM is
bootstrapped with a unique id: rank 0's generated library creates it and ``mpi4py`` broadcasts it
(``MPI_Bcast``), then every process initialises NVSHMEM *in the generated library* (which holds the
device state of ``libnvshmem_device.a``) on GPU ``local rank % GPUs``. ROC_SHMEM bootstraps over MPI
itself. ``NVSHMEM_DISABLE_NVLS=1`` is set unless the environment says otherwise. At exit the symmetric
buffers are freed and the library finalised, in every process (both are collective).
"""

from __future__ import annotations

import atexit
import ctypes
import os

from dace_cpufree.errors import LaunchError
from dace_cpufree.launcher import placement
from dace_cpufree.options import env

from .build import gpu_count


def declare_shmem_calls(lib) -> None:
    """The ctypes signatures of a generated library's SHMEM entry points (``codegen/shmem_host.py``)."""
    lib.cpufree_shmem_malloc.restype = ctypes.c_void_p
    lib.cpufree_shmem_malloc.argtypes = [ctypes.c_size_t]
    lib.cpufree_shmem_free.argtypes = [ctypes.c_void_p]
    lib.cpufree_shmem_copy.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
    lib.cpufree_shmem_init.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_int, ctypes.c_int]


def symmetric_buffer(lib, buffers: dict, key, nbytes: int) -> int | None:
    """The symmetric buffer kept in ``buffers`` (``key -> (pointer, bytes)``) under ``key``, where it holds ``nbytes``;
    else a new one of ``nbytes`` from ``lib``'s symmetric heap, kept there (the smaller one freed). ``None`` where the
    heap refuses. Allocation is collective: every PE asks for the same keys with the same sizes in the same order
    (SPMD), which a program called with the same local shapes on every PE does."""
    ptr, size = buffers.get(key, (None, 0))
    if ptr is not None and size >= nbytes:
        return ptr
    if ptr is not None:
        lib.cpufree_shmem_free(ctypes.c_void_p(ptr))
        del buffers[key]
    ptr = lib.cpufree_shmem_malloc(nbytes)
    if ptr:
        buffers[key] = (ptr, nbytes)
    return ptr or None


def _broadcast(data: bytes, size: int) -> bytes:
    if size == 1:
        return data
    try:
        from mpi4py import MPI
    except ImportError:
        raise LaunchError(
            f"{size} processes were launched but mpi4py is not installed, so the NVSHMEM unique id cannot be "
            "handed from rank 0 to the others. Fix: pip install mpi4py (built on the MPI that runs mpirun)."
        ) from None
    return MPI.COMM_WORLD.bcast(data, root=0)


def pe_device(local_rank: int, gpus: int) -> int:
    """The GPU of the process of node rank ``local_rank`` among ``gpus`` visible ones: ``DACE_CPUFREE_DEVICE``, else
    ``local_rank % gpus``."""
    chosen = env("DACE_CPUFREE_DEVICE")
    return chosen if chosen is not None else local_rank % max(gpus, 1)


class ShmemSession:
    """The process's SHMEM state; one per process (:func:`session`)."""

    def __init__(self):
        os.environ.setdefault("NVSHMEM_DISABLE_NVLS", "1")
        os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
        where = placement()
        self.rank, self.size, self.local_rank = where.rank, where.size, where.local_rank
        self.libraries = []  # initialised generated libraries, in order
        self.buffers = {}  # (library id, name) -> (pointer, nbytes)
        self.uid = None
        atexit.register(self.finalize)

    def device(self, gpus: int) -> int:
        return pe_device(self.local_rank, gpus)

    def attach(self, lib, gpus: int, direct_stores: bool = False) -> None:
        """Initialises SHMEM in generated library ``lib`` (collective: every process, same order).

        ``direct_stores``: the kernel stores to its peers (``shmem_transport="p2p"``); every PE must be
        reachable by load/store from this one, checked here, before any launch could trap."""
        declare_shmem_calls(lib)
        if self.uid is None:
            uid = ctypes.create_string_buffer(max(lib.cpufree_shmem_uniqueid_size(), 1))
            if self.rank == 0:
                _check(lib, lib.cpufree_shmem_get_uniqueid(uid), "creating the NVSHMEM unique id")
            self.uid = _broadcast(uid.raw, self.size)
        device = self.device(gpus)
        _check(lib, lib.cpufree_shmem_init(self.uid, self.rank, self.size, device), f"initialising on GPU {device}")
        pes = (lib.cpufree_shmem_my_pe(), lib.cpufree_shmem_n_pes())
        if pes != (self.rank, self.size):
            raise LaunchError(f"SHMEM reports PE {pes[0]} of {pes[1]}, the launcher rank {self.rank} of {self.size}.")
        self.libraries.append(lib)
        far = lib.cpufree_shmem_unreachable_pe() if direct_stores else -1
        if far >= 0:
            raise LaunchError(
                f"PE {self.rank} cannot store to PE {far} directly (another node, or no peer access between the "
                "GPUs), and this program was built for direct stores (shmem_transport='p2p'). Fix: compile with "
                "shmem_transport='proxy' (or set DACE_CPUFREE_SHMEM_TRANSPORT=proxy)."
            )

    def buffer(self, lib, name: str, nbytes: int) -> int:
        """A symmetric buffer of ``nbytes`` for argument ``name`` of ``lib``, kept across calls (collective:
        :func:`symmetric_buffer`)."""
        ptr = symmetric_buffer(lib, self.buffers, (id(lib), name), nbytes)
        if ptr is None:
            raise LaunchError(
                f"nvshmem_malloc({nbytes}) failed for '{name}': the symmetric heap is too small. "
                "Fix: raise NVSHMEM_SYMMETRIC_SIZE (e.g. NVSHMEM_SYMMETRIC_SIZE=4G)."
            )
        return ptr

    def copy(self, lib, dst: int, src: int, nbytes: int) -> None:
        _check(lib, lib.cpufree_shmem_copy(ctypes.c_void_p(dst), ctypes.c_void_p(src), nbytes), "copying")

    def finalize(self) -> None:
        """Frees the symmetric buffers and finalises every library (collective, at exit)."""
        for (lib_id, _), (ptr, _) in list(self.buffers.items()):
            lib = next((lib for lib in self.libraries if id(lib) == lib_id), None)
            if lib is not None:
                lib.cpufree_shmem_free(ctypes.c_void_p(ptr))
        self.buffers.clear()
        for lib in reversed(self.libraries):
            lib.cpufree_shmem_barrier()
            lib.cpufree_shmem_finalize()
        self.libraries.clear()


def _check(lib, rc: int, what: str) -> None:
    if rc != 0:
        lib.cpufree_error.restype = ctypes.c_char_p
        raise LaunchError(f"SHMEM failed {what}: {lib.cpufree_error().decode()}")


_SESSION: ShmemSession | None = None


def session() -> ShmemSession:
    """The process's SHMEM session, created on first use."""
    global _SESSION
    if _SESSION is None:
        _SESSION = ShmemSession()
    return _SESSION


def is_shmem_library(lib) -> bool:
    """Whether a loaded generated library communicates (exports the SHMEM entry points)."""
    try:
        lib.cpufree_shmem_init  # noqa: B018 - dlsym lookup
    except AttributeError:
        return False
    return True


def attach_session(lib, source):
    """The process's SHMEM session, initialised in this program's library (see :mod:`.nvshmem`)."""
    shmem = session()
    shmem.attach(lib, gpu_count(), direct_stores=source.direct_stores)
    return shmem
