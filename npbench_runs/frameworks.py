"""The frameworks a benchmark compares, each behind one small interface.

A framework ``prepare``s a kernel module once (compilation, timed separately) and returns a
callable that takes the kernel's arguments already on the device (or on the host for NumPy) and
returns the program's return value. ``to_host`` brings any of its arrays back for validation.
"""

from __future__ import annotations

import copy
import time

import dace
import numpy as np


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
    device = True

    def prepare(self, module):
        raise NotImplementedError

    def to_device(self, args: dict) -> dict:
        import cupy

        return {k: cupy.asarray(v) if isinstance(v, np.ndarray) else v for k, v in args.items()}

    @staticmethod
    def to_host(value):
        if value is None or isinstance(value, np.ndarray):
            return value
        get = getattr(value, "get", None)
        return get() if get is not None else np.asarray(value)

    @staticmethod
    def synchronize():
        import cupy

        cupy.cuda.Device().synchronize()

    def version(self) -> str:
        return ""


class NumPyFramework(Framework):
    name = "numpy"
    device = False

    def prepare(self, module):
        return module.reference

    def to_device(self, args):
        return copy.deepcopy(args)

    @staticmethod
    def synchronize():
        return None

    def version(self):
        return np.__version__


class CuPyFramework(Framework):
    """The kernel's NumPy reference on CuPy arrays (NumPy dispatches to CuPy through __array_function__)."""

    name = "cupy"

    def prepare(self, module):
        return module.reference

    def version(self):
        import cupy

        return cupy.__version__


class UpstreamDaCeFramework(Framework):
    """Upstream DaCe on the GPU: ``auto_optimize(..., DeviceType.GPU, use_gpu_storage=True)``."""

    name = "dace_gpu"

    def prepare(self, module):
        from dace.transformation.auto.auto_optimize import auto_optimize

        sdfg = copy.deepcopy(module.program.to_sdfg(simplify=True))
        sdfg.name = f"upstream_{module.NAME}"
        sdfg = auto_optimize(sdfg, dace.DeviceType.GPU, use_gpu_storage=True)
        compiled = sdfg.compile()

        def run(**args):
            return compiled(**args, **infer_symbols(sdfg, args))

        return run

    def version(self):
        return dace.__version__


class CpufreeFramework(Framework):
    """Ours: the whole program as one persistent cooperative kernel."""

    name = "dace_cpufree"

    def __init__(self, backend: str = "cuda"):
        self.backend = backend
        self.program = None

    def prepare(self, module):
        import dace_cpufree

        self.program = dace_cpufree.compile(module.program, backend=self.backend)
        return self.program

    def to_device(self, args):
        return copy.deepcopy(args) if self.backend == "emulate" else super().to_device(args)

    def synchronize(self):
        if self.backend != "emulate":
            super().synchronize()

    def version(self):
        import dace_cpufree

        return dace_cpufree.__version__


FRAMEWORKS = {
    "numpy": NumPyFramework,
    "cupy": CuPyFramework,
    "dace_gpu": UpstreamDaCeFramework,
    "dace_cpufree": CpufreeFramework,
    "dace_cpufree_emulate": lambda: CpufreeFramework("emulate"),
}


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
