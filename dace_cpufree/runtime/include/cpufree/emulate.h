// Single-thread host emulation of the CUDA subset that generated persistent kernels use.
// The kernel runs as one block of one thread, so every grid-stride loop visits every
// element in order and grid.sync() is a no-op: the result must equal the sequential
// semantics of the program. This checks the code generator, not races; GPU tests do that.
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
static const dim3 threadIdx(0, 0, 0), blockIdx(0, 0, 0), blockDim(1, 1, 1), gridDim(1, 1, 1);
static const int warpSize = 1;
template <typename T> inline T __ldg(const T *p) { return *p; }  // the read-only load path

inline void __syncthreads() {}
#define __shared__ static  // one block: a block's shared array is one array

// Clocks (step timing, runtime.cuh's StepTimes): the host's steady clock in ns stands for both.
inline long long clock64() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

namespace cooperative_groups {
struct grid_group {
    void sync() const {}
};
inline grid_group this_grid() { return {}; }
struct thread_block {
    void sync() const {}
};
inline thread_block this_thread_block() { return {}; }
// A tile of the one emulated thread: whatever size was asked for, it holds one thread.
template <unsigned int Size> struct thread_block_tile {
    static constexpr unsigned long long num_threads() { return 1; }
    static constexpr unsigned long long thread_rank() { return 0; }
    static constexpr unsigned long long meta_group_size() { return 1; }
    static constexpr unsigned long long meta_group_rank() { return 0; }
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
enum cudaMemcpyKind { cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost, cudaMemcpyDeviceToDevice };
struct cudaDeviceProp {
    char name[256];
};

inline const char *cudaGetErrorString(cudaError_t) { return "emulation error"; }
inline cudaError_t cudaGetLastError() { return cudaSuccess; }
inline cudaError_t cudaGetDevice(int *d) { *d = 0; return cudaSuccess; }
inline cudaError_t cudaGetDeviceCount(int *n) { *n = 1; return cudaSuccess; }
inline cudaError_t cudaGetDeviceProperties(cudaDeviceProp *p, int) {
    std::strcpy(p->name, "host emulation (1 thread)");
    return cudaSuccess;
}
inline cudaError_t cudaDeviceGetAttribute(int *v, cudaDeviceAttr, int) { *v = 1; return cudaSuccess; }
inline cudaError_t cudaDeviceSynchronize() { return cudaSuccess; }
inline cudaError_t cudaMalloc(void **p, size_t n) { *p = std::calloc(n ? n : 1, 1); return *p ? cudaSuccess : 1; }
inline cudaError_t cudaFree(void *p) { std::free(p); return cudaSuccess; }
inline cudaError_t cudaMemcpy(void *d, const void *s, size_t n, cudaMemcpyKind) { std::memcpy(d, s, n); return cudaSuccess; }
inline cudaError_t cudaMemset(void *d, int v, size_t n) { std::memset(d, v, n); return cudaSuccess; }
template <typename T> inline cudaError_t cudaMemcpyFromSymbol(void *d, const T &symbol, size_t n, size_t offset = 0) {
    std::memcpy(d, reinterpret_cast<const char *>(&symbol) + offset, n);
    return cudaSuccess;
}

template <typename K> inline cudaError_t cudaOccupancyMaxPotentialBlockSize(int *g, int *b, K, size_t = 0, int = 0) {
    *g = 1; *b = 1; return cudaSuccess;
}
template <typename K> inline cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int *n, K, int, size_t) {
    *n = 1; return cudaSuccess;
}

// Events measure host wall time in emulation.
inline cudaError_t cudaEventCreate(cudaEvent_t *e) { *e = new std::chrono::steady_clock::time_point(); return cudaSuccess; }
inline cudaError_t cudaEventDestroy(cudaEvent_t e) { delete static_cast<std::chrono::steady_clock::time_point *>(e); return cudaSuccess; }
inline cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t = nullptr) {
    *static_cast<std::chrono::steady_clock::time_point *>(e) = std::chrono::steady_clock::now();
    return cudaSuccess;
}
inline cudaError_t cudaEventSynchronize(cudaEvent_t) { return cudaSuccess; }
inline cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b) {
    auto d = *static_cast<std::chrono::steady_clock::time_point *>(b) - *static_cast<std::chrono::steady_clock::time_point *>(a);
    *ms = std::chrono::duration<float, std::milli>(d).count();
    return cudaSuccess;
}

namespace cpufree::emu {
template <typename... A, size_t... I>
inline void call(void (*k)(A...), void **args, std::index_sequence<I...>) {
    k(*static_cast<A *>(args[I])...);
}
template <typename... A> inline cudaError_t launch(void (*k)(A...), void **args) {
    call(k, args, std::index_sequence_for<A...>{});
    return cudaSuccess;
}
}  // namespace cpufree::emu

#define CPUFREE_LAUNCH_COOPERATIVE(kernel, grid, block, args, smem, stream) cpufree::emu::launch(kernel, args)
