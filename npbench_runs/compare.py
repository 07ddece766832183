"""Side-by-side comparison: dace-cpufree vs the other frameworks, validated against NumPy.

    python -m npbench_runs.compare --preset S [--kernels jacobi_2d gemm] [--frameworks F ...] [--out DIR]

(The full harness, with parallel builds, SQLite results and plots, is ``python -m npbench_runs run``;
see docs/npbench.md. This script keeps its CSV/markdown output for the results already in docs/.)

For each kernel: NumPy computes the reference once; every framework is compiled (compile time
reported apart), run on fresh device inputs ``--repeat`` times (the first run is validated), and
the median and minimum wall times (device synchronised) are reported, with the speedups of ours over
each other framework. A framework that fails on a kernel gets its error recorded and the run goes on.

Frameworks default to what ``python -m npbench_runs run`` compares on this machine
(:func:`npbench_runs.run.default_frameworks`: the GPU ones where a CUDA device is visible, else NumPy and
the host emulation); ``compare_<preset>.csv`` and ``.md`` go to ``--out``, by default ``compare`` in the
harness's folder (:func:`npbench_runs.results.cache_dir`), not the current folder.
"""

from __future__ import annotations

import argparse
import csv
import math
import platform
import statistics
import time
import traceback
from pathlib import Path

import numpy as np

from npbench_runs import results
from npbench_runs.frameworks import FRAMEWORKS, timed
from npbench_runs.kernels import KERNELS

FIELDS = [
    "kernel",
    "preset",
    "framework",
    "validated",
    "median_ms",
    "min_ms",
    "kernel_ms",
    "compile_s",
    "per_step_us",
    "grid",
    "error",
]
STEP_PARAM = {"jacobi_1d": "TSTEPS", "jacobi_2d": "TSTEPS", "heat_3d": "TSTEPS", "fdtd_2d": "TMAX", "adi": "TSTEPS"}


def validate(module, args, ret, ref_args, ref_ret, framework) -> bool:
    for name in module.OUTPUTS:
        got = framework.to_host(ret if name == "__return" else args[name])
        want = ref_ret if name == "__return" else ref_args[name]
        if got is None or not np.allclose(got, want, rtol=module.RTOL, atol=module.ATOL):
            return False
    return True


def run_kernel(module, preset: str, names: list[str], repeat: int, log) -> list[dict]:
    params = module.PRESETS[preset]
    host_args = module.initialize(**params)
    ref_args = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in host_args.items()}
    ref_ret = module.reference(**ref_args)
    rows = []
    for fname in names:
        fw = FRAMEWORKS[fname]()
        row = {"kernel": module.NAME, "preset": preset, "framework": fname, "validated": False, "error": ""}
        try:
            t0 = time.perf_counter()
            fn = fw.prepare(module)
            row["compile_s"] = round(time.perf_counter() - t0, 2)
            (args, ret), times = timed(fn, fw, lambda fw=fw: fw.to_device(host_args), repeat)
            row["validated"] = validate(module, args, ret, ref_args, ref_ret, fw)
            row["median_ms"] = statistics.median(times) * 1e3
            row["min_ms"] = min(times) * 1e3
            if fname.startswith("dace_cpufree"):
                # the event-timed kernel of the last run, and the grid it ran on
                row["kernel_ms"] = fn.last_kernel_ms
                row["grid"] = f"{fn.launch_config[0]}x{fn.launch_config[1]}"
                steps = params.get(STEP_PARAM.get(module.NAME, ""), 0)
                if steps:
                    row["per_step_us"] = fn.last_kernel_ms * 1e3 / steps
        except Exception as err:  # a failing framework is recorded, the run goes on
            row["error"] = f"{type(err).__name__}: {str(err).splitlines()[0][:300]}"
            log(traceback.format_exc(limit=3))
        log(
            f"  {module.NAME:12s} {fname:13s} "
            + (
                f"{row.get('median_ms', float('nan')):10.3f} ms  validated={row['validated']}"
                if not row["error"]
                else f"ERROR {row['error']}"
            )
        )
        rows.append(row)
    return rows


#: Column and sentence names of the frameworks (the others go by their framework name).
LABELS = {"dace_cpufree": "dace-cpufree", "dace_gpu": "upstream DaCe GPU", "cupy": "CuPy"}


def ours(frameworks: list[str]) -> str | None:
    """The framework the speedups are of: ``dace_cpufree`` if compared, else the first other variant of ours."""
    if "dace_cpufree" in frameworks:
        return "dace_cpufree"
    return next((f for f in frameworks if f.startswith("dace_cpufree")), None)


