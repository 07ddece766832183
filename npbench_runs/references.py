"""NumPy's reference outputs of each (kernel, preset), computed once and kept in the cache as ``.npz``."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import numpy as np

from npbench_runs import frameworks as fw_mod


def kernels() -> dict:
    from npbench_runs.kernels import KERNELS

    return KERNELS


def reference_path(module, preset: str) -> Path:
    """Where the reference lives: keyed by the kernel module's source, the preset's sizes and NumPy's version."""
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
