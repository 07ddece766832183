"""Products with few output rows (``cpufree/gemm_skinny.cuh``) against ``cupy.matmul``, on a GPU, in one run.

    python -m npbench_runs.skinny_products                      # mlp's products at paper and a few others
    python -m npbench_runs.skinny_products --repeats 20 --json out.json

Each shape ``M x N x K`` is ``C = A @ B`` with ``A`` of ``M x K`` rows and ``B`` of ``K x N``, in float32 and float64,
compiled as a program of one product (the kernel's time from device events) and run with CuPy (CUDA events around
``cupy.matmul``, cuBLAS). Both results are checked against NumPy first. Printed per shape: the median times, the
bandwidth each reaches on ``B`` (the bytes that must be read once), and the kernel's speed relative to CuPy.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys

import dace
import numpy as np

import dace_cpufree

M, N, K = (dace.symbol(s) for s in "MNK")


@dace.program
def product32(A: dace.float32[M, K], B: dace.float32[K, N], C: dace.float32[M, N]):
    C[:] = A @ B


@dace.program
def product64(A: dace.float64[M, K], B: dace.float64[K, N], C: dace.float64[M, N]):
    C[:] = A @ B


#: (M, N, K): mlp's second and third products at NPBench's paper size, then a single row, sixteen rows, an odd width.
SHAPES = ((8, 10000, 30000), (8, 1000, 10000), (1, 10000, 30000), (16, 10000, 30000), (5, 4099, 20001))


def _measure(shape, dtype, repeats: int) -> dict:
    import cupy as cp

    m, n, k = shape
    rng = np.random.default_rng(0)
    a = rng.random((m, k), dtype=np.float32).astype(dtype)
    b = rng.random((k, n), dtype=np.float32).astype(dtype)
    want = a.astype(np.float64) @ b.astype(np.float64)
    da, db = cp.asarray(a), cp.asarray(b)
    dc = cp.zeros((m, n), dtype=dtype)
    run = dace_cpufree.compile(product32 if dtype == np.float32 else product64)
    rtol = 1e-4 if dtype == np.float32 else 1e-11
    run(A=da, B=db, C=dc)
    np.testing.assert_allclose(cp.asnumpy(dc), want, rtol=rtol)
    np.testing.assert_allclose(cp.asnumpy(cp.matmul(da, db)), want, rtol=rtol)
    ours, theirs = [], []
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    for _ in range(repeats):
        run(A=da, B=db, C=dc)
        ours.append(run.last_kernel_ms)
        start.record()
        cp.matmul(da, db)
        stop.record()
        stop.synchronize()
        theirs.append(cp.cuda.get_elapsed_time(start, stop))
    ms, cupy_ms = statistics.median(ours), statistics.median(theirs)
    gbytes = b.nbytes / 1e9
    return dict(
        shape=list(shape),
        dtype=np.dtype(dtype).name,
        ms=ms,
        cupy_ms=cupy_ms,
        tb_s=gbytes / ms,  # GB / ms = TB / s
        cupy_tb_s=gbytes / cupy_ms,
        speed=cupy_ms / ms,
    )


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeats", type=int, default=10)
    p.add_argument("--json", help="write the results to this file")
    args = p.parse_args(argv)
    import cupy as cp

    device = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)["name"].decode()
    print(f"device: {device}")
    rows = []
    for dtype in (np.float32, np.float64):
        for shape in SHAPES:
            r = _measure(shape, dtype, args.repeats)
            rows.append(r)
            print(
                f"{r['dtype']} {'x'.join(map(str, shape)):>16}: {r['ms']:.4f} ms ({r['tb_s']:.2f} TB/s on B), "
                f"CuPy {r['cupy_ms']:.4f} ms ({r['cupy_tb_s']:.2f} TB/s), {r['speed']:.2f}x CuPy",
                flush=True,
            )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(device=device, results=rows), f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
