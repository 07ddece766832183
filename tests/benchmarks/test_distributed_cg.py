"""The multi-GPU CG next to a host-driven CuPy CG (``npbench_runs/solvers/distributed.py``, ``scaling.py``).

CPU: the host-driven CG on NumPy tiles against the NumPy reference on the global grid, on one rank and on two and
four ranks run as threads of this process with a small stand-in for the mpi4py communicator (the halo rows and
the neighbour bookkeeping of the MPI path); the scaling script's commands and table from made-up reports.
GPU (``multigpu``): ``mpirun -np 2`` for our kernel and the CuPy CG at a small size, validated.
"""

import os
import queue
import shutil
import threading

import numpy as np
import pytest

from dace_cpufree.options import env
from dace_cpufree.runtime import gpu_count
from npbench_runs.multigpu import scaling as multigpu_scaling
from npbench_runs.solvers import distributed, poisson
from npbench_runs.solvers import scaling as cg_scaling

PROC_NULL = -2
TIMEOUT = env("DACE_CPUFREE_MULTIGPU_TIMEOUT")


def _rel(a, b) -> float:
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


class ThreadComm:
    """What :class:`distributed.HostStaged` uses of an mpi4py communicator, for ranks that are threads of one
    process: ``Sendrecv`` by one queue per (source, destination, tag), ``allreduce`` (sum) at a barrier."""

    def __init__(self, rank: int, world: dict):
        self.rank, self.world = rank, world

    def Get_rank(self) -> int:
        return self.rank

    def Get_size(self) -> int:
        return self.world["size"]

    def _queue(self, src: int, dst: int, tag: int) -> queue.Queue:
        with self.world["lock"]:
            return self.world["queues"].setdefault((src, dst, tag), queue.Queue())

    def Sendrecv(self, sendbuf, dest, sendtag, recvbuf, source, recvtag):
        if dest != PROC_NULL:
            self._queue(self.rank, dest, sendtag).put(np.array(sendbuf))
        if source != PROC_NULL:
            recvbuf[...] = self._queue(source, self.rank, recvtag).get(timeout=10)

    def allreduce(self, value: float) -> float:
        slots, barrier = self.world["slots"], self.world["barrier"]
        slots[self.rank] = value
        barrier.wait(timeout=10)
        total = sum(slots[r] for r in range(self.world["size"]))  # rank order: the same sum on every rank
        barrier.wait(timeout=10)
        return total


