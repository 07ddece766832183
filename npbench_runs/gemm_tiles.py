"""The in-kernel matrix product alone, against cuBLAS: every tile configuration of ``cpufree::gemm`` in
``CONFIGS``, each in a persistent cooperative kernel of its own (grid = occupancy x multiprocessors, as the
launcher of a program sizes it), timed beside cuBLAS (``cupy.matmul``; TF32 off, CuPy's default) on the same
device arrays in the same process, validated against cuBLAS.

    python -m npbench_runs.gemm_tiles --build gemm_tiles_build         # compile (nvcc; no GPU needed)
    python -m npbench_runs.gemm_tiles --run gemm_tiles_build            # on a GPU: time and validate
    python -m npbench_runs.gemm_tiles --run DIR --sizes 1000x1100x1200 --splits 0 1 2 3 --json out.json

``--splits 0`` is the library's own choice of K ranges per output tile; other values force that many.
Sizes are M x N x K of ``C = A @ B`` (row-major, NumPy's order). Printed: ms per product (median of ``--repeat``
timings of ``--reps`` back-to-back launches), TFLOP/s, ratio to cuBLAS, the grid, and the largest relative error.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import ctypes
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from dace_cpufree.runtime import mathdx

#: (element type, tile M, tile N, tile K, threads, pipeline stages[, (warps M, warps N, instruction K) or "dmma"[,
#: blocks per SM]]): six fields take cuBLASDx's block product (``GemmTile``); a seventh takes CUTLASS's block-level
#: multistage product (``GemmTileCutlass``, double only): warps M x warps N warps (threads = 32 x both) on 16 x 8 x K
#: DMMA instructions (K = 4: gemm_cutlass.cuh), or ``"dmma"`` the 16x8x8 DMMA tile (``GemmTileDmma``, double only, tile
#: M 64 or 128 by 64 x 16, 128 threads; gemm_dmma.cuh); an eighth declares the kernel
#: ``__launch_bounds__(threads, blocks)``, as the fused kernel's bounded build does.
CONFIGS = [
    ("double", 64, 64, 16, 128, 3),  # cuBLASDx, for comparison
    ("double", 64, 64, 16, 128, 3, "dmma"),  # the default in the fused kernel's unbounded build
    ("double", 64, 64, 16, 128, 3, (2, 2, 4)),  # CUTLASS's tile: the default in the bounded build
    ("double", 64, 64, 16, 128, 3, (2, 2, 4), 3),  # as the bounded build compiles it
    ("double", 128, 64, 16, 128, 3, "dmma"),  # 64 x 32 warp tiles (spills at 255 registers)
    ("double", 64, 64, 16, 128, 4, (2, 2, 4)),
    ("double", 64, 64, 32, 128, 3, (2, 2, 4)),
    ("double", 128, 128, 16, 256, 3, (2, 4, 4)),  # 64 x 32 warp tiles, one block per SM
    ("float", 64, 128, 16, 128, 3),  # the default
    ("float", 64, 64, 16, 128, 4),
]

SOURCE = r"""
#include <cuda_runtime.h>
#include <cpufree/gemm.cuh>

using T = {T};
using Tile = {TILE};

__global__ void __launch_bounds__({THREADS}, {MINB})
product(long long M, long long N, long long K, const T *A, const T *B, T *C, long long splits) {{
    cpufree::gemm_detail::gemm_tensor<T, Tile>(M, N, K, T(1), A, K, false, B, N, false, T(0), C, N, splits);
}}

extern "C" int shared_bytes() {{ return (int)cpufree::gemm_shared_bytes<T, Tile>(); }}

