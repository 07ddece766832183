"""Time per step of the distributed stencils on 1, 2, 4 (and 8) GPUs, ours next to upstream DaCe + MPI, validated.

    python -m npbench_runs.multigpu.scaling --out results/            # every GPU count this machine has

Each configuration is one ``mpirun -np <gpus> python -m npbench_runs.multigpu.run`` job under a hard
timeout (``timeout -k 15``: SIGTERM, which mpirun passes on to its ranks, then SIGKILL 15 s later), so a hung
kernel costs one configuration, not the run. Weak scaling keeps
the tile per GPU fixed (efficiency = t(1 GPU) / t(p GPUs)); strong scaling keeps the global domain
(efficiency = t(1) / (p t(p))). The halo cost per step is t(p GPUs) - t(1 GPU) at the same tile size,
compared with the put + signal + grid-sync floor per step of a hand-written NVSHMEM ring kernel measured on the
same machine (``--floor-us``; default 3.32 us, two H200s over NVLink), per step
and per exchange (a Jacobi step is two half-steps, each with its own halo exchange: the floor's round).

Time per step t is the slope between two runs of every configuration (``--steps`` and ``--slope-steps``,
default 5x): a run also pays once for its launch (the collective launch, the first touch of the peers'
memory), reported as ``launch_us``; the time of one run over its steps is kept as ``us_per_step_one_run``.

Both frameworks run every configuration: ``cpufree`` (our persistent kernel, each form, timed by CUDA
events around the kernel) and ``dace_mpi`` (:mod:`.dace_mpi`: upstream DaCe kernels launched from the host,
halos staged through host memory and exchanged with ``dace.comm`` Isend/Irecv/Waitall, timed by wall clock
with the device synchronised). ``vs_dace_mpi`` is t(DaCe + MPI) / t(ours) at the same program, mode, GPU
count and size (> 1: ours is faster). The DaCe programs are compiled once, in the background while the
``cpufree`` configurations run, and every ``dace_mpi`` job loads that build.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

#: put + signal + grid sync per step, 2 x H200 over NVLink (shared/gpu-host/README.md).
FLOOR_US = 3.32

# tile interior per GPU side (2-D: per process-grid side)
WEAK = {"jacobi_2d": 1026, "jacobi_3d": 130, "jacobi_3d_grid": 130}
STRONG = {"jacobi_2d": 4098, "jacobi_3d": 258, "jacobi_3d_grid": 258}
#: programs whose first axis may be longer or shorter than the others (``--size PROGRAM=NXxN``)
SLABS = ("jacobi_3d", "jacobi_3d_grid")


def _gpus() -> int:
    from dace_cpufree.runtime import gpu_count

    return gpu_count()


def weak_n(program: str, gpus: int, tile: int | tuple[int, int] | None = None) -> tuple[int, int | None, int | None]:
    """Global ``(N, NX, NY)`` such that every GPU's tile has the 1-GPU interior. ``NX``: jacobi_3d's split axis,
    which alone grows; jacobi_2d's rows where its process grid is not square, else ``None``: a square domain,
    NPBench's; jacobi_3d_grid's leading axis. ``NY``: jacobi_3d_grid's middle axis where its process grid splits it
    differently from the last one (2x2x1 at 4 GPUs), else ``None``. ``tile``: the 1-GPU side instead of
    :data:`WEAK`'s, or jacobi_3d's 1-GPU ``(NX, N)`` for a slab that is not a cube (the split axis longer or shorter
    than the other two: the same work per GPU with larger or smaller halo planes)."""
    nx1, n = _shape(program, tile or WEAK[program])
    if program == "jacobi_3d":
        return n, (nx1 - 2) * gpus + 2, None
    if program == "jacobi_3d_grid":
        from .jacobi_3d_grid import process_grid

        px, py, pz = process_grid(gpus)
        return (n - 2) * pz + 2, (nx1 - 2) * px + 2, (n - 2) * py + 2 if py != pz else None
    from .jacobi_2d import process_grid

    px, py = process_grid(gpus)  # PX x PY square tiles: an NX x N domain, square where the grid is
    return (n - 2) * py + 2, (n - 2) * px + 2 if px != py else None, None


def _shape(program: str, size: int | tuple[int, int]) -> tuple[int, int]:
    """``(NX, N)`` of a size given as a side or as ``(NX, N)`` (:data:`SLABS` only: jacobi_2d's are square)."""
    nx, n = size if isinstance(size, tuple) else (size, size)
    if nx != n and program not in SLABS:
        raise ValueError(f"{program}: a {nx}x{n} domain is not square; give one side (e.g. {program}={n}).")
    return nx, n


def parse_size(item: str) -> tuple[str, int | tuple[int, int]]:
    """``PROGRAM=N`` or ``PROGRAM=NXxN`` (jacobi_3d: the split axis first, as in the array's shape)."""
    program, _, value = item.partition("=")
    try:
        sides = tuple(int(v) for v in value.lower().split("x"))
    except ValueError:
        sides = ()
    if len(sides) not in (1, 2):
        raise argparse.ArgumentTypeError(
            f"--size {item!r}: expected PROGRAM=N or PROGRAM=NXxN, e.g. jacobi_3d=1026x130"
        )
    return program, sides[0] if len(sides) == 1 else sides


#: ``timeout``'s exit status when it ended the job: by SIGTERM (124), or by SIGKILL after it (137).
TIMED_OUT = (124, 137)


def mpirun_command(gpus: int, run_args: list[str], timeout: int, module: str = "npbench_runs.multigpu.run") -> tuple:
    """``(command, environment)`` of :func:`mpirun_job`."""
    env = dict(os.environ, NVSHMEM_DISABLE_NVLS="1", NCCL_NVLS_ENABLE="0")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [os.getcwd(), env.get("PYTHONPATH")]))
    cmd = ["timeout", "-k", "15", str(timeout)]
    if gpus > 1 or os.environ.get("OMPI_COMM_WORLD_SIZE") is None:
        cmd += ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", str(gpus), "-x", "NVSHMEM_DISABLE_NVLS=1"]
        for var in ["PYTHONPATH"] + sorted(v for v in env if v.startswith("DACE_CPUFREE_")):
            cmd += ["-x", var] if var in env else []  # the build settings too: each rank finds the same build
    cmd += [sys.executable, "-m", module, *run_args, "--json"]
    return cmd, env


