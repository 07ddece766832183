"""Shared by the tests: a host library built against the runtime headers, and a program module run against its
NumPy reference."""

import copy
import ctypes
import subprocess
from pathlib import Path

import numpy as np

import dace_cpufree
from dace_cpufree.runtime.build import INCLUDE_DIR


def host_library(folder: Path, source: str) -> ctypes.CDLL:
    """A host C++ program that includes the runtime headers (their host-callable index arithmetic), built with g++
    as a shared library in ``folder`` and loaded."""
    (folder / "host.cpp").write_text(source)
    cmd = ["g++", "-O1", "-std=c++17", "-shared", "-fPIC", f"-I{INCLUDE_DIR}", "host.cpp", "-o", "host.so"]
    proc = subprocess.run(cmd, cwd=folder, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return ctypes.CDLL(str(folder / "host.so"))


def check_against_numpy(
    module, backend: str, preset: str | dict, configure=None, to_device=None, to_host=None, options=None, dtype=None
):
    """Runs ``module.program`` compiled for ``backend`` (``options``: keywords of ``dace_cpufree.compile``)
    on the inputs of ``preset`` (a name or the sizes) and compares with the NumPy reference."""
    sizes = module.PRESETS[preset] if isinstance(preset, str) else preset
    args = module.initialize(**sizes) if dtype is None else module.initialize(**sizes, datatype=dtype)
    ref = copy.deepcopy(args)
    want_ret = module.reference(**ref)
    prog = dace_cpufree.compile(module.program, backend=backend, **(options or {}))
    if configure:
        prog.configure(**configure)
    got = copy.deepcopy(args) if to_device is None else to_device(args)
    got_ret = prog(**got)
    for name in module.OUTPUTS:
        value = got_ret if name == "__return" else got[name]
        value = value if to_host is None else to_host(value)
        want = want_ret if name == "__return" else ref[name]
        np.testing.assert_allclose(value, want, rtol=module.RTOL, atol=module.ATOL, err_msg=f"{module.NAME}: {name}")
    return prog


def cupy_module():
    """CuPy, imported only where a GPU test runs (machines without a GPU need not have it)."""
    import cupy

    return cupy


def to_device(args: dict) -> dict:
    """The arrays of ``args`` as CuPy device arrays, the other values as they are."""
    cp = cupy_module()
    return {k: cp.asarray(v) if hasattr(v, "shape") else v for k, v in args.items()}
