"""The host side of a persistent program: one cooperative launch, sized at run time.

The grid is the largest co-resident one (blocks per multiprocessor from the occupancy API times
the multiprocessor count, both queried on the device in use), capped by the most threads any
step can use when that is known from the arguments. Transients live in one device workspace
that grows when a call needs more.
"""

from __future__ import annotations

from dace_cpufree.cpp import cexpr

HOST_TEMPLATE = """
// ---- host launcher -------------------------------------------------------------------------
#include <cstdarg>
#include <initializer_list>

#include <cpufree/launch.h>

// Launcher hooks; the SHMEM runtime (cpufree/shmem.cuh) redefines them for a symmetric workspace.
#ifndef CPUFREE_WORKSPACE_MALLOC
#define CPUFREE_WORKSPACE_MALLOC(ptr, n) cudaMalloc(ptr, n)
#define CPUFREE_WORKSPACE_FREE(ptr) cudaFree(ptr)
#define CPUFREE_BEFORE_LAUNCH(ws, n) cudaSuccess
#define CPUFREE_AFTER_LAUNCH() cudaSuccess
#endif

namespace {{
struct LauncherState {{
    int block = 0;       // 0: chosen from occupancy
    int max_blocks = 0;  // 0: no cap beyond co-residency
    int grid_used = 0, block_used = 0;
    bool timed = false;  // the events hold the last launch (its time is read off them when asked)
    void *workspace = nullptr;
    size_t workspace_size = 0;
    char error[1024] = {{0}};
    int cached_device = -1, cached_for = 0, sms = 0, warp = 0, block_chosen = 0, per_sm = 0;  // see cpufree_run
    int per_sm_bounded = 0;  // blocks per SM of a kernel's bounded build, 0 where it spills too much (kernel_builds)
    long long bounded_spill_bytes = 0;  // local memory a thread of that build uses (cpufree/launch.h)
    bool events = false;
    cudaEvent_t start, stop;
    // The last kernel may still run (a call that returned once it was queued): the next launch is queued behind it,
    // and the workspace is not freed under it. Written by cpufree_run alone (its caller holds the program's lock).
    bool pending = false;
}} cpufree_state;

int cpufree_fail(const char *fmt, ...) {{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cpufree_state.error, sizeof(cpufree_state.error), fmt, ap);
    va_end(ap);
    return 1;
}}

long long cpufree_max_work(std::initializer_list<long long> works) {{
    long long m = 1;
    for (long long w : works) m = w > m ? w : m;
    return m;
}}

long long cpufree_largest(std::initializer_list<long long> values) {{
    long long m = 0;
    for (long long v : values) m = v > m ? v : m;
    return m;
}}

size_t cpufree_align(size_t n) {{ return (n + 255) / 256 * 256; }}
// A block size in whole warps (at least one): warp reductions shuffle full warps.
int cpufree_whole_warps(int block, int warp) {{ return block < warp ? warp : block - block % warp; }}
}}  // namespace

#define CPUFREE_CHECK(call)                                                                     \\
    do {{                                                                                        \\
        cudaError_t e_ = (call);                                                                 \\
        if (e_ != cudaSuccess) return cpufree_fail("%s failed: %s", #call, cudaGetErrorString(e_)); \\
    }} while (0)

extern "C" const char *cpufree_error() {{ return cpufree_state.error; }}
extern "C" void cpufree_configure(int block, int max_blocks) {{
    cpufree_state.block = block;
    cpufree_state.max_blocks = max_blocks;
}}
// The block size the kernel's library calls are built for (a matrix product's tile), 0 where none, and whether they run
// their fast path in blocks of `block` threads as the launcher rounds them (cpufree_whole_warps): configure() warns
// where a user's block size makes them take their plain loop.
extern "C" int cpufree_products_block() {{ return (int)({need_block}); }}
extern "C" int cpufree_block_fits(int block) {{
    int dev = 0, warp = 1;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&warp, cudaDevAttrWarpSize, dev) != cudaSuccess)
        (void)cudaGetLastError();  // no device: the size unrounded, and no error left for the next launch to report
    block = cpufree_whole_warps(block, warp);
    return ({block_fits}) ? 1 : 0;
}}
// The last launch's grid and block, and (where `ms` is given) its time between the events around it (-1 where there
// is none): read when asked, not by every launch; the time waits for a kernel still running.
extern "C" void cpufree_launch_config(int *grid, int *block, float *ms) {{
    *grid = cpufree_state.grid_used;
    *block = cpufree_state.block_used;
    if (!ms) return;
    *ms = -1.0f;
    if (!cpufree_state.timed) return;
    if ((cpufree_state.pending && cudaEventSynchronize(cpufree_state.stop) != cudaSuccess) ||
        cudaEventElapsedTime(ms, cpufree_state.start, cpufree_state.stop) != cudaSuccess) {{
        *ms = -1.0f;
        (void)cudaGetLastError();  // not left for the next launch to report
    }}
}}
extern "C" int cpufree_device_name(char *out, int n) {{
    int dev = 0;
    cudaDeviceProp prop;
    CPUFREE_CHECK(cudaGetDevice(&dev));
    CPUFREE_CHECK(cudaGetDeviceProperties(&prop, dev));
    snprintf(out, n, "%s", prop.name);
    return 0;
}}
extern "C" void *cpufree_malloc(size_t n) {{
    void *p = nullptr;
    return cudaMalloc(&p, n ? n : 1) == cudaSuccess ? p : nullptr;
}}
extern "C" void cpufree_free(void *p) {{ (void)cudaFree(p); }}
// Copies between a host array and its device copy, in order on the stream the call launches on, and waits for them.
extern "C" int cpufree_memcpy(void *dst, const void *src, size_t n, int to_device, void *stream) {{
    CPUFREE_CHECK(cudaMemcpyAsync(dst, src, n, to_device ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost,
                                  static_cast<cudaStream_t>(stream)));
    CPUFREE_CHECK(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)));
    return 0;
}}
// Waits for the work queued on `stream` (an argument produced on a stream the launch is not ordered after).
extern "C" int cpufree_stream_synchronize(void *stream) {{
    CPUFREE_CHECK(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)));
    return 0;
}}

// `cpufree_stream_arg`: the stream the caller's arrays are ordered on (CuPy's current one), on which the kernel and
// the events around it are queued behind the caller's work. `cpufree_wait`: 1 waits for the kernel; 0 returns once it
// is queued, like a CuPy operation (the caller's later work on that stream is ordered after it).
extern "C" int cpufree_run(void *cpufree_stream_arg, int cpufree_wait{params}) {{
    // Every local of the launcher is cpufree_-prefixed: its scope also holds the program's arguments and workspace
    // arrays under the program's own names.
    cudaStream_t cpufree_stream = static_cast<cudaStream_t>(cpufree_stream_arg);
    // Device facts and the occupancy answer are queried on the first call (and again after
    // cpufree_configure or on another device), not on every call: they cost tens of microseconds.
    int cpufree_dev = 0;
    CPUFREE_CHECK(cudaGetDevice(&cpufree_dev));
    // What the kernel's library calls need of the launch (a matrix product: the block size its tile is built
    // for, the shared memory of its pipeline), 0 where nothing.
    const int cpufree_need_block = (int)({need_block});
    const size_t cpufree_dynamic_shared = (size_t)({dynamic_shared});
    auto *cpufree_kfn = {kernel};
    if (cpufree_state.cached_device != cpufree_dev || cpufree_state.cached_for != cpufree_state.block) {{
        int cpufree_coop = 0, cpufree_sms = 0, cpufree_block = cpufree_state.block, cpufree_per_sm = 0;
        CPUFREE_CHECK(cudaDeviceGetAttribute(&cpufree_coop, cudaDevAttrCooperativeLaunch, cpufree_dev));
        if (!cpufree_coop)
            return cpufree_fail("device %d does not support cooperative launch (persistent kernels need it)",
                                cpufree_dev);
        CPUFREE_CHECK(cudaDeviceGetAttribute(&cpufree_sms, cudaDevAttrMultiProcessorCount, cpufree_dev));
#if defined(__HIPCC__)
        int cpufree_clock_khz = 0;  // the rate of the wall clock that cpufree::clock_ns reads
        CPUFREE_CHECK(cpufree::wall_clock_rate(&cpufree_clock_khz, cpufree_dev));
        CPUFREE_CHECK(cudaMemcpyToSymbol(cpufree_wall_clock_khz, &cpufree_clock_khz, sizeof(cpufree_clock_khz)));
        CPUFREE_CHECK(cudaDeviceSynchronize());  // landed before a kernel on the caller's stream reads it
#endif
        if (cpufree_dynamic_shared > 0)  // above 48 KiB a kernel must opt in; below, the call changes nothing
            CPUFREE_CHECK(cudaFuncSetAttribute((const void *)cpufree_kfn, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                               (int)cpufree_dynamic_shared));
        if (cpufree_block <= 0 && cpufree_need_block > 0) cpufree_block = cpufree_need_block;
        if (cpufree_block <= 0) {{
            int cpufree_min_grid = 0;
            CPUFREE_CHECK(cudaOccupancyMaxPotentialBlockSize(&cpufree_min_grid, &cpufree_block, cpufree_kfn,
                                                             cpufree_dynamic_shared, 0));
        }}
        int cpufree_warp = 1;
        CPUFREE_CHECK(cudaDeviceGetAttribute(&cpufree_warp, cudaDevAttrWarpSize, cpufree_dev));
        cpufree_block = cpufree_whole_warps(cpufree_block, cpufree_warp);
        if (cpufree_state.block <= 0)  // a power of two, so that every power-of-two tile up to it divides it
            while (cpufree_block & (cpufree_block - 1)) cpufree_block &= cpufree_block - 1;
        CPUFREE_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&cpufree_per_sm, cpufree_kfn, cpufree_block,
                                                                    cpufree_dynamic_shared));
        if (cpufree_per_sm < 1)
            return cpufree_fail("kernel {kernel} cannot be co-resident: not one block of %d threads fits on a "
                                "multiprocessor (registers or shared memory). Fix: configure a smaller block size.",
                                cpufree_block);
        // Half the block where the occupancy API's is the device's largest and fills a multiprocessor alone
        // (cpufree::halve_block, cpufree/launch.h); the half's occupancy is queried only where the rule may apply.
        int cpufree_max_block = 0, cpufree_per_sm_half = 0;
        CPUFREE_CHECK(cudaDeviceGetAttribute(&cpufree_max_block, cudaDevAttrMaxThreadsPerBlock, cpufree_dev));
        if (cpufree_state.block <= 0 && cpufree_need_block <= 0 && cpufree_per_sm == 1 &&
            cpufree_block == cpufree_max_block && cpufree_block >= 2 * cpufree_warp)
            CPUFREE_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&cpufree_per_sm_half, cpufree_kfn,
                                                                        cpufree_block / 2, cpufree_dynamic_shared));
        if (cpufree::halve_block(cpufree::BlockFacts{{cpufree_block, cpufree_max_block, cpufree_per_sm,
                                                     cpufree_per_sm_half}})) {{
            cpufree_block /= 2;
            cpufree_per_sm = cpufree_per_sm_half;
        }}
{bounded}        if (!cpufree_state.events) {{
            CPUFREE_CHECK(cudaEventCreate(&cpufree_state.start));
            CPUFREE_CHECK(cudaEventCreate(&cpufree_state.stop));
            cpufree_state.events = true;
        }}
        cpufree_state.sms = cpufree_sms;
        cpufree_state.warp = cpufree_warp;
        cpufree_state.block_chosen = cpufree_block;
        cpufree_state.per_sm = cpufree_per_sm;
        cpufree_state.cached_device = cpufree_dev;
        cpufree_state.cached_for = cpufree_state.block;
    }}
    const int cpufree_sms = cpufree_state.sms, cpufree_block = cpufree_state.block_chosen;
    int cpufree_per_sm = cpufree_state.per_sm;{choose}
    const int cpufree_warp = cpufree_state.warp;  // the grid-size expressions of warp-per-output steps use it
    (void)cpufree_warp;
    long long cpufree_grid = (long long)cpufree_per_sm * cpufree_sms;
    const long long cpufree_work = {work};
    if (cpufree_work > 0 && cpufree_grid > (cpufree_work + cpufree_block - 1) / cpufree_block)
        cpufree_grid = (cpufree_work + cpufree_block - 1) / cpufree_block;
    if (cpufree_state.max_blocks > 0 && cpufree_grid > cpufree_state.max_blocks)
        cpufree_grid = cpufree_state.max_blocks;
    if (cpufree_grid < 1) cpufree_grid = 1;

    size_t cpufree_need = 0;
{workspace_size}
    if (cpufree_need > cpufree_state.workspace_size) {{
        if (cpufree_state.pending) CPUFREE_CHECK(cudaEventSynchronize(cpufree_state.stop));  // the last kernel's
        cpufree_state.pending = false;
        if (cpufree_state.workspace) CPUFREE_CHECK(CPUFREE_WORKSPACE_FREE(cpufree_state.workspace));
        cpufree_state.workspace = nullptr;
        CPUFREE_CHECK(CPUFREE_WORKSPACE_MALLOC(&cpufree_state.workspace, cpufree_need));
        cpufree_state.workspace_size = cpufree_need;
    }}
    char *cpufree_ws = static_cast<char *>(cpufree_state.workspace);
    (void)cpufree_ws;
{workspace_bind}
    void *cpufree_args[] = {{{args}}};
    cudaEvent_t cpufree_start = cpufree_state.start, cpufree_stop = cpufree_state.stop;
    // The last kernel may still run and uses the same workspace: this one is queued behind it, whatever the stream (a
    // handle may name another stream than before once that one was destroyed, and the per-thread default stream's
    // handle names one stream per thread); on its own stream the wait is already met.
    if (cpufree_state.pending) CPUFREE_CHECK(cudaStreamWaitEvent(cpufree_stream, cpufree_stop, 0));
    CPUFREE_CHECK(CPUFREE_BEFORE_LAUNCH(cpufree_state.workspace, cpufree_state.workspace_size));
    cpufree_state.timed = false;
    CPUFREE_CHECK(cudaEventRecord(cpufree_start, cpufree_stream));
    CPUFREE_CHECK(
        CPUFREE_LAUNCH_COOPERATIVE(cpufree_kfn, dim3((unsigned)cpufree_grid), dim3((unsigned)cpufree_block),
                                   cpufree_args, cpufree_dynamic_shared, cpufree_stream));
    CPUFREE_CHECK(cudaEventRecord(cpufree_stop, cpufree_stream));
    cpufree_state.pending = !cpufree_wait;
    if (cpufree_wait) CPUFREE_CHECK(cudaEventSynchronize(cpufree_stop));
    CPUFREE_CHECK(CPUFREE_AFTER_LAUNCH());
    CPUFREE_CHECK(cudaGetLastError());
    cpufree_state.timed = true;
    cpufree_state.grid_used = (int)cpufree_grid;
    cpufree_state.block_used = cpufree_block;
    return 0;
}}
"""


