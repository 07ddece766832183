"""Runs one distributed stencil on every process of an MPI job and checks it against NumPy.

    mpirun -np 4 python -m npbench_runs.multigpu.run --program jacobi_2d --form plain --n 258 --steps 50
    mpirun -np 4 python -m npbench_runs.multigpu.run --framework dace_mpi --program jacobi_2d --n 258
    mpirun -np 8 python -m npbench_runs.multigpu.run --program jacobi_3d_grid --form plain --n 258 --steps 50
    mpirun -np 4 python -m npbench_runs.multigpu.run --program jacobi_3d --form distributed --n 258 --steps 50

Every process builds the global input, takes its tile, runs it on its GPU (one process per GPU), and
rank 0 gathers the tiles (mpi4py) and compares the global result with NumPy's. ``--framework cpufree``
(default) runs our persistent kernel (one PE per process) and times it with CUDA events around the kernel
(``timing: "kernel_event"``); the form ``distributed`` is the single-GPU program distributed by the compiler, called by
every rank with the global arrays, timed by wall clock with the device synchronised (``timing: "wall"``: the call's
scatter and gather are in each run, the slope over two step counts leaves them out); ``--framework dace_mpi`` runs
the upstream DaCe + MPI baseline (:mod:`.dace_mpi`; ``--form`` is ignored) and times the call by wall clock with the
device synchronised (``timing: "wall"``). With ``--json`` rank 0 prints one JSON line (sizes, time per step, error);
exit status 1 on a mismatch.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

from dace_cpufree.launcher import placement
from dace_cpufree.options import env

from . import DISTRIBUTED, FORMS, PROGRAMS

FRAMEWORKS = ("cpufree", "dace_mpi")


def _comm():
    try:
        from mpi4py import MPI
    except ImportError:
        return None
    return MPI.COMM_WORLD


def _abort_job() -> None:
    """After an error on this rank: prints it and ends every rank of the MPI job at once. Left to itself, a
    rank that raised would wait at exit (NVSHMEM's finalize is collective) for ranks that wait for it: the job
    hung until its timeout."""
    comm = _comm()
    if comm is None or comm.Get_size() == 1:
        return
    import traceback

    traceback.print_exc()
    sys.stderr.flush()
    comm.Abort(1)


def compile_symbols(program: str, npes: int, shape: tuple, specialize: bool = True) -> tuple[dict, dict]:
    """``(compiled in, passed per call)``: with ``specialize`` the tile sizes and the process grid are
    compile-time constants (what a production run does: static index arithmetic, and the halo rows and
    interior become provably disjoint, which saves grid syncs); otherwise all stay symbols."""
    module = PROGRAMS[program]
    if specialize:
        return module.symbols(npes, shape), {}
    return {}, module.symbols(npes)


def _per_step(report: dict, steps: int, ms: float, slope_steps: int | None, slope_ms: float | None) -> dict:
    """Time per step: with a second, longer run (``slope_steps``) the slope between the two, which leaves out
    what a run pays once (launch, the first touch of the peers' memory), reported as ``launch_us``; else the
    run's time over its steps."""
    report["us_per_step_one_run"] = 1e3 * ms / steps
    if not slope_steps or slope_ms is None:
        report["us_per_step"] = report["us_per_step_one_run"]
        return report
    per_step = (slope_ms - ms) / (slope_steps - steps)
    report.update(us_per_step=1e3 * per_step, launch_us=1e3 * (ms - steps * per_step), slope_steps=slope_steps)
    return report


def _run_cpufree(
    program, form, A, B, steps: int, repeat: int, specialize: bool = True, slope_steps=None, step_times=None
) -> tuple:
    """Our persistent kernel on this process's PE: final tiles and report fields (kernel time by CUDA events);
    ``step_times``: built with step timing, whose table every PE prints (``None``: as ``DACE_CPUFREE_STEP_TIMES``)."""

    import dace_cpufree

    module = PROGRAMS[program]
    size = placement().size
    fixed, per_call = compile_symbols(program, size, A.shape, specialize)
    prog = dace_cpufree.compile(getattr(module, form), symbols=fixed or None, step_times=step_times)

    def best(n: int) -> tuple:
        times = []
        for _ in range(repeat):
            a, b = A.copy(), B.copy()
            # fresh flags every run: they come back holding the last step's signals, and a wait for a value
            # already reached passes at once (the first run of this study reused them: races, wrong results)
            flags = np.zeros(module.FLAGS, dtype=np.uint64)
            prog(a, b, flags, n, **per_call)
            times.append(prog.last_kernel_ms)
        return a, b, min(times)

    a, b, ms = best(steps)
    slope_ms = best(slope_steps)[2] if slope_steps else None
    if prog.source.step_labels:  # built with step timing (--step-times): the last launch, per block
        rank = placement().rank
        table = prog.step_times().table(per=slope_steps or steps)
        print("\n".join(f"[pe {rank}] {line}" for line in table.splitlines()), flush=True)
    report = {"form": form, "specialized": specialize, "timing": "kernel_event", "kernel_ms": ms}
    report["launch"] = "x".join(str(v) for v in prog.launch_config)  # blocks x threads per block
    report["transport"] = "p2p" if prog.source.direct_stores else "proxy"  # what the kernel was built with
    report["step_times"] = bool(prog.source.step_labels)  # instrumented (--step-times): not a plain kernel's time
    return a, b, _per_step(report, steps, ms, slope_steps, slope_ms)


def _device_arrays():
    """CuPy where it is installed (the call's scatter and gather then stay on the GPU), else NumPy."""
    try:
        import cupy
    except ImportError:
        return np
    return cupy


def run_distributed(program: str, A0, B0, steps: int, repeat: int, slope_steps=None, **options) -> tuple:
    """The program's single-GPU version distributed by the compiler (``compile(single, distribute=...)``), called
    with the global arrays on this process's PE: ``(global A, global B, report fields)``; ``options``: of
    :func:`dace_cpufree.compile` (``backend="emulate", pes=P`` runs P emulated PEs in this process)."""
    import dace_cpufree

    module = PROGRAMS[program]
    if not hasattr(module, "single"):
        have = sorted(p for p, m in PROGRAMS.items() if hasattr(m, "single"))
        raise ValueError(f"{program} has no single-GPU version to distribute (these have: {', '.join(have)}).")
    xp = np if options.get("backend") == "emulate" else _device_arrays()
    prog = dace_cpufree.compile(module.single, distribute=module.DISTRIBUTE, **options)

    def best(n: int) -> tuple:
        times = []
        for _ in range(repeat):
            a, b = xp.array(A0), xp.array(B0)  # copies: every run starts from the initial arrays
            _synchronize(xp)
            t = time.perf_counter()
            prog(a, b, n)
            _synchronize(xp)
            times.append(1e3 * (time.perf_counter() - t))
        return a, b, min(times)

    a, b, ms = best(steps)
    slope_ms = best(slope_steps)[2] if slope_steps else None
    report = {"form": DISTRIBUTED, "specialized": False, "timing": "wall", "call_ms": ms}
    rows = -(-A0.shape[0] // prog.pes)  # each PE's owned rows of the split axis, one halo row on each side
    report["owned_shape"] = [rows, *A0.shape[1:]]
    host = (lambda x: x.get()) if xp is not np else np.asarray
    return host(a), host(b), _per_step(report, steps, ms, slope_steps, slope_ms)


def _synchronize(xp) -> None:
    if xp is not np:
        xp.cuda.Device().synchronize()


def run(
    program: str,
    form: str,
    n: int,
    steps: int,
    repeat: int = 1,
    check: bool = True,
    framework: str = "cpufree",
    device: str = "gpu",
    nx: int | None = None,
    specialize: bool = True,
    slope_steps: int | None = None,
    ny: int | None = None,
    step_times: bool | None = None,
) -> dict:
    """Runs on this process's GPU (``dace_mpi`` with ``device="cpu"``: on the CPU); returns rank 0's report
    (other ranks: their own timing only)."""
    module = PROGRAMS[program]
    where = placement()
    rank, size = where.rank, where.size
    middle = domain_extents(program, ny)
    module.check_size(n, size, nx, **middle)
    A0, B0 = module.initialize(n, nx, **middle)
    A, B = module.tile(A0, rank, size), module.tile(B0, rank, size)
    if framework == "cpufree" and form == DISTRIBUTED:
        a, b, fields = run_distributed(program, A0, B0, steps, repeat, slope_steps)
        a, b = module.tile(a, rank, size), module.tile(b, rank, size)  # every rank holds the global result
    elif framework == "cpufree":
        a, b, fields = _run_cpufree(program, form, A, B, steps, repeat, specialize, slope_steps, step_times)
    else:
        from . import dace_mpi

        if program not in dace_mpi.PROGRAMS:
            raise ValueError(f"{program} has no DaCe + MPI baseline (it has {', '.join(sorted(dace_mpi.PROGRAMS))}).")
        a, b, fields = dace_mpi.run(program, A, B, steps, repeat, device)
        slope_ms = dace_mpi.run(program, A, B, slope_steps, repeat, device)[2]["call_ms"] if slope_steps else None
        fields = _per_step(fields, steps, fields["call_ms"], slope_steps, slope_ms)
    report = {"framework": framework, "program": program, "gpus": size, **domain_fields(program, n, nx, ny)}
    report["local_shape"] = list(A.shape)
    report.update(steps=steps, **fields)
    tiles = _gather_tiles(_comm(), rank, size, a, b)
    if rank == 0 and check:
        ref_a, ref_b = _reference(module, program, A0, B0, steps)
        got_a, got_b = A0.copy(), B0.copy()
        for pe, (ta, tb) in enumerate(tiles):
            module.place(got_a, ta, pe, size)
            module.place(got_b, tb, pe, size)
        err = max(float(np.max(np.abs(got_a - ref_a))), float(np.max(np.abs(got_b - ref_b))))
        report.update(max_abs_error=err, bitwise=bool(np.array_equal(got_a, ref_a) and np.array_equal(got_b, ref_b)))
        report["valid"] = err <= 1e-12
    return report


def _gather_tiles(comm, rank: int, size: int, a: np.ndarray, b: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """Every PE's result tiles at rank 0 (other ranks: none), one PE at a time into buffers of their own. Buffer
    sends, not a pickled ``gather``: a pickled message of all tiles failed at 4 x 920 MB (MPI_ERR_ARG), and the
    tiles must reach rank 0 at any size that fits in its memory."""
    if comm is None or size == 1:
        return [(a, b)]
    shapes = comm.gather((a.shape, b.shape, a.dtype.str), root=0)
    if rank != 0:
        comm.Send(np.ascontiguousarray(a), dest=0, tag=0)
        comm.Send(np.ascontiguousarray(b), dest=0, tag=1)
        return []
    tiles = [(a, b)]
    for pe in range(1, size):
        sa, sb, dtype = shapes[pe]
        ta, tb = np.empty(sa, dtype=dtype), np.empty(sb, dtype=dtype)
        comm.Recv(ta, source=pe, tag=0)
        comm.Recv(tb, source=pe, tag=1)
        tiles.append((ta, tb))
    return tiles


def cached_arrays(name: str, compute) -> dict[str, np.ndarray]:
    """``compute()``'s arrays (a dict), kept as ``name.npz`` in ``$DACE_CPUFREE_REF_CACHE`` (a folder) when set:
    a scaling study validates many configurations against the same NumPy reference."""
    folder = env("DACE_CPUFREE_REF_CACHE")
    path = Path(folder) / f"{name}.npz" if folder else None
    if path is not None and path.exists():
        with np.load(path) as stored:
            return dict(stored)
    arrays = compute()
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.npz")
        np.savez(tmp, **arrays)
        os.replace(tmp, path)
    return arrays


def _reference(module, program: str, A0, B0, steps: int):
    """NumPy's result on the global domain (cached: :func:`cached_arrays`)."""

    def compute():
        ref_a, ref_b = A0.copy(), B0.copy()
        module.reference(ref_a, ref_b, steps)
        return {"A": ref_a, "B": ref_b}

    ref = cached_arrays(f"{program}_{'x'.join(map(str, A0.shape))}_{steps}", compute)
    return ref["A"], ref["B"]


def domain_extents(program: str, ny: int | None) -> dict:
    """The keyword of the global domain's middle extent for the program's functions (``ny``: jacobi_3d_grid's
    ``NX x NY x N`` domain), empty where it is not given."""
    if ny is None:
        return {}
    if program != "jacobi_3d_grid":
        raise ValueError(f"--ny: {program} has no middle extent of its own; only jacobi_3d_grid's NX x NY x N domain.")
    return {"ny": ny}


def domain_fields(program: str, n: int, nx: int | None, ny: int | None) -> dict:
    """A report's global domain, defaults filled in: ``n``, ``nx`` and, for jacobi_3d_grid, ``ny``."""
    return {"n": n, "nx": nx or n, **({"ny": ny or n} if program == "jacobi_3d_grid" else {})}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m npbench_runs.multigpu.run", description=__doc__)
    parser.add_argument("--framework", choices=FRAMEWORKS, default="cpufree")
    parser.add_argument("--device", choices=("gpu", "cpu"), default="gpu", help="dace_mpi only: cpu for testing")
    parser.add_argument("--program", choices=sorted(PROGRAMS), default="jacobi_2d")
    parser.add_argument("--form", choices=(*FORMS, DISTRIBUTED), default="plain")
    parser.add_argument("--n", type=int, default=130, help="global domain size N (N x N or N x N x N)")
    parser.add_argument(
        "--nx",
        type=int,
        default=None,
        help="extent of the first axis, default N (jacobi_2d: the rows of an NX x N domain)",
    )
    parser.add_argument(
        "--ny",
        type=int,
        default=None,
        help="jacobi_3d_grid: extent of the middle axis, default N (an NX x NY x N domain)",
    )
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument(
        "--slope-steps",
        type=int,
        default=None,
        help="also time this many steps: time per step is then the slope between the two runs (launch left out)",
    )
    parser.add_argument("--no-check", action="store_true")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--generic", action="store_true", help="cpufree: keep tile sizes symbolic (no specialisation)")
    parser.add_argument(
        "--step-times",
        action="store_true",
        help="cpufree: build with step timing (compile(..., step_times=True)) and print, on every PE, the last "
        "launch's time per segment and time step (min / mean / max over the blocks; lines prefixed [pe N])",
    )
    args = parser.parse_args(argv)
    try:
        domain_extents(args.program, args.ny)
    except ValueError as e:
        parser.error(str(e))
    t0 = time.perf_counter()
    check = not args.no_check
    try:
        report = run(
            args.program,
            args.form,
            args.n,
            args.steps,
            args.repeat,
            check,
            args.framework,
            args.device,
            args.nx,
            not args.generic,
            args.slope_steps,
            args.ny,
            args.step_times or None,
        )
    except BaseException:
        _abort_job()
        raise
    report["wall_s"] = time.perf_counter() - t0
    rank = placement().rank
    if rank != 0:
        return 0
    if args.json:
        print(json.dumps(report), flush=True)
    else:
        print(" ".join(f"{k}={v}" for k, v in report.items()), flush=True)
    return 0 if report.get("valid", True) else 1


if __name__ == "__main__":
    sys.exit(main())
