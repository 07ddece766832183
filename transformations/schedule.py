"""Enum members that dace-cpufree registers with DaCe."""

from dace import dtypes


def _register(enum, name: str):
    if name not in enum.__members__:
        enum.register(name)
    return enum[name]


#: A map of a persistent kernel: a grid-stride loop over all threads of the cooperative grid.
PERSISTENT_SCHEDULE = _register(dtypes.ScheduleType, "CPUFree_Persistent")
