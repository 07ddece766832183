"""Issue 4 diagnosis: where a distributed Jacobi step's time goes, seen from block 0 thread 0 of each PE.

Run as ``mpirun -np P python3 .gpu/diag_phases.py PROGRAM FORM N NX STEPS`` (NX: jacobi_3d's split axis; 0 for 2-D). The generated kernel is
instrumented (clock64 at every grid sync and before every communication tasklet, accumulated per segment);
the run itself is npbench_runs.multigpu.run.run (validated against NumPy). Prints per PE the cycles per step
of each segment, converted to us with the kernel's own globaltimer/clock64 ratio."""
import re
import sys

import dace_cpufree
from dace_cpufree.api import persistent_sdfg, uses_shmem, add_shmem_runtime, generate, build, PersistentProgram
from dace_cpufree.codegen import CUDA

HEAD = r'''
__device__ __forceinline__ unsigned long long cpufree_dg_ns() {
    unsigned long long t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); return t; }
#define DG_MARK(i) if ((blockIdx.x == 0 || blockIdx.x == gridDim.x - 1) && threadIdx.x == 0) { const long long __n = clock64(); __dg[i] += __n - __dg_last; __dg_last = __n; }
'''


def instrument(code: str) -> str:
    lines = code.split("\n")
    start = next(i for i, l in enumerate(lines) if l.startswith("__global__"))
    end = next(i for i in range(start, len(lines)) if lines[i] == "}")
    out, labels = [], []
    for i, line in enumerate(lines):
        if start < i < end:
            ind = line[: len(line) - len(line.lstrip())]
            if line.strip() == "__grid.sync();":
                labels.append(f"before sync {len(labels)}")
                out.append(f"{ind}DG_MARK({len(labels) - 1})")
                out.append(line)
                labels.append(f"sync {len(labels)}")
                out.append(f"{ind}DG_MARK({len(labels) - 1})")
                continue
            m = re.match(r"\s*// tasklet (\w+)", line)
            if m:
                labels.append(f"before {m.group(1)} {len(labels)}")
                out.append(f"{ind}DG_MARK({len(labels) - 1})")
        if i == end:
            out.append("    if ((blockIdx.x == 0 || blockIdx.x == gridDim.x - 1) && threadIdx.x == 0) {")
            out.append("        const unsigned long long __ns = cpufree_dg_ns() - __dg_t0; const long long __cy = clock64() - __dg_c0;")
            names = ", ".join(f'"{l}"' for l in labels)
            out.append(f"        const char *__names[] = {{{names}}};")
            out.append(f"        for (int __i = 0; __i < {len(labels)}; ++__i) printf(\"DG pe=%lld blk=%d seg=%s us_per_step=%.3f\\n\", "
                       "(long long)__cpufree_pe, (int)blockIdx.x, __names[__i], (double)__dg[__i] * __ns / __cy / 1e3 / (double)TSTEPS);")
            out.append("        printf(\"DG pe=%lld total_us_per_step=%.3f\\n\", (long long)__cpufree_pe, __ns / 1e3 / (double)TSTEPS);")
            out.append("    }")
        out.append(line)
        if line.strip().startswith("const long long __nthreads") and start < i < end:
            out.append("    long long __dg[64] = {0}; long long __dg_last = clock64(), __dg_c0 = __dg_last; "
                       "const unsigned long long __dg_t0 = cpufree_dg_ns();")
    text = "\n".join(out)
    return text.replace("__global__", HEAD + "\n__global__", 1)


def compile_instrumented(program, backend="cuda", scheduler=True, tile_sizes=None, symbols=None, load=True, **kw):
    sdfg = persistent_sdfg(program, scheduler=scheduler, tile_sizes=tile_sizes, symbols=symbols, backend=backend)
    source = add_shmem_runtime(generate(sdfg, CUDA), sdfg)
    source.code = instrument(source.code)
    lib = build(source.code, sdfg.name + "_dg", backend, shmem=uses_shmem(sdfg))
    return PersistentProgram(sdfg, source, lib, backend) if load else lib


if __name__ == "__main__":
    program, form, n, nx, steps = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]) or None, int(sys.argv[5])
    dace_cpufree.compile = compile_instrumented
    from npbench_runs.multigpu import run as mr
    import os
    if os.environ.get("DG_BUILD_ONLY"):  # build for this many PEs, no GPU needed (the ranks then find it cached)
        from npbench_runs.multigpu import PROGRAMS
        npes = int(os.environ["DG_BUILD_ONLY"])
        module = PROGRAMS[program]
        A0, _ = module.initialize(n, nx)
        fixed, _ = mr.compile_symbols(program, npes, module.tile(A0, 0, npes).shape)
        print(compile_instrumented(getattr(module, form), symbols=fixed, load=False), flush=True)
        sys.exit(0)
    from dace_cpufree.runtime.nvshmem import launch_environment
    rank, size, _ = launch_environment()
    rep = mr.run(program, form, n, steps, repeat=2, nx=nx)
    if rank == 0:
        print(f"RESULT {program} {form} n={n} nx={nx} gpus={size} local={rep['local_shape']} "
              f"us_per_step={rep['us_per_step']:.2f} valid={rep.get('valid')}", flush=True)
