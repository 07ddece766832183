"""The suite's distributed stencils (``npbench_runs/multigpu``): each PE's tiles cover the global domain, and every
stencil and form builds and device-links against NVSHMEM within the registers of full blocks.

Marked ``compile``: they run wherever nvcc is, and fail (never skip) in CI.
"""

import numpy as np
import pytest
from device_links import linked_registers

import dace_cpufree
from dace_cpufree.runtime import build
from npbench_runs.multigpu import FORMS, PROGRAMS, jacobi_2d, jacobi_3d


def _build(program, name, **options):
    source = dace_cpufree.kernel_source(program, **options)
    return build(source.code, name, "cuda", shmem=True, full_blocks=source.direct_stores)


@pytest.mark.parametrize("npes", [1, 2, 4, 8])
def test_tiles_cover_the_global_domain(npes):
    for module, n in ((jacobi_2d, 2 + 8 * 4), (jacobi_3d, 2 + 8 * 4)):
        glob = module.initialize(n)[0]
        out = np.zeros_like(glob)
        out[...] = glob
        out[(slice(1, -1),) * glob.ndim] = -1.0
        for pe in range(npes):
            module.place(out, module.tile(glob, pe, npes), pe, npes)
        assert np.array_equal(out, glob)


@pytest.mark.compile
@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("name", ["jacobi_2d", "jacobi_3d"])
def test_multigpu_stencils_compile(name, form):
    """With symbolic sizes, through NVSHMEM's calls. The direct stores of every stencil are built and device-linked
    below (test_direct_store_kernels_fit_full_blocks, sizes compiled in); jacobi_3d_grid's four builds are in
    tests/benchmarks/test_jacobi_3d_grid.py."""
    program = getattr(PROGRAMS[name], form)
    assert _build(program, f"{name}_{form}_proxy", shmem_transport="proxy").stat().st_size > 0


@pytest.mark.compile
@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_direct_store_kernels_fit_full_blocks(name, form, tmp_path):
    """A direct-store kernel is declared CPUFREE_FULL_BLOCKS, so after the device link one block of 1024
    threads (sm_90's limit, the build's default without a GPU) fits in sm_90's 65536 registers per SM:
    64 per thread at most. Without the bound Jacobi 2-D overlapped linked at 66 and ran 512-thread blocks."""
    sizes = {
        "jacobi_2d": dict(LX=1026, LY=1026, PY=2),
        "jacobi_3d": dict(LX=130, N=258),
        "jacobi_3d_grid": dict(LX=130, LY=130, LZ=130, PY=2, PZ=2),
    }[name]
    registers = linked_registers(getattr(PROGRAMS[name], form), "p2p", tmp_path, sizes)
    assert registers <= 65536 // 1024, registers