def workspace_code(args) -> tuple[str, str]:
    """C++ that sizes the workspace and binds each transient to its part of it."""
    size, bind = [], []
    for a in args:
        if a.kind != "workspace":
            continue
        nbytes = f"(size_t)({a.size if a.size is not None else cexpr(a.desc.total_size)}) * sizeof({a.ctype})"
        size.append(f"    const size_t cpufree_off_{a.name} = cpufree_need;")
        size.append(f"    cpufree_need += cpufree_align({nbytes});")
        bind.append(f"    {a.ctype} *{a.name} = reinterpret_cast<{a.ctype} *>(cpufree_ws + cpufree_off_{a.name});")
    return "\n".join(size), "\n".join(bind)


# A kernel with matrix products is built twice: its body is a force-inlined device function, and two kernels run it, one
# with the registers ptxas chooses (NPBench's FP64 product kernels get 228-246, two blocks of 128 threads per
# multiprocessor) and one bounded to three such blocks (``{kernel}_bounded``: 168 registers). The body is a template
# over the build (``cpufree_build``: 0 unbounded, 1 bounded), which its product calls name, so that each build compiles
# its own tile (``cpufree::GemmBuildTile``: FP64 products on the DMMA tile unbounded, on CUTLASS's bounded, where the
# DMMA tile would spill 384 bytes and CUTLASS's spills 96-144). The launcher queries the bounded one's local memory and
# occupancy where the block is the products' size, counts the largest product's output tiles, and leaves the choice to
# ``cpufree::take_bounded_build`` (cpufree/launch.h, where the rule and its reasons are;
# tests/codegen/test_launch_rule.py runs it on the host): a third block per multiprocessor where there are more tiles
# than multiprocessors and either the bounded build is spill-free and the tiles outnumber the unbounded grid's blocks,
# or it spills a little and one wave holds them all. One kernel template for both with ``__launch_bounds__(128,
# MinBlocks)`` made the unbounded one 6-7 % slower (k2mm, mlp at S); the bounds stay on the two kernels. Measured on
# H100s with the earlier DMMA tiles (docs/linear-algebra.md): gemm 0.195 -> 0.155 ms at S, 0.725 -> 0.665 ms at paper;
# k3mm at S 0.218-0.240 -> 0.198-0.217 ms, covariance at paper 0.274 -> 0.220 ms.
BODY_HEAD = """\
template <int cpufree_build>
__device__ __forceinline__ void {kernel}_body"""
BUILDS = """
__global__ void {kernel}({params}) {{ {kernel}_body<0>({args}); }}
__global__ void __launch_bounds__(cpufree::bound_threads({need}), 3)
{kernel}_bounded({params}) {{ {kernel}_body<1>({args}); }}
"""
BOUNDED_BUILD = """\
        cpufree_state.per_sm_bounded = 0;
        cpufree_state.bounded_spill_bytes = 0;
        if (cpufree_need_block > 0 && cpufree_block == cpufree_need_block) {{
            cudaFuncAttributes cpufree_bounded;
            auto *cpufree_three = {kernel}_bounded;
            CPUFREE_CHECK(cudaFuncGetAttributes(&cpufree_bounded, (const void *)cpufree_three));
            cpufree_state.bounded_spill_bytes = (long long)cpufree_bounded.localSizeBytes;
            if (cpufree_state.bounded_spill_bytes <= cpufree::kBoundedSpillBytes) {{
                if (cpufree_dynamic_shared > 0)
                    CPUFREE_CHECK(cudaFuncSetAttribute((const void *)cpufree_three,
                                                       cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                       (int)cpufree_dynamic_shared));
                int &cpufree_per_sm3 = cpufree_state.per_sm_bounded;
                CPUFREE_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&cpufree_per_sm3, cpufree_three,
                                                                            cpufree_block, cpufree_dynamic_shared));
            }}
        }}
"""
CHOOSE_BUILD = """
    const cpufree::BuildFacts cpufree_facts{{
        (long long)({tiles}),  // the largest product's output tiles
        (long long)cpufree_sms, (long long)cpufree_per_sm, (long long)cpufree_state.per_sm_bounded,
        cpufree_state.bounded_spill_bytes, (long long)cpufree_state.max_blocks}};
    if (cpufree::take_bounded_build(cpufree_facts)) {{
        cpufree_kfn = {kernel}_bounded;
        cpufree_per_sm = cpufree_state.per_sm_bounded;
    }}"""


