"""The benchmark runner: ``python -m npbench_runs run --preset S [--kernels ...] [--frameworks ...]``.

Three phases, NPBench's timing rules:

1. **Build** (parallel, ``--jobs`` processes): every (kernel, framework) that compiles is built once,
   and NumPy's reference outputs of each (kernel, preset) are computed and saved (``np.savez``) in
   the cache. Builds persist on disk (see :mod:`npbench_runs.frameworks`), so this phase costs
   nothing the second time.
2. **Timing** (serial, one process per kernel unless ``--no-isolate``): each framework loads its
   build, uploads the inputs once, runs once on a fresh copy (outputs validated against the cached
   NumPy reference with the kernel's RTOL/ATOL), then ``--repeat`` timed runs, each on a fresh
   device-side copy of the inputs (copy not timed; the device is synchronised before the clock
   stops). Median and minimum are stored; the compile time comes from phase 1.
3. Every result goes to the SQLite file (``--db``) as soon as it exists; a framework that fails
   (build error, exception, validation failure, crash, timeout) gets its error stored and the run goes on.

A kernel's worker process that crashes (a sticky CUDA error, a segfault) or passes ``--timeout``
is replaced by a fresh one for the frameworks still to do.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import queue
import re
import statistics
import subprocess
import sys
import threading
import time
import traceback
import uuid
from concurrent.futures import ProcessPoolExecutor, as_completed
from multiprocessing import get_context
from pathlib import Path

import numpy as np

from npbench_runs import frameworks as fw_mod
from npbench_runs import results
from npbench_runs.progress import progress

PROTOCOL = "@@npbench "


def kernels():
    from npbench_runs.kernels import KERNELS

    return KERNELS


# ----------------------------------------------------------------------------------------- references


def reference_path(module, preset: str) -> Path:
    params = json.dumps(module.PRESETS[preset], sort_keys=True)
    key = fw_mod.module_digest(module, preset, params, np.__version__)
    return fw_mod.cache_root() / "references" / f"{module.NAME}-{preset}-{key}.npz"


def compute_reference(kernel: str, preset: str) -> dict:
    """NumPy's outputs of ``kernel`` at ``preset``, saved in the cache (no-op when there already)."""
    module = kernels()[kernel]
    path = reference_path(module, preset)
    if path.exists():
        return {"kernel": kernel, "cached": True, "seconds": 0.0}
    args = module.initialize(**module.PRESETS[preset])
    t0 = time.perf_counter()
    ret = module.reference(**args)
    seconds = time.perf_counter() - t0
    outs = {}
    for name in module.OUTPUTS:
        value = ret if name == "__return" else args[name]
        if value is None:
            raise ValueError(f"{kernel}: the reference produced no '{name}'")
        outs[name] = np.asarray(value)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.stem}.{os.getpid()}.tmp.npz")
    np.savez(tmp, **outs)
    os.replace(tmp, path)
    return {"kernel": kernel, "cached": False, "seconds": seconds}


def load_reference(module, preset: str) -> dict:
    path = reference_path(module, preset)
    if not path.exists():
        compute_reference(module.NAME, preset)
    with np.load(path) as data:
        return {k: data[k] for k in data.files}


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


# ---------------------------------------------------------------------------------------------- timing


def error_text(err: BaseException, limit: int = 2000) -> str:
    """The exception's first line, and for long (compiler) messages the lines that name an error."""
    lines = f"{type(err).__name__}: {err}".strip().splitlines() or [type(err).__name__]
    if len(lines) > 12:
        marked = [ln.strip() for ln in lines[1:] if re.search(r"\berror\b|fatal|failed|undefined", ln, re.I)]
        lines = [lines[0], *marked[:12]] if marked else lines[:12]
    return "\n".join(lines)[:limit]


def validate(module, args, ret, ref: dict, framework) -> tuple[bool, str]:
    problems = []
    for name in module.OUTPUTS:
        got = framework.to_host(ret if name == "__return" else args.get(name))
        want = ref[name]
        if got is None:
            problems.append(f"{name}: no output")
            continue
        got = np.asarray(got)
        if got.shape != want.shape:
            problems.append(f"{name}: shape {got.shape}, expected {want.shape}")
        elif not np.allclose(got, want, rtol=module.RTOL, atol=module.ATOL, equal_nan=True):
            diff = np.abs(got.astype(np.float64) - want.astype(np.float64))
            problems.append(f"{name}: max |diff| {np.nanmax(diff):.3g} (rtol {module.RTOL:g}, atol {module.ATOL:g})")
    if problems:
        return False, "validation failed: " + "; ".join(problems)
    return True, ""


