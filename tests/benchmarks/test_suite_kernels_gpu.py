"""GPU tests: every suite kernel against NumPy on the device, at two sizes and two grid shapes.

Run them under a timeout (a deadlocked persistent kernel hangs): ``timeout 600 pytest -m gpu``.
"""

import pytest
from helpers import check_against_numpy, cupy_module, to_device

from npbench_runs.kernels import KERNELS


@pytest.mark.gpu
@pytest.mark.parametrize("preset", ["test", "small"])
@pytest.mark.parametrize("name", sorted(KERNELS))
def test_program_matches_numpy_on_gpu(name, preset):
    check_against_numpy(KERNELS[name], "cuda", preset, to_device=to_device, to_host=cupy_module().asnumpy)


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(KERNELS))
def test_program_matches_numpy_on_two_small_blocks(name):
    """Few threads: every grid-stride loop wraps around several times."""
    check_against_numpy(KERNELS[name], "cuda", "small", configure={"block_size": 64, "max_blocks": 2})


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
    cp = cupy_module()
    check_against_numpy(module, "cuda", sizes, options={"symbols": symbols}, to_device=to_device, to_host=cp.asnumpy)
