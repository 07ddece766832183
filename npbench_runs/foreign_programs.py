"""One of NPBench's own DaCe programs through dace-cpufree, in the process that runs it (:mod:`npbench_runs.foreign`
runs each benchmark in a process of its own and reports them): the benchmark's inputs and NumPy reference (saved in
the harness's cache), the program compiled, called and compared as NPBench does and classified (``CLASSES``), with
``speed`` timed beside NPBench's CuPy version and upstream DaCe, and the CPU work done ahead of a run
(:func:`prepare_one`).
"""

from __future__ import annotations

import copy
import hashlib
import importlib
import inspect
import json
import os
import pickle
import statistics
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from npbench_runs.results import cache_dir

CLASSES = ("validated", "wrong", "race", "refused", "frontend", "build", "run", "crash", "timeout")
#: What ``--speed`` times beside ours: NPBench's CuPy implementation and upstream DaCe on the GPU.
BASELINES = ("cupy", "dace_gpu")


def benchmarks(root: Path) -> dict[str, dict]:
    """``name -> bench_info["benchmark"]`` of every benchmark that has a DaCe implementation."""
    found = {}
    for info_file in sorted((root / "bench_info").glob("*.json")):
        info = json.loads(info_file.read_text())["benchmark"]
        folder = root / "npbench" / "benchmarks" / info["relative_path"]
        if (folder / f"{info['module_name']}_dace.py").exists():
            found[info_file.stem] = info
    return found


def _module(root: Path, info: dict, suffix: str):
    """NPBench's module of one benchmark (``suffix``: ``""``, ``"_numpy"``, ``"_dace"``). A process imports the
    ``npbench`` package of one tree: asked for another's (or finding another first on the path), it stops with both
    named instead of failing to find a module in the other tree or running the other tree's code."""
    package = Path(root, "npbench").resolve()
    imported = sys.modules.get("npbench")
    if imported is not None and package not in (Path(p).resolve() for p in imported.__path__):
        raise RuntimeError(_other_tree(list(imported.__path__), root))
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    dotted = "npbench.benchmarks." + info["relative_path"].replace("/", ".") + "." + info["module_name"] + suffix
    module = importlib.import_module(dotted)
    if not Path(module.__file__).resolve().is_relative_to(package):
        raise RuntimeError(_other_tree([module.__file__], root))
    return module


def _other_tree(found: list, root: Path) -> str:
    return (
        f"npbench is imported from {found} in this process, not from {root}: one process runs one NPBench tree's "
        "benchmarks (run the other tree's in another process; where another npbench package comes first on the "
        "path, remove it from PYTHONPATH)"
    )


def relative_error(ref, val) -> float:
    ref, val = np.asarray(ref), np.asarray(val)
    norm = np.linalg.norm(ref)
    diff = np.linalg.norm(ref - val)
    return float(diff / norm) if norm != 0 else float(diff)


def compare(info: dict, ref: list, got: list) -> list[float] | None:
    """NPBench's validation: ``None`` when every output agrees, else the relative error of each output."""
    rtol, atol, norm_error = info.get("rtol", 1e-5), info.get("atol", 1e-8), info.get("norm_error", 1e-5)
    errors, ok = [], True
    for r, v in zip(ref, got):
        r, v = np.asarray(r), np.asarray(v)  # broadcast as NumPy does: a scalar return comes back as shape (1,)
        try:
            err = 0.0 if np.allclose(r, v, rtol=rtol, atol=atol) else relative_error(r, v)
        except ValueError:  # shapes that do not broadcast
            err = float("inf")
        errors.append(err)
        ok = ok and err < norm_error
    return None if ok else errors


def _outputs(result, data: dict, info: dict) -> list:
    out = [] if result is None else list(result) if isinstance(result, (tuple, list)) else [result]
    return out + [data[a] for a in info.get("output_args", [])]


def _first_line(err: BaseException) -> str:
    """The error in one line: a build error's first compiler error (without the cache folder's path), else the
    message's first line."""
    first = getattr(err, "first_error", None)
    if first:
        path, _, rest = first.partition(": ")
        first = f"{Path(path).name}: {rest}" if rest else first
    else:
        lines = str(err).strip().splitlines()
        first = lines[0] if lines else ""
    return f"{type(err).__name__}: {first}"[:300]


