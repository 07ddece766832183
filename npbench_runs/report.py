"""``python -m npbench_runs report [--db FILE] --preset S [--out DIR]``: a markdown table and three plots.

``DIR`` defaults to ``report_<preset>`` next to the database (the default database's is in the harness's folder).

From the newest row of each (kernel, framework) of the preset in the SQLite file:

* ``DIR/report_<preset>.md``: median time per framework with validation marks, speedup of each
  framework over the baseline (``dace_pure``, the paper's DaCe-Pure) with geomeans, the TFLOP/s of the kernels
  that declare their matrix products' operations (``product_flops``), compile times, the cells whose repeats the
  time budget cut short (†), errors; the header names the runs and the commits (``not recorded`` for rows written
  without one);
* ``DIR/speedup_<preset>_blas.png``, ``..._iterative.png``, ``..._others.png``: speedup bars over the
  baseline per kernel, one plot per category, each ending in the geomean per framework (the
  paper's Fig. 3-5). A speedup needs both the framework and the baseline validated.

Results of one framework alone (e.g. NumPy, or the host emulation) have no speedups: the markdown says so
and the plots show that framework's median times instead.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from npbench_runs import results

CATEGORIES = {
    "blas": ("BLAS-heavy", ("atax", "bicg", "gemm", "gemver", "gesummv", "k2mm", "k3mm", "mvt")),
    "iterative": ("Iterative", ("adi", "fdtd_2d", "heat_3d", "jacobi_1d", "jacobi_2d")),
    "others": ("Others", ()),  # everything else
}
ORDER = [
    "numpy",
    "cupy",
    "dace_pure",
    "dace_cublas",
    "dace_gpu",
    "dace_cpu",
    "dace_cpufree_plain",
    "dace_cpufree",
    "dace_cpufree_plain_emulate",
    "dace_cpufree_emulate",
]
LABELS = {
    "numpy": "NumPy",
    "cupy": "CuPy",
    "dace_pure": "DaCe-Pure",
    "dace_cublas": "DaCe-cuBLAS",
    "dace_gpu": "DaCe GPU",
    "dace_cpu": "DaCe CPU",
    "dace_cpufree_plain": "CPU-free (no scheduler)",
    "dace_cpufree": "CPU-free",
    "dace_cpufree_plain_emulate": "CPU-free emulate (no scheduler)",
    "dace_cpufree_emulate": "CPU-free emulate",
}


def category(kernel: str) -> str:
    for key, (_, members) in CATEGORIES.items():
        if kernel in members:
            return key
    return "others"


def geomean(values) -> float | None:
    vals = [v for v in values if v is not None and v > 0]
    return math.exp(sum(math.log(v) for v in vals) / len(vals)) if vals else None


class Table:
    """The newest result of each (kernel, framework), with speedups over ``baseline``."""

    def __init__(self, rows: list[dict], baseline: str | None = None):
        self.rows = {(r["kernel"], r["framework"]): r for r in rows}
        present = {r["framework"] for r in rows}
        self.frameworks = [f for f in ORDER if f in present] + sorted(present - set(ORDER))
        cat_rank = {key: i for i, key in enumerate(CATEGORIES)}
        self.kernels = sorted({r["kernel"] for r in rows}, key=lambda k: (cat_rank[category(k)], k))
        if baseline is None:
            baseline = next((b for b in ("dace_pure", "numpy") if b in present), self.frameworks[0] if rows else None)
        self.baseline = baseline
        self.compared = [f for f in self.frameworks if f != baseline and f != "numpy"] or [
            f for f in self.frameworks if f != baseline
        ]

    def time(self, kernel: str, fw: str) -> float | None:
        r = self.rows.get((kernel, fw))
        return None if r is None else r.get("median_ms")

    def valid(self, kernel: str, fw: str) -> bool:
        r = self.rows.get((kernel, fw))
        return bool(r and r.get("validated") and r.get("median_ms"))

    def speedup(self, kernel: str, fw: str) -> float | None:
        if not (self.valid(kernel, fw) and self.valid(kernel, self.baseline)):
            return None
        return self.time(kernel, self.baseline) / self.time(kernel, fw)

    def geomean(self, fw: str, kernels=None) -> float | None:
        return geomean(self.speedup(k, fw) for k in (self.kernels if kernels is None else kernels))

    def in_category(self, key: str) -> list[str]:
        return [k for k in self.kernels if category(k) == key]


def _fmt(v, digits=3, suffix=""):
    return "—" if v is None else f"{v:.{digits}f}{suffix}"


def _speed(v) -> str:
    """A speedup with three significant digits (0.0123x, 1.23x, 123x)."""
    if v is None:
        return "—"
    return f"{v:.3g}x" if v < 1000 else f"{v:.0f}x"


def short_commit(commit: str | None) -> str:
    """``abcdef123456`` or ``abcdef123456-dirty`` from a full one; "not recorded" where none was stored."""
    if not commit:
        return "not recorded"
    head, dirty = (commit[: -len("-dirty")], "-dirty") if commit.endswith("-dirty") else (commit, "")
    return head[:12] + dirty


def shortened(row: dict | None) -> bool:
    """True where the time budget stopped the repeats before ``--repeat`` timed runs."""
    target = (row or {}).get("repeat_target")
    return bool(row and row.get("median_ms") is not None and target and (row.get("repeat") or 0) < target)


def markdown(table: Table, preset: str, rows: list[dict]) -> str:
    gpus = sorted({r.get("gpu") or "?" for r in rows})
    commits = sorted({short_commit(r.get("git_commit")) for r in rows})
    runs = sorted({r.get("run_id") or "?" for r in rows})
    fws = table.frameworks
    out = [
        f"# NPBench kernels — preset {preset}",
        "",
        f"GPU: {', '.join(gpus)}; runs: {', '.join(runs)}; commit: {', '.join(commits)}.",
        "",
        "Median wall time in ms over the timed runs (inputs on the device, device synchronised).",
        "✓ validated against NumPy, ✗ ran but did not validate, ⚠ failed (see Errors), blank: not run;",
        "† fewer timed runs than asked for (time budget, see Timed runs).",
        "",
        "| kernel | category | " + " | ".join(LABELS.get(f, f) for f in fws) + " |",
        "|---|---|" + "---|" * len(fws),
    ]
    for k in table.kernels:
        cells = []
        for f in fws:
            r = table.rows.get((k, f))
            if r is None:
                cells.append("")
            elif r.get("median_ms") is None:
                cells.append("⚠")
            else:
                mark = "✓" if r.get("validated") else "✗"
                cells.append(f"{r['median_ms']:.3f} {mark}" + (" †" if shortened(r) else ""))
        out.append(f"| {k} | {CATEGORIES[category(k)][0]} | " + " | ".join(cells) + " |")

    out += _speedups(table)
    out += _product_rates(table)

    built = [f for f in fws if any(table.rows.get((k, f), {}).get("compile_s") is not None for k in table.kernels)]
    if built:
        out += [
            "",
            "## Compile time (s)",
            "",
            "Fresh build time (a cached build keeps the time of the run that built it).",
            "",
            "| kernel | " + " | ".join(LABELS.get(f, f) for f in built) + " |",
            "|---|" + "---|" * len(built),
        ]
        for k in table.kernels:
            out.append(
                f"| {k} | " + " | ".join(_fmt(table.rows.get((k, f), {}).get("compile_s"), 1) for f in built) + " |"
            )

    out += _timed_runs(table)
    errors = [
        (k, f, table.rows[(k, f)]["error"])
        for k in table.kernels
        for f in fws
        if table.rows.get((k, f), {}).get("error")
    ]
    if errors:
        out += ["", "## Errors", ""]
        for k, f, e in errors:
            text = " ".join(e.split())
            out.append(f"- **{k}** / `{f}`: {text[:400]}{'…' if len(text) > 400 else ''}")
    return "\n".join(out) + "\n"


def _speedups(table: Table) -> list[str]:
    """The speedup table; a note instead where the results hold one framework (nothing to compare)."""
    base = table.baseline
    if not table.compared:
        return [
            "",
            "## Speedups",
            "",
            f"Only {LABELS.get(base, base)} (`{base}`) is in these results: no speedups (the plots show its times).",
        ]
    out = [
        "",
        f"## Speedup over {LABELS.get(base, base)} (`{base}`)",
        "",
        "Baseline time / framework time; — where either did not validate.",
        "",
        "| kernel | " + " | ".join(LABELS.get(f, f) for f in table.compared) + " |",
        "|---|" + "---|" * len(table.compared),
    ]
    for k in table.kernels:
        out.append(f"| {k} | " + " | ".join(_speed(table.speedup(k, f)) for f in table.compared) + " |")
    for key, (label, _) in CATEGORIES.items():
        ks = table.in_category(key)
        if ks:
            out.append(
                f"| **geomean {label}** | " + " | ".join(_speed(table.geomean(f, ks)) for f in table.compared) + " |"
            )
    out.append("| **geomean all** | " + " | ".join(_speed(table.geomean(f)) for f in table.compared) + " |")
    return out


def product_flops(row: dict) -> int | None:
    """The floating-point operations of a row's matrix products, from its kernel's ``product_flops`` and the
    preset's sizes stored with the row; None for kernels that do not declare it."""
    from npbench_runs.kernels import KERNELS

    count = getattr(KERNELS.get(row.get("kernel")), "product_flops", None)
    params = row.get("params")
    if count is None or not params:
        return None
    return count(**(json.loads(params) if isinstance(params, str) else params))


