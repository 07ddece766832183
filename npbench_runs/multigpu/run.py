"""Runs one distributed stencil on every process of an MPI job and checks it against NumPy.

    mpirun -np 4 python -m npbench_runs.multigpu.run --program jacobi_2d --form plain --n 258 --steps 50

Every process builds the global input, takes its tile, runs the persistent kernel on its GPU (one PE
per process), and rank 0 gathers the tiles (mpi4py) and compares the global result with NumPy's. With
``--json`` rank 0 prints one JSON line (sizes, time per step, error); exit status 1 on a mismatch.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np

from dace_cpufree.runtime.nvshmem import launch_environment

from . import FORMS, PROGRAMS


def _comm():
    try:
        from mpi4py import MPI
    except ImportError:
        return None
    return MPI.COMM_WORLD


def run(program: str, form: str, n: int, steps: int, repeat: int = 1, check: bool = True) -> dict:
    """Runs on this process's PE; returns rank 0's report (other ranks: their own timing only)."""
    import dace_cpufree

    module = PROGRAMS[program]
    rank, size, _ = launch_environment()
    module.check_size(n, size)
    A0, B0 = module.initialize(n)
    A, B = module.tile(A0, rank, size), module.tile(B0, rank, size)
    prog = dace_cpufree.compile(getattr(module, form))
    flags = np.zeros(module.FLAGS, dtype=np.uint64)
    times = []
    for _ in range(repeat):
        a, b = A.copy(), B.copy()
        prog(a, b, flags, steps, **module.symbols(size))
        times.append(prog.last_kernel_ms)
    report = {
        "program": program,
        "form": form,
        "gpus": size,
        "n": n,
        "local_shape": list(A.shape),
        "steps": steps,
        "kernel_ms": min(times),
        "us_per_step": 1e3 * min(times) / steps,
        "launch": list(prog.launch_config),
    }
    comm = _comm()
    tiles = comm.gather((a, b), root=0) if comm is not None and size > 1 else [(a, b)]
    if rank == 0 and check:
        ref_a, ref_b = A0.copy(), B0.copy()
        module.reference(ref_a, ref_b, steps)
        got_a, got_b = A0.copy(), B0.copy()
        for pe, (ta, tb) in enumerate(tiles):
            module.place(got_a, ta, pe, size)
            module.place(got_b, tb, pe, size)
        err = max(float(np.max(np.abs(got_a - ref_a))), float(np.max(np.abs(got_b - ref_b))))
        report.update(max_abs_error=err, bitwise=bool(np.array_equal(got_a, ref_a) and np.array_equal(got_b, ref_b)))
        report["valid"] = err <= 1e-12
    return report


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m npbench_runs.multigpu.run", description=__doc__)
    parser.add_argument("--program", choices=sorted(PROGRAMS), default="jacobi_2d")
    parser.add_argument("--form", choices=FORMS, default="plain")
    parser.add_argument("--n", type=int, default=130, help="global domain size N (N x N or N x N x N)")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--no-check", action="store_true")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    report = run(args.program, args.form, args.n, args.steps, args.repeat, not args.no_check)
    report["wall_s"] = time.perf_counter() - t0
    rank, _, _ = launch_environment()
    if rank != 0:
        return 0
    if args.json:
        print(json.dumps(report), flush=True)
    else:
        print(" ".join(f"{k}={v}" for k, v in report.items()), flush=True)
    return 0 if report.get("valid", True) else 1


if __name__ == "__main__":
    sys.exit(main())
