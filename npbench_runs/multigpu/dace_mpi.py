"""The baseline: the same two stencils as plain upstream DaCe programs with MPI halo exchange (``dace.comm``).

One process per GPU, the same decomposition as :mod:`.jacobi_2d` (PX x PY process grid, 4 neighbours) and
:mod:`.jacobi_3d` (split along the first axis, 2 neighbours), the same ``initialize``/``tile``/``place``/
``reference``. Each half-step is a DaCe GPU kernel launched from the host, then a host-side exchange:

1. the edge lines (planes) that a neighbour needs are copied from the GPU into host buffers (DaCe's copies:
   ``cudaMemcpy2DAsync`` for strided columns and plane interiors, then a stream synchronisation);
2. ``dace.comm.Irecv``/``dace.comm.Isend`` of the host buffers, ``dace.comm.Waitall`` of all eight (four)
   requests; a rank on the global boundary sends to and receives from ``MPI_PROC_NULL`` (no-ops), so every
   request is valid and one ``Waitall`` serves every rank;
3. the received buffers are copied into the halo ring on the GPU.

The halo buffers are host memory on purpose: the GPU host's Open MPI is not known to be CUDA-aware, so device
buffers are not handed to ``MPI_Isend``. Neighbour ranks are arguments (``north`` ... or ``lower``/``upper``: a
rank or ``MPI_PROC_NULL``), so one build serves every rank. Ranks and the tag are one-element arrays because
DaCe 2.0.0b1's frontend fails on ``dace.comm.Isend(buf, <symbol or constant>, <tag>, req[i])`` inside a loop
(docs/multigpu.md lists this and the other limits met). :func:`build` compiles with upstream DaCe only
(:func:`sdfg_for`: the stencil maps on the GPU, the tiles ``GPU_Global`` arguments, so CuPy arrays);
``device="cpu"`` is the same program without the GPU placement (for testing without a GPU).
"""

from __future__ import annotations

import hashlib
import os
import sys
import time
from pathlib import Path

import dace
import numpy as np
from dace.transformation.dataflow.map_fusion_vertical import MapFusionVertical

from dace_cpufree.runtime.build import cache_dir, exclusive

from . import jacobi_2d as _j2d

LX, LY, N = dace.symbol("LX"), dace.symbol("LY"), dace.symbol("N")
MPI_Request = dace.opaque("MPI_Request")
RANK = dace.int32[1]  # a neighbour's rank, or MPI_PROC_NULL


@dace.program
def jacobi_2d(
    A: dace.float64[LX, LY],
    B: dace.float64[LX, LY],
    TSTEPS: dace.int64,
    north: RANK,
    south: RANK,
    west: RANK,
    east: RANK,
):
    sn = np.empty((LY - 2,), dtype=np.float64)
    ss = np.empty((LY - 2,), dtype=np.float64)
    sw = np.empty((LX - 2,), dtype=np.float64)
    se = np.empty((LX - 2,), dtype=np.float64)
    rn = np.empty((LY - 2,), dtype=np.float64)
    rs = np.empty((LY - 2,), dtype=np.float64)
    rw = np.empty((LX - 2,), dtype=np.float64)
    re = np.empty((LX - 2,), dtype=np.float64)
    req = np.empty((8,), dtype=MPI_Request)
    tag = np.empty((1,), dtype=np.int32)
    tag[0] = 0
    for _ in range(TSTEPS):
        B[1:-1, 1:-1] = 0.2 * (A[1:-1, 1:-1] + A[1:-1, :-2] + A[1:-1, 2:] + A[2:, 1:-1] + A[:-2, 1:-1])
        if north[0] >= 0:
            sn[:] = B[1, 1:-1]
        if south[0] >= 0:
            ss[:] = B[LX - 2, 1:-1]
        if west[0] >= 0:
            sw[:] = B[1:-1, 1]
        if east[0] >= 0:
            se[:] = B[1:-1, LY - 2]
        dace.comm.Irecv(rn, north, tag, req[0])
        dace.comm.Irecv(rs, south, tag, req[1])
        dace.comm.Irecv(rw, west, tag, req[2])
        dace.comm.Irecv(re, east, tag, req[3])
        dace.comm.Isend(sn, north, tag, req[4])
        dace.comm.Isend(ss, south, tag, req[5])
        dace.comm.Isend(sw, west, tag, req[6])
        dace.comm.Isend(se, east, tag, req[7])
        dace.comm.Waitall(req)
        if north[0] >= 0:
            B[0, 1:-1] = rn
        if south[0] >= 0:
            B[LX - 1, 1:-1] = rs
        if west[0] >= 0:
            B[1:-1, 0] = rw
        if east[0] >= 0:
            B[1:-1, LY - 1] = re
        A[1:-1, 1:-1] = 0.2 * (B[1:-1, 1:-1] + B[1:-1, :-2] + B[1:-1, 2:] + B[2:, 1:-1] + B[:-2, 1:-1])
        if north[0] >= 0:
            sn[:] = A[1, 1:-1]
        if south[0] >= 0:
            ss[:] = A[LX - 2, 1:-1]
        if west[0] >= 0:
            sw[:] = A[1:-1, 1]
        if east[0] >= 0:
            se[:] = A[1:-1, LY - 2]
        dace.comm.Irecv(rn, north, tag, req[0])
        dace.comm.Irecv(rs, south, tag, req[1])
        dace.comm.Irecv(rw, west, tag, req[2])
        dace.comm.Irecv(re, east, tag, req[3])
        dace.comm.Isend(sn, north, tag, req[4])
        dace.comm.Isend(ss, south, tag, req[5])
        dace.comm.Isend(sw, west, tag, req[6])
        dace.comm.Isend(se, east, tag, req[7])
        dace.comm.Waitall(req)
        if north[0] >= 0:
            A[0, 1:-1] = rn
        if south[0] >= 0:
            A[LX - 1, 1:-1] = rs
        if west[0] >= 0:
            A[1:-1, 0] = rw
        if east[0] >= 0:
            A[1:-1, LY - 1] = re


