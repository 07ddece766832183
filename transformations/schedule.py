"""The schedule type of a persistent kernel's maps (registered with DaCe in :mod:`dace_cpufree.vocabulary`)."""

from dace_cpufree.vocabulary import PERSISTENT_SCHEDULE

__all__ = ["PERSISTENT_SCHEDULE"]