def mpirun_job(
    gpus: int, run_args: list[str], timeout: int, module: str = "npbench_runs.multigpu.run"
) -> tuple[subprocess.CompletedProcess, dict | None]:
    """``mpirun -np <gpus> python -m <module> <run_args> --json`` under ``timeout -k 15`` (a single process
    without mpirun inside an MPI job); the process and rank 0's report (its last JSON line). ``module``: the
    job's program, :mod:`.run` by default. SIGTERM first: mpirun then ends its ranks, and a hung kernel's GPU
    is freed for the next job (a SIGKILLed mpirun can leave them running on it); SIGKILL if it has not ended
    15 s later."""
    cmd, env = mpirun_command(gpus, run_args, timeout, module)
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    return proc, (json.loads(lines[-1]) if lines else None)


def run_one(
    program, form, gpus, n, steps, timeout, repeat, framework="cpufree", nx=None, slope_steps=None, ny=None
) -> dict:
    args = ["--framework", framework, "--program", program] + (["--form", form] if framework == "cpufree" else [])
    args += ["--n", str(n), "--steps", str(steps), "--repeat", str(repeat)] + (["--nx", str(nx)] if nx else [])
    args += ["--ny", str(ny)] if ny else []
    args += ["--slope-steps", str(slope_steps)] if slope_steps else []
    proc, report = mpirun_job(gpus, args, timeout)
    if proc.returncode not in (0, 1) or report is None:
        from .run import domain_fields

        failed = {"framework": framework, "program": program, "form": form, "gpus": gpus}
        return {**failed, **domain_fields(program, n, nx, ny), "error": f"rc={proc.returncode}",
                "stderr": proc.stderr[-2000:]}  # fmt: skip
    return report


