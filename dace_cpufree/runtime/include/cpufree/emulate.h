// Host emulation of the CUDA subset that generated persistent kernels use.
// The kernel runs as one block of one thread, so every grid-stride loop visits every
// element in order and grid.sync() is a no-op: the result must equal the sequential
// semantics of the program. With -DCPUFREE_RACE_CHECK it runs as several blocks of several
// threads instead, one at a time between barriers, and checks the synchronisation (racecheck.h).
// A program that communicates runs on several emulated PEs, one copy of its library each (shmem_emulate.h).
#pragma once
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <tuple>
#include <utility>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __restrict__ __restrict
#define __launch_bounds__(...)

struct dim3 {
    unsigned int x = 1, y = 1, z = 1;
    dim3(unsigned int x_ = 1, unsigned int y_ = 1, unsigned int z_ = 1) : x(x_), y(y_), z(z_) {}
};
#if defined(CPUFREE_RACE_CHECK)
#include "racecheck.h"
inline thread_local dim3 threadIdx(0, 0, 0), blockIdx(0, 0, 0);
inline dim3 blockDim(1, 1, 1), gridDim(1, 1, 1);
inline void __syncthreads() { cpufree::race::checker().block_barrier(cpufree::race::self); }
#else
static const dim3 threadIdx(0, 0, 0), blockIdx(0, 0, 0), blockDim(1, 1, 1), gridDim(1, 1, 1);
inline void __syncthreads() {}
#define __shared__ static  // one block: a block's shared array is one array
#endif
static const int warpSize = 1;
template <typename T> inline T __ldg(const T *p) { return *p; }  // the read-only load path

// Clocks (step timing, runtime.cuh's StepTimes): the host's steady clock in ns stands for both.
inline long long clock64() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

namespace cooperative_groups {
#if defined(CPUFREE_RACE_CHECK)
struct grid_group {
    void sync() const { cpufree::race::checker().grid_barrier(cpufree::race::self); }
};
struct thread_block {
    void sync() const { __syncthreads(); }
};
#else
struct grid_group {
    void sync() const {}
};
struct thread_block {
    void sync() const {}
};
#endif
inline grid_group this_grid() { return {}; }
inline thread_block this_thread_block() { return {}; }
// A tile of one emulated thread: whatever size was asked for, it holds one thread (warpSize is 1).
template <unsigned int Size> struct thread_block_tile {
    static constexpr unsigned long long num_threads() { return 1; }
    static constexpr unsigned long long thread_rank() { return 0; }
    static unsigned long long meta_group_size() { return blockDim.x; }
    static unsigned long long meta_group_rank() { return threadIdx.x; }
    void sync() const {}
};
template <unsigned int Size> inline thread_block_tile<Size> tiled_partition(const thread_block &) { return {}; }
}  // namespace cooperative_groups

typedef int cudaError_t;
typedef void *cudaStream_t;
typedef void *cudaEvent_t;
enum { cudaSuccess = 0, cudaErrorInvalidValue = 1 };
enum cudaDeviceAttr {
    cudaDevAttrMultiProcessorCount,
    cudaDevAttrCooperativeLaunch,
    cudaDevAttrMaxThreadsPerBlock,
    cudaDevAttrWarpSize
};
enum cudaMemcpyKind { cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost, cudaMemcpyDeviceToDevice, cudaMemcpyDefault };
struct cudaDeviceProp {
    char name[256];
};

