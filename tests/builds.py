"""The compile tests' builds: each program's generated code for NVIDIA (nvcc) and for AMD (hipcc, for the targets
of ``DACE_CPUFREE_HIP_ARCH``: conftest sets a CDNA and an RDNA one), each from the source generated for its dialect.

A compile test is parametrised over :data:`BACKENDS` and builds its program for ``backend`` (with :func:`built`, or
with ``kernel_source`` and ``build`` where it also reads the source), so that every program whose CUDA output CI
compiles has its HIP output compiled too."""

import pytest

import dace_cpufree
from dace_cpufree.runtime import build

#: The dialects a compile test builds for; the HIP one needs hipcc (marker ``hip``: CI installs it and never skips).
BACKENDS = ["cuda", pytest.param("hip", marks=pytest.mark.hip)]


def built(program, name: str, backend: str, shmem: bool = False, **options):
    """The shared library of ``program``'s code generated for ``backend`` (``options`` go to the generator),
    asserted non-empty."""
    source = dace_cpufree.kernel_source(program, backend=backend, **options)
    library = build(
        source.code,
        f"{name}_{backend}",
        backend,
        shmem=shmem,
        full_blocks=source.direct_stores,
        environments=source.environments,
    )
    assert library.exists() and library.stat().st_size > 0
    return library
