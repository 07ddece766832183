"""GPU tests: results copied back to NumPy arguments, and softmax at NPBench's paper size (the suite's kernels on
the device: tests/benchmarks/test_suite_kernels_gpu.py).

Run them under a timeout (a deadlocked persistent kernel hangs): ``timeout 600 pytest -m gpu``.
"""

import types

import pytest
from helpers import check_against_numpy, cupy_module, to_device
from kernel_copies import jacobi_2d, softmax


@pytest.mark.gpu
def test_numpy_arguments_are_copied_back():
    prog = check_against_numpy(jacobi_2d, "cuda", "small")
    assert prog.launch_config[0] >= 1 and prog.last_kernel_ms > 0


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("specialize", [False, True], ids=["symbolic", "static"])
def test_softmax_at_npbench_paper_size(dtype, specialize):
    """64x16x512x512, where upstream DaCe 2.0.0b1 hit an illegal memory access on the H200."""
    import numpy as np
    from programs import SOFTMAX_PAPER, softmax_f64

    module = softmax
    if dtype == "float64":
        module = types.SimpleNamespace(**{**vars(module), "program": softmax_f64})
    sizes = dict(SOFTMAX_PAPER)
    symbols = None
    if specialize:
        symbols = sizes if dtype == "float32" else dict(N=64, M=16, K=512)
    cp = cupy_module()
    check_against_numpy(
        module,
        "cuda",
        sizes,
        options={"symbols": symbols} if symbols else None,
        to_device=to_device,
        to_host=cp.asnumpy,
        dtype=getattr(np, dtype),
    )
