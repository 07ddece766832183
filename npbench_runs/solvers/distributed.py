"""CG on the 2-D Poisson problem over several GPUs: our persistent kernels next to a host-driven CuPy CG.

    mpirun -np 2 python -m npbench_runs.solvers.distributed --framework cg --n 4096 --iters 50 --repeat 3 --json
    mpirun -np 2 python -m npbench_runs.solvers.distributed --framework cupy --n 4096 --iters 50 --json

One process per GPU (``local rank % GPUs``). Every rank builds the global right-hand side and takes its row tile
(:func:`.poisson.tile`, ``N`` divisible by the process count).

- ``cg`` / ``pipelined``: :func:`.poisson.cg_poisson_2d` / :func:`.poisson.pipelined_cg_poisson_2d` (one PE per
  process, NVSHMEM), sizes compiled in, one warm-up call, then ``--repeat`` calls, each with fresh zero flag
  arrays (flags that come back from a run hold its last signals: the next run's waits would pass at once). Time:
  CUDA events around the kernel (``last_kernel_ms``).
- ``cupy``: the recurrences of ``cg_poisson_2d`` (:func:`.recurrence.conjugate_gradient`) as a Python loop of
  CuPy calls on each rank's tile: before each product the edge rows of ``p`` go to the neighbours' halo rows, and
  each dot product is the global sum of the tiles' interior sums, read back to the host. Communication
  (``comm``): ``nccl`` (``cupy.cuda.nccl``: rows by ``send``/``recv`` in one group, sums by an ``allReduce`` of
  one element on the device) where it imports and a test reduction works on every rank, else
  ``mpi_host_staged`` (mpi4py: rows copied to the host, ``Sendrecv``, copied back; sums by ``allreduce`` of the
  floats); ``none`` on one rank (nothing to exchange: the one-GPU CuPy CG of :mod:`.bench`). Time: CUDA events
  around the whole solve, host round trips included, all ranks started together (a barrier before each).

Per rank the best (and median) of ``--repeat``; the report has the slowest rank's. Rank 0 gathers the ``x``
tiles and every rank's residual history and compares them with NumPy's run of the same recurrences on the
global grid (``reference_cg``, ``reference_pipelined_cg`` for ``pipelined``): relative error <= ``--rtol``. With
``--json`` rank 0 prints the report as one JSON line; exit status 1 if not validated. An error on any rank ends
the whole job (``MPI_Abort``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import numpy as np

from . import poisson
from .recurrence import conjugate_gradient

FRAMEWORKS = ("cg", "pipelined", "cupy")
PROGRAMS = {"cg": "cg_poisson_2d", "pipelined": "pipelined_cg_poisson_2d"}
#: ``--comm`` of the CuPy CG: ``auto`` tries NCCL and falls back to MPI with host staging.
COMMS = ("auto", "nccl", "mpi")
INNER = (slice(1, -1), slice(1, -1))


class Single:
    """One rank: no halo rows to exchange, sums are local."""

    name = "none"

    def exchange(self, p) -> None:
        pass

    def allsum(self, local) -> float:
        return float(local)


class HostStaged:
    """Rows through host memory with ``Sendrecv`` of an mpi4py communicator, sums with ``allreduce``.

    ``xp``: the tiles' array module (CuPy, or NumPy); ``proc_null``: ``MPI.PROC_NULL`` (no neighbour)."""

    name = "mpi_host_staged"

    def __init__(self, comm, xp, proc_null: int):
        self.comm, self.xp = comm, xp
        rank, size = comm.Get_rank(), comm.Get_size()
        self.up = rank - 1 if rank > 0 else proc_null  # the neighbour with the rows above this tile
        self.down = rank + 1 if rank < size - 1 else proc_null
        self.proc_null = proc_null
        self._host = getattr(xp, "asnumpy", np.array)

    def exchange(self, p) -> None:
        """First interior row to the rank above (its lower halo row), last one to the rank below (its upper halo
        row); this tile's halo rows from them. The global boundary rows stay as they are (zero)."""
        to_up, to_down = self._host(p[1]), self._host(p[-2])
        from_down, from_up = np.empty_like(to_up), np.empty_like(to_down)
        self.comm.Sendrecv(to_up, dest=self.up, sendtag=0, recvbuf=from_down, source=self.down, recvtag=0)
        self.comm.Sendrecv(to_down, dest=self.down, sendtag=1, recvbuf=from_up, source=self.up, recvtag=1)
        if self.down != self.proc_null:
            p[-1] = self.xp.asarray(from_down)
        if self.up != self.proc_null:
            p[0] = self.xp.asarray(from_up)

    def allsum(self, local) -> float:
        return self.comm.allreduce(float(local))


