"""NVIDIA MathDx (cuBLASDx, with the CUTLASS/CuTe copy it ships): the device-side matrix products of
``cpufree/gemm.cuh``, headers only, from the ``nvidia-mathdx`` wheel.

The environment ``CPUFreeMathDx`` (:mod:`dace_cpufree.vocabulary`) is what the product's expansion declares (DaCe
records it in the tasklet's ``environments``); the generator includes its ``kernel_headers`` and lists it in
``KernelSource.environments``, and the builder adds :func:`nvcc_flags` for it.
"""

from __future__ import annotations

import functools
import warnings
from pathlib import Path

from dace_cpufree.vocabulary import MATHDX_ENVIRONMENT as ENVIRONMENT  # noqa: F401 (re-exported)


@functools.cache
def include_dirs() -> tuple[Path, ...] | None:
    """cuBLASDx's and its CUTLASS copy's include folders in the installed wheel, ``None`` without it."""
    try:
        import nvidia.mathdx as mathdx
    except ImportError:
        return None
    root = Path(next(iter(mathdx.__path__)))
    dirs = (root / "include", root / "external" / "cutlass" / "include")
    found = (dirs[0] / "cublasdx.hpp").exists() and (dirs[1] / "cute").is_dir()
    return dirs if found else None


def nvcc_flags() -> list[str]:
    """Flags of a CUDA build whose kernel calls ``cpufree::gemm``. Without the wheel the products take the plain
    grid-stride path of gemm.cuh (correct, far slower), with a warning that says how to get the fast one."""
    dirs = include_dirs()
    if dirs is None:
        warnings.warn(
            "nvidia-mathdx is not installed: matrix products in the kernel use plain loops. "
            "Fix: pip install nvidia-mathdx==25.6.0 (headers only) for cuBLASDx's tensor-core products.",
            RuntimeWarning,
            stacklevel=3,
        )
        return ["-DCPUFREE_GEMM_PLAIN"]
    # cuBLASDx's headers evaluate constexpr functions in device code
    return ["--expt-relaxed-constexpr", *(f"-I{d}" for d in dirs)]
