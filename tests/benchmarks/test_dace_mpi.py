"""The upstream DaCe + MPI baseline (``npbench_runs.multigpu.dace_mpi``): SDFG shape, CPU runs, GPU build, GPU runs.

Building the SDFGs and generating their code needs neither MPI nor a GPU. The CPU variant runs under
``mpirun`` where Open MPI and mpi4py are installed (CI has neither: skipped there); the GPU variant is
compiled where nvcc and MPI headers are, and run on two GPUs by the ``multigpu`` test.
"""

import argparse
import shutil

import dace
import numpy as np
import pytest
from dace.libraries.comm.nodes import Irecv, Isend, Waitall

from dace_cpufree.options import env
from npbench_runs.multigpu import dace_mpi, scaling

TIMEOUT = env("DACE_CPUFREE_MULTIGPU_TIMEOUT")


def _library_nodes(sdfg: dace.SDFG) -> list:
    return [n for n, _ in sdfg.all_nodes_recursive() if isinstance(n, dace.nodes.LibraryNode)]


@pytest.mark.parametrize("program", sorted(dace_mpi.PROGRAMS))
def test_gpu_sdfg_has_mpi_nodes_on_host_and_stencils_on_gpu(program):
    sdfg = dace_mpi.sdfg_for(program, "gpu")
    kinds = {type(n) for n in _library_nodes(sdfg)}
    assert {Irecv, Isend, Waitall} <= kinds
    assert all(n.schedule != dace.ScheduleType.GPU_Device for n in _library_nodes(sdfg))
    maps = [n.map for n, _ in sdfg.all_nodes_recursive() if isinstance(n, dace.nodes.MapEntry)]
    assert len(maps) == 2 and all(m.schedule == dace.ScheduleType.GPU_Device for m in maps)  # one fused map per half
    assert sdfg.arrays["A"].storage == dace.StorageType.GPU_Global
    # every halo buffer is host memory (the GPU host's Open MPI is not CUDA-aware)
    for node in _library_nodes(sdfg):
        state = next(s for s in sdfg.states() if node in s.nodes())
        for edge in state.all_edges(node):
            assert sdfg.arrays[edge.data.data].storage != dace.StorageType.GPU_Global, edge.data.data


def test_gpu_code_stages_halos_through_host():
    code = "".join(c.clean_code for c in dace_mpi.sdfg_for("jacobi_2d", "gpu").generate_code())
    # upstream DaCe's code, without facts of ours: the baseline's MPI and CUDA calls are what is under test
    assert "MPI_Isend" in code and "MPI_Irecv" in code and "MPI_Waitall(8" in code
    assert "cudaMemcpyDeviceToHost" in code and "cudaMemcpyHostToDevice" in code
    assert "cudaMemcpy2DAsync" in code  # west/east columns are strided


def test_neighbours_follow_the_process_grid():
    null = -2
    nb = {k: int(v[0]) for k, v in dace_mpi.neighbours("jacobi_2d", 3, 6, null).items()}  # 2 x 3 grid, row 1 col 0
    assert nb == {"north": 0, "south": null, "west": null, "east": 4}
    nb = {k: int(v[0]) for k, v in dace_mpi.neighbours("jacobi_3d", 0, 2, null).items()}
    assert nb == {"lower": null, "upper": 1}
    assert all(v.dtype == np.int32 for v in dace_mpi.neighbours("jacobi_3d", 1, 3, null).values())


def test_scaling_summary_compares_frameworks():
    common = {"program": "jacobi_2d", "mode": "weak", "n": 34, "steps": 10}
    rows = [
        dict(common, framework="cpufree", form="plain", gpus=1, us_per_step=4.0),
        dict(common, framework="cpufree", form="overlapped", gpus=1, us_per_step=5.0),
        dict(common, framework="dace_mpi", form="mpi", gpus=1, us_per_step=20.0),
    ]
    scaling._summarise(rows)
    assert rows[0]["vs_dace_mpi"] == pytest.approx(5.0) and rows[1]["vs_dace_mpi"] == pytest.approx(4.0)
    assert rows[2]["efficiency"] == pytest.approx(1.0)
    table = scaling.comparison(rows)
    assert table[-1].startswith("| jacobi_2d | weak | 1 | 34 | 20.00 | 4.00 (plain) | 5.00")