def kernel_builds(
    kernel: str, items: list, args: list, race_check: bool, dialect: str, direct_stores: bool, shmem: bool
):
    """The kernel's declaration head (up to its parameters), the kernels after its body, and for ``HOST_TEMPLATE``
    the launcher's occupancy query of the bounded kernel (``bounded``) and its choice (``choose``); the last three
    empty for a kernel built once. ``items``: the kernel IR's items, whose library calls state the block size they
    are built for and their output tiles (``ir.Item.tiles``), which the launcher can count only from its parameters
    (``args``); ``direct_stores``: the kernel is declared ``CPUFREE_FULL_BLOCKS``; ``shmem``: the kernel links the
    SHMEM library (relocatable device code: its out-of-line device functions are compiled once, for the unbounded
    kernel's registers, and ptxas refuses them to a bounded caller), built once."""
    bounds = "CPUFREE_FULL_BLOCKS " if direct_stores else ""
    calls = [i for i in items if i.block_threads]
    threads = {i.block_threads for i in calls}
    tiles = [i.tiles for i in calls if i.tiles and i.tile_symbols <= {a.name for a in args}]
    if len(threads) != 1 or dialect != "cuda" or bounds or shmem or len(tiles) != len(calls):
        return f"__global__ void {bounds}{kernel}", "", dict(bounded="", choose="")
    params = ", ".join(a.kernel_decl(race_check) for a in args)
    names = ", ".join(a.name for a in args)
    wrappers = BUILDS.format(kernel=kernel, params=params, args=names, need=next(iter(threads)))
    return (
        BODY_HEAD.format(kernel=kernel),
        wrappers,
        dict(
            bounded=BOUNDED_BUILD.format(kernel=kernel),
            choose=CHOOSE_BUILD.format(kernel=kernel, tiles=largest(tiles)),
        ),
    )


