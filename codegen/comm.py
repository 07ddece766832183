"""Generated code of a program that communicates (NVSHMEM / ROC_SHMEM): the SHMEM header and host entry points.

:func:`add_shmem_runtime` completes the text of :func:`~dace_cpufree.codegen.generate` for such a program:
``cpufree/shmem.cuh`` after the runtime header (SHMEM declarations, the collective launch and the
symmetric workspace behind the launcher's hooks) and the entry points of :data:`SHMEM_HOST_TEMPLATE`.
"""

from __future__ import annotations

import dace

from dace_cpufree.errors import CpufreeError
from dace_cpufree.vocabulary import communicates

from .host import SHMEM_HOST_TEMPLATE
from .kernel import KernelSource

RUNTIME_INCLUDE = "#include <cpufree/runtime.cuh>"
SHMEM_INCLUDE = "#include <cpufree/shmem.cuh>"


def add_shmem_runtime(source: KernelSource, sdfg: dace.SDFG) -> KernelSource:
    """``source`` with the SHMEM runtime when ``sdfg`` communicates, else ``source`` unchanged."""
    if not communicates(sdfg) or SHMEM_INCLUDE in source.code:
        return source
    if source.code.count(RUNTIME_INCLUDE) != 1:
        raise CpufreeError(f"generated code of '{sdfg.name}' does not include the runtime header once.")
    code = source.code.replace(RUNTIME_INCLUDE, f"{RUNTIME_INCLUDE}\n{SHMEM_INCLUDE}", 1)
    code += source.dialect.translate(SHMEM_HOST_TEMPLATE.format())
    source.code = code
    return source
