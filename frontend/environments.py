"""DaCe environments of the SHMEM library: what a program that calls NVSHMEM or ROC_SHMEM needs.

dace-cpufree builds its kernels itself (``dace_cpufree.runtime.build``), so these mostly document the
dependency in DaCe's own terms; the headers are what the generated kernel includes.
"""

from __future__ import annotations

import dace.library


@dace.library.environment
class NVSHMEM:
    """NVIDIA NVSHMEM: device-initiated puts and signals. Needs relocatable device code (``-rdc=true``)
    and a device link against ``libnvshmem_device.a``; the host library is ``libnvshmem_host.so.3``."""

    cmake_minimum_version = None
    cmake_packages = []
    cmake_variables = {}
    cmake_includes = []
    cmake_libraries = []
    cmake_compile_flags = ["-rdc=true"]
    cmake_link_flags = []
    cmake_files = []
    headers = ["nvshmem.h", "nvshmemx.h"]
    state_fields = []
    init_code = ""
    finalize_code = ""
    dependencies = []


@dace.library.environment
class ROCSHMEM:
    """AMD rocSHMEM (the ROC_SHMEM library): the same model on AMD GPUs, bootstrapped through MPI."""

    cmake_minimum_version = None
    cmake_packages = []
    cmake_variables = {}
    cmake_includes = []
    cmake_libraries = []
    cmake_compile_flags = ["-fgpu-rdc"]
    cmake_link_flags = []
    cmake_files = []
    headers = ["rocshmem/rocshmem.hpp"]
    state_fields = []
    init_code = ""
    finalize_code = ""
    dependencies = []
