// The device <-> host channel of a running persistent kernel: progress, cancel and notifications.
//
// One block of host-mapped pinned memory (plain host memory in the emulation), allocated once by the launcher
// (cpufree_channel_open) and reached by the kernel through the device pointer `cpufree_channel`, set once at
// allocation. Its layout, in 64-bit words (the generator defines the CPUFREE_CHANNEL_* indices before including
// this header; dace_cpufree/codegen/channel.py is the one place they are declared):
//   DONE, TOTAL         the last progress(done, total)
//   STOPPED  site + 1 of the cancel point where the kernel stopped (0: it did not stop early)
//   SYNCS    grid syncs passed when it stopped
//   TAIL     host -> device: notification records the host has consumed (a running count)
//   DROPPED  notifications dropped because the ring was full (a running count)
//   PEER     (programs that communicate) number + 1 of the peer whose stop made this PE stop
//   LEFT     (programs that communicate) 1: a wait for a peer's signal was left because a PE stops
//   ring     CPUFREE_CHANNEL_RING records of 3 words {seq, tag, value bits}; record k lies in slot k % RING and
//            is complete once its seq word reads k + 1.
// The kernel never waits for the host: progress is two volatile stores (a loop's automatic progress: at the looks
// and every CPUFREE_CHANNEL_PROGRESS_EVERY iterations), a notification is dropped (and counted) when the ring is
// full. The host's stop request is not in this memory: the host copies it into device memory (DeviceState::cancel,
// set_cancel) on a stream of its own, so the kernel never reads host memory to see it.
//
// Host callbacks (only where the program has them: CPUFREE_CHANNEL_CALL_* defined, their words after the ring):
//   REQ      device -> host: the number of the last request (a running count; read by the host between launches)
//   LATE     device -> host: the number of a request the leader stopped waiting for (the timeout passed)
//   HEAD     device -> host: the request, a flagged word (below): the callback's number (ChannelFacts.calls) and
//            how many arguments follow
//   ARG_WORDS..     device -> host: each argument as two flagged words (its low and high 32 bits)
//   ANSWER   host -> device: a flagged word: 0 answered, 1 the callback raised, 2 a stop was asked (not called); on
//            1 and 2 the kernel makes no more calls and stops at its next cancel point
//   RESULT_WORDS..  host -> device: each result as two flagged words
//   ID, ARGS.., RESULTS..   host only: the request unpacked for Python, and the results Python writes
// A flagged word carries 32 bits of data in its low half and the low 32 bits of the request's number in its high
// half (NCCL's low-latency protocol does the same): a reader knows each word is of this request without a fence
// or an ordering between words, because an aligned 64-bit store and load are single-copy atomic on both sides of
// PCIe. So the leader writes the request's words and spins on the answer's words with no fence (one PCIe read of
// all of them per turn, at most CPUFREE_CHANNEL_CALL_TIMEOUT_NS, then it gives up and stops the kernel), and the
// host's poller thread waits for HEAD (cpufree_channel_wait_call: spinning, then sleeping), unpacks the arguments,
// calls the Python callable and writes the answer (cpufree_channel_answer). The other threads see the results
// after the grid sync that the generator places before their next use.
//
// Debug waits (CPUFREE_CHANNEL_HANG_* defined): grid syncs are a hand-written barrier (DebugGrid: an arrival
// counter and a generation in global memory). A block that waits longer than CPUFREE_CHANNEL_HANG_TIMEOUT_NS
// writes the hang report (where it waited, which block had not arrived and where that one was last), and every
// waiter leaves the barrier and the kernel through the cancel path instead of hanging.
//
// Cancel without deadlock: every thread must leave at the same point. At some grid syncs, about
// CPUFREE_CHANNEL_POLL_NS apart ("looks", see publish), the leader (thread 0 of block 0) publishes its decision
// in a device-global slot chosen by the look's parity; after the sync every thread reads that slot at its next cancel
// point (a loop head or the next grid sync), so all threads hold the same decision, and they act on it there. The
// leader cannot overwrite a slot before every thread has read it: it writes slot (k & 1) again only at look k + 2,
// after all threads passed the sync of look k + 1 (and with it the cancel point before it).
//
// Programs that communicate (CPUFREE_CHANNEL_SHMEM defined: 1 NVSHMEM's calls, 2 direct stores to the peers), one
// channel per PE: every PE's host polls its own. A PE must not stop alone (its peers would wait for it forever), so
// a PE whose leader decides at a look to stop for a reason of its own (its host's request, a failed callback) first
// writes its number + 1 into every peer's symmetric word `cpufree_channel_peers` (tell_peers); a PE stops at its
// next look when that word is set, and every wait for a peer's signal (cpufree::shmem::wait_ge) is left once a stop
// is asked here or on a peer, so no PE waits for one that has stopped. Each PE stops at a cancel point of its own:
// the arrays hold each PE's state reached. In debug mode a wait that lasts past the timeout reports the PE, the
// wait (flag, program line), the value expected and the value seen, and stops this PE and its peers.
#pragma once