enum { cudaErrorRaceCheck = 2 };  // the race checker found conflicting accesses or a hang (its report)
enum { cudaErrorPeStopped = 3 };  // an emulated PE waited for what could never come, or its peers stopped
#if defined(CPUFREE_RACE_CHECK)
inline const char *cudaGetErrorString(cudaError_t e) {
    static std::string text;
    text = e == cudaErrorRaceCheck ? "race check: " + cpufree::race::checker().report() : "emulation error";
    return text.c_str();
}
// The whole report (the launcher's error text holds its start), and the order of the next launch.
extern "C" const char *cpufree_race_report() {
    static std::string text;
    text = cpufree::race::checker().report();
    return text.c_str();
}
extern "C" void cpufree_race_order(int order, unsigned seed) { cpufree::race::checker().set_order(order, seed); }
#else
inline const char *cudaGetErrorString(cudaError_t e) {
    return e == cudaErrorPeStopped ? "the emulated PEs stopped (a wait that could never end)" : "emulation error";
}
#endif
inline cudaError_t cudaGetLastError() { return cudaSuccess; }
inline cudaError_t cudaGetDevice(int *d) { *d = 0; return cudaSuccess; }
inline cudaError_t cudaSetDevice(int) { return cudaSuccess; }
inline cudaError_t cudaGetDeviceCount(int *n) { *n = 1; return cudaSuccess; }
inline cudaError_t cudaGetDeviceProperties(cudaDeviceProp *p, int) {
#if defined(CPUFREE_RACE_CHECK)
    std::strcpy(p->name, "host emulation (race checking)");
#else
    std::strcpy(p->name, "host emulation (1 thread)");
#endif
    return cudaSuccess;
}
#if defined(CPUFREE_RACE_CHECK)
// CPUFREE_RACE_BLOCKS "multiprocessors" of one block of CPUFREE_RACE_THREADS threads each.
inline cudaError_t cudaDeviceGetAttribute(int *v, cudaDeviceAttr a, int) {
    *v = a == cudaDevAttrMultiProcessorCount ? CPUFREE_RACE_BLOCKS : a == cudaDevAttrMaxThreadsPerBlock ? 1024 : 1;
    return cudaSuccess;
}
#else
inline cudaError_t cudaDeviceGetAttribute(int *v, cudaDeviceAttr, int) { *v = 1; return cudaSuccess; }
#endif
inline cudaError_t cudaDeviceSynchronize() { return cudaSuccess; }
inline cudaError_t cudaMalloc(void **p, size_t n) { *p = std::calloc(n ? n : 1, 1); return *p ? cudaSuccess : 1; }
inline cudaError_t cudaFree(void *p) { std::free(p); return cudaSuccess; }
inline cudaError_t cudaMemcpy(void *d, const void *s, size_t n, cudaMemcpyKind) { std::memcpy(d, s, n); return cudaSuccess; }
inline cudaError_t cudaMemcpyAsync(void *d, const void *s, size_t n, cudaMemcpyKind, cudaStream_t) {
    std::memcpy(d, s, n);
    return cudaSuccess;
}
inline cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }
inline cudaError_t cudaMemset(void *d, int v, size_t n) { std::memset(d, v, n); return cudaSuccess; }
template <typename T> inline cudaError_t cudaMemcpyFromSymbol(void *d, const T &symbol, size_t n, size_t offset = 0) {
    std::memcpy(d, reinterpret_cast<const char *>(&symbol) + offset, n);
    return cudaSuccess;
}

#if defined(CPUFREE_RACE_CHECK)
template <typename K> inline cudaError_t cudaOccupancyMaxPotentialBlockSize(int *g, int *b, K, size_t = 0, int = 0) {
    *g = CPUFREE_RACE_BLOCKS; *b = CPUFREE_RACE_THREADS; return cudaSuccess;
}
#else
template <typename K> inline cudaError_t cudaOccupancyMaxPotentialBlockSize(int *g, int *b, K, size_t = 0, int = 0) {
    *g = 1; *b = 1; return cudaSuccess;
}
#endif
template <typename K> inline cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int *n, K, int, size_t) {
    *n = 1; return cudaSuccess;
}
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize };
inline cudaError_t cudaFuncSetAttribute(const void *, cudaFuncAttribute, int) { return cudaSuccess; }
struct cudaFuncAttributes { size_t localSizeBytes; };
inline cudaError_t cudaFuncGetAttributes(cudaFuncAttributes *a, const void *) { a->localSizeBytes = 0; return cudaSuccess; }

