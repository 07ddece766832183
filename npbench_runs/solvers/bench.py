"""Time per CG iteration: the whole solve as one persistent kernel (ours) vs host-driven CuPy CG, on one GPU.

    python -m npbench_runs.solvers.bench                         # 256^2 (launch-bound) and 4096^2 (bandwidth-bound)
    python -m npbench_runs.solvers.bench --sizes 256 --iters 400 --repeat 5 --out cg.json

Frameworks: ``cg`` and ``pipelined`` (:mod:`.poisson`, our kernels, sizes compiled in, CUDA events around the
kernel: ``last_kernel_ms``), ``cg_csr`` (:mod:`.csr`, ours with the CSR matrix of the same problem), ``cupy``
(:func:`.baselines.cg_stencil`: CuPy slices, a Python loop, two dot products read back per iteration) and
``cupy_sparse`` (:func:`.baselines.cg_sparse`: cuSPARSE's product) and ``dace_upstream`` (:mod:`.upstream`: the
recurrences in NumPy under upstream DaCe, ``auto_optimize`` for the GPU, a host loop launching its kernels); CuPy
and upstream DaCe are timed with CUDA events around the whole
loop, its host round trips included (they are what a persistent kernel removes). Every run is checked against the
NumPy reference of its recurrences on the stencil (the CSR matrix is the same problem's): residual history and
solution within ``--rtol`` (relative, default 1e-6: the dot products' summation order differs from NumPy's, and CG
carries the rounding on). Prints a table and, with
``--out``, writes one JSON object per run (GPU name, size, iterations, us per iteration, best and median, errors).
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import sys

import numpy as np

from . import baselines, csr, poisson

FRAMEWORKS = ("cg", "pipelined", "cg_csr", "cupy", "cupy_sparse", "dace_upstream")


def _rel(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-300))


def _ours(name: str, n: int, iters: int, repeat: int, cp) -> tuple[list, np.ndarray, np.ndarray]:
    import dace_cpufree

    if name == "cg_csr":
        indptr, indices, data, b = csr.initialize(n)
        run = dace_cpufree.compile(csr.cg_csr, symbols={"NR": n * n, "NNZ": len(indices), **csr.symbols(indptr)})
        args = [cp.asarray(a) for a in (indptr, indices, data, b)] + [cp.zeros(n * n), cp.zeros(iters)]
        out = (4, 5)
    else:
        program = "cg_poisson_2d" if name == "cg" else "pipelined_cg_poisson_2d"
        run = dace_cpufree.compile(getattr(poisson, program), symbols={"LX": n + 2, "NY": n + 2})
        args = [cp.asarray(a) for a in poisson.arguments(program, n, iters)]
        out = (1, 2)
    times = []
    for _ in range(repeat + 1):  # the first call loads, initialises NVSHMEM and uploads
        run(*args)
        times.append(run.last_kernel_ms * 1e3 / iters)
    x, hist = (cp.asnumpy(args[k]) for k in out)
    return times[1:], x, hist, ""


def _timed(solve, repeat: int, iters: int, cp) -> tuple[list, object]:
    """Microseconds per iteration of ``repeat`` host-driven solves (CUDA events around each, host round trips
    included), and the last solve's result."""
    times = []
    for _ in range(repeat):
        start, end = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        result = solve()
        end.record()
        end.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, end) * 1e3 / iters)
    return times, result


def _cupy(name: str, n: int, iters: int, repeat: int, cp) -> tuple[list, np.ndarray, np.ndarray]:
    if name == "cupy":
        b = cp.asarray(poisson.initialize(n))
        solve = lambda k: baselines.cg_stencil(b, k)  # noqa: E731
    else:
        indptr, indices, data, b = csr.initialize(n)
        solve = lambda k: baselines.cg_sparse(indptr, indices, data, b, k)  # noqa: E731
    solve(2)  # warm-up: kernels compiled and cached
    times, (x, hist) = _timed(lambda: solve(iters), repeat, iters, cp)
    return times, cp.asnumpy(x), hist, ""


