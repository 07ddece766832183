"""Transformations and passes of dace-cpufree, registered with DaCe on import."""

from .communication import PrepareCommunication
from .early_puts import SplitForEarlyPuts
from .expand_libraries import ExpandLibraryNodesToDataflow
from .fuse_persistent import FusePersistentKernel, check_persistable
from .gemm import ExpandGemmCpufree
from .linalg import ExpandCholeskyCpufree, ExpandInvCpufree, ExpandSolveCpufree
from .matvec_pairs import PairMatVecProducts
from .schedule import PERSISTENT_SCHEDULE
from .schedule_threads import ScheduleThreads

__all__ = [
    "ExpandCholeskyCpufree",
    "ExpandGemmCpufree",
    "ExpandInvCpufree",
    "ExpandSolveCpufree",
    "ExpandLibraryNodesToDataflow",
    "FusePersistentKernel",
    "PairMatVecProducts",
    "PERSISTENT_SCHEDULE",
    "ScheduleThreads",
    "PrepareCommunication",
    "SplitForEarlyPuts",
    "check_persistable",
]
