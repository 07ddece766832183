"""The frameworks a benchmark compares, each behind one small interface.

A framework may ``build`` a kernel module ahead of time (in a separate process: the result persists
on disk), ``prepare``s it (loading what was built, building it if needed) and returns a callable
that takes the kernel's arguments already on the device (or on the host for NumPy) and returns the
program's return value. ``to_device`` uploads the inputs once, ``copy`` makes fresh per-run copies
where they live, ``to_host`` brings any array back for validation, ``synchronize`` waits for the device.

Frameworks (``FRAMEWORKS``):

``numpy``                 the kernel's NumPy reference on the host (the reference, timed too when asked)
``cupy``                  the same NumPy code on CuPy arrays (NumPy dispatches through ``__array_function__``)
``dace_pure``             upstream DaCe GPU, ``auto_optimize(GPU, use_gpu_storage=True)``, every library
                          node expanded with its ``pure`` implementation (DaCe's own maps, no vendor BLAS)
``dace_cublas``           the same with cuBLAS for BLAS nodes (MatMul, Gemm, Gemv, Dot, ...): DaCe's default
                          GPU priority list with ``cuBLAS`` first
``dace_cpufree``          ours: ``dace_cpufree.compile(program, backend="cuda")``
``dace_cpufree_plain``    ours with the thread scheduler off (``scheduler=False``)
``dace_cpufree_emulate``  / ``dace_cpufree_plain_emulate``: ours on the host emulation (CPU testing)
``dace_cpu``              upstream DaCe on the CPU (``auto_optimize(CPU)``; CPU testing of the build cache)
``dace_gpu``              alias of ``dace_cublas`` (what ``compare.py`` called upstream DaCe GPU)

Build caching across processes: ``dace_*`` builds go to ``<cache>/dacecache/<name>`` where the name
carries a hash of the kernel module's source, the DaCe version and the variant; a finished build
leaves ``npbench_build.json`` there, and a later process loads the library with
``dace.codegen.compiler.load_precompiled_sdfg`` (the build folder keeps ``program.sdfgz``), without
re-running the frontend, ``auto_optimize`` or the compiler. Ours rebuilds nothing either: its
library cache (``$DACE_CPUFREE_CACHE``) is keyed by the generated code, so a second
``dace_cpufree.compile`` only regenerates the code (well under a second) and loads the library.
"""

from __future__ import annotations

import copy
import hashlib
import inspect
import json
import time
from pathlib import Path

import dace
import numpy as np

from npbench_runs.results import cache_dir


def cache_root() -> Path:
    """The harness's cache (references, upstream DaCe builds, build records), created: :func:`results.cache_dir`."""
    root = cache_dir()
    root.mkdir(parents=True, exist_ok=True)
    return root


def module_digest(module, *extra: str) -> str:
    """A hash of the kernel module's source (and ``extra``): a changed kernel gets fresh builds/references."""
    try:
        text = inspect.getsource(module)
    except (OSError, TypeError):
        text = module.__name__
    return hashlib.sha256("\0".join([text, *extra]).encode()).hexdigest()[:12]


def infer_symbols(sdfg: dace.SDFG, args: dict) -> dict:
    """Values of the SDFG's size symbols, read off the arrays' shapes (as DaCe does)."""
    symbols = {}
    for name, value in args.items():
        desc = sdfg.arrays.get(name)
        if desc is None or not hasattr(value, "shape"):
            continue
        for dim, size in zip(desc.shape, value.shape):
            if dace.symbolic.issymbolic(dim) and str(dim) in sdfg.free_symbols:
                symbols[str(dim)] = int(size)
    return symbols


