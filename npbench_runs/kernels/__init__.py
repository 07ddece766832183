"""Benchmark kernel definitions (Polybench / NPBench semantics, own implementations).

Each module exposes NAME, CATEGORY, program (a ``@dace.program``), reference
(plain NumPy), PRESETS, initialize(**preset), OUTPUTS, RTOL and ATOL.
"""

from . import (
    adi,
    atax,
    bicg,
    cg_residual,
    fdtd_2d,
    gemm,
    gemver,
    gesummv,
    heat_3d,
    jacobi_1d,
    jacobi_2d,
    k2mm,
    k3mm,
    mvt,
    softmax,
)

KERNELS = {
    m.NAME: m
    for m in (
        jacobi_1d,
        jacobi_2d,
        heat_3d,
        fdtd_2d,
        adi,
        softmax,
        gemm,
        atax,
        bicg,
        mvt,
        gesummv,
        gemver,
        k2mm,
        k3mm,
        cg_residual,
    )
}


def get(name):
    """Return the kernel module registered under ``name``."""
    try:
        return KERNELS[name]
    except KeyError:
        raise KeyError(f"unknown kernel {name!r}; known: {sorted(KERNELS)}") from None


__all__ = ["KERNELS", "get"]
