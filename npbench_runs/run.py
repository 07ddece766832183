"""The benchmark runner: ``python -m npbench_runs run --preset S [--kernels ...] [--frameworks ...]``.

Three phases, NPBench's timing rules:

1. **Build** (parallel, ``--jobs`` processes): every (kernel, framework) that compiles is built once,
   and NumPy's reference outputs of each (kernel, preset) are computed and saved (``np.savez``) in
   the cache. Builds persist on disk (see :mod:`npbench_runs.frameworks`), so this phase costs
   nothing the second time. The phase ends (its processes exited) before timing starts: ``--jobs``
   never runs anything beside a timed call.
2. **Timing** (serial, one process per kernel unless ``--no-isolate``, see :mod:`npbench_runs.worker`;
   one framework at a time, with nothing else of the run working meanwhile):
   each framework loads its build, uploads the inputs once, runs once on a fresh copy (outputs
   validated against the cached NumPy reference with the kernel's RTOL/ATOL, time kept as
   ``first_ms``), then up to ``--repeat`` timed runs, each on a fresh device-side copy of the inputs
   (copy not timed; the device is synchronised before the clock stops), fewer when ``--budget``
   seconds are spent. Median and minimum over the timed runs are stored with their number; the
   compile time comes from phase 1.
3. Every result goes to the SQLite file (``--db``) as soon as it exists; a framework that fails
   (build error, exception, validation failure, crash, ``--timeout``) gets its error stored and the
   run goes on.

A kernel's worker process that crashes (a sticky CUDA error, a segfault) or passes ``--timeout``
is replaced by a fresh one for the frameworks still to do. One study may be split over several
invocations that append to one ``--db`` (kernels in groups; ``--skip-done`` leaves out what is
there, ``--stop-after`` starts no kernel after that many seconds); ``report`` renders it at the end.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import sys
import time
import uuid
from concurrent.futures import ProcessPoolExecutor, as_completed
from multiprocessing import get_context
from pathlib import Path

from npbench_runs import frameworks as fw_mod
from npbench_runs import results
from npbench_runs.progress import progress
from npbench_runs.references import compute_reference, kernels, load_reference, reference_path
from npbench_runs.report import default_out as report_dir
from npbench_runs.worker import error_text, run_isolated, time_kernel

__all__ = ["compute_reference", "kernels", "load_reference", "reference_path", "run", "build_phase"]


# ------------------------------------------------------------------------------------------- building


def build_task(kernel: str, names: list[str]) -> list[dict]:
    """Builds ``kernel`` for each framework in ``names`` (in this process, one after another)."""
    module = kernels()[kernel]
    out = []
    for name in names:
        rec = {"kernel": kernel, "framework": name, "error": ""}
        try:
            rec.update(fw_mod.get(name).build(module))
        except BaseException as err:  # noqa: B036 - a failed build is a result, SystemExit from a tool included
            rec["error"] = error_text(err)
        out.append(rec)
    return out


def _child_init(workdir: str, log: str) -> None:
    """Pool workers: private working directory, output to a log file (keeps the progress display clean)."""
    os.chdir(workdir)
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)


@contextlib.contextmanager
def _threads_per_process(n: int):
    """BLAS/OpenMP threads of the pool's processes (they inherit the environment when spawned)."""
    names = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
    saved = {k: os.environ.get(k) for k in names}
    for k in names:
        os.environ[k] = str(n)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def build_phase(kernel_names, framework_names, preset, jobs, ui_kind, log_dir: Path) -> dict:
    """Phase 1 in a process pool. Returns ``{(kernel, framework): build record}``."""
    ks = kernels()
    tasks = []
    for k in kernel_names:  # references first: at paper sizes they are the long ones
        if not reference_path(ks[k], preset).exists():
            tasks.append(("ref", k, None))
    families = {}
    for k in kernel_names:
        for name in framework_names:
            fw = fw_mod.get(name)
            if fw.needs_build:
                families.setdefault((k, fw.build_family or name), []).append(name)
    # upstream DaCe first (the slowest builds), ours after
    for (k, _family), names in sorted(families.items(), key=lambda item: item[0][1] == "cpufree"):
        tasks.append(("build", k, names))
    builds = {}
    if not tasks:
        return builds
    ui = progress(len(tasks), f"build ({jobs} processes)", ui_kind)
    work = fw_mod.cache_root() / "work"
    work.mkdir(parents=True, exist_ok=True)
    log = log_dir / "build.log"
    threads = max(1, (os.cpu_count() or 1) // jobs)
    with _threads_per_process(threads):
        with ProcessPoolExecutor(
            max_workers=jobs, mp_context=get_context("spawn"), initializer=_child_init, initargs=(str(work), str(log))
        ) as pool:
            futures = {}
            for kind, k, names in tasks:
                if kind == "ref":
                    futures[pool.submit(compute_reference, k, preset)] = (kind, k, None)
                else:
                    futures[pool.submit(build_task, k, names)] = (kind, k, names)
            for fut in as_completed(futures):
                kind, k, names = futures[fut]
                try:
                    value = fut.result()
                except BaseException as err:  # noqa: B036 - a dead pool process is a result too
                    value = err
                if kind == "ref":
                    text = f"reference {k}: " + (
                        f"FAILED {error_text(value)}"
                        if isinstance(value, BaseException)
                        else f"{value['seconds']:.1f} s"
                    )
                    ui.advance(text)
                    continue
                if isinstance(value, BaseException):
                    value = [{"kernel": k, "framework": n, "error": error_text(value)} for n in names]
                for rec in value:
                    builds[(k, rec["framework"])] = rec
                ui.advance(
                    "  ".join(
                        f"built {k:14s} {r['framework']:22s} "
                        + (
                            f"FAILED {r['error'][:160]}"
                            if r["error"]
                            else f"{r['compile_s']:6.1f} s" + (" (cached)" if r.get("cached") else "")
                        )
                        for r in value
                    )
                )
    ui.close()
    return builds


# ------------------------------------------------------------------------------------------------- main


def _check_names(ks: dict, kernel_names: list[str], framework_names: list[str], preset: str) -> None:
    for k in kernel_names:
        if k not in ks:
            raise SystemExit(
                f"unknown kernel {k!r}; known: {' '.join(sorted(ks))} (NPBench's own programs, from a checkout, "
                "run with: python -m npbench_runs foreign --npbench DIR)"
            )
    for name in framework_names:
        if name not in fw_mod.FRAMEWORKS:
            raise SystemExit(f"unknown framework {name!r}; known: {' '.join(sorted(fw_mod.FRAMEWORKS))}")
    missing = [k for k in kernel_names if preset not in ks[k].PRESETS]
    if missing:
        raise SystemExit(f"no preset {preset!r} in: {' '.join(missing)}")


def _to_do(db, preset: str, kernel_names: list[str], framework_names: list[str], skip_done: bool) -> dict:
    """``{kernel: [frameworks]}`` still to time: all, or (``skip_done``) those without a row in ``db``."""
    done = set()
    if skip_done and Path(db).exists():
        conn = results.connect(db)
        done = results.done_pairs(conn, preset)
        conn.close()
    todo = {k: [f for f in framework_names if (k, f) not in done] for k in kernel_names}
    skipped = sum(len(framework_names) - len(fs) for fs in todo.values())
    if skipped:
        print(f"skipping {skipped} (kernel, framework) pairs already in {db}", flush=True)
    return {k: fs for k, fs in todo.items() if fs}


#: What the run's first line says where no commit is known (a copy of the tree without ``.git``, e.g. an installed
#: wheel on a GPU host): how to have it recorded.
_UNRECORDED = f"(not recorded: no git checkout here; set {results.COMMIT_ENV}=<commit> to record it)"


def _start(preset: str) -> tuple[dict, Path]:
    """A new run id, the columns every row of this run shares, and the run's log folder."""
    run_id = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ") + "-" + uuid.uuid4().hex[:6]
    log_dir = fw_mod.cache_root() / "logs" / run_id
    log_dir.mkdir(parents=True, exist_ok=True)
    common = {"run_id": run_id, "preset": preset, "gpu": results.gpu_name(), "host": results.host()}
    common["git_commit"] = results.git_commit()
    return common, log_dir


def run(
    preset: str = "S",
    kernel_names: list[str] | None = None,
    framework_names: list[str] | None = None,
    repeat: int = 10,
    db: str | Path | None = None,
    jobs: int | None = None,
    cache: str | Path | None = None,
    timeout: float = 900.0,
    isolate: bool = True,
    compile_only: bool = False,
    ui_kind: str = "auto",
    budget: float | None = None,
    skip_done: bool = False,
    stop_after: float | None = None,
) -> str:
    """Runs the benchmark; returns the run id of the rows it appended to ``db``.

    :param db: the results database (None: :func:`results.default_db`, in ``cache`` when that is given).
    :param cache: the harness's folder for this run and what it starts (None: :func:`results.cache_dir`).
    :param budget: seconds of runs per (kernel, framework) after which the repeats stop (None: all
                   ``repeat`` runs); see :mod:`npbench_runs.worker` for the exact rule.
    :param skip_done: leave out the (kernel, framework) pairs that already have a row of ``preset`` in
                      ``db`` (a run split over several invocations, or one resumed after it was killed).
    :param stop_after: seconds after which no further kernel starts (the kernels left are printed;
                       run them later with ``skip_done``).

    ``cache`` reaches the processes the run starts through ``$NPBENCH_RUNS_CACHE``, set for the duration of
    the call only: the caller's value (or its absence) is back when ``run`` returns or raises.
    """
    with _cache_env(cache):
        t0 = time.perf_counter()
        db = results.default_db() if db is None else db
        ks = kernels()
        kernel_names = list(kernel_names or ks)
        _check_names(ks, kernel_names, list(framework_names or []), preset)  # before the no-GPU notice of the defaults
        framework_names = list(framework_names or default_frameworks())
        todo = {k: framework_names for k in kernel_names}
        if not compile_only:
            todo = _to_do(db, preset, kernel_names, framework_names, skip_done)
        jobs = min(16, os.cpu_count() or 1) if jobs is None else jobs
        common, log_dir = _start(preset)
        run_id = common["run_id"]
        print(
            f"run {run_id}: preset {preset}, {len(todo)} kernels x {len(framework_names)} frameworks "
            f"on {common['gpu']} ({common['host']}), commit {common['git_commit'] or _UNRECORDED}; "
            f"logs in {log_dir}",
            flush=True,
        )
        builds = {}
        if todo and (jobs > 1 or compile_only):
            builds = build_phase(list(todo), framework_names, preset, max(1, jobs), ui_kind, log_dir)
            print(f"build phase: {time.perf_counter() - t0:.1f} s", flush=True)
        if compile_only:
            return run_id
        t1 = time.perf_counter()
        settings = {"preset": preset, "repeat": repeat, "budget": budget, "timeout": timeout, "isolate": isolate}
        deadline = None if stop_after is None else t0 + stop_after
        left, (attempted, measured, validated) = timing_phase(
            todo, builds, settings, common, db, log_dir, ui_kind, deadline
        )
        if attempted and not measured:
            raise BenchmarkFailed(f"every framework failed on every kernel (run {run_id}); the errors are in {db}")
        if attempted and not validated:
            raise BenchmarkFailed(
                f"nothing validated: {measured} of {attempted} (kernel, framework) pairs ran, none matched NumPy's "
                f"outputs (run {run_id}); the errors are in {db}"
            )
        print(
            f"timing phase: {time.perf_counter() - t1:.1f} s; total {time.perf_counter() - t0:.1f} s. "
            f"Results appended to {db} (run {run_id}). Report: python -m npbench_runs report --db {db} "
            f"--preset {preset} (writes {report_dir(db, preset)}; --out DIR for another folder)",
            flush=True,
        )
        if left:
            print(
                f"not started (--stop-after {stop_after:g} s): {' '.join(left)}; run again with --skip-done", flush=True
            )
        return run_id


@contextlib.contextmanager
def _cache_env(cache: str | Path | None):
    """``$NPBENCH_RUNS_CACHE`` = ``cache`` inside the block (nothing changes when ``cache`` is None)."""
    if cache is None:
        yield
        return
    saved = os.environ.get(results.CACHE_ENV)
    os.environ[results.CACHE_ENV] = str(Path(cache).expanduser().resolve())
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop(results.CACHE_ENV, None)
        else:
            os.environ[results.CACHE_ENV] = saved


def timing_phase(todo: dict, builds: dict, settings: dict, common: dict, db, log_dir: Path, ui_kind, deadline):
    """Phase 2: each kernel of ``todo`` in turn; rows go to ``db`` as they come. Returns the kernels not started and
    ``(pairs tried, pairs measured, pairs validated)`` of (kernel, framework)."""
    ks = kernels()
    conn = results.connect(db)
    ui = progress(sum(len(fs) for fs in todo.values()), f"timing ({settings['preset']})", ui_kind)
    left, counts = [], [0, 0, 0]
    for k, names in todo.items():
        if deadline is not None and time.perf_counter() >= deadline:
            left.append(k)
            continue
        module = ks[k]
        base = {**common, "kernel": k, "category": module.CATEGORY, "params": module.PRESETS[settings["preset"]]}

        def emit(event, base=base):
            if event["event"] == "start":
                ui.status(f"{base['kernel']} {event['framework']}")
                return
            if event["event"] != "result":
                return
            row = {**base, **event["row"], "timestamp": dt.datetime.now(dt.timezone.utc).isoformat()}
            results.insert(conn, row)
            counts[0] += 1
            counts[1] += row.get("median_ms") is not None
            counts[2] += bool(row.get("validated"))
            ui.advance(summary_line(row))

        spec = {key: settings[key] for key in ("preset", "repeat", "budget")}
        spec.update(kernel=k, frameworks=names, builds={n: builds[(k, n)] for n in names if (k, n) in builds})
        if settings["isolate"]:
            run_isolated(spec, emit, settings["timeout"], log_dir / f"{k}.log")
            continue
        try:
            time_kernel(spec, emit)
        except Exception as err:
            for name in names:
                emit({"event": "result", "row": {"kernel": k, "framework": name, "error": error_text(err)}})
    ui.close()
    conn.close()
    return left, tuple(counts)


class BenchmarkFailed(RuntimeError):
    """Frameworks ran and none validated on any kernel (each failed, or its outputs differed from NumPy's)."""


def default_frameworks() -> list[str]:
    """The frameworks a run compares when none are named: the GPU ones where there is a GPU; else NumPy and our
    kernel on the host emulation, with a one-line notice naming the GPU frameworks left out."""
    from dace_cpufree.runtime import gpu_count

    if gpu_count() > 0:
        return list(fw_mod.DEFAULT_FRAMEWORKS)
    here = list(fw_mod.HOST_FRAMEWORKS)
    left_out = [f for f in fw_mod.DEFAULT_FRAMEWORKS if f not in here]
    print(
        f"no GPU here (no CUDA device visible): leaving out {' '.join(left_out)}, which need one; comparing "
        f"{' and '.join(here)} (the generated kernel on the host); name --frameworks to choose others. The emulation "
        "is slow at NPBench's sizes: for a short check add --preset test (tiny sizes) or --kernels K ...",
        flush=True,
    )
    return here


def summary_line(row: dict) -> str:
    head = f"{row['kernel']:14s} {row['framework']:22s}"
    if row.get("median_ms") is None:
        return f"{head} ERROR {(row.get('error') or '')[:200]}"
    mark = "ok " if row.get("validated") else "NOT VALIDATED "
    runs = row.get("repeat")
    text = f"{head} {row['median_ms']:10.3f} ms (min {row['min_ms']:.3f}, "
    text += f"{runs} timed runs) " if runs else "first run only) "
    text += mark
    if row.get("error"):
        text += f" {row['error'][:160]}"
    return text


if __name__ == "__main__":
    from npbench_runs.__main__ import main

    raise SystemExit(main(["run", *sys.argv[1:]]))