def test_time_per_step_is_the_slope_between_two_runs():
    """What a run pays once (launch, first touch) stays out of the time per step; halo cost per exchange."""
    from npbench_runs.multigpu.run import _per_step

    r = _per_step({}, 100, 3.0, 500, 11.0)  # 1 ms once + 20 us per step
    assert r["us_per_step"] == pytest.approx(20.0) and r["launch_us"] == pytest.approx(1000.0)
    assert r["us_per_step_one_run"] == pytest.approx(30.0) and r["slope_steps"] == 500
    assert _per_step({}, 100, 3.0, None, None)["us_per_step"] == pytest.approx(30.0)
    common = {"framework": "cpufree", "program": "jacobi_3d", "mode": "weak", "form": "plain", "n": 130}
    rows = [dict(common, gpus=1, us_per_step=20.0), dict(common, gpus=2, us_per_step=26.64)]
    scaling._summarise(rows)
    assert rows[1]["halo_us_per_step"] == pytest.approx(6.64) and rows[1]["halo_vs_floor"] == pytest.approx(2.0)
    assert rows[1]["halo_us_per_exchange"] == pytest.approx(3.32) and rows[1]["exchange_vs_floor"] == pytest.approx(1.0)


def test_weak_slabs_that_are_not_cubes():
    """jacobi_3d's weak tile given as NXxN: the split axis grows with the GPUs, the planes keep their size."""
    assert scaling.parse_size("jacobi_3d=1026x130") == ("jacobi_3d", (1026, 130))
    assert scaling.parse_size("jacobi_2d=4098") == ("jacobi_2d", 4098)
    assert scaling.weak_n("jacobi_3d", 4, (1026, 130)) == (130, 4098, None)
    assert scaling.weak_n("jacobi_3d", 4, 258) == (258, 1026, None)
    assert scaling.weak_n("jacobi_2d", 4, 4098) == (8194, None, None)
    configs = list(scaling._configs(["jacobi_3d"], [1, 4], ("weak", "strong"), {"jacobi_3d": (1026, 130)}))
    assert configs == [("jacobi_3d", "weak", 1, 130, 1026, None), ("jacobi_3d", "weak", 4, 130, 4098, None),
                       ("jacobi_3d", "strong", 1, 130, 1026, None),
                       ("jacobi_3d", "strong", 4, 130, 1026, None)]  # fmt: skip
    with pytest.raises(ValueError, match="not square"):
        scaling.weak_n("jacobi_2d", 4, (4098, 1026))
    with pytest.raises(argparse.ArgumentTypeError, match="PROGRAM=NXxN"):
        scaling.parse_size("jacobi_3d=1026x130x130")


def test_jacobi_2d_weak_scaling_on_grids_that_are_not_square():
    """On 2 (1 x 2) and 8 (2 x 4) GPUs every PE keeps the 1-GPU square tile: the global domain is NX x N, its tiles
    cover it once, and sizes the grid does not divide are refused."""
    from npbench_runs.multigpu import jacobi_2d

    assert scaling.weak_n("jacobi_2d", 2, 130) == (258, 130, None)
    assert scaling.weak_n("jacobi_2d", 8, 130) == (514, 258, None)
    assert [c[2:] for c in scaling._configs(["jacobi_2d"], [1, 2, 4, 8], ("weak",), {"jacobi_2d": 130})] == [
        (1, 130, None, None),
        (2, 258, 130, None),
        (4, 258, None, None),
        (8, 514, 258, None),
    ]
    n, nx = 514, 258
    jacobi_2d.check_size(n, 8, nx)
    assert jacobi_2d.local_shape(n, 8, nx) == (130, 130)
    A, B = jacobi_2d.initialize(n, nx)
    assert A.shape == B.shape == (nx, n)
    rebuilt = np.zeros_like(A)
    rebuilt[0, :], rebuilt[-1, :], rebuilt[:, 0], rebuilt[:, -1] = A[0, :], A[-1, :], A[:, 0], A[:, -1]
    for pe in range(8):
        t = jacobi_2d.tile(A, pe, 8)
        assert t.shape == (130, 130)
        jacobi_2d.place(rebuilt, t, pe, 8)
    np.testing.assert_array_equal(rebuilt, A)
    with pytest.raises(ValueError, match="2 x 4 process grid"):
        jacobi_2d.check_size(514, 8, 259)