class Nccl:
    """Rows by NCCL ``send``/``recv`` (one group per exchange), sums by an ``allReduce`` of one element on the
    device, then read back. ``uid``: rank 0's ``nccl.get_unique_id()``, broadcast."""

    name = "nccl"

    def __init__(self, nccl, cp, uid: tuple, rank: int, size: int):
        self.nccl, self.cp, self.rank, self.size = nccl, cp, rank, size
        self.comm = nccl.NcclCommunicator(size, uid, rank)

    def exchange(self, p) -> None:
        if not p.flags.c_contiguous or p.dtype != np.float64:
            raise ValueError("the NCCL exchange sends whole rows of a C-contiguous float64 tile")
        nccl, count, dtype = self.nccl, p.shape[1], self.nccl.NCCL_FLOAT64
        stream = self.cp.cuda.get_current_stream().ptr
        nccl.groupStart()
        try:
            if self.rank > 0:
                self.comm.send(p[1].data.ptr, count, dtype, self.rank - 1, stream)
                self.comm.recv(p[0].data.ptr, count, dtype, self.rank - 1, stream)
            if self.rank < self.size - 1:
                self.comm.send(p[-2].data.ptr, count, dtype, self.rank + 1, stream)
                self.comm.recv(p[-1].data.ptr, count, dtype, self.rank + 1, stream)
        finally:
            nccl.groupEnd()

    def allsum(self, local) -> float:
        buf = self.cp.ascontiguousarray(local, dtype=self.cp.float64).reshape(1)
        stream = self.cp.cuda.get_current_stream().ptr
        self.comm.allReduce(buf.data.ptr, buf.data.ptr, 1, self.nccl.NCCL_FLOAT64, self.nccl.NCCL_SUM, stream)
        return float(buf[0])


def _nccl(comm, cp, size: int):
    """An :class:`Nccl` if NCCL imports on every rank and a test sum is right on every rank, else ``None``."""
    try:
        from cupy.cuda import nccl

        ok = bool(getattr(nccl, "available", False))
    except Exception:  # noqa: BLE001 - no NCCL in this CuPy: the MPI fallback
        nccl, ok = None, False
    if not all(comm.allgather(ok)):
        return None
    uid = None
    if comm.Get_rank() == 0:
        try:
            uid = nccl.get_unique_id()
        except Exception:  # noqa: BLE001
            uid = None
    uid = comm.bcast(uid, root=0)
    if uid is None:
        return None
    try:
        halo = Nccl(nccl, cp, uid, comm.Get_rank(), size)
        ok = halo.allsum(cp.ones(1)) == float(size)
    except Exception:  # noqa: BLE001 - reported by the fallback's name in the report
        halo, ok = None, False
    return halo if all(comm.allgather(ok)) else None


def communicator(comm, xp, choice: str = "auto"):
    """The exchange of the host-driven CG: :class:`Single` on one rank, else :class:`Nccl` (``auto``: where it
    works, ``nccl``: or an error) or :class:`HostStaged` (``mpi``)."""
    if comm is None or comm.Get_size() == 1:
        return Single()
    if choice in ("auto", "nccl"):
        halo = _nccl(comm, xp, comm.Get_size())
        if halo is not None:
            return halo
        if choice == "nccl":
            raise RuntimeError("NCCL (cupy.cuda.nccl) does not work on every rank; --comm auto falls back to MPI.")
    from mpi4py import MPI

    return HostStaged(comm, xp, MPI.PROC_NULL)


def distributed_cg(b, iters: int, halo, xp=np):
    """The recurrences of :func:`.poisson.cg_poisson_2d` on this rank's tile ``b`` (``LX x NY``, a halo row above
    and below): ``(x, hist)``. ``halo``: :class:`Single`, :class:`HostStaged`, :class:`Nccl` or anything with
    their ``exchange(p)`` and ``allsum(local)``; ``xp``: the tiles' array module."""
    q = xp.zeros_like(b)

    def apply(p):
        halo.exchange(p)
        q[INNER] = 4.0 * p[INNER] - p[:-2, 1:-1] - p[2:, 1:-1] - p[1:-1, :-2] - p[1:-1, 2:]
        return q

    return conjugate_gradient(apply, lambda u, v: halo.allsum(xp.sum(u[INNER] * v[INNER])), b, iters)


def _use_device(cp, local_rank: int) -> None:
    """The GPU that the runtime gives this process's PE (``DACE_CPUFREE_DEVICE``, else ``local rank % GPUs``)."""
    from dace_cpufree.runtime.nvshmem import pe_device

    cp.cuda.Device(pe_device(local_rank, cp.cuda.runtime.getDeviceCount())).use()


def _ours(framework: str, b_tile: np.ndarray, iters: int, repeat: int, cp) -> tuple[list, np.ndarray, np.ndarray]:
    import dace_cpufree

    program = PROGRAMS[framework]
    lx, ny = b_tile.shape
    run = dace_cpufree.compile(getattr(poisson, program), symbols={"LX": lx, "NY": ny})
    b, hist = cp.asarray(b_tile), cp.zeros(iters)
    x = cp.zeros_like(b)

    def call() -> float:
        flags = [cp.zeros(k, dtype=cp.uint64) for k in poisson.FLAGS[program]]  # fresh: no old signals
        run(b, x, hist, *flags)
        return run.last_kernel_ms * 1e3 / iters

    call()  # loads the library, initialises NVSHMEM, places the symmetric arrays
    times = [call() for _ in range(repeat)]
    return times, cp.asnumpy(x), cp.asnumpy(hist)


