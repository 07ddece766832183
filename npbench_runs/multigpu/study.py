"""One multi-GPU study from several runs: merges the CSVs of ``multigpu.scaling`` and ``solvers.scaling``,
recomputes the comparisons with the floor measured on the machine, writes the merged tables and the plots.

    python -m npbench_runs.multigpu.study --stencils run1/multigpu_scaling.csv run2/multigpu_scaling.csv \\
        --cg run1/cg_scaling.csv run2/cg_scaling.csv --floor-us 4.0 --gpu "2 x NVIDIA H100 80GB HBM3" --out study/

A run cut by its time limit keeps the configurations it finished; a study of such runs merges them (later files
win where two runs measured the same configuration). Writes ``stencils.csv``/``.md``, ``cg.csv``/``.md`` and
``stencils.png`` (time per step against the GPU count, per program and mode, every framework and form) and
``cg.png`` (time per iteration against the GPU count, per grid size).
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path

from . import scaling

#: one colour per framework or form in every panel
COLOURS = {"DaCe + MPI": "tab:blue", "overlapped": "tab:orange", "plain": "tab:green", "cupy": "tab:blue",
           "cg": "tab:green", "pipelined": "tab:orange"}  # fmt: skip
_INTS = {"gpus", "n", "nx", "ny", "steps", "slope_steps", "iters"}
_BOOLS = {"bitwise", "valid", "validated"}


def _value(key: str, text: str):
    if text == "":
        return None
    if key in _INTS:
        return int(text)
    if key in _BOOLS:
        return text == "True"
    if key == "local_shape":
        return json.loads(text) if text.startswith("[") else [int(v) for v in text.split("x")]
    try:
        return float(text)
    except ValueError:
        return text


def read(paths: list[Path], key) -> list[dict]:
    """The rows of ``paths`` with their types back, one per configuration ``key(row)`` (the last file's)."""
    rows = {}
    for path in paths:
        with open(path, newline="") as f:
            for raw in csv.DictReader(f):
                row = {k: _value(k, v) for k, v in raw.items() if v not in ("", None)}
                rows[key(row)] = row
    return list(rows.values())


def _stencil_key(r: dict) -> tuple:
    return (r.get("framework"), r["program"], r.get("form"), r["mode"], r["gpus"], r["n"], r.get("nx"), r.get("ny"))


def _cg_key(r: dict) -> tuple:
    return r["framework"], r["gpus"], r["n"]


def stencils(paths: list[Path], floor_us: float) -> list[dict]:
    rows = read(paths, _stencil_key)
    for r in rows:  # recomputed below with this study's floor and baselines
        for k in ("vs_dace_mpi", "efficiency", "halo_us_per_step", "halo_vs_floor", "halo_us_per_exchange",
                  "exchange_vs_floor"):  # fmt: skip
            r.pop(k, None)
    order = {"weak": 0, "strong": 1}
    rows.sort(key=lambda r: (r["program"], order[r["mode"]], r["gpus"], r.get("framework", ""), r.get("form", "")))
    scaling._summarise(rows, floor_us)
    return rows


def cg(paths: list[Path]) -> list[dict]:
    from npbench_runs.solvers import scaling as cg_scaling

    rows = read(paths, _cg_key)
    rows.sort(key=lambda r: (r["n"], r["gpus"], r["framework"]))
    for r in rows:
        r.pop("efficiency", None), r.pop("cupy_over_ours", None)
    return cg_scaling.summarise(rows)


def _plot_series(ax, rows: list[dict], label, y: str) -> None:
    series = {}
    for r in rows:
        if r.get(y) is not None:
            series.setdefault(label(r), []).append((r["gpus"], r[y]))
    for name, points in sorted(series.items()):
        points.sort()
        ax.plot([g for g, _ in points], [t for _, t in points], marker="o", label=name, color=COLOURS.get(name))
    ax.set_xticks(sorted({r["gpus"] for r in rows}))
    ax.set_xlabel("GPUs")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)


def _stencil_label(r: dict) -> str:
    return "DaCe + MPI" if r.get("framework") == "dace_mpi" else r["form"]


def _panel(r: dict) -> tuple:
    """One panel per program, mode and size: weak scaling's tile per GPU, strong scaling's global side (runs at
    several tile sizes would otherwise share one line)."""
    return r["program"], r["mode"], tuple(r["local_shape"]) if r["mode"] == "weak" else (r["n"],)


def _save(fig, title: str, path: Path) -> Path:
    import matplotlib.pyplot as plt

    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=150, bbox_inches="tight")
    plt.close(fig)
    return path


def plot(stencil_rows: list[dict], cg_rows: list[dict], gpu: str, out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    groups = sorted({_panel(r) for r in stencil_rows})
    if groups:
        fig, axes = plt.subplots(1, len(groups), figsize=(4 * len(groups), 3.6), squeeze=False)
        for ax, (program, mode, extent) in zip(axes[0], groups):
            rows = [r for r in stencil_rows if _panel(r) == (program, mode, extent)]
            _plot_series(ax, rows, _stencil_label, "us_per_step")
            size = "x".join(map(str, extent)) + " per GPU" if mode == "weak" else f"N={extent[0]}"
            ax.set_title(f"{program}, {mode} ({size})", fontsize=9)
            ax.set_ylabel("us per step")
        written.append(_save(fig, f"Stencils, time per step ({gpu})", out / "stencils.png"))
    sizes = sorted({r["n"] for r in cg_rows})
    if sizes:
        fig, axes = plt.subplots(1, len(sizes), figsize=(4 * len(sizes), 3.6), squeeze=False)
        for ax, n in zip(axes[0], sizes):
            rows = [r for r in cg_rows if r["n"] == n]
            _plot_series(ax, rows, lambda r: r["framework"], "us_per_iter_best")
            ax.set_yscale("log")
            ax.set_title(f"CG, {n}x{n} unknowns (strong)", fontsize=9)
            ax.set_ylabel("us per iteration")
        written.append(_save(fig, f"CG: ours vs host-driven CuPy ({gpu})", out / "cg.png"))
    return written


def main(argv: list[str] | None = None) -> int:
    from npbench_runs.solvers import scaling as cg_scaling

    ap = argparse.ArgumentParser(prog="python -m npbench_runs.multigpu.study", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    ap.add_argument("--stencils", type=Path, nargs="*", default=[], help="multigpu_scaling.csv files")
    ap.add_argument("--cg", type=Path, nargs="*", default=[], help="cg_scaling.csv files")
    ap.add_argument("--floor-us", type=float, required=True, help="put + signal + grid sync per step, this machine")
    ap.add_argument("--gpu", required=True, help="the machine's GPUs, for the plots' titles")
    ap.add_argument("--out", type=Path, default=Path("."))
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    stencil_rows = stencils(args.stencils, args.floor_us) if args.stencils else []
    cg_rows = cg(args.cg) if args.cg else []
    if stencil_rows:
        scaling._write(stencil_rows, args.out)
        for ext in ("csv", "md"):
            (args.out / f"multigpu_scaling.{ext}").replace(args.out / f"stencils.{ext}")
    if cg_rows:
        cg_scaling.write(cg_rows, args.out)
        (args.out / "cg_scaling.jsonl").unlink()
        for ext in ("csv", "md"):
            (args.out / f"cg_scaling.{ext}").replace(args.out / f"cg.{ext}")
    for path in plot(stencil_rows, cg_rows, args.gpu, args.out):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
