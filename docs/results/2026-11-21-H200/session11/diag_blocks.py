"""Issue 4 diagnosis (session 11): where each thread block of each PE spends a distributed Jacobi step.

Run as ``mpirun -np P python3 .gpu/diag_blocks.py PROGRAM FORM N NX STEPS SLOPE`` (NX: jacobi_3d's split axis,
0 for 2-D). The generated kernel is instrumented: thread 0 of every block reads clock64 before and after
every grid sync, before every top-level map, tasklet, copy and block barrier, and accumulates the cycles of
each segment. At the end every block stores its sums, and block 0 of each PE prints, per segment, the
mean and maximum over the blocks that issued a put and the minimum, mean and maximum over the others
(us per step, converted with each block's own globaltimer/clock64 ratio). Printed for the runs of at
least 50 steps only. The run itself is npbench_runs.multigpu.run.run, validated against NumPy.
``DG_BUILD_ONLY=P`` builds the P-PE configuration without a GPU."""

import os
import re
import sys

import dace_cpufree
from dace_cpufree.api import PersistentProgram, add_shmem_runtime, build, generate, persistent_sdfg, uses_shmem
from dace_cpufree.codegen import CUDA

MAXB, MAXS = 4096, 64
HEAD = rf"""
__device__ long long cpufree_dg_acc[{MAXB}][{MAXS}];
__device__ unsigned long long cpufree_dg_time[{MAXB}][2];
__device__ int cpufree_dg_put[{MAXB}];
__device__ __forceinline__ unsigned long long cpufree_dg_ns() {{
    unsigned long long t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); return t; }}
#define DG_MARK(i) if (threadIdx.x == 0) {{ const long long __n = clock64(); __dg[i] += __n - __dg_last; __dg_last = __n; }}
"""

REPORT = r"""
    if (threadIdx.x == 0) {
        for (int __i = 0; __i < NSEG; ++__i) cpufree_dg_acc[blockIdx.x][__i] = __dg[__i];
        cpufree_dg_time[blockIdx.x][0] = cpufree_dg_ns() - __dg_t0;
        cpufree_dg_time[blockIdx.x][1] = clock64() - __dg_c0;
    }
    __threadfence();
    __grid.sync();
    if (blockIdx.x == 0 && threadIdx.x == 0 && TSTEPS >= 50) {
        const char *__names[] = {NAMES};
        int __nput = 0;
        for (unsigned __b = 0; __b < gridDim.x; ++__b) __nput += cpufree_dg_put[__b] != 0;
        for (int __i = 0; __i < NSEG; ++__i) {
            double pm = 0, px = 0, om = 1e30, oa = 0, ox = 0; int pb = -1, ob = -1, no = 0;
            for (unsigned __b = 0; __b < gridDim.x; ++__b) {
                const double us = (double)cpufree_dg_acc[__b][__i] * cpufree_dg_time[__b][0] / cpufree_dg_time[__b][1] / 1e3 / (double)TSTEPS;
                if (cpufree_dg_put[__b]) { pm += us; if (us > px) { px = us; pb = __b; } }
                else { oa += us; ++no; if (us < om) om = us; if (us > ox) { ox = us; ob = __b; } }
            }
            printf("DB pe=%lld seg=%02d %-26s put(%d): mean %7.2f max %7.2f (b%3d) | other: min %7.2f mean %7.2f max %7.2f (b%3d)\n",
                   (long long)__cpufree_pe, __i, __names[__i], __nput, __nput ? pm / __nput : 0.0, px, pb,
                   no ? om : 0.0, no ? oa / no : 0.0, ox, ob);
        }
        printf("DB pe=%lld grid=%u total_us_per_step=%.3f\n", (long long)__cpufree_pe, gridDim.x,
               (double)cpufree_dg_time[0][0] / 1e3 / (double)TSTEPS);
    }
"""


def instrument(code: str) -> str:
    lines = code.split("\n")
    start = next(i for i, l in enumerate(lines) if l.startswith("__global__"))
    end = next(i for i in range(start, len(lines)) if lines[i] == "}")
    out, labels = [], []

    def mark(ind, label):
        labels.append(label)
        out.append(f"{ind}DG_MARK({len(labels) - 1})")

    nsync = 0
    for i, line in enumerate(lines):
        ind = line[: len(line) - len(line.lstrip())]
        s = line.strip()
        if start < i < end and len(ind) <= 12:
            if s == "__grid.sync();":
                mark(ind, f"to sync {nsync}")
                out.append(line)
                mark(ind, f"in sync {nsync}")
                nsync += 1
                continue
            if s == "__syncthreads();":
                mark(ind, "to barrier")
                out.append(line)
                mark(ind, "in barrier")
                continue
            m = re.match(r"// (map|tasklet|copy) (.*)", s)
            if m:
                mark(ind, f"{m.group(1)} {m.group(2)}"[:26])
        if i == end:
            names = ", ".join(f'"{label}"' for label in labels)
            out.append(REPORT.replace("NSEG", str(len(labels))).replace("NAMES", names))
        out.append(line)
        if start < i < end and s.startswith("if (__part < __use) {"):
            out.append(f"{ind}    cpufree_dg_put[blockIdx.x] = 1;")
        if start < i < end and s.startswith("const long long __nthreads"):
            out.append("    long long __dg[DG_NSEG] = {0}; long long __dg_last = clock64(), __dg_c0 = __dg_last; "
                       "const unsigned long long __dg_t0 = cpufree_dg_ns();")
    assert len(labels) <= MAXS, len(labels)
    text = "\n".join(out).replace("DG_NSEG", str(len(labels)))
    return text.replace("__global__", HEAD + "\n__global__", 1)


def compile_instrumented(program, backend="cuda", scheduler=True, tile_sizes=None, symbols=None, load=True, **kw):
    sdfg = persistent_sdfg(program, scheduler=scheduler, tile_sizes=tile_sizes, symbols=symbols, backend=backend)
    source = add_shmem_runtime(generate(sdfg, CUDA), sdfg)
    source.code = instrument(source.code)
    lib = build(source.code, sdfg.name + "_db", backend, shmem=uses_shmem(sdfg))
    return PersistentProgram(sdfg, source, lib, backend) if load else lib


if __name__ == "__main__":
    program, form, n, nx, steps = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]) or None, int(sys.argv[5])
    slope = int(sys.argv[6]) if len(sys.argv) > 6 else None
    dace_cpufree.compile = compile_instrumented
    from npbench_runs.multigpu import PROGRAMS
    from npbench_runs.multigpu import run as mr

    if os.environ.get("DG_BUILD_ONLY"):
        npes = int(os.environ["DG_BUILD_ONLY"])
        module = PROGRAMS[program]
        fixed, _ = mr.compile_symbols(program, npes, module.local_shape(n, npes, nx))
        print(compile_instrumented(getattr(module, form), symbols=fixed, load=False), flush=True)
        sys.exit(0)
    from dace_cpufree.runtime.nvshmem import launch_environment

    rank, size, _ = launch_environment()
    rep = mr.run(program, form, n, steps, repeat=2, nx=nx, slope_steps=slope)
    if rank == 0:
        print(f"RESULT {program} {form} n={n} nx={nx} gpus={size} local={rep['local_shape']} "
              f"us_per_step={rep['us_per_step']:.2f} valid={rep.get('valid')} bitwise={rep.get('bitwise')}", flush=True)