def test_each_tile_is_compared_with_its_own_one_gpu_run():
    """A run that sweeps several tiles: each p-GPU row's efficiency and halo cost against the 1-GPU row of its
    tile, and DaCe + MPI's against the same global domain (here two with the same N)."""
    rows = []
    for shape, t1, t4 in (((1026, 130, 130), 100.0, 104.0), ((258, 258, 258), 200.0, 212.0)):
        for gpus, t in ((1, t1), (4, t4)):
            nx = (shape[0] - 2) * gpus + 2
            common = {"program": "jacobi_3d", "mode": "weak", "gpus": gpus, "n": shape[1], "nx": nx,
                      "local_shape": list(shape), "us_per_step": t}  # fmt: skip
            rows.append(dict(common, framework="cpufree", form="overlapped"))
    rows.append(dict(rows[1], framework="dace_mpi", form="mpi", us_per_step=416.0))
    scaling._summarise(rows)
    assert rows[1]["efficiency"] == pytest.approx(100 / 104) and rows[1]["halo_us_per_exchange"] == pytest.approx(2.0)
    assert rows[3]["efficiency"] == pytest.approx(200 / 212) and rows[3]["halo_us_per_exchange"] == pytest.approx(6.0)
    assert rows[1]["vs_dace_mpi"] == pytest.approx(4.0) and "vs_dace_mpi" not in rows[3]
    assert scaling.comparison(rows)[-1].startswith("| jacobi_3d | weak | 4 | 4098x130 | 416.00 | 104.00 (overlapped)")


def _mpirun(np_: int, *args: str) -> dict:
    proc, report = scaling.mpirun_job(np_, ["--framework", "dace_mpi", *args], TIMEOUT)
    hung = proc.returncode in scaling.TIMED_OUT
    assert not hung, f"killed after {TIMEOUT} s (hang?):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    assert proc.returncode == 0 and report, f"rc={proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"
    return report


def _needs_mpi():
    if shutil.which("mpirun") is None:
        pytest.skip("needs mpirun (Open MPI or MPICH)")
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        pytest.skip("needs mpi4py")


@pytest.mark.parametrize(("np_", "program", "n"), [(2, "jacobi_2d", 34), (4, "jacobi_2d", 34), (2, "jacobi_3d", 18)])
def test_cpu_variant_under_mpirun_matches_numpy(np_, program, n):
    _needs_mpi()
    report = _mpirun(np_, "--device", "cpu", "--program", program, "--n", str(n), "--steps", "5", "--slope-steps", "9")
    assert report["gpus"] == np_ and report["device"] == "cpu" and report["timing"] == "wall"
    assert report["bitwise"] and report["valid"], report
    assert report["slope_steps"] == 9 and "launch_us" in report and report["us_per_step_one_run"] > 0


@pytest.mark.compile
def test_gpu_variant_builds_with_nvcc(monkeypatch, tmp_path):
    """Upstream DaCe generates and nvcc-compiles the GPU program (no GPU needed; MPI headers are)."""
    if shutil.which("mpicxx") is None:
        pytest.skip("needs MPI headers (mpicxx) to build the MPI library nodes")
    monkeypatch.setenv("DACE_CPUFREE_CACHE", str(tmp_path))
    assert dace_mpi.build("jacobi_3d", "gpu") > 0
    assert (dace_mpi.build_folder("jacobi_3d", "gpu") / "built").exists()
    assert dace_mpi.build("jacobi_3d", "gpu") == 0.0  # cached


@pytest.mark.multigpu
@pytest.mark.parametrize("program", sorted(dace_mpi.PROGRAMS))
def test_gpu_baseline_on_two_gpus_matches_numpy(program):
    _needs_mpi()
    n = {"jacobi_2d": 130, "jacobi_3d": 34}[program]
    report = _mpirun(2, "--program", program, "--n", str(n), "--steps", "20")
    assert report["gpus"] == 2 and report["device"] == "gpu"
    assert report["max_abs_error"] <= 1e-12 and report["valid"], report


def test_an_error_on_the_ranks_ends_the_job():
    """A size the process grid cannot split: every rank raises, the job ends at once with the error named (a
    rank that raised used to wait at exit for the others), not at the timeout."""
    _needs_mpi()
    proc, report = scaling.mpirun_job(2, ["--framework", "dace_mpi", "--device", "cpu", "--program", "jacobi_3d",
                                          "--n", "9", "--steps", "2"], TIMEOUT)  # fmt: skip
    assert proc.returncode not in scaling.TIMED_OUT and proc.returncode != 0 and report is None
    assert "must be divisible by 2 PEs" in proc.stderr