class Framework:
    name = "base"
    device = True  # runs on the GPU: inputs are uploaded, the device is synchronised around runs
    needs_build = False  # has an ahead-of-time build step worth running in a separate process
    build_family = None  # builds of one family run in one process, one after another

    def build(self, module) -> dict:
        """Builds ``module`` so that a later ``prepare`` in another process only loads it.

        Returns ``{"compile_s": seconds of a fresh build, "cached": bool}``.
        """
        t0 = time.perf_counter()
        self.prepare(module)
        return {"compile_s": time.perf_counter() - t0, "cached": False}

    def prepare(self, module):
        raise NotImplementedError

    def to_device(self, args: dict) -> dict:
        import cupy

        out = {k: cupy.asarray(v) if isinstance(v, np.ndarray) else v for k, v in args.items()}
        self.synchronize()
        return out

    def copy(self, args: dict) -> dict:
        """Fresh copies of the (device) arguments: every run starts from the same inputs."""
        return {k: v.copy() if hasattr(v, "copy") and hasattr(v, "shape") else v for k, v in args.items()}

    @staticmethod
    def to_host(value):
        if value is None or isinstance(value, np.ndarray):
            return value
        get = getattr(value, "get", None)
        return get() if get is not None else np.asarray(value)

    def synchronize(self):
        import cupy

        cupy.cuda.Device().synchronize()

    def release(self):
        """Frees what the framework holds on the device between kernels."""
        if self.device:
            try:
                import cupy

                cupy.get_default_memory_pool().free_all_blocks()
            except Exception:
                pass

    def version(self) -> str:
        return ""

    def details(self, fn) -> dict:
        """Facts about the last run worth storing (grid, kernel time)."""
        return {}


class NumPyFramework(Framework):
    name = "numpy"
    device = False

    def prepare(self, module):
        return module.reference

    def to_device(self, args):
        return copy.deepcopy(args)

    def copy(self, args):
        return copy.deepcopy(args)

    def synchronize(self):
        return None

    def version(self):
        return np.__version__


class CuPyFramework(Framework):
    """The kernel's NumPy reference on CuPy arrays (NumPy dispatches to CuPy through __array_function__)."""

    name = "cupy"

    def prepare(self, module):
        import cupy  # noqa: F401  (fails early, and cleanly, where CuPy is missing)

        return module.reference

    def version(self):
        import cupy

        return cupy.__version__


def _build_record_path(key: str) -> Path:
    folder = cache_root() / "builds"
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"{hashlib.sha256(key.encode()).hexdigest()[:24]}.json"


def _read_json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


class UpstreamDaCeFramework(Framework):
    """Upstream DaCe: ``auto_optimize(sdfg, device, use_gpu_storage=True)`` with a chosen library priority.

    :param libraries: implementations tried first for every library node (``["pure"]``: DaCe's own
                      expansions; ``["cuBLAS"]``: vendor BLAS, then DaCe's default GPU priority list).
    """

    needs_build = True

    def __init__(self, name: str = "dace_cublas", libraries: tuple[str, ...] = ("cuBLAS",), gpu: bool = True):
        self.name = name
        self.libraries = tuple(libraries)
        self.device = gpu

    def sdfg_name(self, module) -> str:
        key = module_digest(module, dace.__version__, self.name, ",".join(self.libraries), str(self.device))
        return f"{self.name}_{module.NAME}_{key}"

    def build_folder(self, module) -> Path:
        return cache_root() / "dacecache" / self.sdfg_name(module)

    def build(self, module) -> dict:
        from dace.transformation.auto.auto_optimize import auto_optimize

        folder = self.build_folder(module)
        record = _read_json(folder / "npbench_build.json")
        if record is not None:
            return {"compile_s": record["compile_s"], "cached": True}
        t0 = time.perf_counter()
        sdfg = copy.deepcopy(module.program.to_sdfg(simplify=True))
        sdfg.name = self.sdfg_name(module)
        sdfg.build_folder = str(folder)
        device = dace.DeviceType.GPU if self.device else dace.DeviceType.CPU
        libraries = self.libraries
        sdfg = auto_optimize(
            sdfg, device, use_gpu_storage=self.device, find_fast_library_fn=lambda _device: list(libraries)
        )
        sdfg.compile(return_program_handle=False)
        compile_s = time.perf_counter() - t0
        (folder / "npbench_build.json").write_text(json.dumps({"compile_s": compile_s, "sdfg": sdfg.name}))
        return {"compile_s": compile_s, "cached": False}

    def prepare(self, module):
        from dace.codegen import compiler

        folder = self.build_folder(module)
        record = folder / "npbench_build.json"
        if not record.exists():
            self.build(module)
        try:
            compiled = compiler.load_precompiled_sdfg(folder)
        except Exception:  # a damaged or partial build folder: build it again
            record.unlink(missing_ok=True)
            self.build(module)
            compiled = compiler.load_precompiled_sdfg(folder)
        sdfg = compiled.sdfg

        def run(**args):
            return compiled(**args, **infer_symbols(sdfg, args))

        run.compiled = compiled
        return run

    def to_device(self, args):
        return copy.deepcopy(args) if not self.device else super().to_device(args)

    def copy(self, args):
        return copy.deepcopy(args) if not self.device else super().copy(args)

    def synchronize(self):
        if self.device:
            super().synchronize()

    def version(self):
        return dace.__version__