def _cupy(
    b_tile: np.ndarray, iters: int, repeat: int, cp, comm, choice: str
) -> tuple[list, np.ndarray, np.ndarray, str]:
    from .bench import _timed

    halo = communicator(comm, cp, choice)
    b = cp.asarray(b_tile)
    distributed_cg(b, 2, halo, cp)  # warm-up: kernels compiled, NCCL's connections made
    times = []
    for _ in range(repeat):
        cp.cuda.runtime.deviceSynchronize()
        if comm is not None:
            comm.Barrier()
        t, (x, hist) = _timed(lambda: distributed_cg(b, iters, halo, cp), 1, iters, cp)
        times += t
    return times, cp.asnumpy(x), hist, halo.name


def reference(pipelined: bool, n: int, iters: int) -> tuple[np.ndarray, np.ndarray]:
    """NumPy's ``(x, hist)`` on the global grid (cached: :func:`npbench_runs.multigpu.run.cached_arrays`)."""
    from npbench_runs.multigpu.run import cached_arrays

    def compute():
        solve = poisson.reference_pipelined_cg if pipelined else poisson.reference_cg
        x, hist = solve(poisson.initialize(n), iters)
        return {"x": x, "hist": hist}

    ref = cached_arrays(f"{'pipelined_' if pipelined else ''}cg_poisson_{n}_{iters}", compute)
    return ref["x"], ref["hist"]


def run(framework: str, n: int, iters: int, repeat: int = 3, rtol: float = 1e-6, comm_choice: str = "auto"):
    """Runs on this process's GPU; rank 0's report (other ranks: ``None``)."""
    import cupy as cp

    from dace_cpufree.launcher import placement
    from npbench_runs.multigpu.run import _comm, _gather_tiles

    from .bench import _rel

    where = placement()
    rank, size = where.rank, where.size
    comm = _comm()
    if comm is None and size > 1:
        raise RuntimeError(f"{size} ranks but no mpi4py: the tiles cannot be exchanged. Fix: pip install mpi4py.")
    shape = poisson.local_shape(n, size)
    _use_device(cp, where.local_rank)
    b_tile = poisson.tile(poisson.initialize(n), rank, size)
    if framework == "cupy":
        times, x, hist, how = _cupy(b_tile, iters, repeat, cp, comm, comm_choice)
        timing = "cuda_event_host_loop"
    else:
        times, x, hist = _ours(framework, b_tile, iters, repeat, cp)
        how, timing = "nvshmem", "kernel_event"
    best, median = min(times), statistics.median(times)
    if comm is not None and size > 1:
        from mpi4py import MPI

        best, median = comm.allreduce(best, op=MPI.MAX), comm.allreduce(median, op=MPI.MAX)
    tiles = _gather_tiles(comm, rank, size, x, np.asarray(hist))
    if rank != 0:
        return None
    x_ref, hist_ref = reference(framework == "pipelined", n, iters)
    got = np.zeros_like(x_ref)
    for pe, (tx, _) in enumerate(tiles):
        poisson.place(got, tx, pe, size)
    err_hist = max(_rel(th, hist_ref) for _, th in tiles)  # every rank's history: the same global norms
    err_x = _rel(got, x_ref)
    return {
        "gpu": cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)["name"].decode(),
        "gpus": size,
        "framework": framework,
        "comm": how,
        "timing": timing,
        "n": n,
        "iters": iters,
        "repeat": repeat,
        "local_shape": list(shape),
        "us_per_iter_best": best,
        "us_per_iter_median": median,
        "err_hist": err_hist,
        "err_x": err_x,
        "validated": bool(err_hist <= rtol and err_x <= rtol),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m npbench_runs.solvers.distributed",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--framework", choices=FRAMEWORKS, default="cg")
    ap.add_argument("--n", type=int, default=256, help="global grid side N (N x N unknowns, divisible by the ranks)")
    ap.add_argument("--iters", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--rtol", type=float, default=1e-6)
    ap.add_argument("--comm", choices=COMMS, default="auto", help="cupy: NCCL if it works (auto), or force one")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    try:
        report = run(args.framework, args.n, args.iters, args.repeat, args.rtol, args.comm)
    except BaseException:
        from npbench_runs.multigpu.run import _abort_job

        _abort_job()
        raise
    if report is None:
        return 0
    report["wall_s"] = time.perf_counter() - t0
    if args.json:
        print(json.dumps(report), flush=True)
    else:
        print(" ".join(f"{k}={v}" for k, v in report.items()), flush=True)
    return 0 if report["validated"] else 1


if __name__ == "__main__":
    sys.exit(main())