def _start_dace_build(programs: list[str], timeout: int) -> subprocess.Popen:
    """Compiles the DaCe + MPI programs (once, into the shared cache) in the background."""
    cmd = ["timeout", "-s", "KILL", str(timeout), sys.executable, "-m", "npbench_runs.multigpu.dace_mpi", *programs]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _finish_dace_build(proc: subprocess.Popen) -> dict:
    """``{program: compile seconds}`` (0: cached), or ``{"error": ...}``."""
    out, err = proc.communicate()
    lines = [line for line in out.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        return {"error": f"rc={proc.returncode}", "stderr": err[-2000:]}
    return json.loads(lines[-1])


def _configs(programs, gpus, modes=("weak", "strong"), sizes=None):
    """(program, mode, gpus, n, nx, ny) of every configuration (``nx``: jacobi_3d's split axis, jacobi_2d's rows on
    a process grid that is not square, or ``None``; ``ny``: jacobi_3d_grid's middle axis, see :func:`weak_n`);
    ``sizes``: ``{program: side or (NX, N)}`` replacing the weak tile and the strong domain."""
    sizes = sizes or {}
    for program in programs:
        for mode in modes:
            for g in gpus:
                side = sizes.get(program)
                if mode == "weak":
                    shape = weak_n(program, g, side)
                else:
                    nx, n = _shape(program, side or STRONG[program])
                    shape = (n, nx if nx != n else None, None)
                yield program, mode, g, *shape


def _prebuild(item: tuple) -> str:
    label, module, name, options = item
    import importlib

    from dace_cpufree import prebuild

    try:
        prebuild(getattr(importlib.import_module(module), name), **options)
    except Exception as e:  # noqa: BLE001 - reported; that configuration's job fails with the same error
        return f"{label}: {type(e).__name__}: {e}"
    return ""


def prebuild_programs(todo: list[tuple], jobs: int) -> list[str]:
    """Builds programs in parallel into the build cache, so that the mpirun jobs load them instead of compiling one
    after another. ``todo``: ``(label, module, program name, options of compile)``. Returns the errors."""
    from concurrent.futures import ProcessPoolExecutor

    if not todo:
        return []
    with ProcessPoolExecutor(max_workers=max(1, jobs)) as pool:
        return [e for e in pool.map(_prebuild, todo) if e]


def prebuild_all(configs, forms, jobs: int) -> list[str]:
    """Our program of every configuration, sizes compiled in (:func:`prebuild_programs`). Returns the errors."""
    from . import DISTRIBUTED, PROGRAMS
    from .run import compile_symbols, domain_extents

    todo = []
    unique = {(p, f, g, n, nx, ny) for p, _, g, n, nx, ny in configs for f in forms}
    for program, form, gpus, n, nx, ny in sorted(unique, key=str):
        module = PROGRAMS[program]
        label = f"{program} {form} {gpus} GPUs"
        if form == DISTRIBUTED:  # one build for every size and GPU count: its sizes are arguments
            if hasattr(module, "single"):
                todo.append((f"{program} {form}", module.__name__, "single", {"distribute": module.DISTRIBUTE}))
            continue
        fixed, _ = compile_symbols(program, gpus, module.local_shape(n, gpus, nx, **domain_extents(program, ny)))
        todo.append((label, module.__name__, form, {"symbols": fixed}))
    todo = list({t[0]: t for t in todo}.values())
    return prebuild_programs(todo, jobs)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m npbench_runs.multigpu.scaling", description=__doc__)
    parser.add_argument("--programs", nargs="+", default=["jacobi_2d", "jacobi_3d"])
    parser.add_argument(
        "--forms",
        nargs="+",
        default=["plain", "overlapped", "distributed"],
        help="forms of ours: the hand-written plain and overlapped ones, and the single-GPU program distributed by the "
        "compiler (jacobi_2d and jacobi_3d; its time over the faster hand-written form's is vs_hand_written)",
    )
    parser.add_argument("--frameworks", nargs="+", default=["cpufree", "dace_mpi"], choices=["cpufree", "dace_mpi"])
    parser.add_argument("--gpus", nargs="+", type=int, default=None, help="GPU counts (default 1 2 4 8 up to present)")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument(
        "--slope-steps",
        type=int,
        default=None,
        help="steps of a second run per configuration (default 5 x --steps; 0: none): time per step is the slope "
        "between the two runs, which leaves out what a run pays once (launch, first touch of peer memory)",
    )
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--timeout", type=int, default=240, help="seconds per configuration (then SIGKILL)")
    parser.add_argument("--build-timeout", type=int, default=300, help="seconds for compiling the DaCe programs")
    parser.add_argument("--out", type=Path, default=Path("."))
    parser.add_argument("--modes", nargs="+", default=["weak", "strong"], choices=["weak", "strong"])
    parser.add_argument(
        "--size",
        nargs="+",
        default=[],
        type=parse_size,
        metavar="PROGRAM=N",
        help="per program: the weak tile side (1 GPU) / the strong domain side, e.g. jacobi_2d=4098; jacobi_3d "
        "(and jacobi_3d_grid) also NXxN, a slab NX long on its split axis (weak: per GPU), e.g. jacobi_3d=1026x130",
    )
    parser.add_argument(
        "--floor-us",
        type=float,
        default=FLOOR_US,
        help="put + signal + grid sync per step measured on this machine (default: two H200s' figure)",
    )
    parser.add_argument("--prebuild-jobs", type=int, default=os.cpu_count() or 1, help="parallel builds of ours first")
    args = parser.parse_args(argv)
    slope = 5 * args.steps if args.slope_steps is None else args.slope_steps
    gpus = args.gpus or [g for g in (1, 2, 4, 8) if g <= max(_gpus(), 1)]
    # NumPy's result per domain and step count, computed once for all GPU counts and frameworks
    os.environ.setdefault("DACE_CPUFREE_REF_CACHE", str(Path(tempfile.gettempdir()) / "cpufree_references"))
    from . import PROGRAMS
    from .dace_mpi import PROGRAMS as WITH_BASELINE  # jacobi_3d_grid has no DaCe + MPI form: ours alone

    baseline = [p for p in args.programs if p in WITH_BASELINE]
    build = _start_dace_build(baseline, args.build_timeout) if "dace_mpi" in args.frameworks and baseline else None
    jobs = [("cpufree", form) for form in args.forms] if "cpufree" in args.frameworks else []
    jobs += [("dace_mpi", "mpi")] if build else []
    compile_s = None
    args.out.mkdir(parents=True, exist_ok=True)
    sizes = dict(args.size)
    configs = list(_configs(args.programs, gpus, args.modes, sizes))
    if "cpufree" in args.frameworks:
        for err in prebuild_all(configs, args.forms, args.prebuild_jobs):
            print(json.dumps({"prebuild_error": err}), flush=True)
    rows = []
    # configurations outermost (weak first), frameworks inside: a run cut short still compares them
    for program, mode, g, n, nx, ny in sorted(configs, key=lambda c: c[1] != "weak"):
        for framework, form in jobs:
            if framework == "dace_mpi" and program not in WITH_BASELINE:
                continue
            if form == "distributed" and not hasattr(PROGRAMS[program], "single"):
                continue  # jacobi_3d_grid's process grid: the automatic decomposition splits one axis
            if framework == "dace_mpi" and compile_s is None:
                compile_s = _finish_dace_build(build)
                print(json.dumps({"dace_mpi_compile_s": compile_s}), flush=True)
            row = run_one(program, form, g, n, args.steps, args.timeout, args.repeat, framework, nx, slope, ny)
            row["mode"] = mode
            if framework == "dace_mpi" and program in compile_s:
                row["compile_s"] = compile_s[program]
            rows.append(row)
            print(json.dumps({k: v for k, v in row.items() if k != "stderr"}), flush=True)
            if "error" in row:
                print(row.get("stderr", "")[-1500:], flush=True)
            _summarise(rows, args.floor_us)
            _write(rows, args.out)  # after every configuration: a killed run keeps what it measured
    print("\n".join(comparison(rows)), flush=True)
    return 0 if all(r.get("valid") for r in rows) else 1


def _domain(r: dict) -> tuple:
    """A row's configuration: program, mode, GPU count and global domain (``n``, and ``nx``, ``ny`` where they
    differ)."""
    nx, ny = r.get("nx"), r.get("ny")
    differs = [v if v not in (None, r["n"]) else None for v in (nx, ny)]
    return r["program"], r["mode"], r["gpus"], r["n"], *differs


def _summarise(rows: list[dict], floor_us: float = FLOOR_US) -> None:
    from . import DISTRIBUTED, FORMS, PROGRAMS

    def series(r):  # weak: one tile per series (a run may sweep several); strong: one global domain
        if r["mode"] == "weak":
            size = tuple(r["local_shape"]) if "local_shape" in r else None
        else:
            size = _domain(r)[3:]
        return r.get("framework", "cpufree"), r["program"], r["form"], r["mode"], size

    base = {series(r): r for r in rows if r.get("gpus") == 1 and "us_per_step" in r}
    hand = {}  # the faster hand-written form of each configuration
    for r in rows:
        if r.get("framework", "cpufree") == "cpufree" and r.get("form") in FORMS and "us_per_step" in r:
            if _domain(r) not in hand or r["us_per_step"] < hand[_domain(r)]:
                hand[_domain(r)] = r["us_per_step"]
    dace = {_domain(r): r for r in rows if r.get("framework") == "dace_mpi"}
    for r in rows:
        d = dace.get(_domain(r))
        if r.get("framework") == "cpufree" and d is not None and "us_per_step" in r and "us_per_step" in d:
            r["vs_dace_mpi"] = d["us_per_step"] / r["us_per_step"]
        if r.get("form") == DISTRIBUTED and "us_per_step" in r and _domain(r) in hand:
            r["vs_hand_written"] = r["us_per_step"] / hand[_domain(r)]
        b = base.get(series(r))
        if b is None or "us_per_step" not in r:
            continue
        t1, tp, p = b["us_per_step"], r["us_per_step"], r["gpus"]
        r["efficiency"] = t1 / tp if r["mode"] == "weak" else t1 / (p * tp)
        if r["mode"] == "weak" and p > 1:
            exchanges = PROGRAMS[r["program"]].EXCHANGES_PER_STEP
            r["halo_us_per_step"] = tp - t1
            r["halo_vs_floor"] = (tp - t1) / floor_us
            r["halo_us_per_exchange"] = (tp - t1) / exchanges
            r["exchange_vs_floor"] = (tp - t1) / exchanges / floor_us


def _write(rows: list[dict], out: Path) -> None:
    keys = ["framework", "program", "form", "transport", "launch", "mode", "gpus", "n", "nx", "ny", "local_shape",
            "steps", "slope_steps", "timing",
            "us_per_step", "us_per_step_one_run", "launch_us", "vs_dace_mpi", "vs_hand_written", "efficiency",
            "halo_us_per_step",
            "halo_vs_floor", "halo_us_per_exchange", "exchange_vs_floor", "max_abs_error", "bitwise", "valid",
            "compile_s", "error"]  # fmt: skip
    with open(out / "multigpu_scaling.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=keys, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    lines = ["| " + " | ".join(keys[:-1]) + " |", "|" + "---|" * (len(keys) - 1)]
    for r in rows:
        cells = [r.get(k, "") for k in keys[:-1]]
        lines.append("| " + " | ".join(f"{c:.3f}" if isinstance(c, float) else str(c) for c in cells) + " |")
    (out / "multigpu_scaling.md").write_text("\n".join(lines + [""] + comparison(rows)) + "\n")


def comparison(rows: list[dict]) -> list[str]:
    """Markdown table: per configuration, DaCe + MPI's time per step, our best form's, and their ratio."""
    head = "| program | mode | gpus | n | dace_mpi us/step | ours us/step (form) | dace_mpi / ours |"
    lines = [head, "|" + "---|" * 7]
    for d in rows:
        if d.get("framework") != "dace_mpi" or "us_per_step" not in d:
            continue
        key = _domain(d)
        ours = [r for r in rows if "vs_dace_mpi" in r and _domain(r) == key]
        if not ours:
            continue
        best = min(ours, key=lambda r: r["us_per_step"])
        size = f"{key[4]}x{key[3]}" if key[4] else key[3]
        cells = [*key[:3], size, f"{d['us_per_step']:.2f}", f"{best['us_per_step']:.2f} ({best['form']})"]
        lines.append("| " + " | ".join(map(str, cells)) + f" | {best['vs_dace_mpi']:.2f} |")
    return lines


if __name__ == "__main__":
    sys.exit(main())