class CpufreeFramework(Framework):
    """Ours: the whole program as one persistent cooperative kernel.

    :param scheduler: ``None`` leaves ``dace_cpufree.compile``'s default; ``False`` turns the
                      thread scheduler off (the ``_plain`` variants).
    """

    needs_build = True
    build_family = "cpufree"

    def __init__(self, backend: str = "cuda", scheduler: bool | None = None, name: str | None = None):
        self.backend = backend
        self.scheduler = scheduler
        self.device = backend != "emulate"
        self.name = name or "dace_cpufree"
        self.program = None

    def _compile(self, module):
        import dace_cpufree

        kwargs = {} if self.scheduler is None else {"scheduler": self.scheduler}
        return dace_cpufree.compile(module.program, backend=self.backend, **kwargs)

    def build(self, module) -> dict:
        t0 = time.perf_counter()
        program = self._compile(module)
        elapsed = time.perf_counter() - t0
        library = Path(program.library)
        record_path = _build_record_path(f"{self.name}\0{library}")
        record = _read_json(record_path)
        # the library cache is keyed by the generated code: a library older than this call was a cache hit
        cached = library.stat().st_mtime < time.time() - elapsed - 1.0
        if cached and record is not None:
            return {"compile_s": record["compile_s"], "cached": True}
        record_path.write_text(json.dumps({"compile_s": elapsed, "library": str(library)}))
        return {"compile_s": elapsed, "cached": cached}

    def prepare(self, module):
        self.program = self._compile(module)
        return self.program

    def to_device(self, args):
        return copy.deepcopy(args) if self.backend == "emulate" else super().to_device(args)

    def copy(self, args):
        return copy.deepcopy(args) if self.backend == "emulate" else super().copy(args)

    def synchronize(self):
        if self.backend != "emulate":
            super().synchronize()

    def version(self):
        import dace_cpufree

        return dace_cpufree.__version__

    def details(self, fn) -> dict:
        grid = getattr(fn, "launch_config", None)
        out = {"kernel_ms": getattr(fn, "last_kernel_ms", None)}
        if grid and grid[0]:
            out["grid"] = f"{grid[0]}x{grid[1]}"
        return out


FRAMEWORKS = {
    "numpy": NumPyFramework,
    "cupy": CuPyFramework,
    "dace_pure": lambda: UpstreamDaCeFramework("dace_pure", ("pure",)),
    "dace_cublas": lambda: UpstreamDaCeFramework("dace_cublas", ("cuBLAS",)),
    "dace_gpu": lambda: UpstreamDaCeFramework("dace_gpu", ("cuBLAS",)),
    "dace_cpu": lambda: UpstreamDaCeFramework("dace_cpu", (), gpu=False),
    "dace_cpufree": lambda: CpufreeFramework("cuda"),
    "dace_cpufree_plain": lambda: CpufreeFramework("cuda", scheduler=False, name="dace_cpufree_plain"),
    "dace_cpufree_emulate": lambda: CpufreeFramework("emulate", name="dace_cpufree_emulate"),
    "dace_cpufree_plain_emulate": lambda: CpufreeFramework(
        "emulate", scheduler=False, name="dace_cpufree_plain_emulate"
    ),
}

#: What ``python -m npbench_runs run`` compares when ``--frameworks`` is not given.
DEFAULT_FRAMEWORKS = ["cupy", "dace_pure", "dace_cublas", "dace_cpufree", "dace_cpufree_plain"]
#: What it compares instead on a machine without a GPU: NumPy and our kernel on the host emulation.
HOST_FRAMEWORKS = ["numpy", "dace_cpufree_emulate"]


def get(name: str) -> Framework:
    try:
        return FRAMEWORKS[name]()
    except KeyError:
        raise KeyError(f"unknown framework {name!r}; known: {sorted(FRAMEWORKS)}") from None


def timed(fn, framework: Framework, args_factory, repeat: int) -> tuple[object, list[float]]:
    """Runs ``fn`` on fresh arguments ``repeat`` times; returns the first result's arguments and times."""
    times, first = [], None
    for k in range(repeat):
        args = args_factory()
        framework.synchronize()
        t0 = time.perf_counter()
        ret = fn(**args)
        framework.synchronize()
        times.append(time.perf_counter() - t0)
        if k == 0:
            first = (args, ret)
    return first, times