def _upstream(name: str, n: int, iters: int, repeat: int, cp) -> tuple[list, np.ndarray, np.ndarray, str]:
    from npbench_runs.frameworks import UpstreamDaCeFramework

    from . import upstream

    try:
        run, how = UpstreamDaCeFramework("dace_cublas", ("cuBLAS",)).prepare(upstream), "auto_optimize"
    except Exception as error:  # noqa: BLE001 - DaCe's own failure, reported in the row
        how = f"auto_optimize failed ({type(error).__name__}: {str(error)[:120]}); apply_gpu_transformations + CUB"
        compiled = upstream.sdfg_without_auto_optimize().compile()
        run = lambda **args: compiled(**args, LX=n + 2, NY=n + 2, K=iters)  # noqa: E731
    b = cp.asarray(poisson.initialize(n))
    x, hist = cp.zeros_like(b), cp.zeros(iters)
    run(b=b, x=x, hist=hist)  # warm-up: the library loaded, device memory allocated
    times, _ = _timed(lambda: run(b=b, x=x, hist=hist), repeat, iters, cp)
    return times, cp.asnumpy(x), cp.asnumpy(hist), how


@functools.lru_cache(maxsize=4)
def _reference(pipelined: bool, n: int, iters: int) -> tuple[np.ndarray, np.ndarray]:
    solve = poisson.reference_pipelined_cg if pipelined else poisson.reference_cg
    return solve(poisson.initialize(n), iters)


def measure(name: str, n: int, iters: int, repeat: int, rtol: float) -> dict:
    """One framework at one size: times per iteration and the check against NumPy."""
    import cupy as cp

    run = _cupy if name.startswith("cupy") else _upstream if name == "dace_upstream" else _ours
    times, x, hist, how = run(name, n, iters, repeat, cp)
    x_ref, hist_ref = _reference(name == "pipelined", n, iters)  # the CSR matrix is the same problem's
    x_ref = x_ref[1:-1, 1:-1].ravel() if x.ndim == 1 else x_ref
    err_hist, err_x = _rel(hist, hist_ref), _rel(x, x_ref)
    return {
        "gpu": cp.cuda.runtime.getDeviceProperties(0)["name"].decode(),
        "framework": name,
        "n": n,
        "iters": iters,
        "us_per_iter_best": min(times),
        "us_per_iter_median": statistics.median(times),
        "err_hist": err_hist,
        "err_x": err_x,
        "validated": bool(err_hist <= rtol and err_x <= rtol),
        **({"build": how} if how else {}),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[256, 4096], help="grid side N (N x N unknowns)")
    ap.add_argument("--iters", type=int, nargs="+", default=[400, 50], help="CG iterations, one per size")
    ap.add_argument("--frameworks", nargs="+", default=list(FRAMEWORKS), choices=FRAMEWORKS)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--rtol", type=float, default=1e-6)
    ap.add_argument("--out", help="JSON lines file")
    args = ap.parse_args(argv)
    iters = args.iters if len(args.iters) == len(args.sizes) else [args.iters[0]] * len(args.sizes)
    rows = []
    for n, k in zip(args.sizes, iters):
        for name in args.frameworks:
            rows.append(measure(name, n, k, args.repeat, args.rtol))
            r = rows[-1]
            print(
                f"{r['gpu']}  N={n:5d}  {name:12s} {r['us_per_iter_best']:9.2f} us/iter (median "
                f"{r['us_per_iter_median']:.2f})  hist err {r['err_hist']:.1e}  x err {r['err_x']:.1e}  "
                f"{'ok' if r['validated'] else 'NOT VALIDATED'}  {r.get('build', '')}",
                flush=True,
            )
    if args.out:
        with open(args.out, "w") as f:
            f.writelines(json.dumps(r) + "\n" for r in rows)
    return 0 if all(r["validated"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
