// dace-cpufree SHMEM runtime: what a persistent kernel that communicates needs besides runtime.cuh.
// NVSHMEM (nvcc, -rdc=true, device-linked against libnvshmem_device.a) or rocSHMEM (hipcc, -fgpu-rdc).
// Included by generated code right after runtime.cuh; it replaces the launcher's hooks:
//   - the kernel is launched with nvshmemx_collective_launch (a cooperative launch on every PE);
//   - the launcher's workspace (transients, flags) is allocated on the symmetric heap, zeroed and
//     followed by a barrier over all PEs before each launch (no PE may signal a flag before its owner
//     has reset it), and a quiet + barrier after it (every put delivered before results are read).
#pragma once
#include <cstdint>
#include <cstdio>

#if defined(CPUFREE_EMULATE)  // the host emulation of several PEs in one process
#include "shmem_emulate.h"
#else

#if defined(__HIP_PLATFORM_AMD__) || defined(__HIPCC__)
#include <rocshmem/rocshmem.hpp>
using namespace rocshmem;
#define CPUFREE_SHMEM_ROC 1
#else
#include <nvshmem.h>
#include <nvshmemx.h>
#endif

// rocSHMEM's device calls need their work-group's resources: every work-group initialises them before its first call
// and finalises them when it ends (by a return too), through a scope object at the kernel's start.
#if defined(CPUFREE_SHMEM_ROC)
namespace cpufree {
namespace shmem {
struct WorkGroup {
    __device__ WorkGroup() { rocshmem_wg_init(); }
    __device__ ~WorkGroup() { rocshmem_wg_finalize(); }
};
}  // namespace shmem
}  // namespace cpufree
#define CPUFREE_SHMEM_WORK_GROUP() cpufree::shmem::WorkGroup __cpufree_wg
#endif

// Python's modulo and floor division (py_mod, py_floor: PE arithmetic such as (pe - 1) % n_pes, pe // PY) come
// from math.cuh, which runtime.cuh includes before this header.