def _threads(b: np.ndarray, iters: int, npes: int, halo=distributed.HostStaged) -> tuple:
    """The host-driven CG of every PE's tile of ``b`` on its own thread: the global ``x`` and each PE's history."""
    world = {"size": npes, "lock": threading.Lock(), "queues": {}, "slots": {}, "barrier": threading.Barrier(npes)}
    results, errors = {}, []

    def rank(pe: int) -> None:
        try:
            exchange = halo(ThreadComm(pe, world), np, PROC_NULL)
            results[pe] = distributed.distributed_cg(poisson.tile(b, pe, npes), iters, exchange, np)
        except BaseException as e:  # noqa: BLE001 - re-raised by the test
            errors.append(e)
            world["barrier"].abort()

    threads = [threading.Thread(target=rank, args=(pe,)) for pe in range(npes)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    if errors:
        raise errors[0]
    x = np.zeros_like(b)
    for pe in range(npes):
        poisson.place(x, results[pe][0], pe, npes)
    return x, [results[pe][1] for pe in range(npes)]


def test_one_rank_is_the_reference():
    b = poisson.initialize(24)
    x, hist = distributed.distributed_cg(b.copy(), 15, distributed.Single(), np)
    x_ref, hist_ref = poisson.reference_cg(b, 15)
    assert _rel(hist, hist_ref) <= 1e-13 and _rel(x, x_ref) <= 1e-13


@pytest.mark.parametrize("npes", [2, 4])
def test_tiles_exchanged_through_the_host_match_the_global_reference(npes):
    """Every tile's halo rows come from its neighbours (the outer ones stay the zero boundary): the distributed
    solve is the global one up to the dot products' summation order."""
    b = poisson.initialize(32)
    x, hists = _threads(b, 20, npes)
    x_ref, hist_ref = poisson.reference_cg(b, 20)
    assert _rel(x, x_ref) <= 1e-10
    for hist in hists:
        assert _rel(hist, hist_ref) <= 1e-10
        np.testing.assert_array_equal(hist, hists[0])  # every rank reduced to the same sums


def test_a_missing_exchange_is_seen():
    """The check above is not blind: tiles whose halo rows are never refreshed give a different solve."""

    class SumsOnly(distributed.HostStaged):
        def exchange(self, p):
            pass

    b = poisson.initialize(32)
    x, _ = _threads(b, 20, 2, SumsOnly)
    assert _rel(x, poisson.reference_cg(b, 20)[0]) > 1e-3


def test_one_rank_communicator_is_single():
    assert isinstance(distributed.communicator(None, np), distributed.Single)


def test_job_command():
    args = cg_scaling.job_args("cupy", 4096, 50, 3)
    assert args == ["--framework", "cupy", "--n", "4096", "--iters", "50", "--repeat", "3", "--rtol", "1e-06",
                    "--comm", "auto"]  # fmt: skip
    assert "--comm" not in cg_scaling.job_args("pipelined", 256, 400, 3)
    cmd, env = multigpu_scaling.mpirun_command(2, args, 120, cg_scaling.MODULE)
    assert cmd[:4] == ["timeout", "-k", "15", "120"]
    if os.environ.get("OMPI_COMM_WORLD_SIZE") is None:
        assert cmd[cmd.index("mpirun") :][:6] == ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2", "-x"]
    at = cmd.index("-m")
    assert cmd[at + 1] == "npbench_runs.solvers.distributed" and cmd[at + 2 :] == [*args, "--json"]
    assert env["NVSHMEM_DISABLE_NVLS"] == "1"
    # the stencils' jobs keep their module
    cmd, _ = multigpu_scaling.mpirun_command(2, ["--program", "jacobi_2d"], 120)
    assert cmd[cmd.index("-m") + 1] == "npbench_runs.multigpu.run"


def test_configurations_and_an_indivisible_size():
    got = list(cg_scaling.configs([1, 2], [256, 4096], [400, 50], ["cg", "cupy"]))
    assert got[:4] == [("cg", 1, 256, 400), ("cupy", 1, 256, 400), ("cg", 2, 256, 400), ("cupy", 2, 256, 400)]
    assert len(got) == 8 and got[-1] == ("cupy", 2, 4096, 50)
    row = cg_scaling.run_one("cg", 3, 256, 10, 1, 60)  # no job started: 256 rows do not split into 3
    assert "error" in row and row["gpus"] == 3


def test_efficiency_and_ratio_from_reports(tmp_path):
    def report(framework, gpus, us):
        return {"gpu": "NVIDIA H100", "framework": framework, "gpus": gpus, "n": 4096, "iters": 50,
                "local_shape": [4096 // gpus + 2, 4098], "us_per_iter_best": us, "validated": True}  # fmt: skip

    rows = [report("cg", 1, 100.0), report("cupy", 1, 400.0), report("cg", 2, 62.5), report("cupy", 2, 500.0)]
    rows.append({"framework": "pipelined", "gpus": 2, "n": 4096, "iters": 50, "error": "rc=1"})
    cg_scaling.summarise(rows)
    assert rows[0]["efficiency"] == 1.0 and rows[2]["efficiency"] == pytest.approx(0.8)
    assert rows[3]["efficiency"] == pytest.approx(0.4)
    assert rows[0]["cupy_over_ours"] == 4.0 and rows[2]["cupy_over_ours"] == 8.0
    assert "cupy_over_ours" not in rows[1] and "efficiency" not in rows[4]
    cg_scaling.write(rows, tmp_path)
    md = (tmp_path / "cg_scaling.md").read_text()
    assert "NVIDIA H100" in md.splitlines()[0] and "rc=1" in md and "| 8.000 |" in md
    assert len((tmp_path / "cg_scaling.jsonl").read_text().splitlines()) == 5
    assert (tmp_path / "cg_scaling.csv").read_text().startswith("gpu,framework,comm,gpus")


@pytest.mark.multigpu
@pytest.mark.nvshmem
@pytest.mark.parametrize("framework", ["cg", "cupy"])
def test_two_gpus_match_numpy(framework):
    if gpu_count() < 2:
        pytest.skip(f"needs 2 GPUs, {gpu_count()} present")
    if shutil.which("mpirun") is None:
        pytest.skip("needs mpirun")
    args = cg_scaling.job_args(framework, 64, 20, 1)
    proc, report = multigpu_scaling.mpirun_job(2, args, TIMEOUT, cg_scaling.MODULE)
    assert proc.returncode not in multigpu_scaling.TIMED_OUT, f"killed after {TIMEOUT} s (hang?)\n{proc.stderr[-3000:]}"
    assert proc.returncode == 0 and report, f"rc={proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"
    assert report["gpus"] == 2 and report["local_shape"] == [34, 66]
    assert report["validated"], report
