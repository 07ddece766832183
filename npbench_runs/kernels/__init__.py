"""Benchmark kernel definitions (Polybench / NPBench semantics, own implementations).

Each module exposes NAME, CATEGORY, program (a ``@dace.program``), reference
(plain NumPy), PRESETS, initialize(**preset), OUTPUTS, RTOL and ATOL.
The matrix-product kernels (gemm, k2mm, k3mm, doitgen) also expose product_flops(**preset), their products'
floating-point operations, for the report's TFLOP/s.
"""

from . import (
    adi,
    atax,
    bicg,
    cg_residual,
    conv2d_bias,
    covariance,
    doitgen,
    fdtd_2d,
    gemm,
    gemver,
    gesummv,
    go_fast,
    hdiff,
    heat_3d,
    jacobi_1d,
    jacobi_2d,
    k2mm,
    k3mm,
    mlp,
    mvt,
    softmax,
    syr2k,
    vadv,
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
        mlp,
        conv2d_bias,
        go_fast,
        hdiff,
        vadv,
        covariance,
        syr2k,
        doitgen,
    )
}


def get(name):
    """Return the kernel module registered under ``name``."""
    try:
        return KERNELS[name]
    except KeyError:
        raise KeyError(f"unknown kernel {name!r}; known: {sorted(KERNELS)}") from None


__all__ = ["KERNELS", "get"]
