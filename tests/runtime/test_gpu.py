"""GPU tests: every program against NumPy on the device, at two sizes and two grid shapes.

Run them under a timeout (a deadlocked persistent kernel hangs): ``timeout 600 pytest -m gpu``.
"""

import types

import pytest
from helpers import check_against_numpy

from npbench_runs.kernels import KERNELS


def _cupy():
    import cupy

    return cupy


@pytest.mark.gpu
@pytest.mark.parametrize("preset", ["test", "small"])
@pytest.mark.parametrize("name", sorted(KERNELS))
def test_program_matches_numpy_on_gpu(name, preset):
    cp = _cupy()
    to_dev = lambda args: {k: cp.asarray(v) if hasattr(v, "shape") else v for k, v in args.items()}  # noqa: E731
    check_against_numpy(KERNELS[name], "cuda", preset, to_device=to_dev, to_host=cp.asnumpy)


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(KERNELS))
def test_program_matches_numpy_on_two_small_blocks(name):
    """Few threads: every grid-stride loop wraps around several times."""
    check_against_numpy(KERNELS[name], "cuda", "small", configure={"block_size": 64, "max_blocks": 2})


@pytest.mark.gpu
def test_numpy_arguments_are_copied_back():
    prog = check_against_numpy(KERNELS["jacobi_2d"], "cuda", "small")
    assert prog.launch_config[0] >= 1 and prog.last_kernel_ms > 0


def _to_device(args):
    cp = _cupy()
    return {k: cp.asarray(v) if hasattr(v, "shape") else v for k, v in args.items()}


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(KERNELS))
def test_program_without_scheduler_matches_numpy_on_gpu(name):
    """The plain grid-stride code (scheduler off) stays correct: it is the benchmark's baseline."""
    check_against_numpy(KERNELS[name], "cuda", "small", options={"scheduler": False})


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(KERNELS))
def test_every_map_tiled_matches_numpy_on_two_small_blocks(name):
    """scheduler='all': element-wise maps in tile-sized chunks too; few threads, so every loop wraps."""
    check_against_numpy(
        KERNELS[name], "cuda", "small", configure={"block_size": 64, "max_blocks": 2}, options={"scheduler": "all"}
    )


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["softmax", "heat_3d", "jacobi_2d", "gemm", "atax", "k3mm"])
def test_static_tiles_match_numpy_on_gpu(name):
    """Sizes compiled in: tile sizes chosen at compile time (a 512-thread tile for softmax rows)."""
    module = KERNELS[name]
    sizes = dict(module.PRESETS["small"])
    if name == "softmax":
        sizes["SM"] = 512
    free = {str(s) for s in module.program.to_sdfg().free_symbols}
    symbols = {k: v for k, v in sizes.items() if k in free}
    cp = _cupy()
    check_against_numpy(module, "cuda", sizes, options={"symbols": symbols}, to_device=_to_device, to_host=cp.asnumpy)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("specialize", [False, True], ids=["symbolic", "static"])
def test_softmax_at_npbench_paper_size(dtype, specialize):
    """64x16x512x512, where upstream DaCe 2.0.0b1 hit an illegal memory access on the H200."""
    import numpy as np
    from programs import SOFTMAX_PAPER, softmax_f64

    module = KERNELS["softmax"]
    if dtype == "float64":
        module = types.SimpleNamespace(**{**vars(module), "program": softmax_f64})
    sizes = dict(SOFTMAX_PAPER)
    symbols = None
    if specialize:
        symbols = sizes if dtype == "float32" else dict(N=64, M=16, K=512)
    cp = _cupy()
    check_against_numpy(
        module,
        "cuda",
        sizes,
        options={"symbols": symbols} if symbols else None,
        to_device=_to_device,
        to_host=cp.asnumpy,
        dtype=getattr(np, dtype),
    )
