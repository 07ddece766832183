"""The in-kernel matrix product alone, against cuBLAS: every tile configuration of ``cpufree::gemm`` in
``CONFIGS``, each in a persistent cooperative kernel of its own (grid = occupancy x multiprocessors, as the
launcher of a program sizes it), timed beside cuBLAS (``cupy.matmul``; TF32 off, CuPy's default) on the same
device arrays in the same process, validated against cuBLAS.

    python -m npbench_runs.gemm_tiles --build gemm_tiles_build         # compile (nvcc; no GPU needed)
    python -m npbench_runs.gemm_tiles --run gemm_tiles_build            # on a GPU: time and validate
    python -m npbench_runs.gemm_tiles --run DIR --sizes 1000x1100x1200 --splits 0 1 2 3 --json out.json
    python -m npbench_runs.gemm_tiles --check gemm_tiles_check          # DMMA tiles: host emulation, sm_80/sm_90 nvcc

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

#: (element type, tile M, tile N, tile K, threads, pipeline stages[, (warps M, warps N, atom K)[, blocks per SM]]): six
#: fields take cuBLASDx's block product (``GemmTile``); a seventh takes the direct DMMA product (``GemmTileDmma``,
#: double only): warps M x warps N warps (threads = 32 x both), each on 16 x 8 x atom-K MMAs; an eighth declares the
#: kernel ``__launch_bounds__(threads, blocks)``, as the fused kernel's bounded build does.
CONFIGS = [
    ("double", 64, 64, 16, 128, 3),  # cuBLASDx, for comparison
    ("double", 64, 64, 16, 128, 3, (2, 2, 4), 3),  # C = A B on 16x8x4 atoms
    ("double", 64, 64, 16, 128, 3, (2, 2, 8), 3),  # the default: C^T = B^T A^T on 16x8x8 atoms
    ("double", 64, 64, 32, 128, 3, (2, 2, 16)),  # cuBLAS's FP64 tile on an H100 (Nsight Compute): two blocks per SM
    ("double", 128, 64, 16, 128, 4, (2, 2, 4)),  # 64 x 32 warp tiles
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
    dmma = cfg[6] if len(cfg) > 6 else None
    if dmma is None:
        tile = f"cpufree::GemmTile<{tm}, {tn}, {tk}, {threads}, {stages}>"
    else:
        wm, wn, ak = dmma
        if t != "double" or threads != 32 * wm * wn:
            raise ValueError(f"DMMA configuration {cfg}: double only, threads = 32 x warps")
        tile = f"cpufree::GemmTileDmma<{tm}, {tn}, {tk}, {wm}, {wn}, {ak}, {stages}>"
    return dict(T=t, TILE=tile, THREADS=threads, MINB=cfg[7] if len(cfg) > 7 else 1)


def name(cfg) -> str:
    t, tm, tn, tk, threads, stages = cfg[:6]
    base = f"{t}_{tm}x{tn}x{tk}_t{threads}_s{stages}"
    if len(cfg) > 6 and cfg[6] is not None:
        wm, wn, ak = cfg[6]
        base += f"_dmma{wm}x{wn}k{ak}"
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
    newest = max((include / h).stat().st_mtime for h in ("gemm.cuh", "gemm_dmma.cuh"))
    if lib.exists() and lib.stat().st_mtime > newest:
        return name(cfg), "ok (built before)"
    src.write_text(SOURCE.format(**_fields(cfg)))
    cmd = _nvcc(arch) + ["-shared", "-Xcompiler", "-fPIC", str(src), "-o", str(lib)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    return name(cfg), ("ok" if proc.returncode == 0 else proc.stderr[-2000:])


CHECK_SOURCE = r"""
// Host check of the DMMA tile product's index arithmetic (cpufree/gemm_dmma.cuh): shared-memory layouts are
// bijections, and one tile product emulated lane by lane with CuTe's MMA fragment layouts (the sm_90 atom, and
// the m8n8k4 decomposition other architectures use) equals the plain product exactly.
#define CPUFREE_DMMA_HOST_ONLY
#include <cpufree/gemm_dmma.cuh>
#include <cute/tensor.hpp>
#include <cute/atom/mma_traits_sm80.hpp>
#include <cute/atom/mma_traits_sm90.hpp>
#include <cstdio>
#include <vector>

template <int AK> struct Sm90Atom;
template <> struct Sm90Atom<4> { using type = cute::SM90_16x8x4_F64F64F64F64_TN; };
template <> struct Sm90Atom<8> { using type = cute::SM90_16x8x8_F64F64F64F64_TN; };
template <> struct Sm90Atom<16> { using type = cute::SM90_16x8x16_F64F64F64F64_TN; };