def time_kernel(spec: dict, emit) -> None:
    """Times one kernel on each of ``spec["frameworks"]``; calls ``emit(event)`` for each start and result."""
    module = kernels()[spec["kernel"]]
    preset, repeat = spec["preset"], int(spec["repeat"])
    host_args = module.initialize(**module.PRESETS[preset])
    ref = load_reference(module, preset)
    for name in spec["frameworks"]:
        emit({"event": "start", "framework": name})
        row = {"kernel": module.NAME, "framework": name, "validated": False, "error": "", "repeat": repeat}
        prior = spec.get("builds", {}).get(name)
        if prior:
            row["compile_s"], row["compile_cached"] = prior.get("compile_s"), prior.get("cached")
        fw = dev = args = None
        try:
            fw = fw_mod.get(name)
            row["framework_version"] = fw.version()
            if prior and prior.get("error"):
                raise RuntimeError(f"build failed: {prior['error']}")
            if fw.needs_build and not prior:
                info = fw.build(module)
                row["compile_s"], row["compile_cached"] = info["compile_s"], info["cached"]
            fn = fw.prepare(module)
            dev = fw.to_device(host_args)
            args = fw.copy(dev)
            fw.synchronize()
            ret = fn(**args)
            fw.synchronize()
            row["validated"], row["error"] = validate(module, args, ret, ref, fw)
            del ret
            times = []
            for _ in range(repeat):
                args = fw.copy(dev)
                fw.synchronize()
                t0 = time.perf_counter()
                fn(**args)
                fw.synchronize()
                times.append(time.perf_counter() - t0)
            if times:
                row["median_ms"] = statistics.median(times) * 1e3
                row["min_ms"] = min(times) * 1e3
            row.update(fw.details(fn))
        except Exception as err:  # a failing framework is recorded, the run goes on
            row["error"] = (row["error"] + "; " if row["error"] else "") + error_text(err)
            traceback.print_exc(limit=4, file=sys.stderr)
        finally:
            del dev, args
            if fw is not None:
                fw.release()
        emit({"event": "result", "row": row})


def worker_main() -> int:
    """``python -m npbench_runs.run --worker``: the spec comes on stdin, events go out on stdout."""
    spec = json.loads(sys.stdin.read())
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # everything else (DaCe, nvcc, C libraries) goes to stderr, i.e. the log
    sys.stdout = sys.stderr

    def emit(event):
        proto.write(PROTOCOL + json.dumps(event, default=_jsonable) + "\n")
        proto.flush()

    try:
        time_kernel(spec, emit)
    except Exception as err:  # the kernel itself failed (inputs, reference): no framework can run it
        traceback.print_exc(file=sys.stderr)
        emit({"event": "fatal", "error": error_text(err)})
    return 0


def _jsonable(value):
    if isinstance(value, np.generic):
        return value.item()
    return str(value)


def _tail(path: Path, lines: int = 8) -> str:
    try:
        return " | ".join(path.read_text(errors="replace").strip().splitlines()[-lines:])[-1500:]
    except OSError:
        return ""