def reference_path(root: Path, name: str, info: dict, preset: str) -> Path:
    """Where the saved inputs and NumPy outputs of ``name`` at ``preset`` live: keyed by the bench_info entry (the
    preset's parameters among it), the NumPy implementation's and ``initialize``'s sources and NumPy's version."""
    folder = root / "npbench" / "benchmarks" / info["relative_path"]
    digest = hashlib.sha256(json.dumps([name, preset, info, np.__version__], sort_keys=True).encode())
    for suffix in ("", "_numpy"):
        source = folder / f"{info['module_name']}{suffix}.py"
        digest.update(b"\0" + (source.read_bytes() if source.exists() else b""))
    return cache_dir() / "foreign_references" / f"{name}-{preset}-{digest.hexdigest()[:16]}.pkl"


def compute_reference(root: Path, info: dict, preset: str) -> tuple[dict, list]:
    """NPBench's inputs of the preset (parameters and ``initialize``'s outputs) and the NumPy implementation's
    outputs on copies of them."""
    data = dict(info["parameters"][preset])
    if info.get("init"):  # some benchmarks take their parameters only (mandelbrot)
        init_fn = getattr(_module(root, info, ""), info["init"]["func_name"])
        outs = init_fn(*[data[a] for a in info["init"]["input_args"]])
        outs = outs if len(info["init"]["output_args"]) > 1 else [outs]
        data.update(zip(info["init"]["output_args"], outs))
    ref_data = copy.deepcopy(data)
    numpy_impl = getattr(_module(root, info, "_numpy"), info["func_name"])
    with np.errstate(all="ignore"):
        ref = _outputs(numpy_impl(*[ref_data[a] for a in info["input_args"]]), ref_data, info)
    return data, ref


