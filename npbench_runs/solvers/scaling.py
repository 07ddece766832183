"""Strong scaling of CG on the 2-D Poisson problem: our kernels and the host-driven CuPy CG on 1, 2, ... GPUs.

    python -m npbench_runs.solvers.scaling --gpus 1 2 --sizes 256 4096 --iters 400 50 --out results/

Each configuration (framework, GPU count, global N) is one ``mpirun -np <gpus> python -m
npbench_runs.solvers.distributed`` job under a hard timeout (:func:`npbench_runs.multigpu.scaling.mpirun_job`),
so a hung kernel costs one configuration; a failed or timed-out job is a row with an ``error`` field. The global
grid stays ``N x N`` at every GPU count (strong scaling, ``N`` divisible by the GPU count): efficiency
``t(1) / (p t(p))`` per framework and size; ``cupy_over_ours`` is t(CuPy) / t(ours) at the same N and GPU count
(> 1: ours is faster). Weak scaling is not offered: a square grid split by rows keeps the work per GPU fixed only
where N grows by sqrt(p). Writes ``cg_scaling.jsonl``, ``cg_scaling.csv`` and ``cg_scaling.md`` into ``--out``
after every configuration (a run cut short keeps what it measured).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys
import tempfile
from pathlib import Path

from npbench_runs.multigpu.scaling import TIMED_OUT, mpirun_job, prebuild_programs

from .distributed import FRAMEWORKS, PROGRAMS

MODULE = "npbench_runs.solvers.distributed"
OURS = tuple(PROGRAMS)
KEYS = ["framework", "comm", "gpus", "n", "iters", "local_shape", "us_per_iter_best", "us_per_iter_median",
        "efficiency", "cupy_over_ours", "err_hist", "err_x", "validated", "error"]  # fmt: skip


def job_args(framework: str, n: int, iters: int, repeat: int, rtol: float = 1e-6, comm: str = "auto") -> list[str]:
    """The arguments of :mod:`.distributed` for one configuration (``--json`` is added by ``mpirun_job``)."""
    args = ["--framework", framework, "--n", str(n), "--iters", str(iters), "--repeat", str(repeat)]
    args += ["--rtol", repr(rtol)]
    return args + (["--comm", comm] if framework == "cupy" else [])


def configs(gpus: list[int], sizes: list[int], iters: list[int], frameworks: list[str]):
    """``(framework, gpus, n, iters)`` of every configuration: per size, per GPU count, every framework."""
    iters = iters if len(iters) == len(sizes) else [iters[0]] * len(sizes)
    for n, k in zip(sizes, iters):
        for g in gpus:
            for framework in frameworks:
                yield framework, g, n, k


def run_one(framework, gpus, n, iters, repeat, timeout, rtol=1e-6, comm="auto") -> dict:
    row = {"framework": framework, "gpus": gpus, "n": n, "iters": iters}
    if n % gpus or n // gpus < 2:
        return {**row, "error": f"N = {n} is not split into {gpus} tiles of >= 2 rows"}
    proc, report = mpirun_job(gpus, job_args(framework, n, iters, repeat, rtol, comm), timeout, MODULE)
    if proc.returncode in TIMED_OUT:
        return {**row, "error": f"timed out after {timeout} s", "stderr": proc.stderr[-2000:]}
    if proc.returncode not in (0, 1) or report is None:
        return {**row, "error": f"rc={proc.returncode}", "stderr": proc.stderr[-2000:]}
    return report


def prebuild_all(todo: list[tuple], jobs: int) -> list[str]:
    """Our program of every configuration, sizes compiled in (:func:`npbench_runs.multigpu.scaling.prebuild_programs`).
    Returns the errors."""
    from . import poisson

    builds = []
    for f, g, n in sorted({(f, g, n) for f, g, n, _ in todo if f in OURS and n % g == 0 and n // g >= 2}):
        lx, ny = poisson.local_shape(n, g)
        builds.append((f"{f} {g} GPUs N={n}", poisson.__name__, PROGRAMS[f], {"symbols": {"LX": lx, "NY": ny}}))
    return prebuild_programs(builds, jobs)


def summarise(rows: list[dict]) -> list[dict]:
    """Adds ``efficiency`` (strong: t(1) / (p t(p)), same framework and N) and, to our rows,
    ``cupy_over_ours`` (same N and GPU count). Rows without a time are left as they are."""
    timed = [r for r in rows if "us_per_iter_best" in r]
    one = {(r["framework"], r["n"]): r["us_per_iter_best"] for r in timed if r["gpus"] == 1}
    cupy = {(r["n"], r["gpus"]): r["us_per_iter_best"] for r in timed if r["framework"] == "cupy"}
    for r in timed:
        t1, tp, p = one.get((r["framework"], r["n"])), r["us_per_iter_best"], r["gpus"]
        if t1 is not None:
            r["efficiency"] = t1 / (p * tp)
        c = cupy.get((r["n"], r["gpus"]))
        if r["framework"] in OURS and c is not None:
            r["cupy_over_ours"] = c / tp
    return rows


def _cell(value) -> str:
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 1e-2 and value else f"{value:.3f}"
    if isinstance(value, list):
        return "x".join(map(str, value))
    return "" if value is None else str(value)


def table(rows: list[dict]) -> list[str]:
    """Markdown: a header naming the GPU, then one line per configuration."""
    gpu = next((r["gpu"] for r in rows if r.get("gpu")), "GPU not reported")
    lines = [f"### CG on the 2-D Poisson problem, strong scaling, {gpu}", ""]
    lines += ["| " + " | ".join(KEYS) + " |", "|" + "---|" * len(KEYS)]
    lines += ["| " + " | ".join(_cell(r.get(k)) for k in KEYS) + " |" for r in rows]
    return lines


def write(rows: list[dict], out: Path) -> None:
    with open(out / "cg_scaling.jsonl", "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)
    with open(out / "cg_scaling.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["gpu", *KEYS], extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    (out / "cg_scaling.md").write_text("\n".join(table(rows)) + "\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m npbench_runs.solvers.scaling", description=__doc__)
    ap.add_argument("--gpus", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--sizes", type=int, nargs="+", default=[256, 4096], help="global grid side N")
    ap.add_argument("--iters", type=int, nargs="+", default=[400, 50], help="CG iterations, one per size")
    ap.add_argument("--frameworks", nargs="+", default=list(FRAMEWORKS), choices=FRAMEWORKS)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--rtol", type=float, default=1e-6)
    ap.add_argument("--comm", choices=("auto", "nccl", "mpi"), default="auto", help="the CuPy CG's communication")
    ap.add_argument("--timeout", type=int, default=300, help="seconds per configuration")
    ap.add_argument("--out", type=Path, default=Path("."))
    ap.add_argument("--prebuild-jobs", type=int, default=os.cpu_count() or 1, help="parallel builds of ours first")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    # NumPy's result per size and iteration count, computed once for all GPU counts and frameworks
    os.environ.setdefault("DACE_CPUFREE_REF_CACHE", str(Path(tempfile.gettempdir()) / "cpufree_references"))
    todo = list(configs(args.gpus, args.sizes, args.iters, args.frameworks))
    for error in prebuild_all(todo, args.prebuild_jobs):
        print(error, flush=True)
    rows = []
    for framework, g, n, k in todo:
        rows.append(run_one(framework, g, n, k, args.repeat, args.timeout, args.rtol, args.comm))
        print(json.dumps({key: v for key, v in rows[-1].items() if key != "stderr"}), flush=True)
        if "error" in rows[-1]:
            print(rows[-1].get("stderr", "")[-1500:], flush=True)
        write(summarise(rows), args.out)
    print("\n".join(table(rows)), flush=True)
    return 0 if all(r.get("validated") for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
