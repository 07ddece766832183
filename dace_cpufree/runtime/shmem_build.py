"""Compiler flags of programs that call NVSHMEM (or ROC_SHMEM) from device code.

NVSHMEM's device API is a static library (``libnvshmem_device.a``): the program is compiled as
relocatable device code (``-rdc=true``) and nvcc device-links it into the shared library, which then
holds NVSHMEM's device state (so it is also where NVSHMEM is initialised, see ``codegen/host.py``).
The library comes from the ``nvidia-nvshmem-cu13`` wheel (``import nvidia.nvshmem``), or from
``NVSHMEM_HOME``; its host part is linked by soname (the wheel ships no unversioned ``.so``) with an
rpath, so nothing needs ``LD_LIBRARY_PATH``.
"""

from __future__ import annotations

import os
from pathlib import Path

from dace_cpufree.errors import BuildError
from dace_cpufree.options import env


def nvshmem_home() -> Path:
    """The NVSHMEM installation: ``NVSHMEM_HOME``, else the ``nvidia-nvshmem-cu13`` wheel."""
    given = os.environ.get("NVSHMEM_HOME")
    if given:
        home = Path(given)
    else:
        try:
            import nvidia.nvshmem as wheel
        except ImportError:
            wheel = None
        if wheel is None:
            raise BuildError(
                "NVSHMEM was not found. Fix: pip install nvidia-nvshmem-cu13 (or dace-cpufree[nvshmem]), "
                "or set NVSHMEM_HOME to an NVSHMEM installation."
            )
        home = Path(list(wheel.__path__)[0])
    if not (home / "include" / "nvshmem.h").exists() or not (home / "lib" / "libnvshmem_device.a").exists():
        raise BuildError(f"{home} is not an NVSHMEM installation (no include/nvshmem.h or lib/libnvshmem_device.a).")
    return home


def _host_library(lib: Path) -> str:
    """Link argument of the host library: by soname (``libnvshmem_host.so.3``) when there is no ``.so``."""
    if (lib / "libnvshmem_host.so").exists():
        return "-lnvshmem_host"
    versioned = sorted(lib.glob("libnvshmem_host.so.*"))
    if not versioned:
        raise BuildError(f"no libnvshmem_host.so* in {lib}.")
    return f"-l:{versioned[0].name}"


def shmem_flags(backend: str) -> tuple[list[str], list[str]]:
    """``(compile flags, link flags)`` of a shared library: the link flags go after the source file."""
    wait = _wait_timeout()
    if backend == "hip":
        home = Path(os.environ.get("ROCSHMEM_HOME", "/opt/rocm"))
        link = ["-fgpu-rdc", "--hip-link", f"-L{home / 'lib'}", "-lrocshmem"]
        return ["-fgpu-rdc", f"-I{home / 'include'}", *wait], link
    if backend == "emulate":
        return emulation_flags(), []
    if backend != "cuda":
        raise BuildError(f"backend '{backend}' cannot build SHMEM programs. Fix: use backend='cuda' or 'hip'.")
    home = nvshmem_home()
    lib = home / "lib"
    flags = ["-rdc=true", f"-I{home / 'include'}", *wait]
    # The static device library's host code reaches the driver through the CUDA runtime: no -lcuda.
    return flags, [f"-L{lib}", _host_library(lib), "-lnvshmem_device", "-Xlinker", f"-rpath={lib}"]


def emulation_flags() -> list[str]:
    """Flags of the host emulation of several PEs (``cpufree/shmem_emulate.h``): every PE loads a copy of the library
    of its own, and each copy must keep its statics and bind its calls to itself. g++ makes the statics of inline
    functions and inline variables one object in the whole process (``STB_GNU_UNIQUE``) unless told otherwise;
    ``-Bsymbolic`` binds a library's references to its own definitions."""
    cxx = os.environ.get("CXX", "g++")
    unique = [] if "clang" in Path(cxx).name else ["-fno-gnu-unique"]
    return [*unique, "-pthread", "-Wl,-Bsymbolic"]


def _wait_timeout() -> list[str]:
    """``DACE_CPUFREE_WAIT_TIMEOUT_MS``: build SignalWait as a polling loop that traps after that long."""
    ms = env("DACE_CPUFREE_WAIT_TIMEOUT_MS")
    if ms is None:
        return []
    return [f"-DCPUFREE_WAIT_TIMEOUT_NS={int(ms * 1e6)}ull"]