namespace cpufree {
namespace shmem {

// The debug form of SignalWait: polls the flag and, after `timeout_ns`, reports and traps. Every block waits
// for itself, so the first block to time out reports (once per kernel) and traps; the others go on polling
// until the trap ends the kernel, rather than trapping before the report is printed.
__device__ inline void wait_or_trap(uint64_t *flag, uint64_t expected, const char *name,
                                    unsigned long long timeout_ns) {
    static unsigned int reported = 0;
    const unsigned long long start = clock_ns();
    while (true) {
        const uint64_t value = *(volatile uint64_t *)flag;
        if (value >= expected) break;
        if (clock_ns() - start > timeout_ns && atomicExch(&reported, 1u) == 0u) {
#if defined(CPUFREE_SHMEM_ROC)
            const int pe = rocshmem_my_pe();
#else
            const int pe = nvshmem_my_pe();
#endif
            printf("dace-cpufree: SignalWait timed out after %llu ns on PE %d (block %d): flag %s at %p is %llu, "
                   "waiting for >= %llu. A peer never signalled: check the target PE and signal value of the "
                   "matching Putmem.\n",
                   timeout_ns, pe, (int)blockIdx.x, name, (void *)flag, (unsigned long long)value,
                   (unsigned long long)expected);
#if defined(CPUFREE_SHMEM_ROC)
            abort();
#else
            __trap();
#endif
        }
    }
    __threadfence_system();  // acquire: data that arrived before the flag is visible after the wait
}

#if defined(CPUFREE_CHANNEL_SHMEM)
}  // namespace shmem
namespace channel {
__device__ inline bool leave_wait(uint64_t expected, uint64_t seen, unsigned int wait, unsigned long long since);
}  // namespace channel
namespace shmem {

// Every wait for a peer's signal in a program built with the device <-> host channel (cpufree/channel.cuh): one
// thread polls the local flag until it is at least `value` (acquire: the data put before the signal is visible
// after it), and leaves early when this PE or a peer is stopping (channel::leave_wait), so that no PE waits for a
// peer that has stopped. `wait`: the wait's number in the channel's facts (ChannelFacts.waits; 0: an Allreduce).
__device__ inline void wait_ge(uint64_t *flag, uint64_t value, unsigned int wait) {
    uint64_t seen;
    asm volatile("ld.acquire.sys.u64 %0, [%1];" : "=l"(seen) : "l"(flag) : "memory");
    if (seen >= value) return;
    const unsigned long long since = clock_ns();
    do {
        if (cpufree::channel::leave_wait(value, seen, wait, since)) return;
        asm volatile("ld.acquire.sys.u64 %0, [%1];" : "=l"(seen) : "l"(flag) : "memory");
    } while (seen < value);
}
#endif

// A put shared by `n` blocks signals once, after every block's part has arrived: each block's thread 0
// calls this after its own quiet; the last of the `n` gets true (and the counter wraps back to 0, ready
// for the next round). The caller's quiet before the count is the release (its puts are complete), the
// fence after it the acquire: every block's completed puts happen before the last one's signal.
__device__ inline bool last_of(unsigned int *counter, unsigned int n) {
    if (n == 1) return true;  // one block did it all: its own quiet is the whole completion
    const bool last = atomicInc(counter, n - 1) == n - 1;
    if (last) __threadfence_system();
    return last;
}

// ---- Allreduce (frontend/allreduce.py) ------------------------------------------------------------------
// The gather form: one thread per PE copies its values into its slot of a symmetric [2, npes, n] array, puts
// them into the same slot on every other PE and signals flags[parity][me] there with the round number; the
// receiver waits for the npes - 1 flags and combines the slots in PE order. Rounds alternate between the two
// parities: a PE can be one round ahead of another (its next start follows its wait, which needed the other's
// values of this round), never two, so a slot is not overwritten while it is read.

// The slot of PE `pe` in round `round`.
template <typename T> __device__ inline T *gather_slot(T *slots, uint64_t round, int pe, int npes, long long n) {
    return slots + ((long long)(round & 1) * npes + pe) * n;
}

// Starts a round: counts it (`round` is the buffer's counter, zeroed before each launch) and copies this PE's
// values into its own slot. Returns the round number (the signal value).
template <typename T>
__device__ inline uint64_t gather_begin(T *slots, uint64_t *round, const T *in, int me, int npes, long long n) {
    const uint64_t r = ++*round;
    T *mine = gather_slot(slots, r, me, npes, n);
    for (long long i = 0; i < n; ++i) mine[i] = in[i];
    return r;
}

// Combines the slots of a round in PE order into `out`: every PE combines in the same order, so all get the
// same bits.
template <Op op, typename T>
__device__ inline void gather_combine(T *out, T *slots, uint64_t round, int npes, long long n) {
    for (long long i = 0; i < n; ++i) {
        T acc = gather_slot(slots, round, 0, npes, n)[i];
        for (int p = 1; p < npes; ++p) acc = combine<op>(acc, gather_slot(slots, round, p, npes, n)[i]);
        out[i] = acc;
    }
}

#if defined(CPUFREE_SHMEM_ROC)
// rocSHMEM's ROCSHMEM_TEAM_WORLD is a host variable: the launcher copies its value here before each launch.
static __device__ rocshmem_team_t team_world_handle;
__device__ inline rocshmem_team_t team_world() { return team_world_handle; }

// The library's form of the gather: a put with signal to every other PE (non-blocking, from this PE's slot).
template <typename T>
__device__ inline void gather_send(T *slots, uint64_t *flags, uint64_t round, int me, int npes, long long n) {
    T *mine = gather_slot(slots, round, me, npes, n);
    uint64_t *flag = flags + (round & 1) * npes + me;
    for (int p = 0; p < npes; ++p)
        if (p != me) rocshmem_putmem_signal_nbi(mine, mine, n * sizeof(T), flag, round, ROCSHMEM_SIGNAL_SET, p);
}
__device__ inline void gather_receive(uint64_t *flags, uint64_t round, int me, int npes) {
    for (int p = 0; p < npes; ++p)
        if (p != me)
            rocshmem_ulonglong_wait_until((unsigned long long *)(flags + (round & 1) * npes + p), ROCSHMEM_CMP_GE,
                                          (unsigned long long)round);
    rocshmem_quiet();  // this PE's puts of the round are complete: its slot may be rewritten two rounds on
}
#else
template <typename T>
__device__ inline void gather_send(T *slots, uint64_t *flags, uint64_t round, int me, int npes, long long n) {
    T *mine = gather_slot(slots, round, me, npes, n);
    uint64_t *flag = flags + (round & 1) * npes + me;
    for (int p = 0; p < npes; ++p)
        if (p != me) nvshmem_putmem_signal_nbi(mine, mine, n * sizeof(T), flag, round, NVSHMEM_SIGNAL_SET, p);
}
__device__ inline void gather_receive(uint64_t *flags, uint64_t round, int me, int npes) {
    for (int p = 0; p < npes; ++p)
        if (p != me) {
#if defined(CPUFREE_CHANNEL_SHMEM)
            wait_ge(flags + (round & 1) * npes + p, round, 0u);
#else
            nvshmem_signal_wait_until(flags + (round & 1) * npes + p, NVSHMEM_CMP_GE, round);
#endif
        }
    nvshmem_quiet();  // this PE's puts of the round are complete: its slot may be rewritten two rounds on
}
#endif

#if !defined(CPUFREE_SHMEM_ROC)
// Direct stores to the peers (shmem_transport="p2p"): every PE is reachable by load/store (one node,
// NVLink or PCIe peer access), so a put is the block's stores through nvshmem_ptr's address of the
// target's copy, a quiet a system-scope fence, a signal a release store. NVSHMEM's own calls also carry
// the proxy transport for remote nodes, which the device link adds to the kernel's call graph: Jacobi 2-D
// on 2 PEs went from 42 to 76 registers per thread after the link, halving the blocks per SM.
namespace p2p {

// Reports a peer without load/store access and stops the kernel (the launcher checks every peer before
// the first launch: reaching this means a target PE out of range).
__device__ __noinline__ void unreachable(int pe) {
    printf("dace-cpufree: PE %d cannot store to PE %d directly (no such PE, another node, or no peer access), "
           "and this kernel was built for direct stores. Fix: check the target PE; across nodes build with "
           "shmem_transport=\"proxy\" (or DACE_CPUFREE_SHMEM_TRANSPORT=proxy).\n",
           nvshmem_my_pe(), pe);
    __trap();
}

// The address of `symmetric` on PE `pe`.
template <typename T> __device__ inline T *peer(T *symmetric, int pe) {
    T *p = (T *)nvshmem_ptr((const void *)symmetric, pe);
    if (p == nullptr) unreachable(pe);
    return p;
}

// How many of the `parts` blocks of a lane share a put of `n` elements: at least `per_thread` elements per
// thread. A put on the critical path (a wait follows it) is spread wide; one that later work hides is done by
// fewer blocks (fewer fences and arrivals to count, none for one block): their delay holds up the grid.
#ifndef CPUFREE_P2P_PER_THREAD
#define CPUFREE_P2P_PER_THREAD 1
#endif
#ifndef CPUFREE_P2P_PER_THREAD_HIDDEN
#define CPUFREE_P2P_PER_THREAD_HIDDEN 4
#endif
__device__ inline unsigned int blocks_for(long long n, unsigned int parts, int per_thread) {
    const long long per_block = (long long)per_thread * blockDim.x;
    return (unsigned int)min_<long long>(parts, max_<long long>(1, (n + per_block - 1) / per_block));
}

// One thread waits until the local flag is at least `value` (acquire: the data put before the flag's
// signal is visible after the wait). Measured against relaxed polls and one fence.acq_rel after them: no
// faster (4 H200s).
__device__ inline void wait_until_ge(uint64_t *flag, uint64_t value) {
#if defined(CPUFREE_CHANNEL_SHMEM)
    cpufree::shmem::wait_ge(flag, value, 0u);
#else
    uint64_t seen;
    do {
        asm volatile("ld.acquire.sys.u64 %0, [%1];" : "=l"(seen) : "l"(flag) : "memory");
    } while (seen < value);
#endif
}

// A completion point: this thread's stores to peers, and those of its block before a __syncthreads(), are
// visible there before its later stores. fence.acq_rel is enough for that (release cumulativity). Measured
// with last_of's leading fence dropped too, against fence.sc (__threadfence_system) and both fences: Jacobi
// 3-D 128^3 per GPU 1.5 us per step faster on 2 H200s, 2-D the same.
__device__ inline void quiet() { asm volatile("fence.acq_rel.sys;" ::: "memory"); }

// One thread sets the flag on PE `pe` (after a quiet: the data before it is visible first).
__device__ inline void signal_set(uint64_t *flag, uint64_t value, int pe) {
    uint64_t *f = peer(flag, pe);
    asm volatile("st.release.sys.u64 [%0], %1;" ::"l"(f), "l"(value) : "memory");
}

// The elements k = first, first + step, ... below end of a put: `at(k, so, dst)` sets element k's offsets in
// the source and in the destination. The calling thread loads up to CPUFREE_P2P_BATCH elements before it
// stores them, so that their load latencies overlap (the compiler cannot move a load above a store to memory
// it cannot prove apart, and a put's rows were a chain of load-store pairs: 8 per thread for a 3-D plane).
#ifndef CPUFREE_P2P_BATCH
#define CPUFREE_P2P_BATCH 4
#endif
template <typename T, typename At>
__device__ inline void copy(T *dest, const T *src, long long first, long long end, long long step, At at) {
    for (long long k = first; k < end; k += CPUFREE_P2P_BATCH * step) {
        T value[CPUFREE_P2P_BATCH];
        long long to[CPUFREE_P2P_BATCH];
#pragma unroll
        for (int u = 0; u < CPUFREE_P2P_BATCH; ++u) {
            const long long i = k + u * step;
            if (i < end) {
                long long from;
                at(i, from, to[u]);
                value[u] = src[from];
            }
        }
#pragma unroll
        for (int u = 0; u < CPUFREE_P2P_BATCH; ++u)
            if (k + u * step < end) dest[to[u]] = value[u];
    }
}

// The gather form of Allreduce by direct stores: this PE's slot into the same slot on every other PE, one
// fence for all of them, then each peer's flag (a release store). No quiet is needed later: a store that has
// been issued has read its source.
template <typename T>
__device__ inline void gather_send(T *slots, uint64_t *flags, uint64_t round, int me, int npes, long long n) {
    T *mine = gather_slot(slots, round, me, npes, n);
    for (int p = 0; p < npes; ++p) {
        if (p == me) continue;
        T *there = peer(mine, p);
        for (long long i = 0; i < n; ++i) there[i] = mine[i];
    }
    quiet();
    uint64_t *flag = flags + (round & 1) * npes + me;
    for (int p = 0; p < npes; ++p)
        if (p != me) signal_set(flag, round, p);
}
__device__ inline void gather_receive(uint64_t *flags, uint64_t round, int me, int npes) {
    for (int p = 0; p < npes; ++p)
        if (p != me) wait_until_ge(flags + (round & 1) * npes + p, round);
}

}  // namespace p2p
#endif

}  // namespace shmem
}  // namespace cpufree

