"""The timing phase's worker: one kernel, each framework in turn, in a process of its own.

``python -m npbench_runs.worker`` reads a spec (JSON) on stdin and writes events on stdout, one line
each, prefixed with :data:`PROTOCOL`: ``start`` (a framework begins), ``result`` (its row) and
``fatal`` (the kernel itself failed). :func:`run_isolated` drives such processes and replaces one
that crashes or passes the per-framework timeout, so that a hang costs one framework, not the kernel.

Timing rules (NPBench's): the first run on a fresh copy of the inputs is validated against the
cached NumPy reference and timed too; then up to ``repeat`` timed runs, each on a fresh copy (the
copy not timed, the device synchronised before the clock starts and stops, Python's garbage collector
off inside the clock as in ``timeit``). Nothing else of the run works meanwhile: the build phase (and
its ``--jobs`` processes) has ended before the first worker starts, and workers run one at a time.
With a time ``budget`` (seconds per kernel and framework, counted from the first run) the repeats stop
once the budget is spent; at least one timed run follows the first unless the first alone took the
whole budget, in which case the first run's time is the result (``repeat`` 0 in the row).
"""

from __future__ import annotations

import gc
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
from pathlib import Path

import numpy as np

from npbench_runs import frameworks as fw_mod
from npbench_runs import references, results

PROTOCOL = "@@npbench "


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


def _timed_run(fn, fw, dev, bind=None) -> tuple[float, object, dict]:
    """One run on a fresh copy of the device inputs: (seconds, return value, arguments). Python's garbage
    collector is off inside the clock, as in ``timeit`` (NPBench's timer): a collection of the framework's
    objects (a loaded SDFG holds many) is no part of a call. ``bind``: ``fn(bind(args))`` is timed instead of
    ``fn(**args)``, ``bind`` before the clock starts."""
    args = fw.copy(dev)
    bound = bind(args) if bind is not None else None
    fw.synchronize()
    collecting = gc.isenabled()
    gc.disable()
    try:
        t0 = time.perf_counter()
        ret = fn(**args) if bind is None else fn(bound)
        fw.synchronize()
        seconds = time.perf_counter() - t0
    finally:
        if collecting:
            gc.enable()
    return seconds, ret, args


def measure(fn, fw, dev, module, ref: dict, repeat: int, budget: float | None) -> dict:
    """The validated first run, then the timed runs that ``repeat`` and ``budget`` allow (see module doc)."""
    started = time.perf_counter()
    first, ret, args = _timed_run(fn, fw, dev)
    row = {"first_ms": first * 1e3}
    row["validated"], row["error"] = validate(module, args, ret, ref, fw)
    del ret, args
    times = []
    for _ in range(repeat):
        spent = time.perf_counter() - started
        if budget is not None and spent >= budget and (times or first >= budget):
            break
        times.append(_timed_run(fn, fw, dev)[0])
    timings = times or [first]
    row.update(repeat=len(times), median_ms=statistics.median(timings) * 1e3, min_ms=min(timings) * 1e3)
    return row


def time_kernel(spec: dict, emit) -> None:
    """Times one kernel on each of ``spec["frameworks"]``; calls ``emit(event)`` for each start and result."""
    module = references.kernels()[spec["kernel"]]
    preset, repeat, budget = spec["preset"], int(spec["repeat"]), spec.get("budget")
    host_args = module.initialize(**module.PRESETS[preset])
    ref = references.load_reference(module, preset)
    for name in spec["frameworks"]:
        emit({"event": "start", "framework": name})
        row = {"kernel": module.NAME, "framework": name, "validated": False, "error": ""}
        row.update(repeat=0, repeat_target=repeat, budget_s=budget)
        prior = spec.get("builds", {}).get(name)
        if prior:
            row["compile_s"], row["compile_cached"] = prior.get("compile_s"), prior.get("cached")
        fw = dev = None
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
            row.update(measure(fn, fw, dev, module, ref, repeat, budget))
            row.update(fw.details(fn))
        except Exception as err:  # a failing framework is recorded, the run goes on
            row["error"] = (row["error"] + "; " if row["error"] else "") + error_text(err)
            traceback.print_exc(limit=4, file=sys.stderr)
        finally:
            del dev
            if fw is not None:
                fw.release()
        emit({"event": "result", "row": row})


def main() -> int:
    """``python -m npbench_runs.worker``: the spec comes on stdin, events go out on stdout."""
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


def _start(spec: dict, log: Path) -> tuple[subprocess.Popen, queue.Queue]:
    """A worker process for ``spec``, and a queue of its stdout lines (``None`` once it closed)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(results.REPO), env.get("PYTHONPATH", "")) if p)
    work = fw_mod.cache_root() / "work"
    work.mkdir(parents=True, exist_ok=True)
    with open(log, "a") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "npbench_runs.worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            cwd=work,
            env=env,
        )
    proc.stdin.write(json.dumps(spec))
    proc.stdin.close()
    lines: queue.Queue = queue.Queue()

    def reader(stream=proc.stdout):
        for line in stream:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=reader, daemon=True).start()
    return proc, lines


def run_isolated(spec: dict, emit, timeout: float, log: Path) -> None:
    """Runs :func:`time_kernel` in fresh processes; a crash or timeout costs one framework, not the kernel.

    :param timeout: seconds one framework may take (load, upload, runs) before its process is killed;
                    the framework gets a timeout error and the next one starts in a fresh process.
    """
    remaining = list(spec["frameworks"])
    while remaining:
        proc, lines = _start({**spec, "frameworks": remaining}, log)
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


if __name__ == "__main__":
    raise SystemExit(main())
