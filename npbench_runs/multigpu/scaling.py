"""Time per step of the distributed stencils on 1, 2, 4 (and 8) GPUs: weak and strong scaling, validated.

    python -m npbench_runs.multigpu.scaling --out results/            # every GPU count this machine has

Each configuration is one ``mpirun -np <gpus> python -m npbench_runs.multigpu.run`` job under a hard
timeout (``timeout -s KILL``), so a hung kernel costs one configuration, not the run. Weak scaling keeps
the tile per GPU fixed (efficiency = t(1 GPU) / t(p GPUs)); strong scaling keeps the global domain
(efficiency = t(1) / (p t(p))). The halo cost per step is t(p GPUs) - t(1 GPU) at the same tile size,
compared with the 3.32 us put + signal + grid-sync floor measured on two H200s (``nvshmem_ring.cu``).

Upstream DaCe with MPI (``dace.comm``) is not run: its halo exchange is host-initiated
(``Isend``/``Irecv`` in host code between kernel launches) and needs a CUDA-aware MPI for device
buffers, which the GPU host's Open MPI 4.1.6 is not known to be; see docs/multigpu.md.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
from pathlib import Path

#: put + signal + grid sync per step, 2 x H200 over NVLink (shared/gpu-host/README.md).
FLOOR_US = 3.32

WEAK = {"jacobi_2d": 1026, "jacobi_3d": 130}  # tile interior per GPU side (2-D: per process-grid side)
STRONG = {"jacobi_2d": 4098, "jacobi_3d": 258}


def _gpus() -> int:
    from dace_cpufree.runtime import gpu_count

    return gpu_count()


def weak_n(program: str, gpus: int) -> int:
    """Global N such that every GPU's tile has the 1-GPU interior."""
    inner = WEAK[program] - 2
    if program == "jacobi_3d":
        return inner * gpus + 2
    from .jacobi_2d import process_grid

    px, py = process_grid(gpus)
    if px != py:
        return None  # a non-square grid has non-square tiles: not the same work per GPU
    return inner * px + 2


def run_one(program, form, gpus, n, steps, timeout, repeat) -> dict:
    cmd = ["timeout", "-s", "KILL", str(timeout)]
    if gpus > 1 or os.environ.get("OMPI_COMM_WORLD_SIZE") is None:
        cmd += ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", str(gpus), "-x", "NVSHMEM_DISABLE_NVLS=1"]
        cmd += ["-x", "PYTHONPATH", "-x", "DACE_CPUFREE_CACHE"]
    cmd += [sys.executable, "-m", "npbench_runs.multigpu.run", "--program", program, "--form", form]
    cmd += ["--n", str(n), "--steps", str(steps), "--repeat", str(repeat), "--json"]
    env = dict(os.environ, NVSHMEM_DISABLE_NVLS="1", NCCL_NVLS_ENABLE="0")
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode not in (0, 1) or not lines:
        return {"program": program, "form": form, "gpus": gpus, "n": n, "error": f"rc={proc.returncode}",
                "stderr": proc.stderr[-2000:]}  # fmt: skip
    return json.loads(lines[-1])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m npbench_runs.multigpu.scaling", description=__doc__)
    parser.add_argument("--programs", nargs="+", default=["jacobi_2d", "jacobi_3d"])
    parser.add_argument("--forms", nargs="+", default=["plain", "overlapped"])
    parser.add_argument("--gpus", nargs="+", type=int, default=None, help="GPU counts (default 1 2 4 8 up to present)")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--timeout", type=int, default=240, help="seconds per configuration (then SIGKILL)")
    parser.add_argument("--out", type=Path, default=Path("."))
    args = parser.parse_args(argv)
    gpus = args.gpus or [g for g in (1, 2, 4, 8) if g <= max(_gpus(), 1)]
    rows = []
    for program in args.programs:
        for form in args.forms:
            for mode, sizes in (("weak", None), ("strong", STRONG)):
                for g in gpus:
                    n = weak_n(program, g) if sizes is None else sizes[program]
                    if n is None:
                        continue
                    row = run_one(program, form, g, n, args.steps, args.timeout, args.repeat)
                    row["mode"] = mode
                    rows.append(row)
                    print(json.dumps({k: v for k, v in row.items() if k != "stderr"}), flush=True)
    _summarise(rows)
    args.out.mkdir(parents=True, exist_ok=True)
    _write(rows, args.out)
    return 0 if all(r.get("valid") for r in rows) else 1


def _summarise(rows: list[dict]) -> None:
    base = {(r["program"], r["form"], r["mode"]): r for r in rows if r.get("gpus") == 1 and "us_per_step" in r}
    for r in rows:
        b = base.get((r["program"], r["form"], r["mode"]))
        if b is None or "us_per_step" not in r:
            continue
        t1, tp, p = b["us_per_step"], r["us_per_step"], r["gpus"]
        r["efficiency"] = t1 / tp if r["mode"] == "weak" else t1 / (p * tp)
        if r["mode"] == "weak" and p > 1:
            r["halo_us_per_step"] = tp - t1
            r["halo_vs_floor"] = (tp - t1) / FLOOR_US


def _write(rows: list[dict], out: Path) -> None:
    keys = ["program", "form", "mode", "gpus", "n", "local_shape", "steps", "us_per_step", "efficiency",
            "halo_us_per_step", "halo_vs_floor", "max_abs_error", "bitwise", "valid", "error"]  # fmt: skip
    with open(out / "multigpu_scaling.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=keys, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    lines = ["| " + " | ".join(keys[:-1]) + " |", "|" + "---|" * (len(keys) - 1)]
    for r in rows:
        cells = [r.get(k, "") for k in keys[:-1]]
        lines.append("| " + " | ".join(f"{c:.3f}" if isinstance(c, float) else str(c) for c in cells) + " |")
    (out / "multigpu_scaling.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    sys.exit(main())
