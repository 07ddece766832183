"""``python -m npbench_runs foreign --npbench DIR``: NPBench's own DaCe programs through dace-cpufree, classified.

For every benchmark of an NPBench checkout (``bench_info/<name>.json`` with a ``<module>_dace.py``), in a process
of its own (a crash or a hang costs that benchmark only): the inputs of the preset from NPBench's ``initialize``,
NPBench's NumPy implementation on copies, the DaCe program compiled by :func:`dace_cpufree.compile` and called the
way NPBench calls a DaCe program (input arguments and size parameters as keywords), and the outputs compared as
NPBench compares them (``np.allclose`` with the benchmark's rtol/atol, else the relative error in the 2-norm
against ``norm_error``). Each program ends in one class:

* ``validated``; ``wrong`` (ran, and an output differs: the relative error of each output is kept); ``race``
  (with ``--race-check``: the emulation's race checker saw threads access an element with no barrier between);
* ``refused`` (the compiler named a construct it cannot make persistent), ``frontend`` (DaCe's own parser
  failed), ``build`` (the generated code did not compile: the first compiler error), ``run`` (an error at the
  call), ``crash`` or ``timeout``.

With ``--speed`` (``--backend cuda``), a validated program is timed next to what its users would pick instead:
NPBench's own CuPy implementation (``<module>_cupy.py``) and the same DaCe program under upstream DaCe
(``auto_optimize(GPU, use_gpu_storage=True)``, DaCe's default library choices; built once, then loaded from the
harness's cache), each on the same inputs already on the GPU (CuPy arrays, fresh
copies before every call), CUDA events around the call, the median of ``REPEATS`` calls (3 where one call takes
over 50 ms) after a warm-up. A
baseline's result is validated like ours; one that fails or differs is reported with its reason, not timed. The
process prints its row after validation and after each framework's timing, so one stopped at the time limit while
a slow baseline runs keeps its class and the times taken (the rest have the limit as their reason).
``--baselines`` names which of the two are timed (none: ours alone).

With ``--jobs N`` (N > 1), a first phase does every benchmark's CPU work in N processes side by side, each with
the ``--timeout``: NPBench's inputs and NumPy reference outputs, saved in the harness's cache
(``<cache>/foreign_references``, keyed by the benchmark, the preset, the NumPy and init sources, the bench_info
entry and NumPy's version), our library built into dace-cpufree's build cache (:func:`dace_cpufree.prebuild`) and,
with ``--speed``, upstream DaCe's build. Nothing runs on the GPU there and nothing is classified there: the second
phase is the serial run above, each process loading the saved reference (computing it again if the file cannot be
read) and finding the builds done, so its timings are not disturbed. A saved reference is used whenever it is
present, ``--jobs 1`` included.

Nothing of NPBench is copied into this repository: the checkout is read where it is.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from npbench_runs.foreign_programs import BASELINES, CLASSES, benchmarks, prepare_one, run_one


def _command(
    root: Path, name: str, preset: str, backend: str, race_check: bool, speed: int, baselines=BASELINES
) -> list[str]:
    cmd = [sys.executable, "-m", "npbench_runs.foreign", "--one", name, "--npbench", str(root)]
    cmd += ["--preset", preset, "--backend", backend] + (["--race-check"] if race_check else [])
    if not speed:
        return cmd
    return cmd + ["--speed", str(speed)] + (["--baselines", *baselines] if tuple(baselines) != BASELINES else [])


def _environment() -> dict:
    """The benchmark processes' environment: unbuffered output, and one string-hash seed for all of them (unless
    one is set): DaCe's map fusion can leave index expressions such as ``k - k`` whose printed form follows the
    hash order (docs/dace-limitations.md), and the same code text in every process is what lets the serial run
    find the builds of the preparing processes in the build cache."""
    return dict(os.environ, PYTHONUNBUFFERED="1", PYTHONHASHSEED=os.environ.get("PYTHONHASHSEED", "0"))


def _last_row(stdout) -> dict | None:
    if isinstance(stdout, bytes):
        stdout = stdout.decode(errors="replace")
    line = next((x for x in reversed((stdout or "").splitlines()) if x.startswith("{")), None)
    return json.loads(line) if line else None


def _answer(cmd: list[str], timeout: float, env: dict) -> tuple[dict | None, str, str]:
    """``(row, "", "")`` with the JSON row a benchmark process printed last, or ``(None, class, reason)`` where it
    gave none: ``"timeout"`` past ``timeout`` seconds, else ``"crash"`` with its exit status and last error line.
    A process stopped at the time limit after it printed a row (a program validated, then timed beside slow
    baselines) answers with that row: the frameworks it had not timed have the time limit as their reason."""
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired as stopped:
        row = _last_row(stopped.stdout)
        if row is None:
            return None, "timeout", f"no answer within {timeout:.0f} s"
        for key in ("ours", "cupy", "dace_gpu") if "speed" in row else ():
            if f"{key}_ms" not in row["speed"]:
                row["speed"][f"{key}_ms"], row["speed"][f"{key}_error"] = None, f"timeout: past {timeout:.0f} s"
        return row, "", ""
    row = _last_row(proc.stdout)
    if proc.returncode == 0 and row:
        return row, "", ""
    tail = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
    return None, "crash", f"exit {proc.returncode}: {tail[:250]}"


def _threads_each(jobs: int) -> dict:
    """BLAS/OpenMP threads of each of ``jobs`` processes side by side, where the environment sets none: the cores
    shared out, so that NumPy's references do not oversubscribe them."""
    threads = str(max(1, (os.cpu_count() or 1) // jobs))
    names = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
    return {k: threads for k in names if k not in os.environ}


def prepare_all(
    root: Path,
    names,
    preset: str,
    backend: str,
    timeout: float,
    jobs: int,
    progress=print,
    race_check: bool = False,
    speed: int = 0,
    baselines: tuple[str, ...] = BASELINES,
) -> list:
    """:func:`prepare_one` of every benchmark, ``jobs`` processes at a time, each with the time limit; a line per
    benchmark as it ends."""
    env = dict(_environment(), **_threads_each(jobs))

    def one(name: str) -> dict:
        t0 = time.perf_counter()
        cmd = _command(root, name, preset, backend, race_check, speed, baselines) + ["--prepare"]
        row, _, reason = _answer(cmd, timeout, env)
        row = row or {"note": reason}
        row.update(name=name, seconds=time.perf_counter() - t0)
        progress(f"prepared {name:<28} {row['seconds']:7.1f} s  {_steps_line(row)}")
        return row

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        return list(pool.map(one, names))


def _steps_line(row: dict) -> str:
    """``reference 1.2 s (computed), ours 14.0 s, ...``, or why the process gave no answer."""
    if "steps" not in row:
        return row.get("note", "")
    return ", ".join(f"{label} {s:.1f} s" + (f" ({note[:100]})" if note else "") for label, s, note in row["steps"])


def run_all(
    root: Path,
    names,
    preset: str,
    backend: str,
    timeout: float,
    progress=print,
    into=None,
    race_check: bool = False,
    speed: int = 0,
    baselines: tuple[str, ...] = BASELINES,
) -> list:
    """Every benchmark in a process of its own, with a time limit each; rows are appended to ``into`` (a new list
    by default) as they come."""
    results = [] if into is None else into
    env = _environment()
    for name in names:
        cmd = _command(root, name, preset, backend, race_check, speed, baselines)
        t0 = time.perf_counter()
        result, failure, reason = _answer(cmd, timeout, env)
        result = result or {"name": name, "class": failure, "reason": reason}
        result.setdefault("seconds", time.perf_counter() - t0)
        results.append(result)
        progress(f"{name:<28} {result['class']:<10} {result['seconds']:7.1f} s  {result.get('reason', '')[:150]}")
        if "speed" in result:
            progress("    " + speed_line(result["speed"]))
    return results


def speed_line(row: dict) -> str:
    """``ours 1.23 ms | cupy 2.34 ms (1.90x) | dace_gpu ...``: ratios are the baseline's time over ours."""
    ours = row.get("ours_ms")
    parts = [f"ours {ours:.4g} ms" if ours else f"ours: {row.get('ours_error')}"]
    for key in ("cupy", "dace_gpu"):
        ms = row.get(f"{key}_ms")
        if ms and ours:
            parts.append(f"{key} {ms:.4g} ms ({ms / ours:.2f}x)")
        else:
            parts.append(f"{key}: {(row.get(f'{key}_error') or '')[:80]}")
    return " | ".join(parts)


def speed_table(results: list) -> str:
    """A Markdown table of ``--speed`` rows: ms per call and each baseline's time over ours (>1: ours is faster),
    with the geometric mean of the ratios over the programs where both were timed."""
    lines = [
        "| program | ours (ms) | CuPy (ms) | CuPy / ours | upstream DaCe (ms) | upstream DaCe / ours | note |",
        "|---|---|---|---|---|---|---|",
    ]
    ratios = {"cupy": [], "dace_gpu": []}
    for r in sorted(results, key=lambda r: r["name"]):
        row = r.get("speed")
        if not row:
            note = "validated, not timed" if r["class"] == "validated" else f"{r['class']}: {r.get('reason', '')[:90]}"
            lines.append(f"| {r['name']} | | | | | | {note} |")
            continue
        ours, cells, notes = row.get("ours_ms"), [], []
        for key, label in (("cupy", "CuPy"), ("dace_gpu", "upstream DaCe")):
            ms = row.get(f"{key}_ms")
            if ms and ours:
                ratios[key].append(ms / ours)
                cells += [f"{ms:.4g}", f"{ms / ours:.2f}x"]
            else:
                cells += ["", ""]
                notes.append(f"{label}: {(row.get(f'{key}_error') or '')[:70]}")
        ours_cell = f"{ours:.4g}" if ours else ""
        lines.append(f"| {r['name']} | {ours_cell} | {' | '.join(cells)} | {'; '.join(notes)} |")
    for key, label in (("cupy", "CuPy"), ("dace_gpu", "upstream DaCe")):
        if ratios[key]:
            mean = float(np.exp(np.mean(np.log(ratios[key]))))
            faster = sum(x > 1 for x in ratios[key])
            lines.append(
                f"\n{label} / ours: geometric mean **{mean:.2f}x** over {len(ratios[key])} programs; ours faster on "
                f"{faster}, slower on {len(ratios[key]) - faster}."
            )
    return "\n".join(lines) + "\n"


def summary(results: list) -> str:
    counts = {c: sum(r["class"] == c for r in results) for c in CLASSES}
    return ", ".join(f"{n} {c}" for c, n in counts.items() if n) + f" (of {len(results)})"


def reference_summary(results: list) -> str:
    """``references: 3 from the cache (0.1 s), 1 computed (2.3 s)``: where each program's reference came from."""
    parts = []
    for how, label in (("cache", "from the cache"), ("computed", "computed")):
        rows = [r for r in results if r.get("reference") == how]
        parts.append(f"{len(rows)} {label} ({sum(r['reference_s'] for r in rows):.1f} s)")
    return "references: " + ", ".join(parts)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m npbench_runs foreign", description=__doc__.split("\n")[0])
    parser.add_argument("--npbench", help="an NPBench checkout (has bench_info/ and npbench/)")
    parser.add_argument("--preset", default="S")
    parser.add_argument("--backend", default="emulate", choices=("emulate", "cuda"))
    parser.add_argument("--benchmarks", nargs="+", help="default: every benchmark with a DaCe implementation")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per benchmark (default 600)")
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("--strict", action="store_true", help="exit 1 when a program is wrong or races")
    parser.add_argument(
        "--race-check", action="store_true", help="emulation only: run each program under the race checker"
    )
    parser.add_argument(
        "--speed",
        type=int,
        default=0,
        metavar="REPEATS",
        help="GPU only: time each validated program (median of REPEATS calls) next to NPBench's CuPy version and "
        "upstream DaCe on the GPU",
    )
    parser.add_argument(
        "--baselines",
        nargs="*",
        choices=BASELINES,
        default=list(BASELINES),
        help="with --speed: what is timed beside ours (default: both; none given: ours alone, e.g. to compare two "
        "builds of ours)",
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=1,
        metavar="N",
        help="N > 1: first do every benchmark's CPU work in N processes side by side (NumPy references saved in the "
        "harness's cache, our library and, with --speed and dace_gpu among --baselines, upstream DaCe built), then "
        "run, validate and time them one at a time as with 1 (default 1: one at a time only)",
    )
    parser.add_argument("--table", nargs="+", metavar="JSON", help="print the speed table of these result files")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    parser.add_argument("--prepare", action="store_true", help=argparse.SUPPRESS)  # with --one: its CPU work only
    args = parser.parse_args(argv)
    if args.table:  # later files' rows replace earlier ones of the same program
        rows = {r["name"]: r for f in args.table for r in json.loads(Path(f).read_text())}
        print(speed_table(list(rows.values())), end="")
        return 0
    if not args.npbench:
        parser.error("--npbench is required (the root of an NPBench checkout)")
    root = Path(args.npbench).resolve()
    if not (root / "bench_info").is_dir():
        parser.error(f"{root} has no bench_info/: pass the root of an NPBench checkout")
    if args.race_check and args.backend != "emulate":
        parser.error("--race-check runs in the host emulation: use it with --backend emulate")
    if args.speed and args.backend != "cuda":
        parser.error("--speed times programs on the GPU: use it with --backend cuda")
    baselines = tuple(b for b in BASELINES if b in args.baselines)
    if baselines != BASELINES and not args.speed:
        parser.error("--baselines chooses what --speed times beside ours: use it with --speed")
    if args.jobs < 1:
        parser.error("--jobs takes a number of processes, 1 or more")
    if args.one:
        if args.prepare:
            row = prepare_one(root, args.one, args.preset, args.backend, args.race_check, args.speed, baselines)
            print(json.dumps(row))
            return 0

        def checkpoint(row: dict) -> None:  # the parent reads the last row printed, also of a process it stopped
            print(json.dumps(row), flush=True)

        row = run_one(root, args.one, args.preset, args.backend, args.race_check, args.speed, checkpoint, baselines)
        print(json.dumps(row))
        return 0
    names = args.benchmarks or list(benchmarks(root))
    unknown = sorted(set(names) - set(benchmarks(root)))
    if unknown:
        parser.error(f"no DaCe benchmark named {', '.join(unknown)} in {root}")
    if args.jobs > 1:
        t0 = time.perf_counter()
        kwargs = dict(race_check=args.race_check, speed=args.speed, baselines=baselines)
        kwargs.update(progress=lambda line: print(line, flush=True))
        prepare_all(root, names, args.preset, args.backend, args.timeout, args.jobs, **kwargs)
        print(f"prepared {len(names)} benchmarks in {time.perf_counter() - t0:.1f} s ({args.jobs} jobs)", flush=True)
    results = []

    def progress(line: str) -> None:  # the JSON file is rewritten after each program: a stopped run keeps its rows
        print(line, flush=True)
        if args.json:
            Path(args.json).write_text(json.dumps(results, indent=1))

    results = run_all(
        root,
        names,
        args.preset,
        args.backend,
        args.timeout,
        progress=progress,
        into=results,
        race_check=args.race_check,
        speed=args.speed,
        baselines=baselines,
    )
    print(summary(results))
    print(reference_summary(results))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 1 if args.strict and any(r["class"] in ("wrong", "race") for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
