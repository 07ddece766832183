"""The built-in demo: Jacobi 2-D as one persistent kernel, next to upstream DaCe on the GPU."""

from __future__ import annotations

import copy
import time

import dace
import numpy as np

N = dace.symbol("N")


@dace.program
def jacobi_2d(A: dace.float64[N, N], B: dace.float64[N, N], TSTEPS: dace.int64):
    for _ in range(TSTEPS):
        B[1:-1, 1:-1] = 0.2 * (A[1:-1, 1:-1] + A[1:-1, :-2] + A[1:-1, 2:] + A[2:, 1:-1] + A[:-2, 1:-1])
        A[1:-1, 1:-1] = 0.2 * (B[1:-1, 1:-1] + B[1:-1, :-2] + B[1:-1, 2:] + B[2:, 1:-1] + B[:-2, 1:-1])


def jacobi_2d_numpy(A, B, TSTEPS):
    for _ in range(TSTEPS):
        B[1:-1, 1:-1] = 0.2 * (A[1:-1, 1:-1] + A[1:-1, :-2] + A[1:-1, 2:] + A[2:, 1:-1] + A[:-2, 1:-1])
        A[1:-1, 1:-1] = 0.2 * (B[1:-1, 1:-1] + B[1:-1, :-2] + B[1:-1, 2:] + B[2:, 1:-1] + B[:-2, 1:-1])


def _inputs(n: int):
    i, j = np.meshgrid(np.arange(n, dtype=np.float64), np.arange(n, dtype=np.float64), indexing="ij")
    return (i * (j + 2) + 2) / n, (i * (j + 3) + 3) / n


def run_demo(size: int = 150, steps: int = 50) -> int:
    from dace_cpufree.api import compile as cpufree_compile
    from dace_cpufree.api import kernel_source
    from dace_cpufree.cli import summary
    from dace_cpufree.runtime import build, cuda_arch, gpu_count

    source = kernel_source(jacobi_2d)
    library = build(source.code, "jacobi_2d_demo", "cuda")
    print(f"dace-cpufree demo: Jacobi 2-D, N={size}, {steps} time steps")
    print(summary(source))
    print(f"CUDA source   : {library.parent / ('jacobi_2d_demo' + source.dialect.suffix)}")
    print(f"built with    : nvcc -arch={cuda_arch()} (cached)")
    if gpu_count() == 0:
        print("no GPU here: the code was generated and compiled with nvcc, not run.")
        return 0
    A0, B0 = _inputs(size)
    ref_A, ref_B = A0.copy(), B0.copy()
    jacobi_2d_numpy(ref_A, ref_B, steps)
    prog = cpufree_compile(jacobi_2d)
    try:
        import cupy
    except ImportError:
        cupy = None
    if cupy is None:  # NumPy arrays: the call copies them to the device and back
        A, B = A0.copy(), B0.copy()
        prog(A, B, steps)
    else:
        A, B = cupy.asarray(A0), cupy.asarray(B0)
        prog(A, B, steps)
        A, B = cupy.asnumpy(A), cupy.asnumpy(B)
    ok = np.allclose(A, ref_A) and np.allclose(B, ref_B)
    print(f"validated against NumPy: {'yes' if ok else 'NO'}  (grid {prog.launch_config[0]} x {prog.launch_config[1]})")
    if cupy is None:
        print('CuPy is not installed: no timing beside upstream DaCe. Fix: pip install -e ".[gpu]" (cupy-cuda13x).')
        return 0 if ok else 1

    def ours():
        a, b = cupy.asarray(A0), cupy.asarray(B0)
        cupy.cuda.Device().synchronize()
        t0 = time.perf_counter()
        prog(a, b, steps)  # returns once the kernel is queued: the clock stops when the device is done
        cupy.cuda.Device().synchronize()
        return time.perf_counter() - t0

    t_ours = min(ours() for _ in range(5))
    t_up = _upstream(A0, B0, steps)
    print(
        f"time: dace-cpufree {t_ours * 1e3:.3f} ms, upstream DaCe GPU {t_up * 1e3:.3f} ms, "
        f"speedup {t_up / t_ours:.2f}x ({prog.device_name()})"
    )
    return 0 if ok else 1


def _upstream(A0, B0, steps) -> float:
    import cupy
    from dace.transformation.auto.auto_optimize import auto_optimize

    sdfg = copy.deepcopy(jacobi_2d.to_sdfg(simplify=True))
    sdfg = auto_optimize(sdfg, dace.DeviceType.GPU, use_gpu_storage=True)
    compiled = sdfg.compile()
    best = float("inf")
    for _ in range(5):
        a, b = cupy.asarray(A0), cupy.asarray(B0)
        cupy.cuda.Device().synchronize()
        t0 = time.perf_counter()
        compiled(A=a, B=b, TSTEPS=steps, N=A0.shape[0])
        cupy.cuda.Device().synchronize()
        best = min(best, time.perf_counter() - t0)
    return best