#ifndef CPUFREE_CHANNEL_POLL_NS
// The stop requests are looked at about every millisecond, at a grid sync. A look delays the grid by about two
// memory round trips (the leader's loads before the sync, every thread's read of its word after it): every 50 us
// that was 3-4 % of a 1.4 us grid sync; every 1 ms it is below 0.3 %, and a cancel still takes effect within
// milliseconds.
#define CPUFREE_CHANNEL_POLL_NS 1000000
#endif
#ifndef CPUFREE_CHANNEL_MAX_APART
#define CPUFREE_CHANNEL_MAX_APART 1024  // at most this many grid syncs between two looks
#endif

#include <cstddef>
#include <cstdlib>
#include <cstring>
#if defined(CPUFREE_EMULATE)
#include <atomic>
#include <chrono>
#include <thread>
#endif
#if defined(CPUFREE_CHANNEL_CALL_REQ)
#include <sched.h>

#include <atomic>
#include <ctime>
#include <type_traits>
#endif

namespace cpufree::channel {

struct DeviceState {
    int slot[2];               // the leader's decision published before a grid sync, by the sync's parity
    int seen;                  // leader only: a host callback failed or was not answered: stop (sticky in a launch)
    int cancel;                // the host asks to stop: written by the host (set_cancel) into device memory
    unsigned long long next;   // notification records reserved (a running count, like TAIL)
    unsigned long long dropped;
#if defined(CPUFREE_CHANNEL_CALL_REQ)
    long long calls;           // leader only: host requests made (a running count over launches, like REQ)
#endif
    long long looked;          // leader only: when it last looked at the stop requests (ns; 0: not yet)
    unsigned int apart;        // leader only: grid syncs between the last two looks
    long long loop_total;      // leader only: iterations of the loop that reports progress (-1: none running)
    long long loop_start, loop_stride;  // leader only: its position `at` is iteration (at - start) / stride
#if defined(CPUFREE_CHANNEL_SHMEM)
    unsigned long long barriers;  // leader only: PE barriers passed in this launch
#endif
};

#if defined(CPUFREE_CHANNEL_HANG_SITE)
#ifndef CPUFREE_DEBUG_BLOCKS
#define CPUFREE_DEBUG_BLOCKS 4096  // blocks whose last grid sync the hang report can name
#endif
struct DebugBarrier {
    unsigned int count;        // blocks arrived at the current barrier
    unsigned int generation;   // barriers completed
    int failed;                // a waiter timed out (or the blocks met at different grid syncs): everyone leaves
    int site[CPUFREE_DEBUG_BLOCKS];            // per block: site + 1 of the grid sync it arrived at last
    unsigned int passed[CPUFREE_DEBUG_BLOCKS];  // per block: grid syncs it had passed when it arrived there
};
#endif

}  // namespace cpufree::channel

__device__ long long *cpufree_channel = nullptr;
__device__ cpufree::channel::DeviceState cpufree_channel_state;
#if defined(CPUFREE_CHANNEL_SHMEM)
__device__ int *cpufree_channel_peers = nullptr;  // symmetric: number + 1 of a peer that stopped (0: none)
__device__ unsigned long long *cpufree_channel_barrier = nullptr;  // symmetric: arrivals of peers at PE barriers
#endif
#if defined(CPUFREE_CHANNEL_HANG_SITE)
__device__ cpufree::channel::DebugBarrier cpufree_debug_barrier;
#endif

