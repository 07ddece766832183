"""GPU tests: every program against NumPy on the device, at two sizes and two grid shapes.

Run them under a timeout (a deadlocked persistent kernel hangs): ``timeout 600 pytest -m gpu``.
"""

import pytest
from test_emulate import check_against_numpy

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