@dace.program
def jacobi_3d(A: dace.float64[LX, N, N], B: dace.float64[LX, N, N], TSTEPS: dace.int64, lower: RANK, upper: RANK):
    s_lo = np.empty((N - 2, N - 2), dtype=np.float64)
    s_hi = np.empty((N - 2, N - 2), dtype=np.float64)
    r_lo = np.empty((N - 2, N - 2), dtype=np.float64)
    r_hi = np.empty((N - 2, N - 2), dtype=np.float64)
    req = np.empty((4,), dtype=MPI_Request)
    tag = np.empty((1,), dtype=np.int32)
    tag[0] = 0
    for _ in range(TSTEPS):
        B[1:-1, 1:-1, 1:-1] = (1.0 / 7.0) * (
            A[1:-1, 1:-1, 1:-1] + A[:-2, 1:-1, 1:-1] + A[2:, 1:-1, 1:-1] + A[1:-1, :-2, 1:-1]
            + A[1:-1, 2:, 1:-1] + A[1:-1, 1:-1, :-2] + A[1:-1, 1:-1, 2:]
        )  # fmt: skip
        if lower[0] >= 0:
            s_lo[:] = B[1, 1:-1, 1:-1]
        if upper[0] >= 0:
            s_hi[:] = B[LX - 2, 1:-1, 1:-1]
        dace.comm.Irecv(r_lo, lower, tag, req[0])
        dace.comm.Irecv(r_hi, upper, tag, req[1])
        dace.comm.Isend(s_lo, lower, tag, req[2])
        dace.comm.Isend(s_hi, upper, tag, req[3])
        dace.comm.Waitall(req)
        if lower[0] >= 0:
            B[0, 1:-1, 1:-1] = r_lo
        if upper[0] >= 0:
            B[LX - 1, 1:-1, 1:-1] = r_hi
        A[1:-1, 1:-1, 1:-1] = (1.0 / 7.0) * (
            B[1:-1, 1:-1, 1:-1] + B[:-2, 1:-1, 1:-1] + B[2:, 1:-1, 1:-1] + B[1:-1, :-2, 1:-1]
            + B[1:-1, 2:, 1:-1] + B[1:-1, 1:-1, :-2] + B[1:-1, 1:-1, 2:]
        )  # fmt: skip
        if lower[0] >= 0:
            s_lo[:] = A[1, 1:-1, 1:-1]
        if upper[0] >= 0:
            s_hi[:] = A[LX - 2, 1:-1, 1:-1]
        dace.comm.Irecv(r_lo, lower, tag, req[0])
        dace.comm.Irecv(r_hi, upper, tag, req[1])
        dace.comm.Isend(s_lo, lower, tag, req[2])
        dace.comm.Isend(s_hi, upper, tag, req[3])
        dace.comm.Waitall(req)
        if lower[0] >= 0:
            A[0, 1:-1, 1:-1] = r_lo
        if upper[0] >= 0:
            A[LX - 1, 1:-1, 1:-1] = r_hi