def save_reference(path: Path, data: dict, ref: list) -> None:
    """Written whole or not at all: a process stopped mid-write leaves no file under ``path``'s name."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as f:
        pickle.dump({"data": data, "ref": ref}, f, protocol=pickle.HIGHEST_PROTOCOL)
    os.replace(tmp, path)


def load_reference(path: Path) -> tuple[dict, list] | None:
    """The saved inputs and outputs, or ``None`` when there are none or the file cannot be read."""
    try:
        with open(path, "rb") as f:
            saved = pickle.load(f)
        return saved["data"], saved["ref"]
    except Exception:  # absent, partial or from an incompatible version: computed again
        return None


def reference(root: Path, name: str, info: dict, preset: str) -> tuple[dict, list, bool]:
    """``(data, ref, cached)``: the saved reference where there is one, else computed here (and not saved)."""
    saved = load_reference(reference_path(root, name, info, preset))
    if saved is not None:
        return *saved, True
    return *compute_reference(root, info, preset), False


def run_one(
    root: Path,
    name: str,
    preset: str,
    backend: str,
    race_check: bool = False,
    speed: int = 0,
    checkpoint=None,
    baselines: tuple[str, ...] = BASELINES,
) -> dict:
    """Classifies one benchmark in this process (see the module doc); with ``speed`` (a number of timed calls)
    and a validated program on the GPU, adds the ``speed`` row (:func:`measure_speed`, beside ``baselines``, some
    of :data:`BASELINES`). ``checkpoint(row)`` is
    given the row as it stands once the program is validated and after each framework is timed, so that a process
    stopped while a slow baseline is timed still tells its class and the times taken so far."""
    import dace_cpufree

    info = benchmarks(root)[name]
    params = info["parameters"][preset]
    t0 = time.perf_counter()
    data, ref, cached = reference(root, name, info, preset)
    report = {"name": name, "preset": preset, "backend": backend + (" race-check" if race_check else "")}
    report.update(reference="cache" if cached else "computed", reference_s=time.perf_counter() - t0)
    t0 = time.perf_counter()
    try:
        program = _program(root, info)
        run = dace_cpufree.compile(program, backend=backend, race_check=race_check)
    except dace_cpufree.BuildError as err:
        return {**report, "class": "build", "reason": _first_line(err), "seconds": time.perf_counter() - t0}
    except dace_cpufree.CpufreeError as err:
        return {**report, "class": "refused", "reason": _first_line(err), "seconds": time.perf_counter() - t0}
    except Exception as err:  # DaCe's frontend or passes: not ours to classify further
        return {**report, "class": "frontend", "reason": _first_line(err), "seconds": time.perf_counter() - t0}
    accepted = set(run.sdfg.arg_names) | {str(s) for s in run.sdfg.symbols}
    got_data = copy.deepcopy(data)
    kwargs = {a: got_data[a] for a in info["input_args"]}
    kwargs.update({p: v for p, v in params.items() if p not in kwargs and p in accepted})
    try:
        result = run(**kwargs)
    except dace_cpufree.RaceError as err:
        reason = err.report.strip().splitlines()[0][:300]
        return {**report, "class": "race", "reason": reason, "seconds": time.perf_counter() - t0}
    except Exception as err:
        return {**report, "class": "run", "reason": _first_line(err), "seconds": time.perf_counter() - t0}
    got = [
        a.get() if hasattr(a, "get") and not isinstance(a, np.ndarray) else a for a in _outputs(result, got_data, info)
    ]
    errors = compare(info, ref, got)
    report["seconds"] = time.perf_counter() - t0
    if errors is None:
        report.update({"class": "validated", "reason": ""})
        if speed and backend == "cuda":
            report["speed"] = {}
            note = (lambda: checkpoint(report)) if checkpoint else (lambda: None)
            measure_speed(
                root, info, program, run, data, params, ref, speed, report["speed"], note, baselines=baselines
            )
        return report
    outputs = ["return"] * (len(ref) - len(info.get("output_args", []))) + list(info.get("output_args", []))
    detail = ", ".join(f"{o}: {e:.3g}" for o, e in zip(outputs, errors))
    return {**report, "class": "wrong", "reason": f"relative errors {detail}", "errors": errors}


def measure_speed(
    root: Path,
    info: dict,
    program,
    run,
    data: dict,
    params: dict,
    ref,
    repeats: int,
    into=None,
    checkpoint=None,
    baselines: tuple[str, ...] = BASELINES,
):
    """Milliseconds per call (median) of ours and of ``baselines`` (NPBench's CuPy implementation, upstream DaCe on
    the GPU) in this process, on the same device inputs; a baseline that fails or gives a different result has a
    reason instead, one not asked for says so. The row is ``into`` (a new dict by default); ``checkpoint()`` is called
    before anything is timed and after each framework's entry."""
    row = {} if into is None else into
    row["repeats"] = repeats
    row.update(_not_asked(baselines))
    checkpoint = checkpoint or (lambda: None)
    checkpoint()
    import cupy as cp

    def on_device(values: dict) -> dict:
        return {k: cp.asarray(v) if isinstance(v, np.ndarray) else copy.deepcopy(v) for k, v in values.items()}

    inputs = on_device({a: data[a] for a in info["input_args"]})

    def fresh() -> dict:
        return {k: v.copy() if isinstance(v, cp.ndarray) else v for k, v in inputs.items()}

    def timed(call) -> tuple[float | None, str]:
        """``call(args)`` runs one framework on a dict of fresh inputs."""
        try:
            args = fresh()
            got = [cp.asnumpy(a) if isinstance(a, cp.ndarray) else a for a in _outputs(call(args), args, info)]
            errors = compare(info, ref, got)
            if errors is not None:
                return None, "wrong: relative errors " + ", ".join(f"{e:.3g}" for e in errors)
            args = fresh()  # one more call, on the wall clock: a slow program is timed fewer times
            cp.cuda.runtime.deviceSynchronize()
            t0 = time.perf_counter()
            call(args)
            cp.cuda.runtime.deviceSynchronize()
            times = []
            for _ in range(repeats if time.perf_counter() - t0 < 0.05 else min(repeats, 3)):
                args = fresh()
                cp.cuda.runtime.deviceSynchronize()
                start, end = cp.cuda.Event(), cp.cuda.Event()
                start.record()
                call(args)
                end.record()
                end.synchronize()
                times.append(cp.cuda.get_elapsed_time(start, end))
            return statistics.median(times), ""
        except Exception as err:  # a baseline's own failure: reported, not ours to classify
            return None, _first_line(err)

    sizes = {k: v for k, v in params.items() if k not in inputs}
    accepted = set(run.sdfg.arg_names) | {str(s) for s in run.sdfg.symbols}
    ours_sizes = {k: v for k, v in sizes.items() if k in accepted}
    row["ours_ms"], row["ours_error"] = timed(lambda args: run(**args, **ours_sizes))
    checkpoint()
    if "cupy" in baselines:
        try:
            cupy_impl = getattr(_module(root, info, "_cupy"), info["func_name"])
            row["cupy_ms"], row["cupy_error"] = timed(lambda args: cupy_impl(*[args[k] for k in info["input_args"]]))
        except Exception as err:  # no CuPy implementation in this checkout
            row["cupy_ms"], row["cupy_error"] = None, _first_line(err)
        checkpoint()
    if "dace_gpu" not in baselines:
        return row
    try:
        from npbench_runs.frameworks import UpstreamDaCeFramework, infer_symbols

        compiled = UpstreamDaCeFramework("dace_gpu", ()).prepare(upstream_module(info, program)).compiled
        given = {k: v for k, v in sizes.items() if k in compiled.sdfg.free_symbols}  # NPBench passes its sizes

        def call(args: dict):
            symbols = {**infer_symbols(compiled.sdfg, args), **given}
            return compiled(**args, **{k: v for k, v in symbols.items() if k not in args})

        row["dace_gpu_ms"], row["dace_gpu_error"] = timed(call)
    except Exception as err:  # upstream DaCe's own failure
        row["dace_gpu_ms"], row["dace_gpu_error"] = None, _first_line(err)
    return row


