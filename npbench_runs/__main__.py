"""``python -m npbench_runs {run,report,list}``: NPBench-style benchmark of the kernels in npbench_runs/kernels.

python -m npbench_runs run --preset S [--kernels K ...] [--frameworks F ...] [--repeat N] [--db FILE] [--jobs J]
                           [--budget SECONDS] [--timeout SECONDS] [--skip-done] [--stop-after SECONDS]
python -m npbench_runs report --db FILE --preset S --out DIR
python -m npbench_runs merge --db FILE SHARD.db ...
python -m npbench_runs list
python -m npbench_runs foreign --npbench DIR [--preset S] [--backend emulate|cuda] [--benchmarks B ...] [--json OUT]
"""

from __future__ import annotations

import argparse
import os
import sys

from npbench_runs.results import DEFAULT_DB


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["foreign"]:  # NPBench's own programs (npbench_runs/foreign.py has its own options)
        from npbench_runs.foreign import main as foreign

        return foreign(argv[1:])
    from npbench_runs import frameworks

    parser = argparse.ArgumentParser(prog="python -m npbench_runs", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)

    r = sub.add_parser("run", help="compile (in parallel), validate and time; append results to the SQLite file")
    r.add_argument("--preset", default="S", help="S, M, L, paper (NPBench's sizes) or test/small (tiny)")
    r.add_argument("--kernels", nargs="+", help="default: all kernels")
    r.add_argument(
        "--frameworks",
        nargs="+",
        help=f"default: {' '.join(frameworks.DEFAULT_FRAMEWORKS)}; all: {' '.join(frameworks.FRAMEWORKS)}",
    )
    r.add_argument("--repeat", type=int, default=10, help="timed runs after the validated first run (default 10)")
    r.add_argument("--db", default=DEFAULT_DB, help=f"SQLite file, appended to (default {DEFAULT_DB})")
    r.add_argument(
        "--jobs",
        type=int,
        default=None,
        help="processes of the build phase (default min(16, cores)); 0 or 1: build inline while timing",
    )
    r.add_argument(
        "--cache", help="cache of builds and references (default $NPBENCH_RUNS_CACHE or ~/.cache/npbench_runs)"
    )
    r.add_argument(
        "--timeout",
        type=float,
        default=900.0,
        help="seconds one framework may take on one kernel (load, upload, runs); then its error is stored (900)",
    )
    r.add_argument(
        "--budget",
        type=float,
        help="seconds of runs per kernel and framework: the repeats stop once spent (the first run validated, "
        "at least one timed run after it unless the first alone took the budget); default: all --repeat runs",
    )
    r.add_argument(
        "--skip-done", action="store_true", help="leave out (kernel, framework) pairs that have a row in --db already"
    )
    r.add_argument(
        "--stop-after", type=float, help="seconds after which no further kernel starts (resume with --skip-done)"
    )
    r.add_argument("--no-isolate", action="store_true", help="time in this process (no crash/timeout protection)")
    r.add_argument("--compile-only", action="store_true", help="run the build phase only")
    r.add_argument("--progress", choices=("auto", "rich", "tqdm", "plain"), default="auto")

    p = sub.add_parser("report", help="markdown table and speedup plots from the SQLite file")
    p.add_argument("--db", default=DEFAULT_DB)
    p.add_argument("--preset", default="S")
    p.add_argument("--out", default="npbench_report")
    p.add_argument("--gpu", help="only rows of this GPU name")
    p.add_argument("--run-id", help="only rows of this run")
    p.add_argument("--baseline", help="framework the speedups are over (default dace_pure)")
    p.add_argument("--no-plots", action="store_true", help="markdown only (no matplotlib needed)")

    m = sub.add_parser("merge", help="append the rows of other result files (shards of one study) to --db")
    m.add_argument("--db", required=True)
    m.add_argument("sources", nargs="+")

    sub.add_parser("list", help="kernels and frameworks")

    args = parser.parse_args(argv)
    if args.command == "run":
        from npbench_runs.run import BenchmarkFailed, run

        try:
            run(
                preset=args.preset,
                kernel_names=args.kernels,
                framework_names=args.frameworks,
                repeat=args.repeat,
                db=args.db,
                jobs=args.jobs,
                cache=args.cache,
                timeout=args.timeout,
                isolate=not args.no_isolate,
                compile_only=args.compile_only,
                ui_kind=args.progress,
                budget=args.budget,
                skip_done=args.skip_done,
                stop_after=args.stop_after,
            )
        except BenchmarkFailed as err:
            print(f"error: {err}", file=sys.stderr)
            return 1
        return 0
    if args.command == "report":
        from npbench_runs.report import report

        written = report(
            args.db,
            args.preset,
            args.out,
            gpu=args.gpu,
            run_id=args.run_id,
            baseline=args.baseline,
            plots=not args.no_plots,
        )
        print(written["markdown"].read_text())
        for key, path in written.items():
            print(f"{key}: {path}")
        return 0
    if args.command == "merge":
        from npbench_runs.results import merge

        print(f"{merge(args.sources, args.db)} rows added to {args.db}")
        return 0
    from npbench_runs.kernels import KERNELS
    from npbench_runs.report import category

    for name, module in KERNELS.items():
        print(f"{name:16s} {category(name):10s} presets: {' '.join(module.PRESETS)}")
    print("frameworks:", " ".join(frameworks.FRAMEWORKS), f"(default: {' '.join(frameworks.DEFAULT_FRAMEWORKS)})")
    print("cache:", os.environ.get("NPBENCH_RUNS_CACHE") or "~/.cache/npbench_runs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
