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
from npbench_runs.multigpu.run import run_distributed


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


@pytest.mark.parametrize("program, nx, n, pes", [("jacobi_2d", 17, 9, 3), ("jacobi_3d", 11, 7, 2)])
def test_the_distributed_form_matches_numpy_on_emulated_pes(program, nx, n, pes):
    """The benchmark's form "distributed" (the single-GPU program split by the compiler, called with the global arrays)
    on emulated PEs under the race checker: NumPy's result on the global domain (rows that do not divide evenly)."""
    module = PROGRAMS[program]
    A0, B0 = module.initialize(n, nx)
    a, b, fields = run_distributed(program, A0, B0, 3, 1, backend="emulate", pes=pes, race_check="shuffle")
    ref_a, ref_b = A0.copy(), B0.copy()
    module.reference(ref_a, ref_b, 3)
    assert np.allclose(a, ref_a, rtol=0, atol=1e-13) and np.allclose(b, ref_b, rtol=0, atol=1e-13)
    assert fields["form"] == "distributed" and fields["owned_shape"][0] == -(-nx // pes)
    assert fields["us_per_step"] > 0


def test_the_study_compares_the_distributed_form_with_the_faster_hand_written_one(monkeypatch):
    """``vs_hand_written``: the distributed form's time over the faster hand-written form's at the same configuration;
    the study builds the distributed program once (its sizes are arguments) and only where a program has one."""
    from npbench_runs.multigpu import scaling

    row = {"framework": "cpufree", "program": "jacobi_3d", "mode": "weak", "gpus": 2, "n": 130, "nx": 262}
    rows = [
        {**row, "form": "plain", "us_per_step": 10.0},
        {**row, "form": "overlapped", "us_per_step": 8.0},
        {**row, "form": "distributed", "us_per_step": 8.8},
    ]
    scaling._summarise(rows)
    assert rows[2]["vs_hand_written"] == pytest.approx(1.1) and "vs_hand_written" not in rows[0]
    built = []
    monkeypatch.setattr(scaling, "prebuild_programs", lambda todo, jobs: built.extend(todo) or [])
    configs = list(scaling._configs(["jacobi_3d", "jacobi_3d_grid"], [1, 2], ("weak",)))
    scaling.prebuild_all(configs, ["plain", "distributed"], 1)
    distributed = [b for b in built if b[2] == "single"]
    assert [b[0] for b in distributed] == ["jacobi_3d distributed"]
    assert distributed[0][3] == {"distribute": jacobi_3d.DISTRIBUTE}
    assert len([b for b in built if b[2] == "plain"]) == 4  # two programs on 1 and 2 GPUs, sizes compiled in
