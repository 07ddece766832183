// The device <-> host channel of a running persistent kernel: progress, cancel and notifications.
//
// One block of host-mapped pinned memory (plain host memory in the emulation), allocated once by the launcher
// (cpufree_channel_open) and reached by the kernel through the device pointer `cpufree_channel`, set once at
// allocation. Its layout, in 64-bit words (the generator defines the CPUFREE_CHANNEL_* indices before including
// this header; dace_cpufree/codegen/channel.py is the one place they are declared):
//   CANCEL   host -> device: nonzero asks the kernel to stop
//   DONE, TOTAL         the last progress(done, total)
//   STOPPED  site + 1 of the cancel point where the kernel stopped (0: it did not stop early)
//   SYNCS    grid syncs passed when it stopped
//   TAIL     host -> device: notification records the host has consumed (a running count)
//   DROPPED  notifications dropped because the ring was full (a running count)
//   ring     CPUFREE_CHANNEL_RING records of 3 words {seq, tag, value bits}; record k lies in slot k % RING and
//            is complete once its seq word reads k + 1.
// The kernel never waits for the host: progress is two volatile stores, a notification is dropped (and counted)
// when the ring is full, and the cancel word is read by one thread at most every CPUFREE_CHANNEL_POLL_NS.
//
// Cancel without deadlock: every thread must leave at the same point. Before each grid sync the leader (thread
// 0 of block 0) publishes its decision in a device-global slot chosen by the sync's parity; after the sync every
// thread reads that slot, so all threads hold the same decision, and they act on it at the next cancel point (a
// loop head or the next grid sync). The leader cannot overwrite a slot before every thread has read it: it
// writes slot (n & 1) again only before sync n + 2, after all threads passed sync n + 1.
#pragma once

#ifndef CPUFREE_CHANNEL_POLL_NS
#define CPUFREE_CHANNEL_POLL_NS 50000  // the leader reads the host's cancel word at most every 50 us
#endif

#include <cstddef>
#include <cstdlib>
#include <cstring>
#if defined(CPUFREE_EMULATE)
#include <atomic>
#include <chrono>
#endif

namespace cpufree::channel {

struct DeviceState {
    int slot[2];               // the leader's decision published before a grid sync, by the sync's parity
    int seen;                  // leader only: the host asked to stop (sticky within a launch)
    long long polled;          // leader only: time of the last read of the host word (ns)
    long long ticks;           // leader only: iterations of the loop that reports progress
    unsigned long long next;   // notification records reserved (a running count, like TAIL)
    unsigned long long dropped;
};

}  // namespace cpufree::channel

__device__ long long *cpufree_channel = nullptr;
__device__ cpufree::channel::DeviceState cpufree_channel_state;

