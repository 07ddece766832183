"""dace-cpufree: whole DaCe programs as one persistent cooperative GPU kernel.

>>> import dace_cpufree
>>> run = dace_cpufree.compile(my_dace_program)      # one kernel, launched once per call
>>> print(dace_cpufree.generate_code(my_dace_program))
"""

from dace_cpufree import transformations  # noqa: F401  (registers enum members with DaCe)
from dace_cpufree.api import compile, generate_code, kernel_source, persistent_sdfg, prebuild
from dace_cpufree.channel import notify, progress
from dace_cpufree.errors import (
    ArgumentError,
    BuildError,
    CommunicationError,
    CpufreeError,
    KernelCancelled,
    LaunchError,
    NotPersistableError,
    RaceError,
)
from dace_cpufree.frontend.gridscope import blocks, mapgridscope

__version__ = "0.1.0"

__all__ = [
    "ArgumentError",
    "BuildError",
    "CommunicationError",
    "CpufreeError",
    "KernelCancelled",
    "LaunchError",
    "NotPersistableError",
    "RaceError",
    "blocks",
    "compile",
    "generate_code",
    "kernel_source",
    "mapgridscope",
    "notify",
    "persistent_sdfg",
    "prebuild",
    "progress",
]