// Events measure host wall time in emulation.
inline cudaError_t cudaEventCreate(cudaEvent_t *e) { *e = new std::chrono::steady_clock::time_point(); return cudaSuccess; }
inline cudaError_t cudaEventDestroy(cudaEvent_t e) { delete static_cast<std::chrono::steady_clock::time_point *>(e); return cudaSuccess; }
inline cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t = nullptr) {
    *static_cast<std::chrono::steady_clock::time_point *>(e) = std::chrono::steady_clock::now();
    return cudaSuccess;
}
inline cudaError_t cudaEventSynchronize(cudaEvent_t) { return cudaSuccess; }
inline cudaError_t cudaStreamWaitEvent(cudaStream_t, cudaEvent_t, unsigned int) { return cudaSuccess; }
inline cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b) {
    auto d = *static_cast<std::chrono::steady_clock::time_point *>(b) - *static_cast<std::chrono::steady_clock::time_point *>(a);
    *ms = std::chrono::duration<float, std::milli>(d).count();
    return cudaSuccess;
}

namespace cpufree::emu {
// Thrown in an emulated PE whose wait can never end, or whose peers stopped: unwinds its kernel.
struct Stopped {};

// The PEs of a multi-PE emulation that this library's launches belong to (shmem_emulate.h fills it in when the
// library joins them): this library's PE, their number, and the host barrier of all PEs (false: the run stopped).
// Internal linkage: every PE's copy of the library has its own.
struct Pes {
    int pe = 0, count = 1;
    bool (*meet)() = nullptr;
};
static Pes pes;

template <typename... A, size_t... I>
inline void call(void (*k)(A...), void **args, std::index_sequence<I...>) {
    k(*static_cast<A *>(args[I])...);
}
#if defined(CPUFREE_RACE_CHECK)
template <typename... A, size_t... I>
inline void call_checked(void (*k)(A...), void **args, std::index_sequence<I...>) {
    k(race::argument<A>::get(args[I])...);
}
// Every virtual thread is an OS thread; the checker lets one run at a time (racecheck.h). With several PEs, PE 0
// starts the checker for the threads of all of them (numbered PE by PE), and every PE's launch waits for the others
// before its threads start and after they end (so that the result read is the whole run's). The PEs' launchers may
// size their grids differently (each to its own work); the checker numbers every PE's threads alike, so all PEs run
// the largest of them (a kernel is correct on any grid).
template <typename... A> inline cudaError_t launch(void (*k)(A...), void **args, dim3 grid, dim3 block) {
    race::Checker &c = race::checker();
    blockDim = block;
    c.offer_blocks((int)grid.x);
    if (pes.meet && !pes.meet()) return cudaErrorPeStopped;
    if (pes.pe == 0) c.start((int)grid.x, (int)block.x, c.order(), c.seed(), pes.count);
    if (pes.meet && !pes.meet()) return cudaErrorPeStopped;
    gridDim = dim3((unsigned)c.blocks());
    const int n = (int)(gridDim.x * block.x), first = pes.pe * n;
    std::vector<std::thread> pool;
    for (int id = first; id < first + n; ++id)
        pool.emplace_back([&, id] {
            race::self = id;
            race::step = "kernel start";
            race::inside = true;
            threadIdx = dim3((id - first) % block.x);
            blockIdx = dim3((id - first) / block.x);
            try {
                c.enter(id);
                call_checked(k, args, std::index_sequence_for<A...>{});
            } catch (const race::Abandoned &) {
            } catch (const Stopped &) {
            }
            c.leave(id);
        });
    for (std::thread &t : pool) t.join();
    if (pes.meet && !pes.meet()) return cudaErrorPeStopped;
    return c.clean() ? cudaSuccess : cudaErrorRaceCheck;
}
#else
template <typename... A> inline cudaError_t launch(void (*k)(A...), void **args, dim3, dim3) {
    try {
        call(k, args, std::index_sequence_for<A...>{});
    } catch (const Stopped &) {
        return cudaErrorPeStopped;
    }
    return cudaSuccess;
}
#endif
}  // namespace cpufree::emu

#define CPUFREE_LAUNCH_COOPERATIVE(kernel, grid, block, args, smem, stream) cpufree::emu::launch(kernel, args, grid, block)