PROGRAMS = {"jacobi_2d": jacobi_2d, "jacobi_3d": jacobi_3d}
DEVICES = ("gpu", "cpu")
#: Thread-block shape of the stencil kernels (x runs along the last, contiguous axis): 256 threads, where DaCe's
#: default (``compiler.cuda.default_block_size``, 32 x 1 x 1) would give the baseline one warp per block.
BLOCK = {"jacobi_2d": [32, 8, 1], "jacobi_3d": [32, 4, 2]}


def sdfg_for(program: str, device: str = "gpu") -> dace.SDFG:
    """The SDFG of ``program``: simplified, the maps of each stencil fused into one; on the GPU, the stencil maps
    are kernels (``GPU_Device``) and the tiles ``A``, ``B`` device arguments, while the halo buffers, requests and
    communication nodes stay on the host, so DaCe copies the edges between the device and the host buffers.

    GPU placement is set directly rather than with ``apply_gpu_transformations``: that moves every transient
    (halo buffers, ``MPI_Request`` arrays) to the GPU and wraps the host tasklets that set ranks and requests in
    GPU maps, and its ``host_data`` option, which would keep them on the host, fails on library nodes in DaCe
    2.0.0b1 (docs/multigpu.md).
    """
    if device not in DEVICES:
        raise ValueError(f"device {device!r}: one of {DEVICES}")
    sdfg = PROGRAMS[program].to_sdfg(simplify=True)
    sdfg.name = f"dace_mpi_{program}_{device}"
    sdfg.apply_transformations_repeated(MapFusionVertical)
    if device == "gpu":
        for name in ("A", "B"):
            sdfg.arrays[name].storage = dace.StorageType.GPU_Global
        for state in sdfg.states():
            for node in state.nodes():
                if isinstance(node, dace.nodes.MapEntry) and _touches_tiles(state, node):
                    node.map.schedule = dace.ScheduleType.GPU_Device
                    node.map.gpu_block_size = BLOCK[program]
    sdfg.validate()
    return sdfg


def _touches_tiles(state: dace.SDFGState, entry: dace.nodes.MapEntry) -> bool:
    """Whether the top-level map of ``entry`` reads or writes the tiles (a stencil, not host bookkeeping)."""
    if state.entry_node(entry) is not None:
        return False
    edges = state.in_edges(entry) + state.out_edges(state.exit_node(entry))
    return any(e.data.data in ("A", "B") for e in edges)


def neighbours(program: str, rank: int, size: int, proc_null: int) -> dict[str, np.ndarray]:
    """The neighbour-rank arguments of ``rank``: ``north``/``south``/``west``/``east`` on the process grid of
    :func:`.jacobi_2d.process_grid` (``lower``/``upper`` along the first axis for ``jacobi_3d``), ``proc_null``
    where the tile touches the global boundary."""

    def arg(r: int, exists: bool) -> np.ndarray:
        return np.array([r if exists else proc_null], dtype=np.int32)

    if program == "jacobi_3d":
        return {"lower": arg(rank - 1, rank > 0), "upper": arg(rank + 1, rank < size - 1)}
    px, py = _j2d.process_grid(size)
    i, j = rank // py, rank % py
    return {
        "north": arg(rank - py, i > 0),
        "south": arg(rank + py, i < px - 1),
        "west": arg(rank - 1, j > 0),
        "east": arg(rank + 1, j < py - 1),
    }


def build_folder(program: str, device: str) -> Path:
    """Where ``program`` is built: under ``$DACE_CPUFREE_CACHE`` (else ``~/.cache/dace_cpufree``), keyed by this
    module's source, the DaCe version and the CUDA architecture, so every process of every job finds one build."""
    root = cache_dir()
    key = hashlib.sha256(Path(__file__).read_bytes() + f"{dace.__version__} {device} {_cuda_arch()}".encode())
    return root / "dace_mpi" / f"{program}_{device}_{key.hexdigest()[:12]}"


def _cuda_arch() -> str:
    return dace.Config.get("compiler", "cuda", "cuda_arch") or "90"


def build(program: str, device: str = "gpu") -> float:
    """Compiles ``program`` with upstream DaCe into :func:`build_folder`, unless it is built there; returns the
    compile time in seconds (0 when it was built already)."""
    folder = build_folder(program, device)
    folder.mkdir(parents=True, exist_ok=True)
    with exclusive(folder.parent / f".{folder.name}.lock"):  # beside the folder: DaCe may clear the folder itself
        if (folder / "built").exists():
            return 0.0
        t0 = time.perf_counter()
        sdfg = sdfg_for(program, device)
        sdfg.build_folder = str(folder)
        with dace.config.set_temporary("compiler", "cuda", "cuda_arch", value=_cuda_arch()):
            sdfg.compile()
        seconds = time.perf_counter() - t0
        (folder / "built").write_text(f"{seconds:.1f}\n")
        return seconds


