"""The public API: persistent_sdfg, generate_code, compile."""

from __future__ import annotations

import copy

import dace

from dace_cpufree.codegen import DIALECTS, KernelSource, generate
from dace_cpufree.errors import CpufreeError, LaunchError
from dace_cpufree.runtime import BACKENDS, PersistentProgram, build, gpu_count
from dace_cpufree.transformations import FusePersistentKernel


def _to_sdfg(program_or_sdfg) -> dace.SDFG:
    if isinstance(program_or_sdfg, dace.SDFG):
        return copy.deepcopy(program_or_sdfg)
    if hasattr(program_or_sdfg, "to_sdfg"):
        return program_or_sdfg.to_sdfg(simplify=True)
    raise CpufreeError(
        f"expected a @dace.program or a dace.SDFG, got {type(program_or_sdfg).__name__}. "
        "Fix: decorate the function with @dace.program."
    )


def persistent_sdfg(program_or_sdfg) -> dace.SDFG:
    """The SDFG of a program, transformed to run as one persistent cooperative kernel.

    The input is not modified. Raises :class:`NotPersistableError` naming what cannot be made persistent.
    """
    sdfg = _to_sdfg(program_or_sdfg)
    FusePersistentKernel().apply_pass(sdfg, {})
    sdfg.validate()
    return sdfg


def kernel_source(program_or_sdfg, backend: str = "cuda") -> KernelSource:
    """The generated source and the facts about it (kernel name, arguments, grid syncs)."""
    dialect = DIALECTS["cuda" if backend == "emulate" else backend]
    return generate(persistent_sdfg(program_or_sdfg), dialect)


def generate_code(program_or_sdfg, backend: str = "cuda") -> str:
    """The device code (kernel and host launcher) of a program, for ``backend`` ``"cuda"`` or ``"hip"``."""
    if backend not in DIALECTS:
        raise CpufreeError(f"unknown backend '{backend}'. Fix: use one of {', '.join(DIALECTS)}.")
    return kernel_source(program_or_sdfg, backend).code


def compile(program_or_sdfg, backend: str = "cuda") -> PersistentProgram:  # noqa: A001 - the API's name
    """Compiles a program into a callable that runs it as one persistent kernel.

    :param backend: ``"cuda"`` (NVIDIA GPUs), ``"hip"`` (AMD GPUs) or ``"emulate"``: the same CUDA
                    text built for the host and run by one thread, to test the generator without a GPU.
    """
    if backend not in BACKENDS:
        raise CpufreeError(f"unknown backend '{backend}'. Fix: use one of {', '.join(BACKENDS)}.")
    if backend == "cuda" and gpu_count() == 0:
        raise LaunchError(
            "no NVIDIA GPU is visible to this process. Fix: run on a GPU machine, or use "
            "backend='emulate' to run the generated kernel on the host."
        )
    sdfg = persistent_sdfg(program_or_sdfg)
    source = generate(sdfg, DIALECTS["cuda" if backend == "emulate" else backend])
    library = build(source.code, sdfg.name, backend)
    return PersistentProgram(sdfg, source, library, backend)