def _not_asked(baselines) -> dict:
    """The speed row's entries of the baselines left out of ``baselines``."""
    out = {}
    for key in BASELINES:
        if key not in baselines:
            out[f"{key}_ms"], out[f"{key}_error"] = None, "not asked for (--baselines)"
    return out


def upstream_module(info: dict, program) -> SimpleNamespace:
    """The DaCe program as :class:`~npbench_runs.frameworks.UpstreamDaCeFramework` takes a kernel module: built
    once per source text, then loaded from the harness's cache."""
    source = Path(inspect.getsourcefile(program.f)).read_bytes()
    return SimpleNamespace(NAME=info["module_name"], program=program, __name__=hashlib.sha256(source).hexdigest())


def _step(label: str, work) -> list:
    """``[label, seconds, note]`` of ``work()``: its answer as the note, or the first line of its error."""
    t0 = time.perf_counter()
    try:
        note = work() or ""
    except Exception as err:  # met again, and classified, in the serial run
        note = "failed: " + _first_line(err)
    return [label, time.perf_counter() - t0, note]


def save_reference_once(root: Path, name: str, info: dict, preset: str) -> str:
    """Computes and saves the reference where none is saved: ``"cached"`` or ``"computed"``."""
    path = reference_path(root, name, info, preset)
    if path.exists():
        return "cached"
    save_reference(path, *compute_reference(root, info, preset))
    return "computed"


def _program(root: Path, info: dict):
    return getattr(_module(root, info, "_dace"), info["func_name"])


def _build_ours(root: Path, info: dict, backend: str, race_check: bool) -> str:
    import dace_cpufree

    dace_cpufree.prebuild(_program(root, info), backend=backend, race_check=race_check)  # compile's options
    return ""


def _build_upstream(info: dict, program) -> str:
    from npbench_runs.frameworks import UpstreamDaCeFramework

    built = UpstreamDaCeFramework("dace_gpu", ()).build(upstream_module(info, program))
    return "cached" if built["cached"] else ""


def prepare_one(
    root: Path,
    name: str,
    preset: str,
    backend: str,
    race_check: bool = False,
    speed: int = 0,
    baselines: tuple[str, ...] = BASELINES,
) -> dict:
    """The CPU work of one benchmark ahead of its run, on no GPU: the reference saved (see :func:`reference_path`),
    our library built into dace-cpufree's build cache and, with ``speed`` on the GPU backend and upstream DaCe among
    the ``baselines``, upstream DaCe's build.
    Errors are only noted: the serial run meets them again and classifies them."""
    info = benchmarks(root)[name]
    steps = [_step("reference", lambda: save_reference_once(root, name, info, preset))]
    steps.append(_step("ours", lambda: _build_ours(root, info, backend, race_check)))
    ours_built = not steps[-1][2].startswith("failed")
    if speed and backend == "cuda" and ours_built and "dace_gpu" in baselines:
        steps.append(_step("upstream DaCe", lambda: _build_upstream(info, _program(root, info))))
    return {"name": name, "steps": steps}