def load(program: str, device: str = "gpu"):
    """The compiled ``program`` from :func:`build_folder` (built by :func:`build`)."""
    from dace.codegen.compiler import load_precompiled_sdfg

    return load_precompiled_sdfg(build_folder(program, device))


def select_gpu(local_rank: int) -> None:
    """Makes GPU ``local_rank % GPUs`` this process's only visible GPU (DaCe's generated code uses device 0).
    Must run before anything initialises CUDA in the process; the GPUs are counted without initialising it."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible:
        ids = [d for d in visible.split(",") if d]
    else:
        gpus = Path("/proc/driver/nvidia/gpus")
        ids = [str(i) for i in range(len(list(gpus.iterdir())) if gpus.is_dir() else 1)]
    os.environ["CUDA_VISIBLE_DEVICES"] = ids[local_rank % len(ids)]


def _symbols(program: str, shape: tuple) -> dict:
    return {"LX": shape[0], "LY": shape[1]} if program == "jacobi_2d" else {"LX": shape[0], "N": shape[1]}


def _compiled(program: str, device: str, comm) -> tuple:
    """(compiled program, compile seconds): built by rank 0 (unless cached), then loaded by every rank."""
    error, seconds = None, 0.0
    if comm.Get_rank() == 0:
        try:
            seconds = build(program, device)
        except Exception as exc:  # handed to the other ranks, which would otherwise wait for the build forever
            error = f"{type(exc).__name__}: {exc}"
    error, seconds = comm.bcast((error, seconds), root=0)
    if error is not None:
        raise RuntimeError(f"building the DaCe+MPI {program} ({device}) failed on rank 0: {error}")
    return load(program, device), seconds


def run(program: str, A: np.ndarray, B: np.ndarray, steps: int, repeat: int = 1, device: str = "gpu") -> tuple:
    """Runs ``program`` on this process's tiles ``A``, ``B`` (numbers of an ``mpirun`` job, rank ``r`` on GPU
    ``local rank % GPUs``); returns the final tiles (NumPy) and the report fields.

    Time per call is wall-clock, with the device synchronised and all ranks at a barrier before, the slowest
    rank's time, best of ``repeat``: upstream DaCe has no kernel-event timer. The tiles live on the GPU (CuPy
    arrays), so the time holds the kernels, the halo copies to and from the host, MPI, and the Python call.
    """
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    if device == "gpu":
        select_gpu(int(os.environ.get("OMPI_COMM_WORLD_LOCAL_RANK", os.environ.get("SLURM_LOCALID", rank))))
        import cupy as xp

        sync = xp.cuda.runtime.deviceSynchronize
    else:
        xp, sync = np, lambda: None
    prog, compile_s = _compiled(program, device, comm)
    args = dict(neighbours(program, rank, size, MPI.PROC_NULL), **_symbols(program, A.shape))
    prog(A=xp.array(A), B=xp.array(B), TSTEPS=0, **args)  # initialises the program (streams, MPI) untimed
    times = []
    for _ in range(repeat):
        a, b = xp.array(A), xp.array(B)
        sync()
        comm.Barrier()
        t0 = time.perf_counter()
        prog(A=a, B=b, TSTEPS=steps, **args)
        sync()
        times.append(comm.allreduce(time.perf_counter() - t0, op=MPI.MAX))
    a, b = (x.get() for x in (a, b)) if device == "gpu" else (a, b)
    best = min(times)
    report = {"form": "mpi", "device": device, "timing": "wall", "call_ms": 1e3 * best}
    report["compile_s"] = round(compile_s, 1)  # time per step: run._per_step, from call_ms
    return a, b, report


def main(argv=None) -> int:
    """``python -m npbench_runs.multigpu.dace_mpi jacobi_2d jacobi_3d``: builds them (once), prints
    ``{"program": compile seconds}`` as one JSON line."""
    import argparse
    import json

    parser = argparse.ArgumentParser(prog="python -m npbench_runs.multigpu.dace_mpi", description=main.__doc__)
    parser.add_argument("programs", nargs="+", choices=sorted(PROGRAMS))
    parser.add_argument("--device", choices=DEVICES, default="gpu")
    args = parser.parse_args(argv)
    print(json.dumps({p: round(build(p, args.device), 1) for p in args.programs}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