def run_isolated(spec: dict, emit, timeout: float, log: Path) -> None:
    """Runs :func:`time_kernel` in fresh processes; a crash or timeout costs one framework, not the kernel."""
    remaining = list(spec["frameworks"])
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(results.REPO), env.get("PYTHONPATH", "")) if p)
    work = fw_mod.cache_root() / "work"
    work.mkdir(parents=True, exist_ok=True)
    while remaining:
        with open(log, "a") as err:
            proc = subprocess.Popen(
                [sys.executable, "-m", "npbench_runs.run", "--worker"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=err,
                text=True,
                cwd=work,
                env=env,
            )
        proc.stdin.write(json.dumps({**spec, "frameworks": remaining}))
        proc.stdin.close()
        lines: queue.Queue = queue.Queue()

        def reader(stream=proc.stdout, lines=lines):
            for line in stream:
                lines.put(line)
            lines.put(None)

        threading.Thread(target=reader, daemon=True).start()
        current, started, fatal, killed = None, time.monotonic(), None, None
        while True:
            try:
                line = lines.get(timeout=1.0)
            except queue.Empty:
                line = ""
            if line is None:
                break
            if line.startswith(PROTOCOL):
                event = json.loads(line[len(PROTOCOL) :])
                if event["event"] == "start":
                    current, started = event["framework"], time.monotonic()
                elif event["event"] == "result":
                    emit(event)
                    remaining.remove(event["row"]["framework"])
                    current = None
                elif event["event"] == "fatal":
                    fatal = event["error"]
            if killed is None and current is not None and time.monotonic() - started > timeout:
                proc.kill()
                killed = f"timeout: no result after {timeout:.0f} s (process killed)"
        rc = proc.wait()
        if fatal is not None or (current is None and remaining):
            # the kernel failed before any framework, or the process died between frameworks
            reason = fatal or f"worker exited with status {rc} before running this framework: {_tail(log)}"
            for name in remaining:
                emit({"event": "result", "row": {"kernel": spec["kernel"], "framework": name, "error": reason}})
            return
        if current is not None:
            reason = killed or f"crashed (exit status {rc}): {_tail(log)}"
            emit({"event": "result", "row": {"kernel": spec["kernel"], "framework": current, "error": reason}})
            remaining.remove(current)


# ------------------------------------------------------------------------------------------------- main


def run(
    preset: str = "S",
    kernel_names: list[str] | None = None,
    framework_names: list[str] | None = None,
    repeat: int = 10,
    db: str | Path = "npbench_results.db",
    jobs: int | None = None,
    cache: str | Path | None = None,
    timeout: float = 900.0,
    isolate: bool = True,
    compile_only: bool = False,
    ui_kind: str = "auto",
) -> str:
    """Runs the benchmark; returns the run id of the rows it appended to ``db``."""
    if cache is not None:
        os.environ["NPBENCH_RUNS_CACHE"] = str(Path(cache).resolve())
    ks = kernels()
    kernel_names = list(kernel_names or ks)
    framework_names = list(framework_names or fw_mod.DEFAULT_FRAMEWORKS)
    for k in kernel_names:
        if k not in ks:
            raise SystemExit(f"unknown kernel {k!r}; known: {' '.join(sorted(ks))}")
    for name in framework_names:
        if name not in fw_mod.FRAMEWORKS:
            raise SystemExit(f"unknown framework {name!r}; known: {' '.join(sorted(fw_mod.FRAMEWORKS))}")
    missing = [k for k in kernel_names if preset not in ks[k].PRESETS]
    if missing:
        raise SystemExit(f"no preset {preset!r} in: {' '.join(missing)}")
    jobs = min(16, os.cpu_count() or 1) if jobs is None else jobs
    run_id = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ") + "-" + uuid.uuid4().hex[:6]
    log_dir = fw_mod.cache_root() / "logs" / run_id
    log_dir.mkdir(parents=True, exist_ok=True)
    common = {
        "run_id": run_id,
        "preset": preset,
        "gpu": results.gpu_name(),
        "host": results.host(),
        "git_commit": results.git_commit(),
    }
    print(
        f"run {run_id}: preset {preset}, {len(kernel_names)} kernels x {len(framework_names)} frameworks "
        f"on {common['gpu']} ({common['host']}), commit {common['git_commit'] or '?'}; logs in {log_dir}",
        flush=True,
    )

    t0 = time.perf_counter()
    builds = {}
    if jobs > 1 or compile_only:
        builds = build_phase(kernel_names, framework_names, preset, max(1, jobs), ui_kind, log_dir)
        print(f"build phase: {time.perf_counter() - t0:.1f} s", flush=True)
    if compile_only:
        return run_id

    conn = results.connect(db)
    ui = progress(len(kernel_names) * len(framework_names), f"timing ({preset})", ui_kind)
    t1 = time.perf_counter()
    for k in kernel_names:
        module = ks[k]
        base = {**common, "kernel": k, "category": module.CATEGORY, "params": module.PRESETS[preset]}

        def emit(event, base=base):
            if event["event"] == "start":
                ui.status(f"{base['kernel']} {event['framework']}")
                return
            if event["event"] != "result":
                return
            row = {**base, **event["row"], "timestamp": dt.datetime.now(dt.timezone.utc).isoformat()}
            results.insert(conn, row)
            ui.advance(summary_line(row))

        spec = {
            "kernel": k,
            "preset": preset,
            "repeat": repeat,
            "frameworks": framework_names,
            "builds": {name: builds[(k, name)] for name in framework_names if (k, name) in builds},
        }
        if isolate:
            run_isolated(spec, emit, timeout, log_dir / f"{k}.log")
        else:
            try:
                time_kernel(spec, emit)
            except Exception as err:
                for name in framework_names:
                    emit({"event": "result", "row": {"kernel": k, "framework": name, "error": error_text(err)}})
    ui.close()
    conn.close()
    print(
        f"timing phase: {time.perf_counter() - t1:.1f} s; total {time.perf_counter() - t0:.1f} s. "
        f"Results appended to {db} (run {run_id}). Report: python -m npbench_runs report --db {db} "
        f"--preset {preset} --out <dir>",
        flush=True,
    )
    return run_id


def summary_line(row: dict) -> str:
    head = f"{row['kernel']:14s} {row['framework']:22s}"
    if row.get("median_ms") is None:
        return f"{head} ERROR {(row.get('error') or '')[:200]}"
    mark = "ok " if row.get("validated") else "NOT VALIDATED "
    text = f"{head} {row['median_ms']:10.3f} ms (min {row['min_ms']:.3f})  {mark}"
    if row.get("error"):
        text += f" {row['error'][:160]}"
    return text


if __name__ == "__main__":
    if sys.argv[1:] == ["--worker"]:
        raise SystemExit(worker_main())
    from npbench_runs.__main__ import main

    raise SystemExit(main(["run", *sys.argv[1:]]))
