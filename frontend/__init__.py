"""The SHMEM library of dace-cpufree: ``Putmem``/``SignalWait``/``Allreduce`` library nodes with NVSHMEM and
ROC_SHMEM expansions, and the Python calls (:mod:`dace_cpufree.nvshmem`) that create them in a ``@dace.program``."""

from dace.library import register_library

from . import calls, norms, numpy_products, numpy_statistics, scans  # noqa: F401  (register the Python calls and NumPy functions)
from .allreduce import Allreduce, ExpandAllreduceNVSHMEM, ExpandAllreduceNVSHMEMP2P, ExpandAllreduceROCSHMEM
from .environments import NVSHMEM, ROCSHMEM
from .pe import N_PES_SYMBOL, PE_SYMBOL, PE_SYMBOLS
from .putmem import ExpandPutmemNVSHMEM, ExpandPutmemROCSHMEM, Putmem
from .signal_wait import ExpandSignalWaitNVSHMEM, ExpandSignalWaitROCSHMEM, SignalWait

register_library(__name__, "cpufree_shmem")

__all__ = [
    "Allreduce",
    "ExpandAllreduceNVSHMEM",
    "ExpandAllreduceNVSHMEMP2P",
    "ExpandAllreduceROCSHMEM",
    "NVSHMEM",
    "ROCSHMEM",
    "N_PES_SYMBOL",
    "PE_SYMBOL",
    "PE_SYMBOLS",
    "Putmem",
    "SignalWait",
    "ExpandPutmemNVSHMEM",
    "ExpandPutmemROCSHMEM",
    "ExpandSignalWaitNVSHMEM",
    "ExpandSignalWaitROCSHMEM",
]