def largest(expressions: list[str]) -> str:
    """C++ of the largest of some constant expressions (sizes), ``0`` for none."""
    unique = sorted(set(expressions))
    if not unique:
        return "0"
    if len(unique) == 1:
        return unique[0]
    return "cpufree_largest({" + ", ".join(f"(long long)({e})" for e in unique) + "})"


STEP_TIMES_HOST = """
// ---- step timing (DACE_CPUFREE_STEP_TIMES=1) ------------------------------------------------------------
extern "C" int cpufree_step_segments() {{ return {n}; }}
// Copies the rows of the first `blocks` blocks of the last launch (each: {n} segment sums in cycles, then
// the block's elapsed ns and cycles) to `out`; returns how many rows it copied, or -1.
extern "C" int cpufree_step_times_read(unsigned long long *out, int blocks) {{
    if (blocks > CPUFREE_TIMES_BLOCKS) blocks = CPUFREE_TIMES_BLOCKS;
    if (blocks < 1) return 0;
    const size_t bytes = sizeof(unsigned long long) * ({n} + 2) * (size_t)blocks;
    const cudaError_t e = cudaMemcpyFromSymbol(out, cpufree_step_times, bytes);
    if (e == cudaSuccess) return blocks;
    (void)cudaGetLastError();  // not left for the next launch to report
    cpufree_fail("reading the step times: %s", cudaGetErrorString(e));
    return -1;
}}
"""
