"""``python -m npbench_runs {run,report,merge,list,foreign}``: NPBench-style benchmark of the kernels in
npbench_runs/kernels (``foreign``: of NPBench's own programs, from a checkout).

python -m npbench_runs run --preset S [--kernels K ...] [--frameworks F ...] [--repeat N] [--db FILE] [--jobs J]
                           [--cache DIR] [--budget SECONDS] [--timeout SECONDS] [--skip-done] [--stop-after SECONDS]
python -m npbench_runs report [--db FILE] --preset S [--out DIR]
python -m npbench_runs merge [--db FILE] SHARD.db ...
python -m npbench_runs list
python -m npbench_runs foreign --npbench DIR [--preset S] [--backend emulate|cuda] [--benchmarks B ...] [--json OUT]

The results database is ``results.db`` in the harness's folder (``--cache``, ``$NPBENCH_RUNS_CACHE`` or
``~/.cache/npbench_runs``, outside the repository) unless ``--db`` names one; ``merge`` appends to it and
``report`` writes ``report_<preset>`` next to it unless ``--out`` names a folder. Nothing goes into the current
folder by default.
"""

from __future__ import annotations

import argparse
import sys

from npbench_runs import results

DESCRIPTION = (
    "NPBench-style benchmark of the kernels in npbench_runs/kernels (run, report, merge, list); foreign: "
    "NPBench's own DaCe programs from an NPBench checkout"
)

RUN_EPILOG = """\
exit status: 0 when at least one (kernel, framework) validated (the failures of the others are stored in the
database), when nothing was left to run (--skip-done, --stop-after) and with --compile-only; 1 when frameworks
ran and none validated on any kernel (one line on stderr says why) or a kernel, framework or preset is unknown;
2 on a usage error."""


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["foreign"]:  # NPBench's own programs (npbench_runs/foreign.py has its own options)
        from npbench_runs.foreign import main as foreign

        return foreign(argv[1:])
    from npbench_runs import frameworks

    parser = argparse.ArgumentParser(prog="python -m npbench_runs", description=DESCRIPTION)
    sub = parser.add_subparsers(dest="command", required=True)
    default_db = f"results.db in the harness's folder, here {results.default_db()}"

    r = sub.add_parser(
        "run",
        help="compile (in parallel), validate and time; append results to the SQLite file",
        epilog=RUN_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    r.add_argument("--preset", default="S", help="S, M, L, paper (NPBench's sizes) or test/small (tiny)")
    r.add_argument("--kernels", nargs="+", help="default: all kernels (list shows them)")
    r.add_argument(
        "--frameworks",
        nargs="+",
        help=f"default: {' '.join(frameworks.DEFAULT_FRAMEWORKS)} where a CUDA device is visible, else "
        f"{' '.join(frameworks.HOST_FRAMEWORKS)} (list says which applies here); "
        f"all: {' '.join(frameworks.FRAMEWORKS)}",
    )
    r.add_argument("--repeat", type=int, default=10, help="timed runs after the validated first run (default 10)")
    r.add_argument("--db", help=f"SQLite file, appended to (default: {default_db}; with --cache DIR: DIR/results.db)")
    r.add_argument(
        "--jobs",
        type=int,
        default=None,
        help="processes of the build phase (default min(16, cores)), which ends before the timing phase starts: "
        "timed calls run one at a time with nothing else of the run beside them; 0 or 1: no build phase, each "
        "framework is built in the timing worker before its runs",
    )
    r.add_argument(
        "--cache",
        metavar="DIR",
        help="the harness's folder: builds, references, logs and the default --db "
        "(default $NPBENCH_RUNS_CACHE or ~/.cache/npbench_runs)",
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
    r.add_argument(
        "--progress",
        choices=("auto", "rich", "tqdm", "plain"),
        default="auto",
        help="progress display (auto: rich, else tqdm, else plain lines)",
    )

    p = sub.add_parser("report", help="markdown table and speedup plots from the SQLite file")
    p.add_argument("--db", help=f"SQLite file (default: {default_db}; with --cache DIR: DIR/results.db)")
    p.add_argument("--cache", metavar="DIR", help="the folder a run used with --cache: its results.db is read")
    p.add_argument("--preset", default="S", help="the rows of this preset (default S)")
    p.add_argument(
        "--out",
        metavar="DIR",
        help="folder of the markdown and PNGs (default: report_<preset> next to the database, here "
        f"{results.default_db().parent / 'report_S'} for preset S)",
    )
    p.add_argument("--gpu", help="only rows of this GPU name")
    p.add_argument("--run-id", help="only rows of this run")
    p.add_argument("--baseline", help="framework the speedups are over (default dace_pure)")
    p.add_argument("--no-plots", action="store_true", help="markdown only (no matplotlib needed)")

    m = sub.add_parser("merge", help="append the rows of other result files (shards of one study) to --db")
    m.add_argument("--db", help=f"SQLite file, appended to (default: {default_db}; with --cache DIR: DIR/results.db)")
    m.add_argument("--cache", metavar="DIR", help="the folder a run used with --cache: rows go to its results.db")
    m.add_argument("sources", nargs="+")

    sub.add_parser("list", help="kernels, the frameworks run would compare here, and the folders it uses")
    sub.add_parser(  # parsed by npbench_runs/foreign.py (above); here for the help text
        "foreign",
        help="NPBench's own DaCe programs through dace-cpufree: needs an NPBench checkout (--npbench DIR); "
        "python -m npbench_runs foreign --help",
        add_help=False,
    )

    args, extra = parser.parse_known_args(argv)
    if extra:
        hint = ""
        if args.command == "run" and "--benchmarks" in extra:
            hint = (
                "; run names its kernels with --kernels (python -m npbench_runs list shows them), NPBench's own "
                "programs run from a checkout with: python -m npbench_runs foreign --npbench DIR --benchmarks ..."
            )
        sub.choices[args.command].error(f"unrecognized arguments: {' '.join(extra)}{hint}")
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
        from npbench_runs.report import default_out, report

        db = args.db or results.default_db(args.cache)
        out = args.out or default_out(db, args.preset)
        written = report(
            db,
            args.preset,
            out,
            gpu=args.gpu,
            run_id=args.run_id,
            baseline=args.baseline,
            plots=not args.no_plots,
        )
        print(written["markdown"].read_text())
        for key, path in written.items():
            print(f"{key}: {path}")
        print(f"report written to {out}")
        return 0
    if args.command == "merge":
        from npbench_runs.results import merge

        db = args.db or results.default_db(args.cache)
        print(f"{merge(args.sources, db)} rows added to {db}")
        return 0
    from npbench_runs.kernels import KERNELS
    from npbench_runs.report import category
    from npbench_runs.run import default_frameworks

    for name, module in KERNELS.items():
        print(f"{name:16s} {category(name):10s} presets: {' '.join(module.PRESETS)}")
    here = default_frameworks()  # what run compares when --frameworks is not given (with its notice without a GPU)
    print("frameworks:", " ".join(frameworks.FRAMEWORKS), f"(default here: {' '.join(here)})")
    print("cache:", results.cache_dir())
    print("results:", results.default_db())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