def _product_rates(table: Table) -> list[str]:
    """TFLOP/s of the matrix-product kernels per framework (the products' operations over the median time of the
    whole call), and each compared framework's rate over the baseline's."""
    flops = {k: n for (k, _), r in table.rows.items() if (n := product_flops(r))}  # the same sizes in every row
    kernels = [k for k in table.kernels if k in flops]
    if not kernels:
        return []
    head = [LABELS.get(f, f) for f in table.frameworks]
    head += [f"{LABELS.get(f, f)} / {LABELS.get(table.baseline, table.baseline)}" for f in table.compared]
    out = [
        "",
        "## Matrix products: TFLOP/s",
        "",
        "The products' floating-point operations (`product_flops` of the kernel: 2 per multiply-add) over the median",
        "time of the whole call, validated results only; the ratios are those rates over the baseline's.",
        "",
        "| kernel | GFLOP | " + " | ".join(head) + " |",
        "|---|---|" + "---|" * len(head),
    ]
    for k in kernels:
        rates = [flops[k] / table.time(k, f) / 1e9 if table.valid(k, f) else None for f in table.frameworks]
        out.append(
            f"| {k} | {flops[k] / 1e9:.1f} | "
            + " | ".join("—" if r is None else f"{r:.3g}" for r in rates)
            + "".join(f" | {_speed(table.speedup(k, f))}" for f in table.compared)
            + " |"
        )
    return out