// Milliseconds per product over `reps` back-to-back cooperative launches; the grid used in *grid; < 0 on error.
extern "C" float run(long long M, long long N, long long K, const T *A, const T *B, T *C, int reps, long long splits,
                     int *grid) {{
    const int smem = (int)cpufree::gemm_shared_bytes<T, Tile>();
    int dev = 0, sms = 0, per_sm = 0;
    if (cudaGetDevice(&dev) != cudaSuccess) return -1.f;
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    if (cudaFuncSetAttribute(product, cudaFuncAttributeMaxDynamicSharedMemorySize, smem) != cudaSuccess) return -2.f;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, product, {THREADS}, smem) != cudaSuccess || per_sm < 1)
        return -3.f;
    *grid = per_sm * sms;
    void *args[] = {{&M, &N, &K, &A, &B, &C, &splits}};
    cudaEvent_t a, b;
    cudaEventCreate(&a);
    cudaEventCreate(&b);
    if (cudaLaunchCooperativeKernel((void *)product, dim3(*grid), dim3({THREADS}), args, smem, 0) != cudaSuccess)
        return -4.f;
    cudaEventRecord(a);
    for (int r = 0; r < reps; ++r)
        cudaLaunchCooperativeKernel((void *)product, dim3(*grid), dim3({THREADS}), args, smem, 0);
    cudaEventRecord(b);
    if (cudaEventSynchronize(b) != cudaSuccess) return -5.f;
    float ms = 0.f;
    cudaEventElapsedTime(&ms, a, b);
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    return cudaGetLastError() == cudaSuccess ? ms / reps : -6.f;
}}
"""


def _fields(cfg) -> dict:
    t, tm, tn, tk, threads, stages = cfg[:6]
    warps = cfg[6] if len(cfg) > 6 else None
    if warps is None:
        tile = f"cpufree::GemmTile<{tm}, {tn}, {tk}, {threads}, {stages}>"
    elif warps == "dmma":
        if t != "double" or (tn, tk, threads) != (64, 16, 128) or tm not in (64, 128):
            raise ValueError(f"DMMA configuration {cfg}: double only, 64 or 128 x 64 x 16, 128 threads")
        tile = f"cpufree::GemmTileDmma<{tm}, {stages}, cpufree::GemmTileCutlass<64, 64, 16, 2, 2, 4, 3>>"
    else:
        wm, wn, ik = warps
        if t != "double" or threads != 32 * wm * wn:
            raise ValueError(f"CUTLASS configuration {cfg}: double only, threads = 32 x warps")
        tile = f"cpufree::GemmTileCutlass<{tm}, {tn}, {tk}, {wm}, {wn}, {ik}, {stages}>"
    return dict(T=t, TILE=tile, THREADS=threads, MINB=cfg[7] if len(cfg) > 7 else 1)


def name(cfg) -> str:
    t, tm, tn, tk, threads, stages = cfg[:6]
    base = f"{t}_{tm}x{tn}x{tk}_t{threads}_s{stages}"
    if len(cfg) > 6 and cfg[6] == "dmma":
        base += "_dmma"
    elif len(cfg) > 6 and cfg[6] is not None:
        wm, wn, ik = cfg[6]
        base += f"_cutlass{wm}x{wn}k{ik}"
    if len(cfg) > 7:
        base += f"_b{cfg[7]}"
    return base


def _nvcc(arch: str) -> list[str]:
    include = Path(__file__).resolve().parent.parent / "dace_cpufree" / "runtime" / "include"
    dirs = mathdx.include_dirs()
    if dirs is None:
        raise SystemExit("nvidia-mathdx is not installed: pip install nvidia-mathdx==25.6.0")
    cmd = ["nvcc", "-O3", "-std=c++17", f"-arch={arch}", "--expt-relaxed-constexpr"]
    return cmd + [f"-I{include}", *(f"-I{d}" for d in dirs)]


def build_one(cfg, out: Path, arch: str) -> tuple[str, str]:
    src, lib = out / f"{name(cfg)}.cu", out / f"{name(cfg)}.so"
    include = Path(__file__).resolve().parent.parent / "dace_cpufree" / "runtime" / "include" / "cpufree"
    newest = max((include / h).stat().st_mtime for h in ("gemm.cuh", "gemm_cutlass.cuh", "gemm_dmma.cuh"))
    if lib.exists() and lib.stat().st_mtime > newest:
        return name(cfg), "ok (built before)"
    src.write_text(SOURCE.format(**_fields(cfg)))
    cmd = _nvcc(arch) + ["-shared", "-Xcompiler", "-fPIC", str(src), "-o", str(lib)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    return name(cfg), ("ok" if proc.returncode == 0 else proc.stderr[-2000:])


def build(out: Path, arch: str, jobs: int) -> int:
    out.mkdir(parents=True, exist_ok=True)
    failed = 0
    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        for cfg_name, status in pool.map(lambda c: build_one(c, out, arch), CONFIGS):
            print(f"{cfg_name}: {status}", flush=True)
            failed += not status.startswith("ok")
    return 1 if failed else 0


def _time_cublas(cp, A, B, reps: int) -> float:
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    cp.matmul(A, B)
    start.record()
    for _ in range(reps):
        cp.matmul(A, B)
    stop.record()
    stop.synchronize()
    return cp.cuda.get_elapsed_time(start, stop) / reps


def run(folder: Path, sizes: list[tuple[int, int, int]], splits: list[int], reps: int, repeat: int) -> list[dict]:
    import cupy as cp

    device = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)["name"].decode()
    print(f"device: {device}")
    rows = []
    for M, N, K in sizes:
        flops = 2.0 * M * N * K
        for t in ("double", "float"):
            dtype = cp.float64 if t == "double" else cp.float32
            rng = cp.random.default_rng(7)
            A = rng.standard_normal((M, K), dtype=dtype)
            B = rng.standard_normal((K, N), dtype=dtype)
            ref = cp.matmul(A, B)
            blas = statistics.median(_time_cublas(cp, A, B, reps) for _ in range(repeat))
            print(f"{M}x{N}x{K} {t}: cuBLAS {blas:.3f} ms {flops / blas / 1e9:.1f} TFLOP/s")
            rows.append(dict(device=device, size=[M, N, K], type=t, config="cuBLAS", ms=blas, splits=None))
            for cfg in CONFIGS:
                if cfg[0] != t or not (folder / f"{name(cfg)}.so").exists():
                    continue
                lib = ctypes.CDLL(str(folder / f"{name(cfg)}.so"))
                lib.run.restype = ctypes.c_float
                lib.run.argtypes = (
                    [ctypes.c_longlong] * 3
                    + [ctypes.c_void_p] * 3
                    + [
                        ctypes.c_int,
                        ctypes.c_longlong,
                        ctypes.POINTER(ctypes.c_int),
                    ]
                )
                for s in splits:
                    C = cp.full((M, N), cp.nan, dtype=dtype)
                    grid = ctypes.c_int(0)
                    times = []
                    for _ in range(repeat):
                        ms = lib.run(M, N, K, A.data.ptr, B.data.ptr, C.data.ptr, reps, s, ctypes.byref(grid))
                        times.append(ms)
                    if min(times) < 0:
                        print(f"  {name(cfg)} splits={s}: launch failed ({min(times)})")
                        continue
                    ms = statistics.median(times)
                    err = float(cp.max(cp.abs(C - ref)) / cp.max(cp.abs(ref)))
                    row = dict(device=device, size=[M, N, K], type=t, config=name(cfg), ms=ms, splits=s)
                    row.update(grid=grid.value, rel_err=err, ratio=blas / ms)
                    rows.append(row)
                    print(
                        f"  {name(cfg):28s} splits={s}: {ms:.3f} ms {flops / ms / 1e9:6.1f} TFLOP/s "
                        f"{blas / ms:.2f}x cuBLAS grid {grid.value} err {err:.1e}",
                        flush=True,
                    )
    return rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", type=Path, help="compile every configuration into this folder")
    p.add_argument("--arch", default="sm_90", help="nvcc -arch of the build (default sm_90)")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    p.add_argument("--run", type=Path, help="time the configurations built in this folder")
    p.add_argument("--sizes", nargs="+", default=["1000x1100x1200", "2000x2300x2600", "4096x4096x4096"])
    p.add_argument("--splits", nargs="+", type=int, default=[0])
    p.add_argument("--reps", type=int, default=10)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--json", type=Path)
    args = p.parse_args(argv)
    if args.build:
        rc = build(args.build, args.arch, args.jobs)
        if rc or not args.run:
            return rc
    if not args.run:
        p.error("give --build or --run")
    sizes = [tuple(int(x) for x in s.split("x")) for s in args.sizes]
    rows = run(args.run, sizes, args.splits, args.reps, args.repeat)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
