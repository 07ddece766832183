"""Building HIP programs for AMD GPUs: hipcc's platform and targets.

``hipcc`` chooses NVIDIA's platform wherever ``nvcc`` is installed unless ``HIP_PLATFORM=amd`` says otherwise, and
builds for the GPUs it finds: the targets come from ``DACE_CPUFREE_HIP_ARCH`` (comma-separated ``gfx`` names, e.g.
``gfx90a,gfx1030``), else from the AMD GPUs of this machine (``rocm_agent_enumerator``), else the build is refused
with that fix. The wavefront size follows each target (the device code reads it from the compiler).
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess

from dace_cpufree.errors import BuildError
from dace_cpufree.options import env


@functools.lru_cache(maxsize=1)
def _local_targets() -> tuple[str, ...]:
    """The ``gfx`` names of this machine's AMD GPUs (none where ROCm's enumerator is missing or finds none)."""
    tool = shutil.which("rocm_agent_enumerator")
    if tool is None:
        return ()
    try:
        out = subprocess.run([tool], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return ()
    return tuple(sorted({t for t in out.split() if t.startswith("gfx") and t != "gfx000"}))


def hip_targets() -> list[str]:
    """The AMD targets of a HIP build: ``DACE_CPUFREE_HIP_ARCH``, else this machine's AMD GPUs."""
    chosen = env("DACE_CPUFREE_HIP_ARCH")
    targets = [t.strip() for t in chosen.split(",") if t.strip()] if chosen else list(_local_targets())
    if not targets:
        raise BuildError(
            "no AMD GPU was found to build the HIP code for. Fix: set DACE_CPUFREE_HIP_ARCH to the target of your "
            "GPU (e.g. gfx90a for an MI200, gfx1030 for an RX 6800; several comma-separated)."
        )
    return targets


def hipcc_command(inc: str, extra: list[str], link: list[str], source: str, output: str, libs: list[str]) -> list[str]:
    """hipcc's command for a shared library of ``source`` built for :func:`hip_targets`, with the flags of
    ``DACE_CPUFREE_HIP_FLAGS`` after the generated ones."""
    arch = [f"--offload-arch={t}" for t in hip_targets()]
    more = env("DACE_CPUFREE_HIP_FLAGS").split()
    return ["hipcc", "-O3", "-std=c++17", *arch, inc, *extra, *more, *link, source, "-o", output, *libs]


def hipcc_environment() -> dict[str, str]:
    """The environment of a hipcc run: AMD's platform, also where nvcc is installed."""
    return {**os.environ, "HIP_PLATFORM": "amd"}