def _timed_runs(table: Table) -> list[str]:
    """The cells whose repeats the time budget cut short, with the number of timed runs."""
    cut = [
        (k, f, table.rows[(k, f)]) for k in table.kernels for f in table.frameworks if shortened(table.rows.get((k, f)))
    ]
    if not cut:
        return []
    out = ["", "## Timed runs", "", "Cells marked † (median and minimum over the runs that fit the time budget):", ""]
    for k, f, r in cut:
        budget = f"budget {r['budget_s']:g} s" if r.get("budget_s") is not None else "no budget"
        if r.get("repeat"):
            runs = f"{r['repeat']} of {r['repeat_target']} timed runs"
        else:
            runs = f"the validated first run only ({r.get('first_ms') or r['median_ms']:.1f} ms)"
        out.append(f"- **{k}** / `{f}`: {runs} ({budget})")
    return out


def plot(table: Table, key: str, preset: str, path: Path) -> None:
    """One category's speedup bars (log scale), the geomean per framework last; one framework alone: its times."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    label, _ = CATEGORIES[key]
    ks = table.in_category(key)
    if not table.compared:
        fig, ax = _time_bars(table, ks, plt)
        ax.set_title(f"{label} kernels — preset {preset}")
        fig.savefig(path, dpi=150, bbox_inches="tight")
        plt.close(fig)
        return
    groups = ks + ["geomean"]
    fws = table.compared
    width = 0.8 / max(1, len(fws))
    fig, ax = plt.subplots(figsize=(max(6.0, 1.1 * len(groups) + 2), 4.2))
    colors = plt.get_cmap("tab10")
    top = 1.0
    for i, f in enumerate(fws):
        values = [table.speedup(k, f) for k in ks] + [table.geomean(f, ks)]
        xs = [g + (i - (len(fws) - 1) / 2) * width for g in range(len(groups))]
        # bars grow from 1 (no change) up to a speedup or down to a slowdown
        heights = [v - 1.0 if v is not None else float("nan") for v in values]
        ax.bar(
            xs,
            heights,
            width,
            bottom=1.0,
            label=LABELS.get(f, f),
            color=colors(i % 10),
            edgecolor="black",
            linewidth=0.4,
        )
        for x, v in zip(xs, values):
            if v is None:
                ax.text(x, 1.0, "×", ha="center", va="bottom", fontsize=8, color="grey")
            else:
                top = max(top, v)
        gm = values[-1]
        if gm is not None:
            ax.text(xs[-1], max(gm, 1.0), _speed(gm), ha="center", va="bottom", fontsize=7, rotation=90)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_yscale("log")
    low = min(
        [table.speedup(k, f) or 1.0 for k in ks for f in fws] + [table.geomean(f, ks) or 1.0 for f in fws], default=1.0
    )
    ax.set_ylim(min(0.5, low / 2.0), top * 6.0)
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels(groups, rotation=30, ha="right")
    # the x range the groups span: with no kernel the bars are all NaN and would leave it to the autoscale (a figure
    # thousands of pixels wide)
    ax.set_xlim(-0.75, len(groups) - 0.25)
    if ks:
        ax.axvline(len(groups) - 1.5, color="grey", linestyle=":", linewidth=0.8)
    ax.set_ylabel(f"speedup over {LABELS.get(table.baseline, table.baseline)}")
    ax.set_title(f"{label} kernels — preset {preset}")
    ax.legend(fontsize=8, ncol=min(3, max(1, len(fws))), loc="lower center", bbox_to_anchor=(0.5, 1.08))
    ax.grid(axis="y", which="major", alpha=0.3)
    if not ks:
        ax.text(0.5, 0.5, "no kernels of this category in the results", transform=ax.transAxes, ha="center")
    fig.savefig(path, dpi=150, bbox_inches="tight")
    plt.close(fig)


def _time_bars(table: Table, ks: list[str], plt):
    """The plot of results that hold one framework (no speedups): its median time per kernel (log scale), × where
    it failed or did not validate."""
    fw = table.frameworks[0]
    values = [table.time(k, fw) if table.valid(k, fw) else None for k in ks]
    valid = [v for v in values if v is not None]
    low, high = (min(valid) / 3.0, max(valid) * 6.0) if valid else (0.1, 10.0)
    fig, ax = plt.subplots(figsize=(max(6.0, 1.1 * len(ks) + 2), 4.2))
    heights = [v - low if v is not None else float("nan") for v in values]
    ax.bar(range(len(ks)), heights, 0.6, bottom=low, label=LABELS.get(fw, fw), edgecolor="black", linewidth=0.4)
    for x, v in enumerate(values):
        text = "×" if v is None else _fmt(v)
        ax.text(
            x,
            low if v is None else v,
            text,
            ha="center",
            va="bottom",
            fontsize=7,
            color="grey" if v is None else "black",
        )
    ax.set_yscale("log")
    ax.set_ylim(low, high)
    ax.set_xlim(-1, len(ks))
    ax.set_xticks(range(len(ks)))
    ax.set_xticklabels(ks, rotation=30, ha="right")
    ax.set_ylabel("median time (ms)")
    ax.legend(fontsize=8, loc="lower center", bbox_to_anchor=(0.5, 1.08))
    ax.grid(axis="y", which="major", alpha=0.3)
    if not ks:
        ax.text(0.5, 0.5, "no kernels of this category in the results", transform=ax.transAxes, ha="center")
    return fig, ax


def default_out(db: str | Path, preset: str) -> Path:
    """Where ``report`` writes when no ``--out`` is given: ``report_<preset>`` next to the results database (for
    the default database, in the harness's folder :func:`results.cache_dir`), never the current folder."""
    return Path(db).expanduser().resolve().parent / f"report_{preset}"


def report(
    db: str | Path,
    preset: str,
    out: str | Path | None = None,
    gpu: str | None = None,
    run_id: str | None = None,
    baseline: str | None = None,
    plots: bool = True,
) -> dict:
    """Writes the markdown table and (``plots``) the three PNGs into ``out`` (None: :func:`default_out`); returns
    their paths."""
    if not Path(db).is_file():  # connect would create an empty one
        raise SystemExit(
            f"no results database at {db}: write one with python -m npbench_runs run (the same --cache), "
            "or name one with --db"
        )
    conn = results.connect(db)
    rows = results.latest(conn, preset, gpu=gpu, run_id=run_id)
    conn.close()
    if not rows:
        raise SystemExit(f"no results for preset {preset!r} in {db}")
    table = Table(rows, baseline)
    out = default_out(db, preset) if out is None else Path(out)
    out.mkdir(parents=True, exist_ok=True)
    md = out / f"report_{preset}.md"
    md.write_text(markdown(table, preset, rows))
    written = {"markdown": md}
    if plots:
        for key in CATEGORIES:
            path = out / f"speedup_{preset}_{key}.png"
            plot(table, key, preset, path)
            written[key] = path
    return written