// ---- launcher hooks (host) -------------------------------------------------------------------
#if defined(CPUFREE_SHMEM_ROC)
static inline hipError_t cpufree_shmem_workspace_malloc(void **ptr, size_t n) {
    *ptr = rocshmem_malloc(n ? n : 1);  // collective: every PE allocates the same size, in the same order
    return *ptr ? hipSuccess : hipErrorOutOfMemory;
}
static inline hipError_t cpufree_shmem_workspace_free(void *ptr) {
    rocshmem_free(ptr);
    return hipSuccess;
}
static inline hipError_t cpufree_shmem_before_launch(void *ws, size_t n) {
    if (ws && n) {
        hipError_t e = hipMemset(ws, 0, n);
        if (e != hipSuccess) return e;
    }
    {
        hipError_t e = hipMemcpyToSymbol(HIP_SYMBOL(cpufree::shmem::team_world_handle), &ROCSHMEM_TEAM_WORLD,
                                         sizeof(rocshmem_team_t));  // for Allreduce's team reductions
        if (e != hipSuccess) return e;
    }
    hipError_t e = hipDeviceSynchronize();
    rocshmem_barrier_all();
    return e;
}
static inline hipError_t cpufree_shmem_after_launch() {
    rocshmem_quiet();
    rocshmem_barrier_all();
    return hipDeviceSynchronize();
}
static inline hipError_t cpufree_shmem_launch(const void *kernel, dim3 grid, dim3 block, void **args, size_t smem,
                                              hipStream_t stream) {
    // rocSHMEM has no collective launch: a cooperative launch on each PE.
    return hipLaunchCooperativeKernel(kernel, grid, block, args, smem, stream);
}
#else
static inline cudaError_t cpufree_shmem_workspace_malloc(void **ptr, size_t n) {
    *ptr = nvshmem_malloc(n ? n : 1);  // collective: every PE allocates the same size, in the same order
    return *ptr ? cudaSuccess : cudaErrorMemoryAllocation;
}
static inline cudaError_t cpufree_shmem_workspace_free(void *ptr) {
    nvshmem_free(ptr);
    return cudaSuccess;
}
static inline cudaError_t cpufree_shmem_before_launch(void *ws, size_t n) {
    if (ws && n) {
        cudaError_t e = cudaMemset(ws, 0, n);
        if (e != cudaSuccess) return e;
    }
    cudaError_t e = cudaDeviceSynchronize();  // uploads and the reset done here before any PE may signal
    // The barrier runs on the launch stream, and the kernel is queued right behind it: every PE's kernel starts
    // within the barrier's release time of the others'. (A host barrier left them as far apart as the processes'
    // launch calls, and the first PE to start spent that time in its first wait, counted in its kernel time.)
    nvshmemx_barrier_all_on_stream(0);
    return e != cudaSuccess ? e : cudaGetLastError();
}
static inline cudaError_t cpufree_shmem_after_launch() {
    nvshmemx_quiet_on_stream(0);
    nvshmemx_barrier_all_on_stream(0);
    return cudaDeviceSynchronize();
}
static inline cudaError_t cpufree_shmem_launch(const void *kernel, dim3 grid, dim3 block, void **args, size_t smem,
                                               cudaStream_t stream) {
    const int rc = nvshmemx_collective_launch(kernel, grid, block, args, smem, stream);
    return rc == 0 ? cudaSuccess : cudaErrorLaunchFailure;
}
#endif

#undef CPUFREE_LAUNCH_COOPERATIVE
#define CPUFREE_LAUNCH_COOPERATIVE(kernel, grid, block, args, smem, stream) \
    cpufree_shmem_launch((const void *)(kernel), grid, block, args, smem, stream)
#define CPUFREE_WORKSPACE_MALLOC(ptr, n) cpufree_shmem_workspace_malloc((void **)(ptr), n)
#define CPUFREE_WORKSPACE_FREE(ptr) cpufree_shmem_workspace_free(ptr)
#define CPUFREE_BEFORE_LAUNCH(ws, n) cpufree_shmem_before_launch(ws, n)
#define CPUFREE_AFTER_LAUNCH() cpufree_shmem_after_launch()
#endif  // CPUFREE_EMULATE

#ifndef CPUFREE_SHMEM_WORK_GROUP  // NVSHMEM and the emulation: nothing to set up per block
#define CPUFREE_SHMEM_WORK_GROUP()
#endif