def ratios(rows: list[dict]) -> list[dict]:
    """One line per kernel: times, and speedups of ours over each other framework."""
    table, names = {}, []
    for r in rows:
        table.setdefault(r["kernel"], {})[r["framework"]] = r
        if r["framework"] not in names:
            names.append(r["framework"])
    me = ours(names)
    out = []
    for kernel, fws in table.items():
        line = {"kernel": kernel}
        for f, r in fws.items():
            line[f] = r.get("median_ms") if r.get("validated") else None
        for base in names:
            if base != me:
                b, o = line.get(base), line.get(me)
                line[f"speedup_vs_{base}"] = (b / o) if (b and o) else None
        line["per_step_us"] = fws.get(me, {}).get("per_step_us")
        out.append(line)
    return out


def geomean(values) -> float | None:
    vals = [v for v in values if v]
    return math.exp(sum(math.log(v) for v in vals) / len(vals)) if vals else None


def markdown(preset: str, lines: list[dict], hardware: str, frameworks: list[str] | None = None) -> str:
    """The table of ``lines`` (:func:`ratios`): a column per framework, then ours over each other one.

    :param frameworks: the columns, in order (default: the old comparison, dace_cpufree, dace_gpu, cupy).
    """
    frameworks = list(frameworks or ["dace_cpufree", "dace_gpu", "cupy"])
    me = ours(frameworks)
    bases = [f for f in frameworks if f != me]
    label = lambda f: LABELS.get(f, f)  # noqa: E731
    fmt = lambda v, p=3: "—" if v is None else f"{v:.{p}f}"  # noqa: E731
    where = (
        "inputs on the GPU, device synchronised"
        if any(FRAMEWORKS[f]().device for f in frameworks if f in FRAMEWORKS)
        else "on the host"
    )
    md = [
        f"# {' vs '.join(label(f) for f in ([me] if me else []) + bases)} — preset {preset}",
        "",
        f"Hardware: {hardware}",
        "",
        f"Median wall time in ms ({where}); — = failed or not validated.",
        "",
        "| kernel | " + " | ".join(frameworks) + "".join(f" | vs {b}" for b in bases if me) + " | per step (µs) |",
        "|---" * (len(frameworks) + (len(bases) if me else 0) + 2) + "|",
    ]
    for ln in lines:
        cells = [fmt(ln.get(f)) for f in frameworks]
        if me:
            cells += [f"{fmt(ln.get(f'speedup_vs_{b}'), 2)}x" for b in bases]
        md.append(f"| {ln['kernel']} | " + " | ".join(cells) + f" | {fmt(ln.get('per_step_us'), 2)} |")
    if me and bases:
        speedups = "; vs ".join(
            f"{label(b)}: {fmt(geomean(ln.get(f'speedup_vs_{b}') for ln in lines), 2)}x" for b in bases
        )
        md += ["", f"Geomean speedup vs {speedups}."]
    return "\n".join(md) + "\n"


def hardware() -> str:
    try:
        import cupy

        props = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)
        gpu = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
        return f"{gpu}, {props['multiProcessorCount']} SMs; host {platform.node()} (Python {platform.python_version()})"
    except Exception:
        return f"no GPU ({platform.node()})"


def default_out() -> Path:
    """Where the CSV and markdown go without ``--out``: ``compare`` in the harness's folder."""
    return results.cache_dir() / "compare"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="S")
    parser.add_argument("--kernels", nargs="*", default=list(KERNELS))
    parser.add_argument(
        "--frameworks", nargs="*", help="default: what python -m npbench_runs run compares here (list shows it)"
    )
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--out", help=f"folder of compare_<preset>.csv and .md (default: {default_out()})")
    args = parser.parse_args(argv)
    if not args.frameworks:
        from npbench_runs.run import default_frameworks

        args.frameworks = default_frameworks()
    out = Path(args.out) if args.out else default_out()
    out.mkdir(parents=True, exist_ok=True)
    hw = hardware()
    print(f"preset {args.preset} on {hw}: {' '.join(args.frameworks)}", flush=True)
    rows = []
    for name in args.kernels:
        rows += run_kernel(KERNELS[name], args.preset, args.frameworks, args.repeat, lambda s: print(s, flush=True))
    stem = out / f"compare_{args.preset}"
    with open(f"{stem}.csv", "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=FIELDS)
        writer.writeheader()
        writer.writerows(rows)
    text = markdown(args.preset, ratios(rows), hw, args.frameworks)
    Path(f"{stem}.md").write_text(text)
    print(text)
    print(f"written: {stem}.csv, {stem}.md", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