namespace cpufree::channel {

__device__ inline long long now_ns() {
#if defined(CPUFREE_EMULATE)
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
#elif defined(__HIPCC__)
    return (long long)wall_clock64();
#else
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return (long long)t;
#endif
}

__device__ inline void fence_system() {
#if defined(CPUFREE_EMULATE)
    std::atomic_thread_fence(std::memory_order_seq_cst);
#else
    __threadfence_system();
#endif
}

__device__ inline unsigned long long cas(unsigned long long *p, unsigned long long expected, unsigned long long value) {
#if defined(CPUFREE_EMULATE)
    __atomic_compare_exchange_n(p, &expected, value, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    return expected;
#else
    return atomicCAS(p, expected, value);
#endif
}

__device__ inline unsigned long long add(unsigned long long *p, unsigned long long value) {
#if defined(CPUFREE_EMULATE)
    return __atomic_fetch_add(p, value, __ATOMIC_SEQ_CST);
#else
    return atomicAdd(p, value);
#endif
}

// Kernel start, leader only: a new launch has not seen a cancel yet.
__device__ inline void start() {
    cpufree_channel_state.seen = 0;
    cpufree_channel_state.polled = 0;
    cpufree_channel_state.ticks = 0;
}

// Leader, before grid sync number `n` (counted from 1): read the host word (throttled) and publish the decision.
__device__ inline void publish(unsigned int n) {
    DeviceState &s = cpufree_channel_state;
    if (!s.seen) {
        const long long t = now_ns();
        if (t - s.polled >= CPUFREE_CHANNEL_POLL_NS) {
            s.polled = t;
            s.seen = reinterpret_cast<volatile long long *>(cpufree_channel)[CPUFREE_CHANNEL_CANCEL] != 0;
        }
    }
    reinterpret_cast<volatile int *>(s.slot)[n & 1u] = s.seen;
}

// Every thread, after grid sync number `n`: the decision the leader published for it.
__device__ inline int decision(unsigned int n) {
    return reinterpret_cast<volatile int *>(cpufree_channel_state.slot)[n & 1u];
}

// Every thread at a cancel point that decided to stop: the leader tells the host where.
__device__ inline void stopped(long long tid, int site, unsigned int syncs) {
    if (tid != 0) return;
    volatile long long *w = cpufree_channel;
    w[CPUFREE_CHANNEL_SYNCS] = syncs;
    w[CPUFREE_CHANNEL_STOPPED] = site + 1;
    fence_system();
}

// progress(done, total) from one thread; no fence: the host reads the latest values it sees, in any order.
__device__ inline void progress(long long done, long long total) {
    volatile long long *w = cpufree_channel;
    w[CPUFREE_CHANNEL_TOTAL] = total;
    w[CPUFREE_CHANNEL_DONE] = done;
}

// Iterations of `for (i = start; i <= end; i += stride)` (DaCe's loop analysis gives the inclusive end).
__device__ inline long long trip_count(long long start, long long end, long long stride) {
    if (stride == 0) return 0;
    const long long n = stride > 0 ? (end - start) / stride + 1 : (start - end) / -stride + 1;
    return n > 0 ? n : 0;
}

// A loop that reports progress: before it (`begin`), at the head of each iteration (`tick`) and after it.
__device__ inline void loop_begin(long long total) {
    cpufree_channel_state.ticks = 0;
    progress(0, total);
}
__device__ inline void loop_tick(long long total) { progress(cpufree_channel_state.ticks++, total); }
__device__ inline void loop_end(long long total) { progress(cpufree_channel_state.ticks, total); }

// notify(tag, value) from any thread: a record in the ring, or a count of the dropped ones when it is full.
__device__ inline void notify(long long tag, double value) {
    volatile long long *w = cpufree_channel;
    DeviceState &s = cpufree_channel_state;
    unsigned long long k = *reinterpret_cast<volatile unsigned long long *>(&s.next);
    while (true) {
        if (k - (unsigned long long)w[CPUFREE_CHANNEL_TAIL] >= (unsigned long long)CPUFREE_CHANNEL_RING) {
            w[CPUFREE_CHANNEL_DROPPED] = (long long)(add(&s.dropped, 1ull) + 1ull);
            return;
        }
        const unsigned long long got = cas(&s.next, k, k + 1ull);
        if (got == k) break;
        k = got;
    }
    volatile long long *rec = w + CPUFREE_CHANNEL_HEADER + 3 * (long long)(k % CPUFREE_CHANNEL_RING);
    long long bits;
    memcpy(&bits, &value, sizeof(bits));
    rec[1] = tag;
    rec[2] = bits;
    fence_system();  // the record before its sequence number
    rec[0] = (long long)(k + 1ull);
    fence_system();
}

// ---- host side ----------------------------------------------------------------------------------------------
inline void *host_alloc(size_t bytes, long long **device) {
#if defined(CPUFREE_EMULATE)
    void *p = calloc(1, bytes);
    *device = static_cast<long long *>(p);
    cpufree_channel = *device;
    return p;
#else
    void *p = nullptr;
    if (cudaHostAlloc(&p, bytes, cudaHostAllocMapped) != cudaSuccess) return nullptr;
    memset(p, 0, bytes);
    void *d = nullptr;
    if (cudaHostGetDevicePointer(&d, p, 0) != cudaSuccess) return nullptr;
    *device = static_cast<long long *>(d);
    if (cudaMemcpyToSymbol(cpufree_channel, device, sizeof(*device)) != cudaSuccess) return nullptr;
    return p;
#endif
}

// The exact count of dropped notifications (the host word may lag behind when several threads drop at once).
inline unsigned long long dropped() {
#if defined(CPUFREE_EMULATE)
    return cpufree_channel_state.dropped;
#else
    unsigned long long n = 0;
    cudaMemcpyFromSymbol(&n, cpufree_channel_state, sizeof(n), offsetof(DeviceState, dropped));
    return n;
#endif
}

}  // namespace cpufree::channel

// Cancel points, printed by the generator only when the channel is on. `__cpufree_stop` is the decision every
// thread read after the last grid sync, so all threads leave at the same point.
#define CPUFREE_CHANNEL_BEGIN()                   \
    int __cpufree_stop = 0;                       \
    unsigned int __cpufree_syncs = 0;             \
    if (__tid == 0) cpufree::channel::start();
#define CPUFREE_CHANNEL_POINT(site)                                              \
    if (__cpufree_stop) {                                                       \
        cpufree::channel::stopped(__tid, site, __cpufree_syncs);                \
        return;                                                                 \
    }
#define CPUFREE_CHANNEL_BEFORE_SYNC(site) \
    CPUFREE_CHANNEL_POINT(site)           \
    if (__tid == 0) cpufree::channel::publish(__cpufree_syncs + 1u);
#define CPUFREE_CHANNEL_AFTER_SYNC() __cpufree_stop = cpufree::channel::decision(++__cpufree_syncs);
