"""Block functions (``@mapgridscope``) against the same steps one after another, on a GPU, in one run.

    python -m npbench_runs.block_scopes_bench                    # on a GPU machine
    python -m npbench_runs.block_scopes_bench --steps 200 --repeats 5 --json out.json

Two independent 2-D Jacobi stencils (grids of ``--n1`` and ``--n2`` points a side) advanced in one time loop, two
half-steps each per iteration:

- ``concurrent``: a grid function with one block function per stencil; the grid's blocks are split by their work,
  each stencil's half-steps are ordered by a barrier of its own blocks, and nothing waits for the whole grid;
- ``one after another``: the same statements in sequence, compiled with ``concurrent_steps=False``; every
  half-step is a grid-wide step behind a grid sync;
- ``CuPy``: the same statements on CuPy arrays (a kernel launch per array expression).

NPBench's gemver (``npbench_runs.kernels.gemver``) compiled both ways, its runs alternating so that both see the
same machine state (``gemver``): its small independent steps (``beta * y`` beside the rank-2 update of ``A``) are
the kind the compiler places side by side.

A periodic 2-D Jacobi whose edge rows and columns are copied after each step (``side_by_side``): the two row copies
and the two column copies are independent small steps, which the compiler runs side by side on blocks of their
own (``concurrent_steps=True``, the default) or one after another on the whole grid (``False``).

The 1-D Jacobi of the paper's Listing 7 on one PE (its puts land in its own halo cells): the first and last blocks
compute and send the edge cells while the rest of the grid computes the interior (``overlapped``), against the
whole step followed by the two puts (``plain``).

Every result is checked against NumPy. Times are kernel times from device events (CuPy: CUDA events around the
loop), the median of ``--repeats`` runs, per time step.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys

import dace
import numpy as np

import dace_cpufree
from dace_cpufree import mapgridscope, nvshmem

N1, N2, N = dace.symbol("N1"), dace.symbol("N2"), dace.symbol("N")
Grid1, Grid2 = dace.float64[N1, N1], dace.float64[N2, N2]


@mapgridscope
def two_stencils(
    A1: dace.float64[N1, N1], B1: dace.float64[N1, N1], A2: dace.float64[N2, N2], B2: dace.float64[N2, N2]
):
    def first():
        B1[1:-1, 1:-1] = 0.2 * (A1[1:-1, 1:-1] + A1[:-2, 1:-1] + A1[2:, 1:-1] + A1[1:-1, :-2] + A1[1:-1, 2:])
        A1[1:-1, 1:-1] = 0.2 * (B1[1:-1, 1:-1] + B1[:-2, 1:-1] + B1[2:, 1:-1] + B1[1:-1, :-2] + B1[1:-1, 2:])

    def second():
        B2[1:-1, 1:-1] = 0.2 * (A2[1:-1, 1:-1] + A2[:-2, 1:-1] + A2[2:, 1:-1] + A2[1:-1, :-2] + A2[1:-1, 2:])
        A2[1:-1, 1:-1] = 0.2 * (B2[1:-1, 1:-1] + B2[:-2, 1:-1] + B2[2:, 1:-1] + B2[1:-1, :-2] + B2[1:-1, 2:])


@dace.program
def concurrent(
    A1: dace.float64[N1, N1],
    B1: dace.float64[N1, N1],
    A2: dace.float64[N2, N2],
    B2: dace.float64[N2, N2],
    T: dace.int64,
):
    for _ in range(T):
        two_stencils(A1, B1, A2, B2)


@dace.program
def one_after_another(
    A1: dace.float64[N1, N1],
    B1: dace.float64[N1, N1],
    A2: dace.float64[N2, N2],
    B2: dace.float64[N2, N2],
    T: dace.int64,
):
    for _ in range(T):
        B1[1:-1, 1:-1] = 0.2 * (A1[1:-1, 1:-1] + A1[:-2, 1:-1] + A1[2:, 1:-1] + A1[1:-1, :-2] + A1[1:-1, 2:])
        A1[1:-1, 1:-1] = 0.2 * (B1[1:-1, 1:-1] + B1[:-2, 1:-1] + B1[2:, 1:-1] + B1[1:-1, :-2] + B1[1:-1, 2:])
        B2[1:-1, 1:-1] = 0.2 * (A2[1:-1, 1:-1] + A2[:-2, 1:-1] + A2[2:, 1:-1] + A2[1:-1, :-2] + A2[1:-1, 2:])
        A2[1:-1, 1:-1] = 0.2 * (B2[1:-1, 1:-1] + B2[:-2, 1:-1] + B2[2:, 1:-1] + B2[1:-1, :-2] + B2[1:-1, 2:])


def stencils_reference(xp, A1, B1, A2, B2, T):
    """NumPy (``xp=numpy``) or CuPy: the two stencils, in place."""
    for _ in range(T):
        for A, B in ((A1, B1), (A2, B2)):
            B[1:-1, 1:-1] = 0.2 * (A[1:-1, 1:-1] + A[:-2, 1:-1] + A[2:, 1:-1] + A[1:-1, :-2] + A[1:-1, 2:])
            A[1:-1, 1:-1] = 0.2 * (B[1:-1, 1:-1] + B[:-2, 1:-1] + B[2:, 1:-1] + B[1:-1, :-2] + B[1:-1, 2:])


@mapgridscope
def relax_and_send(A: dace.float64[N], B: dace.float64[N], flags: dace.uint64[2], t: dace.int64):
    def left():
        B[1] = (A[0] + A[1] + A[2]) / 3.0
        me, npes = nvshmem.my_pe(), nvshmem.n_pes()
        nvshmem.Putmem(B[N - 1 : N], B[1:2], (me + npes - 1) % npes, flags[1], t)

    def right():
        B[N - 2] = (A[N - 3] + A[N - 2] + A[N - 1]) / 3.0
        me, npes = nvshmem.my_pe(), nvshmem.n_pes()
        nvshmem.Putmem(B[0:1], B[N - 2 : N - 1], (me + 1) % npes, flags[0], t)

    def interior():
        B[2 : N - 2] = (A[1 : N - 3] + A[2 : N - 2] + A[3 : N - 1]) / 3.0


@dace.program
def overlapped(A: dace.float64[N], B: dace.float64[N], flags: dace.uint64[2], T: dace.int64):
    nvshmem.my_pe(), nvshmem.n_pes()  # the PE symbols, which the block functions use
    for t in range(1, T + 1):
        relax_and_send(A, B, flags, t)
        nvshmem.SignalWait(flags[0], t)
        nvshmem.SignalWait(flags[1], t)
        A[:] = B[:]


@dace.program
def plain(A: dace.float64[N], B: dace.float64[N], flags: dace.uint64[2], T: dace.int64):
    me, npes = nvshmem.my_pe(), nvshmem.n_pes()
    for t in range(1, T + 1):
        B[1 : N - 1] = (A[0 : N - 2] + A[1 : N - 1] + A[2:N]) / 3.0
        nvshmem.Putmem(B[N - 1 : N], B[1:2], (me + npes - 1) % npes, flags[1], t)
        nvshmem.Putmem(B[0:1], B[N - 2 : N - 1], (me + 1) % npes, flags[0], t)
        nvshmem.SignalWait(flags[0], t)
        nvshmem.SignalWait(flags[1], t)
        A[:] = B[:]


@dace.program
def periodic_2d(A: Grid1, B: Grid1, T: dace.int64):
    """A 2-D Jacobi step, then the edges copied from the opposite interior rows and columns: two pairs of small
    independent steps per iteration (rows, then columns: the corners order them)."""
    for _ in range(T):
        B[1:-1, 1:-1] = 0.25 * (A[:-2, 1:-1] + A[2:, 1:-1] + A[1:-1, :-2] + A[1:-1, 2:])
        B[0, :] = B[N1 - 2, :]
        B[N1 - 1, :] = B[1, :]
        B[:, 0] = B[:, N1 - 2]
        B[:, N1 - 1] = B[:, 1]
        A[:] = B[:]


def periodic_2d_reference(A, B, T):
    A, B = A.copy(), B.copy()
    for _ in range(T):
        B[1:-1, 1:-1] = 0.25 * (A[:-2, 1:-1] + A[2:, 1:-1] + A[1:-1, :-2] + A[1:-1, 2:])
        B[0, :], B[-1, :] = B[-2, :], B[1, :]
        B[:, 0], B[:, -1] = B[:, -2], B[:, 1]
        A[:] = B
    return A, B


def jacobi_1d_reference(A, T):
    A = A.copy()
    for _ in range(T):
        B = A.copy()
        B[1:-1] = (A[:-2] + A[1:-1] + A[2:]) / 3.0
        B[0], B[-1] = B[-2], B[1]
        A = B
    return A


def _median_ms(run, args, kwargs, repeats):
    times = []
    for _ in range(repeats):
        fresh = [a.copy() for a in args]
        run(*fresh, **kwargs)
        times.append(run.last_kernel_ms)
    return statistics.median(times), fresh


def bench_stencils(n1: int, n2: int, steps: int, repeats: int) -> dict:
    rng = np.random.default_rng(0)
    args = [rng.random((n1, n1)), np.zeros((n1, n1)), rng.random((n2, n2)), np.zeros((n2, n2))]
    ref = [a.copy() for a in args]
    stencils_reference(np, *ref, steps)
    out = {"n1": n1, "n2": n2, "steps": steps}
    for name, program in (("concurrent", concurrent), ("one after another", one_after_another)):
        run = dace_cpufree.compile(program, concurrent_steps=program is concurrent)
        run(*[a.copy() for a in args], T=1)  # build and first launch
        ms, got = _median_ms(run, args, {"T": steps}, repeats)
        ok = all(np.allclose(g, r, rtol=1e-12, atol=1e-12) for g, r in zip(got, ref))
        source = run.source
        out[name] = {
            "ms_per_step": ms / steps,
            "valid": ok,
            "grid_syncs": source.grid_syncs,
            "part_syncs": source.part_syncs,
            "launch": list(run.launch_config),
        }
        out["device"] = run.device_name()
    try:
        import cupy as cp

        dev = [cp.asarray(a) for a in args]
        stencils_reference(cp, *dev, 1)
        times = []
        for _ in range(repeats):
            dev = [cp.asarray(a) for a in args]
            start, stop = cp.cuda.Event(), cp.cuda.Event()
            start.record()
            stencils_reference(cp, *dev, steps)
            stop.record()
            stop.synchronize()
            times.append(cp.cuda.get_elapsed_time(start, stop))
        ok = all(np.allclose(cp.asnumpy(g), r, rtol=1e-12, atol=1e-12) for g, r in zip(dev, ref))
        out["CuPy"] = {"ms_per_step": statistics.median(times) / steps, "valid": ok}
    except ImportError:
        out["CuPy"] = None
    return out


def bench_listing7(n: int, steps: int, repeats: int) -> dict:
    rng = np.random.default_rng(1)
    A = rng.random(n)
    ref = jacobi_1d_reference(A, steps)
    out = {"n": n, "steps": steps}
    for name, program in (("overlapped", overlapped), ("plain", plain)):
        run = dace_cpufree.compile(program)
        args = [A, A.copy(), np.zeros(2, np.uint64)]
        run(*[a.copy() for a in args], T=1)
        ms, got = _median_ms(run, args, {"T": steps}, repeats)
        out[name] = {"ms_per_step": ms / steps, "valid": bool(np.allclose(got[0], ref, rtol=1e-12))}
    return out


def bench_side_by_side(n: int, steps: int, repeats: int) -> dict:
    """The periodic 2-D Jacobi with its edge copies side by side (default) and one after another, same run."""
    rng = np.random.default_rng(2)
    args = [rng.random((n, n)), rng.random((n, n))]
    ref = periodic_2d_reference(*args, steps)
    out = {"n": n, "steps": steps}
    for name, concurrent_steps in (("side by side", True), ("one after another", False)):
        run = dace_cpufree.compile(periodic_2d, concurrent_steps=concurrent_steps)
        run(*[a.copy() for a in args], T=1)
        ms, got = _median_ms(run, args, {"T": steps}, repeats)
        ok = all(np.allclose(g, r, rtol=1e-12) for g, r in zip(got, ref))
        scopes = sum(1 for scope in run.source.block_scopes or [] if scope[0].automatic)
        out[name] = {
            "ms_per_step": ms / steps,
            "valid": ok,
            "automatic_scopes": scopes,
            "grid_syncs": run.source.grid_syncs,
            "launch": list(run.launch_config),
        }
    return out


def bench_gemver(n: int, repeats: int) -> dict:
    """NPBench's gemver with and without independent steps side by side; the two builds' runs alternate."""
    from npbench_runs.kernels import gemver

    data = gemver.initialize(n)
    ref = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in data.items()}
    gemver.reference(**ref)
    names = (("side by side", True), ("one after another", False))
    runs = {name: dace_cpufree.compile(gemver.program, concurrent_steps=flag) for name, flag in names}
    times = {name: [] for name, _ in names}
    valid = {name: True for name, _ in names}
    for repeat in range(repeats + 1):  # the first round builds and warms up
        for name, run in runs.items():
            fresh = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in data.items()}
            run(**fresh)
            if repeat:
                times[name].append(run.last_kernel_ms)
            valid[name] = valid[name] and all(
                np.allclose(fresh[k], ref[k], rtol=gemver.RTOL, atol=gemver.ATOL) for k in gemver.OUTPUTS
            )
    out = {"n": n}
    for name, run in runs.items():
        out[name] = {
            "ms": statistics.median(times[name]),
            "valid": valid[name],
            "automatic_scopes": sum(1 for scope in run.source.block_scopes or [] if scope[0].automatic),
            "grid_syncs": run.source.grid_syncs,
            "launch": list(run.launch_config),
        }
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n1", type=int, default=2048)
    parser.add_argument("--n2", type=int, default=512)
    parser.add_argument("--n", type=int, default=1 << 22, help="1-D Jacobi points")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--gemver", type=int, nargs="*", default=[1000, 8000], help="gemver sizes (NPBench S, paper)")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    result = {}
    result["stencils"] = bench_stencils(args.n1, args.n2, args.steps, args.repeats)
    result["listing7"] = bench_listing7(args.n, args.steps, args.repeats)
    result["side_by_side"] = bench_side_by_side(args.n1, args.steps, args.repeats)
    result["gemver"] = [bench_gemver(n, 4 * args.repeats) for n in args.gemver]
    print(json.dumps(result, indent=1))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    valid = all(v["valid"] for k, v in result["stencils"].items() if isinstance(v, dict))
    for study in [result["listing7"], result["side_by_side"], *result["gemver"]]:
        valid = valid and all(v["valid"] for v in study.values() if isinstance(v, dict))
    return 0 if valid else 1


if __name__ == "__main__":
    sys.exit(main())
