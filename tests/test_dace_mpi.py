"""The upstream DaCe + MPI baseline (``npbench_runs.multigpu.dace_mpi``): SDFG shape, CPU runs, GPU build, GPU runs.

Building the SDFGs and generating their code needs neither MPI nor a GPU. The CPU variant runs under
``mpirun`` where Open MPI and mpi4py are installed (CI has neither: skipped there); the GPU variant is
compiled where nvcc and MPI headers are, and run on two GPUs by the ``multigpu`` test.
"""

import os
import shutil

import dace
import numpy as np
import pytest
from dace.libraries.comm.nodes import Irecv, Isend, Waitall

from npbench_runs.multigpu import dace_mpi, scaling

TIMEOUT = int(os.environ.get("DACE_CPUFREE_MULTIGPU_TIMEOUT", "300"))


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