template <class L> bool bijective(L layout, int rows, int cols) {
    std::vector<int> hit(rows * cols, 0);
    for (int r = 0; r < rows; ++r)
        for (int c = 0; c < cols; ++c) {
            const int o = layout(r, c);
            if (o < 0 || o >= rows * cols || hit[o]++) return false;
            if ((c & 1) && layout(r, c) != layout(r, c - 1) + 1) return false;  // 16-byte chunks stay whole
        }
    return true;
}

// One atom: d[lane][v] += A_atom * B_atom with the lanes' fragments a[lane][*], b[lane][*].
template <int AK>
void atom(bool sm90, double (*d)[4], const double (*a)[AK / 2], const double (*b)[AK / 4]) {
    double Am[16][AK] = {}, Bm[AK][8] = {}, Cm[16][8] = {};
    if (sm90) {
        using Tr = cute::MMA_Traits<typename Sm90Atom<AK>::type>;
        for (int l = 0; l < 32; ++l) {
            for (int v = 0; v < AK / 2; ++v) { int x = typename Tr::ALayout{}(l, v); Am[x % 16][x / 16] = a[l][v]; }
            for (int v = 0; v < AK / 4; ++v) { int x = typename Tr::BLayout{}(l, v); Bm[x / 8][x % 8] = b[l][v]; }
        }
        for (int m = 0; m < 16; ++m)
            for (int n = 0; n < 8; ++n)
                for (int k = 0; k < AK; ++k) Cm[m][n] += Am[m][k] * Bm[k][n];
        for (int l = 0; l < 32; ++l)
            for (int v = 0; v < 4; ++v) { int x = typename Tr::CLayout{}(l, v); d[l][v] += Cm[x % 16][x / 16]; }
    } else {  // m8n8k4 per (q, h) with a[h + 2 q], b[q], d[2 h], d[2 h + 1], as dmma() issues them
        using Tr = cute::MMA_Traits<cute::SM80_8x8x4_F64F64F64F64_TN>;
        for (int q = 0; q < AK / 4; ++q)
            for (int h = 0; h < 2; ++h) {
                double A8[8][4] = {}, B8[4][8] = {};
                for (int l = 0; l < 32; ++l) {
                    int x = typename Tr::ALayout{}(l, 0); A8[x % 8][x / 8] = a[l][h + 2 * q];
                    int y = typename Tr::BLayout{}(l, 0); B8[y / 8][y % 8] = b[l][q];
                }
                for (int l = 0; l < 32; ++l)
                    for (int v = 0; v < 2; ++v) {
                        int x = typename Tr::CLayout{}(l, v);
                        for (int k = 0; k < 4; ++k) d[l][2 * h + v] += A8[x % 8][k] * B8[k][x / 8];
                    }
            }
    }
}

template <int TM, int TN, int TK, int WM, int WN, int AK>
bool check(bool sm90) {
    using W = cpufree::dmma::Warp<TM, TN, TK, WM, WN, AK>;
    typename W::LA la;
    typename W::LB lb;
    if (!bijective(la, TM, TK) || !bijective(lb, TK, TN)) return false;
    std::vector<double> A(TM * TK), B(TK * TN), sa(TM * TK), sb(TK * TN), C(TM * TN, 0.0);
    std::vector<int> writes(TM * TN, 0);
    unsigned x = 12345u;
    for (auto &v : A) v = double(int((x = x * 1103515245u + 12345u) >> 27) - 16);
    for (auto &v : B) v = double(int((x = x * 1103515245u + 12345u) >> 27) - 16);
    for (int r = 0; r < TM; ++r) for (int c = 0; c < TK; ++c) sa[la(r, c)] = A[r * TK + c];
    for (int r = 0; r < TK; ++r) for (int c = 0; c < TN; ++c) sb[lb(r, c)] = B[r * TN + c];
    for (int w = 0; w < WM * WN; ++w) {
        std::vector<typename W::Frag> f(32);
        std::vector<double> acc(32 * W::kMI * W::kNJ * 4, 0.0);
        auto at = [&](int l, int i, int j) {
            return reinterpret_cast<double(*)[4]>(&acc[((i * W::kNJ + j) * 32 + l) * 4]);
        };
        for (int kb = 0; kb < W::kKB; ++kb) {
            for (int l = 0; l < 32; ++l) W::load(f[l], sa.data(), sb.data(), w, l, kb);
            for (int i = 0; i < W::kMI; ++i)
                for (int j = 0; j < W::kNJ; ++j) {
                    double a[32][AK / 2], b[32][AK / 4];
                    for (int l = 0; l < 32; ++l) {
                        for (int v = 0; v < AK / 2; ++v) a[l][v] = f[l].a[i][v];
                        for (int v = 0; v < AK / 4; ++v) b[l][v] = f[l].b[j][v];
                    }
                    atom<AK>(sm90, at(0, i, j), a, b);
                }
        }
        for (int l = 0; l < 32; ++l)
            for (int i = 0; i < W::kMI; ++i)
                for (int j = 0; j < W::kNJ; ++j)
                    for (int v = 0; v < 4; ++v) {
                        const int m = W::c_row(w, l, i, j, v), n = W::c_col(w, l, i, j, v);
                        if (m < 0 || m >= TM || n < 0 || n >= TN) return false;
                        C[m * TN + n] += at(l, i, j)[0][v];
                        ++writes[m * TN + n];
                    }
    }
    for (int m = 0; m < TM; ++m)
        for (int n = 0; n < TN; ++n) {
            double ref = 0.0;
            for (int k = 0; k < TK; ++k) ref += A[m * TK + k] * B[k * TN + n];
            if (writes[m * TN + n] != 1 || C[m * TN + n] != ref) return false;
        }
    return true;
}