namespace cpufree::channel {

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

// Kernel start, leader only: a new launch has not seen a failed callback yet (the host clears `cancel`), and the
// first look is at the first grid sync.
__device__ inline void start() {
    DeviceState &s = cpufree_channel_state;
    s.seen = 0;
    s.looked = 0;
    s.apart = 1;
    s.loop_total = -1;
#if defined(CPUFREE_CHANNEL_SHMEM)
    s.barriers = 0;
#endif
}

// The iterations of a loop that reports progress and has no variable with a known range, counted in a register
// (declared by CPUFREE_CHANNEL_BEGIN); a loop with one is read from its variable at the looks, and counts nothing.
// The rest of the leader's state lies in device memory (DeviceState): read at the looks only, in the same round trip
// as the stop requests, it keeps registers free in every thread between looks.
struct Leader {
    long long ticks = 0;
};

// The stop requests are looked at only at some grid syncs, "looks", about CPUFREE_CHANNEL_POLL_NS apart: before the
// sync of a look the leader reads them (device memory: the host's, and a failed callback's) with its own state, in
// one round trip, and publishes one word: 1 to stop, or 4 times the grid syncs to the next look (from the time the
// last ones took; at most twice as many as before, at most CPUFREE_CHANNEL_MAX_APART) plus twice that look's slot.
// After the sync every thread reads the word at its next cancel point, so all hold the same decision and count the
// same syncs to the next look. The word of look k lies in slot k % 2: it is written again two looks later, when every
// thread has read it. `left`: the word of the last look, counted down to this one (CPUFREE_CHANNEL_BEGIN).
__device__ inline void progress(long long done, long long total);

#if defined(CPUFREE_CHANNEL_SHMEM)
// This PE stops for a reason of its own: every peer's word gets its number + 1. Out of line: NVSHMEM's put is not
// in the kernel's own code path.
__device__ __noinline__ void tell_peers() {
    const int me = nvshmem_my_pe(), npes = nvshmem_n_pes();
    for (int p = 0; p < npes; ++p) {
        if (p == me) continue;
#if CPUFREE_CHANNEL_SHMEM == 2
        int *there = static_cast<int *>(nvshmem_ptr(cpufree_channel_peers, p));
        if (there != nullptr) *reinterpret_cast<volatile int *>(there) = me + 1;
#else
        nvshmem_int_p(cpufree_channel_peers, me + 1, p);
#endif
    }
#if CPUFREE_CHANNEL_SHMEM == 2
    __threadfence_system();
#else
    nvshmem_quiet();
#endif
}
#endif

// `at`: the position of the loop that reports progress (its variable, or its count of iterations begun).
__device__ inline void publish(unsigned int left, long long at) {
    DeviceState &s = cpufree_channel_state;
    const long long looked = s.looked;  // all loads first: one round trip to memory
    const unsigned int last = s.apart;
    const long long total = s.loop_total, from = s.loop_start, stride = s.loop_stride;
    const volatile DeviceState &asked = s;
    const bool own = (asked.cancel | asked.seen) != 0;
#if defined(CPUFREE_CHANNEL_SHMEM)
    const int peer = *reinterpret_cast<volatile int *>(cpufree_channel_peers);
    if (own && peer == 0) tell_peers();  // before this PE stops: its peers stop too, and leave their waits for it
    const bool stop = own || peer != 0;
#else
    const bool stop = own;
#endif
    const long long t = clock_ns();
    unsigned int apart = 1;
    if (looked != 0 && t > looked) {
        const long long per_sync = (t - looked) / (long long)last;
        const long long want = per_sync > 0 ? CPUFREE_CHANNEL_POLL_NS / per_sync : CPUFREE_CHANNEL_MAX_APART;
        const long long most = 2LL * last < CPUFREE_CHANNEL_MAX_APART ? 2LL * last : CPUFREE_CHANNEL_MAX_APART;
        apart = (unsigned int)(want < 1 ? 1 : want > most ? most : want);
    }
    s.looked = t;
    s.apart = apart;
    if (total >= 0 && stride != 0) progress((at - from) / stride, total);  // a loop's progress, shown at the looks
    const unsigned int slot = (left >> 1) & 1u;
    reinterpret_cast<volatile unsigned int *>(s.slot)[slot] = stop ? 1u : apart << 2 | (slot ^ 1u) << 1;
}

// Every thread, at its first cancel point after the grid sync of a look: the leader's word.
__device__ inline unsigned int decision(unsigned int left) {
    return reinterpret_cast<volatile unsigned int *>(cpufree_channel_state.slot)[(left >> 1) & 1u];
}

// Every thread at a cancel point that decided to stop: the leader tells the host where, and after how many grid
// syncs.
__device__ inline void stopped(long long tid, int site, unsigned int syncs) {
    if (tid != 0) return;
    volatile long long *w = cpufree_channel;
    w[CPUFREE_CHANNEL_SYNCS] = syncs;
#if defined(CPUFREE_CHANNEL_SHMEM)
    w[CPUFREE_CHANNEL_PEER] = *reinterpret_cast<volatile int *>(cpufree_channel_peers);
#endif
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

// A loop that reports progress: before it (`begin`), at the head of each iteration (`tick`, or `count` in a loop
// with grid syncs) and after it. The iterations are counted in a register and shown at the looks of the cancel path
// (about every CPUFREE_CHANNEL_POLL_NS), and by `tick` every CPUFREE_CHANNEL_PROGRESS_EVERY iterations for loops
// without grid syncs (no looks there).
#ifndef CPUFREE_CHANNEL_PROGRESS_EVERY
#define CPUFREE_CHANNEL_PROGRESS_EVERY 4096
#endif
// `start`, `stride`: how the loop's position (CPUFREE_CHANNEL_BEFORE_SYNC_AT) counts its iterations; the loop's
// variable's range, or 1 and 1 for the count of iterations begun (`ticks`).
__device__ inline void loop_begin(long long total, long long start, long long stride) {
    DeviceState &s = cpufree_channel_state;
    s.loop_total = total;
    s.loop_start = start;
    s.loop_stride = stride;
    progress(0, total);
}
__device__ inline void loop_tick(Leader &l) {
    if (++l.ticks % CPUFREE_CHANNEL_PROGRESS_EVERY == 0) progress(l.ticks - 1, cpufree_channel_state.loop_total);
}
__device__ inline void loop_count(Leader &l) { ++l.ticks; }
// After the loop: `at` its position one past the last iteration.
__device__ inline void loop_end(long long at) {
    DeviceState &s = cpufree_channel_state;
    if (s.loop_stride != 0) progress((at - s.loop_start) / s.loop_stride, s.loop_total);
    s.loop_total = -1;
}

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

#if defined(CPUFREE_CHANNEL_CALL_REQ)
// ---- host callbacks ---------------------------------------------------------------------------------------------
// A value as a 64-bit word of the call slot: floating point as float64 bits, integers and bools as int64.
template <typename T> __device__ inline long long to_word(T value) {
    if constexpr (std::is_floating_point_v<T>) {
        const double d = (double)value;
        long long bits;
        memcpy(&bits, &d, sizeof(bits));
        return bits;
    } else {
        return (long long)value;
    }
}
template <typename T> __device__ inline T from_word(long long word, char kind) {
    if (kind == 'f') {
        double d;
        memcpy(&d, &word, sizeof(d));
        return (T)d;
    }
    return (T)word;
}

__device__ inline void pause_briefly() {
#if defined(CPUFREE_EMULATE)
    std::this_thread::yield();
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
    __nanosleep(64);
#endif
}

// A flagged word of the call slot: `data` in the low 32 bits, the request's flag (its number's low 32 bits) above.
__host__ __device__ inline long long flagged(unsigned int flag, unsigned int data) {
    return (long long)(((unsigned long long)flag << 32) | (unsigned long long)data);
}
__host__ __device__ inline unsigned int flag_of(long long word) { return (unsigned int)((unsigned long long)word >> 32); }
__host__ __device__ inline unsigned int data_of(long long word) { return (unsigned int)(unsigned long long)word; }
__host__ __device__ inline long long joined(long long low, long long high) {
    return (long long)((unsigned long long)data_of(low) | ((unsigned long long)data_of(high) << 32));
}
// A 64-bit value as the two flagged words at `w[at]` (low half) and `w[at + 1]` (high half); `joined` reads it back.
__host__ __device__ inline void put_flagged(volatile long long *w, int at, unsigned int flag, long long value) {
    w[at] = flagged(flag, (unsigned int)(unsigned long long)value);
    w[at + 1] = flagged(flag, (unsigned int)((unsigned long long)value >> 32));
}

// The leader calls host callback `id` with `nargs` argument words and waits for `nres` result words. After a cancel
// (or a callback that raised, or no answer within the timeout) it makes no more calls: results are 0.
__device__ inline void call(int id, const long long *args, int nargs, long long *results, int nres) {
    DeviceState &s = cpufree_channel_state;
    volatile long long *w = cpufree_channel;
    for (int k = 0; k < nres; ++k) results[k] = 0;
    if (s.seen) return;
    const long long seq = ++s.calls;  // device memory: the numbering goes on over launches of this library
    const unsigned int flag = (unsigned int)seq;
    for (int k = 0; k < nargs; ++k) put_flagged(w, CPUFREE_CHANNEL_CALL_ARG_WORDS + 2 * k, flag, args[k]);
    w[CPUFREE_CHANNEL_CALL_HEAD] = flagged(flag, (unsigned int)id | ((unsigned int)nargs << 16));
    w[CPUFREE_CHANNEL_CALL_REQ] = seq;
    const long long start = clock_ns();
    while (true) {
        long long got[1 + 2 * CPUFREE_CHANNEL_CALL_MAX_RESULTS];  // the answer's words, read in one turn
        got[0] = w[CPUFREE_CHANNEL_CALL_ANSWER];
        for (int k = 0; k < 2 * nres; ++k) got[1 + k] = w[CPUFREE_CHANNEL_CALL_RESULT_WORDS + k];
        bool ready = flag_of(got[0]) == flag;
        for (int k = 0; k < 2 * nres; ++k) ready = ready && flag_of(got[1 + k]) == flag;
        if (ready) {
            if (data_of(got[0]) != 0) {
                s.seen = 1;  // the callback raised (the host re-raises it after the kernel stopped), or a cancel came
                return;
            }
            for (int k = 0; k < nres; ++k) results[k] = joined(got[1 + 2 * k], got[2 + 2 * k]);
            return;
        }
        if (clock_ns() - start > CPUFREE_CHANNEL_CALL_TIMEOUT_NS) {
            s.seen = 1;  // the host did not answer: stop at the next cancel point
            w[CPUFREE_CHANNEL_CALL_LATE] = seq;
            fence_system();
            return;
        }
        pause_briefly();
    }
}

// The host's address of the channel (set by host_alloc). `static`: every library keeps its own (an `inline`
// function's static would be one object in the whole process, shared by all loaded programs).
static inline long long *&host_words_ref() {
    static long long *words = nullptr;
    return words;
}

// Host: waits until the kernel makes request `answered + 1` (returns its number, its arguments unpacked into ID
// and ARGS) or `timeout_ns` passed (returns `answered`). Spins for the first CPUFREE_CHANNEL_SPIN_NS after each
// request, then sleeps 20 us steps.
#ifndef CPUFREE_CHANNEL_SPIN_NS
#define CPUFREE_CHANNEL_SPIN_NS 2000000LL
#endif
inline long long host_now_ns() {
#if defined(CPUFREE_EMULATE)
    return clock_ns();
#else
    timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
#endif
}
static inline long long wait_call(long long answered, long long timeout_ns) {
    static long long last_request = 0;  // host time of the last request seen: spin while requests come often
    volatile long long *w = host_words_ref();
    const unsigned int flag = (unsigned int)(answered + 1);
    const long long start = host_now_ns();
    while (true) {
        const long long head = w[CPUFREE_CHANNEL_CALL_HEAD];
        const long long now = host_now_ns();
        if (flag_of(head) == flag) {
            const int nargs = (int)(data_of(head) >> 16);
            bool complete = true;  // every argument word of this request has arrived
            for (int k = 0; k < 2 * nargs && complete; ++k)
                complete = flag_of(w[CPUFREE_CHANNEL_CALL_ARG_WORDS + k]) == flag;
            if (complete) {
                for (int k = 0; k < nargs; ++k)
                    w[CPUFREE_CHANNEL_CALL_ARGS + k] =
                        joined(w[CPUFREE_CHANNEL_CALL_ARG_WORDS + 2 * k], w[CPUFREE_CHANNEL_CALL_ARG_WORDS + 2 * k + 1]);
                w[CPUFREE_CHANNEL_CALL_ID] = data_of(head) & 0xffffu;
                last_request = now;
                return answered + 1;
            }
            continue;  // the rest of the request is on its way
        }
        if (now - start >= timeout_ns) return answered;
        if (now - last_request > CPUFREE_CHANNEL_SPIN_NS) {
            timespec pause{0, 20000};
            nanosleep(&pause, nullptr);
        } else {
#if defined(CPUFREE_EMULATE)
            sched_yield();  // spinning, but a thread waiting for this core (the emulated kernel) goes first
#elif defined(__x86_64__) || defined(__i386__)
            __builtin_ia32_pause();  // spinning: a system call here would add its microsecond to the round trip
#elif defined(__aarch64__)
            asm volatile("yield");
#endif
        }
    }
}

// Host: answers request `request` with `status` and the results Python wrote into RESULTS.
static inline void answer(long long request, long long status) {
    volatile long long *w = host_words_ref();
    const unsigned int flag = (unsigned int)request;
    for (int k = 0; k < CPUFREE_CHANNEL_CALL_MAX_RESULTS; ++k)
        put_flagged(w, CPUFREE_CHANNEL_CALL_RESULT_WORDS + 2 * k, flag, w[CPUFREE_CHANNEL_CALL_RESULTS + k]);
    w[CPUFREE_CHANNEL_CALL_ANSWER] = flagged(flag, (unsigned int)status);
}
#endif  // CPUFREE_CHANNEL_CALL_REQ

}  // namespace cpufree::channel
#if defined(CPUFREE_CHANNEL_HANG_SITE)
#include <cpufree/debug_waits.cuh>
#endif
namespace cpufree::channel {

#if defined(CPUFREE_CHANNEL_SHMEM)
#if defined(CPUFREE_CHANNEL_HANG_SITE)
// Debug waits: a wait for a peer's signal lasted past the timeout. The first waiter to give up reports it (kind 3:
// this PE, its block, the wait's number, the value it waited for and the value it saw); this PE's blocks leave at
// their next grid sync (the barrier has failed), its peers at their next look.
__device__ __noinline__ void report_wait(uint64_t expected, uint64_t seen, unsigned int wait) {
    if (!claim_report()) return;
    volatile long long *w = cpufree_channel;
    w[CPUFREE_CHANNEL_HANG_BLOCK] = blockIdx.x;
    w[CPUFREE_CHANNEL_HANG_PE] = nvshmem_my_pe();
    w[CPUFREE_CHANNEL_HANG_WAIT] = wait;
    w[CPUFREE_CHANNEL_HANG_EXPECTED] = (long long)expected;
    w[CPUFREE_CHANNEL_HANG_VALUE] = (long long)seen;
    finish_report(3, -1);  // site word -1: not a grid sync
    tell_peers();
}
#endif

// Between two polls of a wait for a peer's signal (cpufree::shmem::wait_ge): true to leave the wait, because this
// PE is asked to stop (it stops at its next look), a peer stopped, or in debug mode the wait lasted too long.
__device__ inline bool leave_wait(uint64_t expected, uint64_t seen, unsigned int wait, unsigned long long since) {
    const volatile DeviceState &s = cpufree_channel_state;
    bool leave = (s.cancel | s.seen) != 0 || *reinterpret_cast<volatile int *>(cpufree_channel_peers) != 0;
#if defined(CPUFREE_CHANNEL_HANG_SITE)
    leave = leave || hung();
    if (!leave && (unsigned long long)clock_ns() - since > (unsigned long long)CPUFREE_CHANNEL_HANG_TIMEOUT_NS) {
        report_wait(expected, seen, wait);
        leave = true;
    }
#else
    (void)expected, (void)seen, (void)wait, (void)since;
#endif
    // The data this wait guards has not arrived: even a kernel that runs on to its end has no complete result.
    if (leave) reinterpret_cast<volatile long long *>(cpufree_channel)[CPUFREE_CHANNEL_LEFT] = 1;
    return leave;
}

// A barrier over all PEs (the leader; the generator places grid syncs around it) that a PE can leave: this PE's
// arrival is added to every peer's word, then it waits for all peers' arrivals with wait_ge, which is left when a PE
// stops. nvshmem_barrier_all, which it replaces in programs built with the channel, cannot be left: a PE that
// stopped before it would leave its peers there. Like it, it completes this PE's puts before its arrival.
__device__ inline void barrier_all() {
    const int me = nvshmem_my_pe(), npes = nvshmem_n_pes();
    const unsigned long long round = ++cpufree_channel_state.barriers;
#if CPUFREE_CHANNEL_SHMEM == 2
    __threadfence_system();
    for (int p = 0; p < npes; ++p)
        if (p != me) atomicAdd_system(cpufree::shmem::p2p::peer(cpufree_channel_barrier, p), 1ull);
#else
    nvshmem_quiet();
    for (int p = 0; p < npes; ++p)
        if (p != me) nvshmemx_signal_op((uint64_t *)cpufree_channel_barrier, 1, NVSHMEM_SIGNAL_ADD, p);
#endif
    cpufree::shmem::wait_ge((uint64_t *)cpufree_channel_barrier, round * (unsigned long long)(npes - 1), 1u);
}
#endif  // CPUFREE_CHANNEL_SHMEM

// ---- host side ----------------------------------------------------------------------------------------------
#if !defined(CPUFREE_EMULATE)
// The device and a stream that does not wait for the kernel: the host's stop request is copied into device memory
// while the kernel runs (the kernel then never reads host memory to see it).
struct CancelPath {
    int device = 0;
    cudaStream_t stream = nullptr;
#if defined(CPUFREE_CHANNEL_SHMEM)
    int *peers = nullptr;  // the symmetric word of cpufree_channel_peers
#endif
};
static inline CancelPath &cancel_path() {
    static CancelPath path;
    return path;
}
#endif

// Host: asks the kernel to stop (1) or clears the request before a launch (0). 0: done.
static inline int set_cancel(int value) {
#if defined(CPUFREE_EMULATE)
    __atomic_store_n(&cpufree_channel_state.cancel, value, __ATOMIC_SEQ_CST);
    return 0;
#else
    CancelPath &path = cancel_path();
    if (path.stream == nullptr) return (int)cudaErrorInvalidResourceHandle;
    static int word;
    word = value;
    cudaError_t e = cudaSetDevice(path.device);
    if (e == cudaSuccess)
        e = cudaMemcpyToSymbolAsync(cpufree_channel_state, &word, sizeof(word), offsetof(DeviceState, cancel),
                                    cudaMemcpyHostToDevice, path.stream);
#if defined(CPUFREE_CHANNEL_SHMEM)
    // Before a launch the peers' word is cleared too; the launcher's barrier over all PEs follows, so no peer
    // can tell this PE to stop before it is cleared.
    if (e == cudaSuccess && value == 0) e = cudaMemsetAsync(path.peers, 0, 2 * sizeof(long long), path.stream);
#endif
    if (e == cudaSuccess) e = cudaStreamSynchronize(path.stream);
    return (int)e;
#endif
}

inline void *host_alloc(size_t bytes, long long **device) {
#if defined(CPUFREE_EMULATE)
    void *p = calloc(1, bytes);
    *device = static_cast<long long *>(p);
    cpufree_channel = *device;
#if defined(CPUFREE_CHANNEL_CALL_REQ)
    host_words_ref() = static_cast<long long *>(p);
#endif
    return p;
#else
    void *p = nullptr;
    if (cudaHostAlloc(&p, bytes, cudaHostAllocMapped) != cudaSuccess) return nullptr;
    memset(p, 0, bytes);
    void *d = nullptr;
    if (cudaHostGetDevicePointer(&d, p, 0) != cudaSuccess) return nullptr;
    *device = static_cast<long long *>(d);
    if (cudaMemcpyToSymbol(cpufree_channel, device, sizeof(*device)) != cudaSuccess) return nullptr;
    CancelPath &path = cancel_path();
    if (cudaGetDevice(&path.device) != cudaSuccess) return nullptr;
    if (cudaStreamCreateWithFlags(&path.stream, cudaStreamNonBlocking) != cudaSuccess) return nullptr;
#if defined(CPUFREE_CHANNEL_SHMEM)
    // Collective: every PE opens its channel when it loads the program, after NVSHMEM's initialisation.
    // Two symmetric words: the peers' stop (int) and the arrivals at PE barriers.
    path.peers = static_cast<int *>(nvshmem_malloc(2 * sizeof(long long)));
    if (path.peers == nullptr || cudaMemset(path.peers, 0, 2 * sizeof(long long)) != cudaSuccess) return nullptr;
    unsigned long long *arrivals = reinterpret_cast<unsigned long long *>(path.peers) + 1;
    if (cudaMemcpyToSymbol(cpufree_channel_peers, &path.peers, sizeof(path.peers)) != cudaSuccess) return nullptr;
    if (cudaMemcpyToSymbol(cpufree_channel_barrier, &arrivals, sizeof(arrivals)) != cudaSuccess) return nullptr;
#endif
#if defined(CPUFREE_CHANNEL_CALL_REQ)
    host_words_ref() = static_cast<long long *>(p);
#endif
    return p;
#endif
}

#if defined(CPUFREE_CHANNEL_HANG_SITE)
// Before each launch: the debug barrier starts empty (a launch that gave up leaves it failed, blocks counted).
static inline int debug_reset() {
#if defined(CPUFREE_EMULATE)
    memset(&cpufree_debug_barrier, 0, sizeof(cpufree_debug_barrier));
    return 0;
#else
    // waited for: from pageable memory the copy may still be under way when the call returns, and the kernel runs on
    // the caller's stream, which need not be ordered after the legacy default stream this copy takes
    static DebugBarrier zero{};
    if (cudaMemcpyToSymbol(cpufree_debug_barrier, &zero, sizeof(zero)) != cudaSuccess) return 1;
    return cudaDeviceSynchronize() == cudaSuccess ? 0 : 1;
#endif
}
#endif

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

// The work of a cancel point that is due (a look's word to read, a look to publish) runs out of line: in the
// kernel's loops a cancel point is one compare and a branch around a call, and the loops keep their code compact.
// Both return the new countdown word (1: stop here, every thread returns).
#if defined(CPUFREE_EMULATE)
#define CPUFREE_CHANNEL_OUT_OF_LINE inline
#else
#define CPUFREE_CHANNEL_OUT_OF_LINE __device__ __noinline__
#endif
namespace cpufree::channel {

// A cancel point (loop head) with `left` below 8. Below 4 the word of a look waits: every thread reads it.
CPUFREE_CHANNEL_OUT_OF_LINE unsigned int point(unsigned int left, long long tid, int site, unsigned int syncs) {
    if (left < 4u) {
        left = decision(left);
        if (left == 1u) stopped(tid, site, syncs);
    }
    return left;
}

// The cancel point before a grid sync, with `left` below 8: the word of a look read as at `point`; then, if this
// sync is a look (left below 8 still), the leader publishes the next word before it.
CPUFREE_CHANNEL_OUT_OF_LINE unsigned int check(unsigned int left, long long tid, int site, unsigned int syncs,
                                               long long at) {
    if (left < 4u) {
        left = decision(left);
        if (left == 1u) {
            stopped(tid, site, syncs);
            return left;
        }
    }
    if (tid == 0 && left < 8u) publish(left, at);
    return left;
}

}  // namespace cpufree::channel

// Cancel points, printed by the generator only when the channel is on. `__cpufree_left` is the word of the last look
// (see publish), counted down by 4 after each grid sync that is a cancel point: 4 times such syncs to the next look
// (it included) plus twice its slot, or 1: stop. In a loop only the first grid sync of an iteration is a cancel point
// (the generator's loop_points); the others are plain, counted only in `__cpufree_syncs`, which a stop reports. Below 4 the word of a look waits in its slot, and the next cancel point reads it; so
// between looks a grid sync costs a subtraction after it and one compare before it, and the read after a look waits
// for memory at that cancel point only. A loop head compares with 8 as the cancel point of a grid sync does (from 4
// to 7 it has nothing to do): where a grid sync follows it with nothing between, nvcc makes the two one compare.
#define CPUFREE_CHANNEL_BEGIN()                                                                        \
    unsigned int __cpufree_left = 4;  /* the first grid sync is a look, its word in slot 0 */           \
    unsigned int __cpufree_syncs = 0; /* grid syncs passed */                                           \
    cpufree::channel::Leader __cpufree_leader;                                                          \
    if (__tid == 0) cpufree::channel::start();
// Whether a cancel point has work (`__cpufree_left` below `bound`). The word is the same in every thread, so on the
// GPU the compare is a warp vote: it changes nothing, but tells nvcc that the branch is the whole warp's, which then
// needs no convergence barrier around the call nor a divergence check before the grid sync (cancel points are in
// the kernel's top-level code, where a block's threads run together; blocks are whole warps, the launcher rounds
// them).
#if defined(CPUFREE_EMULATE)
#define CPUFREE_CHANNEL_DUE(bound) (__cpufree_left < (bound))
#else
#define CPUFREE_CHANNEL_DUE(bound) __any_sync(0xffffffffu, __cpufree_left < (bound))
#endif
// After a grid sync that is a cancel point, and after a plain one.
#define CPUFREE_CHANNEL_TAKE_LOOK() \
    __cpufree_left -= 4u;           \
    ++__cpufree_syncs;
#define CPUFREE_CHANNEL_PLAIN_SYNC() ++__cpufree_syncs;
// At a loop head: every thread reads the word of a look at its first cancel point after the look's grid sync, and
// all stop there if it says so.
#define CPUFREE_CHANNEL_POINT(site)                                                 \
    if (CPUFREE_CHANNEL_DUE(8u)) {                                                  \
        __cpufree_left = cpufree::channel::point(__cpufree_left, __tid, site, __cpufree_syncs); \
        if (__cpufree_left == 1u) return;                                           \
    }
// Before a grid sync: a cancel point, and before the sync of a look the leader publishes its word (with the progress
// of the loop whose position is `at`, inside a loop that reports it).
#define CPUFREE_CHANNEL_CHECK(site, at)                                                                       \
    if (CPUFREE_CHANNEL_DUE(8u)) {                                                                            \
        __cpufree_left = cpufree::channel::check(__cpufree_left, __tid, site, __cpufree_syncs, (long long)(at)); \
        if (__cpufree_left == 1u) return;                                                                     \
    }
#define CPUFREE_CHANNEL_BEFORE_SYNC(site) CPUFREE_CHANNEL_BEFORE_SYNC_AT(site, 0)
#if defined(CPUFREE_CHANNEL_HANG_SITE)
#define CPUFREE_CHANNEL_BEFORE_SYNC_AT(site, at) \
    CPUFREE_CHANNEL_CHECK(site, at)              \
    __grid.where = site;
#define CPUFREE_CHANNEL_AFTER_SYNC()                                       \
    CPUFREE_CHANNEL_TAKE_LOOK()                                            \
    if (cpufree::channel::hung()) {                                        \
        cpufree::channel::stopped(__tid, __grid.where, __grid.passed);     \
        return;                                                            \
    }
#else
#define CPUFREE_CHANNEL_BEFORE_SYNC_AT(site, at) CPUFREE_CHANNEL_CHECK(site, at)
#define CPUFREE_CHANNEL_AFTER_SYNC() CPUFREE_CHANNEL_TAKE_LOOK()
#endif
