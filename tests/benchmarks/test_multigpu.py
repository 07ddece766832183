"""GPU tests: the distributed stencils on 2 and 4 GPUs (and one PE alone) match NumPy on the global domain.

Each case is an ``mpirun -np <gpus>`` job under ``timeout -k 15`` (a hung persistent kernel holds
its GPU until killed; see ``scaling.mpirun_job``). Skipped without enough GPUs, or without mpirun.
"""

import shutil

import pytest

from dace_cpufree.options import env
from dace_cpufree.runtime import gpu_count
from npbench_runs.multigpu import scaling

SIZES = {"jacobi_2d": 130, "jacobi_3d": 34}
TIMEOUT = env("DACE_CPUFREE_MULTIGPU_TIMEOUT")


def _run(program: str, form: str, gpus: int, n: int, steps: int, extra: tuple = ()) -> dict:
    if gpu_count() < gpus:
        pytest.skip(f"needs {gpus} GPUs, {gpu_count()} present")
    if shutil.which("mpirun") is None:
        pytest.skip("needs mpirun")
    args = ["--program", program, "--form", form, "--n", str(n), "--steps", str(steps), *extra]
    proc, report = scaling.mpirun_job(gpus, args, TIMEOUT)
    hung = proc.returncode in scaling.TIMED_OUT
    assert not hung, f"killed after {TIMEOUT} s (hang?):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    assert proc.returncode == 0 and report, f"rc={proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"
    return report


@pytest.mark.multigpu
@pytest.mark.nvshmem
@pytest.mark.parametrize("gpus", [2, 4])
@pytest.mark.parametrize("form", ["plain", "overlapped"])
@pytest.mark.parametrize("program", ["jacobi_2d", "jacobi_3d"])
def test_distributed_stencil_matches_numpy(program, form, gpus):
    report = _run(program, form, gpus, SIZES[program], steps=20)
    assert report["gpus"] == gpus
    assert report["max_abs_error"] <= 1e-12, report
    assert report["valid"]


@pytest.mark.gpu
@pytest.mark.nvshmem
def test_odd_step_count_and_single_pe_agree():
    """One PE (no neighbours: every put and wait is skipped) gives NumPy's result too."""
    report = _run("jacobi_2d", "plain", 1, 66, steps=7)
    assert report["valid"] and report["max_abs_error"] <= 1e-12


@pytest.mark.multigpu
@pytest.mark.nvshmem
@pytest.mark.parametrize("program", ["jacobi_2d", "jacobi_3d"])
def test_overlapped_with_symbolic_sizes(program):
    """The overlapped form compiled with symbolic tile sizes (more grid syncs: halo rows and the interior
    are not provably disjoint) and the in-kernel halo buffer initialisation fenced by a PE barrier."""
    report = _run(program, "overlapped", 2, SIZES[program], steps=20, extra=("--generic",))
    assert report["valid"] and report["max_abs_error"] <= 1e-12, report