int main() {
    int failed = 0;
{CASES}
    return failed != 0;
}
"""


def dmma_tiles() -> list[tuple[int, int, int, int, int, int]]:
    """(TM, TN, TK, warps M, warps N, atom K) of every DMMA configuration, and one per atom K besides."""
    tiles = {(c[1], c[2], c[3], *c[6]) for c in CONFIGS if len(c) > 6 and c[6] is not None}
    tiles |= {(64, 64, 16, 2, 2, 4), (64, 64, 16, 2, 2, 8), (64, 64, 32, 2, 2, 16)}
    return sorted(tiles)


def check(out: Path, compile_configs: bool = True) -> int:
    """CPU-only checks of the DMMA tile product: index arithmetic emulated on the host against CuTe's fragment
    layouts, and (``compile_configs``) every DMMA configuration compiled for sm_80 and sm_90."""
    out.mkdir(parents=True, exist_ok=True)
    cases = []
    for tile in dmma_tiles():
        args = ", ".join(map(str, tile))
        for sm90 in ("true", "false"):
            cases.append(
                f'    if (!check<{args}>({sm90})) {{ std::printf("FAIL check {args} sm90={sm90}\\n"); ++failed; }}\n'
                f'    else std::printf("ok   check {args} sm90={sm90}\\n");'
            )
    src, exe = out / "dmma_check.cu", out / "dmma_check"
    src.write_text(CHECK_SOURCE.replace("{CASES}", "\n".join(cases)))
    proc = subprocess.run(_nvcc("sm_90") + [str(src), "-o", str(exe)], capture_output=True, text=True)
    if proc.returncode:
        print(proc.stderr[-3000:])
        return 1
    run_proc = subprocess.run([str(exe)], capture_output=True, text=True)
    print(run_proc.stdout, end="")
    failed = run_proc.returncode != 0
    for cfg in CONFIGS if compile_configs else ():
        if len(cfg) < 7 or cfg[6] is None:
            continue
        for arch in ("sm_80", "sm_90"):
            cu = out / f"{name(cfg)}_{arch}.cu"
            cu.write_text(SOURCE.format(**_fields(cfg)))
            cmd = _nvcc(arch) + ["-cubin", str(cu), "-o", str(cu.with_suffix(".cubin"))]
            proc = subprocess.run(cmd, capture_output=True, text=True)
            print(f"{name(cfg)} {arch}: {'compiles' if proc.returncode == 0 else proc.stderr[-1500:]}", flush=True)
            failed |= proc.returncode != 0
    return 1 if failed else 0


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
    p.add_argument("--check", type=Path, help="CPU-only checks of the DMMA tile product, scratch files in this folder")
    p.add_argument("--sizes", nargs="+", default=["1000x1100x1200", "2000x2300x2600", "4096x4096x4096"])
    p.add_argument("--splits", nargs="+", type=int, default=[0])
    p.add_argument("--reps", type=int, default=10)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--json", type=Path)
    args = p.parse_args(argv)
    if args.check:
        rc = check(args.check)
        if rc or not (args.build or args.run):
            return rc
    if args.build:
        rc = build(args.build, args.arch, args.jobs)
        if rc or not args.run:
            return rc
    if not args.run:
        p.error("give --build, --run or --check")
    sizes = [tuple(int(x) for x in s.split("x")) for s in args.sizes]
    rows = run(args.run, sizes, args.splits, args.reps, args.repeat)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
