"""The device <-> host channel on several PEs: cancel, timeout and hang reports of a distributed Jacobi 2-D.

    mpirun -np 2 python -m npbench_runs.multigpu.channel --case timeout    # every PE: timeout, then a correct re-run
    mpirun -np 2 python -m npbench_runs.multigpu.channel --case one        # PE 0 alone times out: its peers stop too
    mpirun -np 2 python -m npbench_runs.multigpu.channel --case hang       # PE 0 runs fewer steps: debug_waits report
    mpirun -np 2 python -m npbench_runs.multigpu.channel --case stuck      # the same without debug_waits: timeout
    mpirun -np 2 python -m npbench_runs.multigpu.channel --case fenced     # symbolic tiles: a PE barrier, timeout

Every PE runs ``jacobi_2d``'s plain form (:mod:`.jacobi_2d`; ``fenced``: the overlapped form with symbolic tile
sizes, whose kernel fences its halo buffers with a PE barrier) with the channel on, far more steps than it can finish
(or, for ``hang``/``stuck``, PE 0 fewer steps than its peers, so they wait for a signal that never comes), and
records how the call ended: the exception's type and message and the seconds from the call to its end. Then every
PE runs the same compiled program again for a few steps, and rank 0 checks the global result against NumPy: the
PEs and GPUs stay usable after a stop. Rank 0 prints one JSON line (``--json``) with every PE's record.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np

from dace_cpufree.launcher import placement

from . import PROGRAMS
from .run import _abort_job, _comm, _gather_tiles, _reference, compile_symbols

CASES = ("timeout", "one", "hang", "stuck", "fenced")
LONG = 10**9  # steps of a run that is stopped


def _options(case: str, rank: int, seconds: float) -> dict:
    """The compile options of a case on this PE."""
    if case == "timeout":
        return {"timeout": seconds, "progress": "text"}
    if case == "fenced":
        return {"timeout": seconds}
    if case == "one":
        return {"timeout": seconds} if rank == 0 else {"channel": True}
    if case == "hang":
        return {"debug_waits": seconds, "timeout": 60.0}
    return {"timeout": seconds}  # stuck


def _steps(case: str, rank: int) -> int:
    """Steps of the stopped run: ``hang`` and ``stuck`` give PE 0 fewer, so its peers wait for it."""
    if case in ("hang", "stuck"):
        return 10 if rank == 0 else 20
    return LONG


def _call(prog, A, B, flags, steps, sizes) -> dict:
    """One call: how it ended and how long it took. ``sizes``: the size symbols passed per call."""
    t0 = time.perf_counter()
    try:
        prog(A, B, flags, steps, **sizes)
        ended = {"ended": "returned"}
    except Exception as err:  # noqa: BLE001 - the record names it
        ended = {"ended": type(err).__name__, "message": str(err)}
        for key in ("reason", "site", "syncs", "source", "block"):
            if hasattr(err, key):
                ended[key] = getattr(err, key)
    ended["seconds"] = round(time.perf_counter() - t0, 3)
    return ended


def run(case: str, n: int, seconds: float, steps: int) -> dict:
    import dace_cpufree

    module = PROGRAMS["jacobi_2d"]
    where = placement()
    rank, size = where.rank, where.size
    module.check_size(n, size, None)
    A0, B0 = module.initialize(n, None)
    A, B = module.tile(A0, rank, size), module.tile(B0, rank, size)
    fenced = case == "fenced"  # symbolic tile sizes: the kernel initialises its halo buffers behind a PE barrier
    fixed, sizes = compile_symbols("jacobi_2d", size, A.shape, specialize=not fenced)
    form = module.overlapped if fenced else module.plain
    prog = dace_cpufree.compile(form, symbols=fixed or None, **_options(case, rank, seconds))
    flags = np.zeros(module.FLAGS, np.uint64)
    record = {"pe": rank, **_call(prog, A.copy(), B.copy(), flags, _steps(case, rank), sizes)}
    a, b = A.copy(), B.copy()
    again = _call(prog, a, b, np.zeros(module.FLAGS, np.uint64), steps, sizes)
    record["again"] = again["ended"]
    records = _comm().gather(record, root=0) if size > 1 else [record]
    tiles = _gather_tiles(_comm(), rank, size, a, b)
    if rank != 0:
        return {}
    ref_a, ref_b = _reference(module, "jacobi_2d", A0, B0, steps)
    got_a, got_b = A0.copy(), B0.copy()
    for pe, (ta, tb) in enumerate(tiles):
        module.place(got_a, ta, pe, size)
        module.place(got_b, tb, pe, size)
    err = max(float(np.max(np.abs(got_a - ref_a))), float(np.max(np.abs(got_b - ref_b))))
    return {"case": case, "gpus": size, "n": n, "seconds": seconds, "pes": records, "again_error": err}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m npbench_runs.multigpu.channel", description=__doc__)
    parser.add_argument("--case", choices=CASES, default="timeout")
    parser.add_argument("--n", type=int, default=130, help="global domain size N (N x N)")
    parser.add_argument("--seconds", type=float, default=1.0, help="the timeout (debug_waits for --case hang)")
    parser.add_argument("--steps", type=int, default=20, help="steps of the run after the stop, checked")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    try:
        report = run(args.case, args.n, args.seconds, args.steps)
    except BaseException:
        _abort_job()
        raise
    if placement().rank == 0:
        print(json.dumps(report) if args.json else report, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
