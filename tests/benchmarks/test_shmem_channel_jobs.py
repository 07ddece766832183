"""The device <-> host channel in the suite's programs: the refusal of a library collective in the CG solver, the
PE barrier and the gather form of Allreduce built with the channel (marked ``compile``: they fail, never skip, in CI),
and ``mpirun`` jobs of :mod:`npbench_runs.multigpu.channel` on 2 GPUs (``multigpu``): a timeout on every PE, on one
PE, a wait that never ends reported in debug mode and stopped by a timeout without it, a timeout in a kernel with a
PE barrier; after each, a re-run on every PE matches NumPy.
"""

import shutil

import pytest

import dace_cpufree
from dace_cpufree.errors import CpufreeError
from dace_cpufree.options import env
from dace_cpufree.runtime import build, gpu_count
from npbench_runs.multigpu import jacobi_2d, scaling
from npbench_runs.solvers import poisson


def _source(program=jacobi_2d.plain, **options):
    return dace_cpufree.kernel_source(program, **options)


def test_a_library_collective_is_refused_and_pe_barriers_can_be_left():
    with pytest.raises(
        CpufreeError, match=r"Allreduce \(the SHMEM library's collective reduction\) at .*poisson.*Fix:"
    ):
        _source(poisson.cg_poisson_2d, progress=True, shmem_transport="proxy")
    # the gather form (direct stores) and the PE barrier before the first communication can be left: built
    code = _source(poisson.cg_poisson_2d, progress=True, shmem_transport="p2p").code
    assert "wait_ge" in code and "cpufree::channel::barrier_all();" in code
    assert "cpufree::channel::barrier_all();" in _source(jacobi_2d.overlapped, channel=True).code


@pytest.mark.compile
@pytest.mark.parametrize("transport", ["p2p", "proxy"])
def test_pe_barrier_and_allreduce_gather_form_with_the_channel_build(transport):
    sources = {"fenced": _source(jacobi_2d.overlapped, channel=True, shmem_transport=transport)}  # a PE barrier
    if transport == "p2p":  # the gather form of Allreduce (with NVSHMEM's calls it is the library's: refused)
        sources["cg"] = _source(
            poisson.cg_poisson_2d, progress=True, shmem_transport="p2p", symbols={"LX": 18, "NY": 16}
        )
    for name, source in sources.items():
        library = build(
            source.code, f"shmem_channel_{name}_{transport}", "cuda", shmem=True, full_blocks=source.direct_stores
        )
        assert library.stat().st_size > 0


# ---- GPU: mpirun jobs on 2 GPUs -----------------------------------------------------------------------------------
TIMEOUT = env("DACE_CPUFREE_MULTIGPU_TIMEOUT")


def _job(case: str, seconds: float = 1.0) -> dict:
    if gpu_count() < 2:
        pytest.skip(f"needs 2 GPUs, {gpu_count()} present")
    if shutil.which("mpirun") is None:
        pytest.skip("needs mpirun")
    args = ["--case", case, "--seconds", str(seconds)]
    proc, report = scaling.mpirun_job(2, args, TIMEOUT, module="npbench_runs.multigpu.channel")
    assert proc.returncode not in scaling.TIMED_OUT, f"hung:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    assert proc.returncode == 0 and report, f"rc={proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"
    assert report["again_error"] <= 1e-12, report  # every PE usable again: the re-run matches NumPy
    assert all(pe["again"] == "returned" for pe in report["pes"]), report
    return {pe["pe"]: pe for pe in report["pes"]}


@pytest.mark.multigpu
@pytest.mark.nvshmem
@pytest.mark.parametrize("case", ["timeout", "fenced"])
def test_timeout_stops_every_pe_and_they_run_again(case):
    """``fenced``: symbolic tile sizes, so the kernel fences its halo buffers with the PE barrier the channel can
    leave."""
    pes = _job(case)
    for pe in pes.values():
        assert pe["ended"] == "KernelCancelled" and pe["seconds"] < 10, pe


@pytest.mark.multigpu
@pytest.mark.nvshmem
def test_one_pe_stopping_stops_its_peer():
    pes = _job("one")
    assert pes[0]["ended"] == "KernelCancelled" and pes[0]["reason"] == "timeout", pes
    assert pes[1]["ended"] == "KernelCancelled" and pes[1]["reason"] == "PE 0, which stopped", pes
    assert pes[1]["seconds"] < 10, pes


@pytest.mark.multigpu
@pytest.mark.nvshmem
def test_a_wait_never_signalled_is_reported_and_stopped():
    pes = _job("hang")
    assert pes[0]["ended"] == "returned", pes  # PE 0 ran its fewer steps
    hang = pes[1]
    assert hang["ended"] == "KernelHang" and hang["seconds"] < 30, hang
    assert "PE 1" in hang["message"] and "SignalWait on flags[" in hang["message"] and "reach 11" in hang["message"]


@pytest.mark.multigpu
@pytest.mark.nvshmem
def test_a_timeout_ends_a_wait_never_signalled():
    pes = _job("stuck")
    assert pes[0]["ended"] == "returned", pes
    assert pes[1]["ended"] == "KernelCancelled" and pes[1]["reason"] == "timeout" and pes[1]["seconds"] < 10, pes
