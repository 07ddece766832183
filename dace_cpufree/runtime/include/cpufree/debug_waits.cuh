// Debug waits of the device <-> host channel (included by cpufree/channel.cuh when CPUFREE_CHANNEL_HANG_* are
// defined): grid syncs, block barriers and tile barriers whose waiters give up after a timeout, report where they
// waited and who had not arrived, and leave through the cancel path instead of hanging.
//
// The innermost wait gives up first, so that the report names the thread (or PE) that was late rather than the
// block that waited for it: a wait for a peer's signal after the timeout T (cpufree::channel::leave_wait), a tile
// barrier after 1.125 T, a block barrier after 1.25 T, a grid sync after 1.5 T.
#pragma once

namespace cpufree::channel {

#define CPUFREE_HANG_TILE_NS (CPUFREE_CHANNEL_HANG_TIMEOUT_NS + CPUFREE_CHANNEL_HANG_TIMEOUT_NS / 8)
#define CPUFREE_HANG_BLOCK_NS (CPUFREE_CHANNEL_HANG_TIMEOUT_NS + CPUFREE_CHANNEL_HANG_TIMEOUT_NS / 4)
#define CPUFREE_HANG_GRID_NS (CPUFREE_CHANNEL_HANG_TIMEOUT_NS + CPUFREE_CHANNEL_HANG_TIMEOUT_NS / 2)

__device__ inline int hung() { return reinterpret_cast<volatile int *>(&cpufree_debug_barrier.failed)[0]; }

// The first waiter to give up writes the report: true for that one (every waiter leaves once the kernel hung).
__device__ inline bool claim_report() {
#if defined(CPUFREE_EMULATE)
    int expected = 0;
    return __atomic_compare_exchange_n(&cpufree_debug_barrier.failed, &expected, 1, false, __ATOMIC_SEQ_CST,
                                       __ATOMIC_SEQ_CST);
#else
    return atomicCAS(&cpufree_debug_barrier.failed, 0, 1) == 0;
#endif
}

// The end of a report: its kind, then its site word after a fence (the host reads a whole report once it sees it).
__device__ inline void finish_report(int kind, long long site_word) {
    volatile long long *w = cpufree_channel;
    w[CPUFREE_CHANNEL_HANG_KIND] = kind;
    fence_system();
    w[CPUFREE_CHANNEL_HANG_SITE] = site_word;
    fence_system();
}

// A report of a barrier's waiters: this block, how many of `size` had arrived, the first missing (a block, or a
// thread) with where it was (`missing_site`, `missing_syncs`), the grid syncs passed, and the barrier's site.
__device__ inline void write_report(int kind, int site, long long arrived, long long size, long long missing,
                                    long long missing_site, long long missing_syncs, long long syncs) {
    volatile long long *w = cpufree_channel;
    w[CPUFREE_CHANNEL_HANG_BLOCK] = blockIdx.x;
    w[CPUFREE_CHANNEL_HANG_ARRIVED] = arrived;
    w[CPUFREE_CHANNEL_HANG_GRID] = size;
    w[CPUFREE_CHANNEL_HANG_MISSING] = missing;
    w[CPUFREE_CHANNEL_HANG_MISSING_SITE] = missing_site;
    w[CPUFREE_CHANNEL_HANG_MISSING_SYNCS] = missing_syncs;
    w[CPUFREE_CHANNEL_HANG_SYNCS] = syncs;
    finish_report(kind, site + 1);
}

// The first block to give up writes the report (kind 0: it timed out, 1: the blocks met at different grid syncs,
// 2: the race checker saw that the barrier can never complete): where it waited, how many blocks had arrived, and the first block
// that had not (or that waits at another grid sync) with the grid sync it reached last.
__device__ inline void report_hang(int kind, int site, unsigned int passed, unsigned int arrived) {
    if (!claim_report()) return;
    DebugBarrier &b = cpufree_debug_barrier;
    const unsigned int blocks = gridDim.x < CPUFREE_DEBUG_BLOCKS ? gridDim.x : CPUFREE_DEBUG_BLOCKS;
    long long missing = -1, missing_site = 0, missing_passed = 0;
    volatile int *where = b.site;
    volatile unsigned int *when = b.passed;
    for (unsigned int k = 0; k < blocks; ++k) {
        if (where[k] != site + 1 || when[k] != passed) {
            missing = k;
            missing_site = where[k];
            missing_passed = when[k];
            break;
        }
    }
    write_report(kind, site, arrived, gridDim.x, missing, missing_site, missing_passed, passed);
}

// ---- block and tile barriers that time out --------------------------------------------------------------------
// Per block, in shared memory: a thread's bit is set while it waits at the block barrier (or at its tile's), and the
// last thread to arrive clears the bits of all, which releases them; a waiter that gives up reports the first thread
// whose bit is clear as the one missing. Blocks are one-dimensional (the generator launches them so).
struct BlockWaits {
    unsigned int count;              // threads arrived at the block barrier
    unsigned int tile_count[16];     // threads arrived at the barrier of each tile larger than a warp (at most 15)
    unsigned int waiting[32];        // one bit per thread: waiting at the block barrier
    unsigned int tile_waiting[32];   // one bit per thread: waiting at its tile's barrier
};

#if !defined(CPUFREE_EMULATE)
__device__ inline BlockWaits &block_waits() {
    __shared__ BlockWaits waits;
    return waits;
}

// Kind 4 (a block barrier) or 5 (a tile barrier): the cancel point `site` it is at, the grid syncs passed (-1:
// unknown), the threads it waits for (`size` from thread `first`), how many were there and the first that was not.
__device__ __noinline__ void report_barrier(int kind, int site, long long passed, unsigned int first,
                                            unsigned int size, const volatile unsigned int *bits) {
    if (!claim_report()) return;
    long long missing = -1, arrived = 0;
    for (unsigned int t = first; t < first + size; ++t) {
        if ((bits[t / 32] >> (t % 32)) & 1u)
            ++arrived;
        else if (missing < 0)
            missing = t;
    }
    write_report(kind, site, arrived, size, missing, first, 0, passed);
}

// Waits until this thread's bit in `word` is cleared (the barrier is complete) or the kernel hung; with a timeout
// (`timeout_ns` > 0) it reports the barrier itself when that passes.
__device__ inline void wait_cleared(const volatile unsigned int *word, unsigned int bit, long long timeout_ns, int kind,
                                    int site, long long passed, unsigned int first, unsigned int size,
                                    const volatile unsigned int *bits) {
    const long long start = clock_ns();
    while ((*word & bit) && !hung()) {
        if (timeout_ns > 0 && clock_ns() - start > timeout_ns) {
            report_barrier(kind, site, passed, first, size, bits);
            return;
        }
        __nanosleep(64);
    }
}
#endif

// Before the kernel's first barrier (DebugGrid's constructor): every thread of the block, no thread waiting.
__device__ inline void start_block_waits() {
#if !defined(CPUFREE_EMULATE)
    unsigned int *words = reinterpret_cast<unsigned int *>(&block_waits());
    for (unsigned int k = threadIdx.x; k < sizeof(BlockWaits) / sizeof(unsigned int); k += blockDim.x) words[k] = 0u;
    __syncthreads();
#endif
}

// A block barrier at cancel point `site`, after `passed` grid syncs. `timed`: a waiter gives up after
// CPUFREE_HANG_BLOCK_NS and reports it (`kind` 4, or 6 for the barrier of a grid sync); otherwise the waiters only leave once the kernel hung (a barrier
// that waits for a thread that is itself bounded by a timeout). Once the kernel hung every barrier is left at once.
__device__ inline void block_sync(int site, long long passed, bool timed = true, int kind = 4) {
#if defined(CPUFREE_EMULATE)
    __syncthreads();
#else
    if (hung()) return;
    BlockWaits &s = block_waits();
    const unsigned int me = threadIdx.x, size = blockDim.x, bit = 1u << (me % 32);
    __threadfence_block();
    atomicOr(&s.waiting[me / 32], bit);  // before the count: the last to arrive sees every bit set
    if (atomicAdd(&s.count, 1u) + 1u == size) {
        atomicExch(&s.count, 0u);  // before the release: the next barrier counts afresh
        __threadfence_block();
        for (unsigned int k = 0; k < (size + 31) / 32; ++k) atomicExch(&s.waiting[k], 0u);
    } else {
        wait_cleared(&s.waiting[me / 32], bit, timed ? CPUFREE_HANG_BLOCK_NS : 0, kind, site, passed, 0, size, s.waiting);
    }
    __threadfence_block();
#endif
}

// The barrier of a tile (cooperative groups' tiles of a warp or less, BlockTile above) at cancel point `site`: a
// waiter gives up after CPUFREE_HANG_TILE_NS and reports it (kind 5).
template <typename Tile> __device__ inline void tile_sync(const Tile &tile, int site) {
#if defined(CPUFREE_EMULATE)
    tile.sync();
#else
    const unsigned int size = tile.num_threads();
    if (size == 1u || hung()) return;
    BlockWaits &s = block_waits();
    const unsigned int me = threadIdx.x, first = me - (unsigned int)tile.thread_rank(), bit = 1u << (me % 32);
    __threadfence_block();
    bool last;
    if (size <= 32u) {  // the tile's bits share one word: the thread whose bit completes them is the last
        const unsigned int mask = (size == 32u ? 0xffffffffu : (1u << size) - 1u) << (first % 32);
        last = ((atomicOr(&s.tile_waiting[me / 32], bit) | bit) & mask) == mask;
        if (last) atomicAnd(&s.tile_waiting[me / 32], ~mask);
    } else {  // whole words; a count per tile (BlockTile: at most 15 a block)
        atomicOr(&s.tile_waiting[me / 32], bit);
        const unsigned int t = (unsigned int)tile.meta_group_rank();
        last = atomicAdd(&s.tile_count[t], 1u) + 1u == size;
        if (last) {
            atomicExch(&s.tile_count[t], 0u);
            __threadfence_block();
            for (unsigned int k = first / 32; k < (first + size) / 32; ++k) atomicExch(&s.tile_waiting[k], 0u);
        }
    }
    if (!last)
        wait_cleared(&s.tile_waiting[me / 32], bit, CPUFREE_HANG_TILE_NS, 5, site, -1, first, size, s.tile_waiting);
    __threadfence_block();
#endif
}

// `__grid` of a kernel built with debug waits. `site` is set before each sync (CPUFREE_CHANNEL_BEFORE_SYNC).
struct DebugGrid {
    int where = -1;  // the cancel point number of the grid sync being made
    unsigned int passed = 0;  // grid syncs this thread has passed

    __device__ DebugGrid() { start_block_waits(); }

    __device__ void sync() {
        DebugBarrier &b = cpufree_debug_barrier;
        const unsigned int me = blockIdx.x < CPUFREE_DEBUG_BLOCKS ? blockIdx.x : CPUFREE_DEBUG_BLOCKS - 1;
#if defined(CPUFREE_EMULATE) && defined(CPUFREE_RACE_CHECK)
        // The race checker runs the threads one at a time and sees a barrier that can never complete at once.
        if (threadIdx.x == 0) {
            b.site[me] = where + 1;
            b.passed[me] = passed;
        }
        try {
            cpufree::race::checker().grid_barrier(cpufree::race::self);
        } catch (const cpufree::race::Abandoned &) {
            report_hang(2, where, passed, 0);  // kind 2: the checker saw it can never complete
            throw;
        }
#elif defined(CPUFREE_EMULATE)
        b.site[me] = where + 1;  // one thread: the barrier is complete at once
        b.passed[me] = passed;
#else
        block_sync(where, passed, true, 6);  // reports a thread of this block that does not arrive
        if (threadIdx.x == 0) {
            volatile unsigned int *gen = &b.generation;
            const unsigned int g = *gen;
            reinterpret_cast<volatile int *>(b.site)[me] = where + 1;
            reinterpret_cast<volatile unsigned int *>(b.passed)[me] = passed;
            __threadfence();
            const unsigned int arrived = atomicAdd(&b.count, 1u) + 1u;
            if (arrived == gridDim.x) {
                // the last to arrive: every block must be at this grid sync, with as many passed
                const unsigned int blocks = gridDim.x < CPUFREE_DEBUG_BLOCKS ? gridDim.x : CPUFREE_DEBUG_BLOCKS;
                for (unsigned int k = 0; k < blocks; ++k) {
                    if (reinterpret_cast<volatile int *>(b.site)[k] != where + 1 ||
                        reinterpret_cast<volatile unsigned int *>(b.passed)[k] != passed) {
                        report_hang(1, where, passed, arrived);
                        break;
                    }
                }
                atomicExch(&b.count, 0u);  // before the generation moves: the next barrier counts afresh
                __threadfence();
                atomicAdd(&b.generation, 1u);
            } else {
                const long long start = clock_ns();
                while (*gen == g && !hung()) {
                    if (clock_ns() - start > CPUFREE_HANG_GRID_NS) {
                        report_hang(0, where, passed, *reinterpret_cast<volatile unsigned int *>(&b.count));
                        break;
                    }
                    __nanosleep(256);
                }
            }
            __threadfence();
        }
        block_sync(where, passed, false);  // thread 0's wait above is bounded by its own timeout
#endif
        ++passed;
    }
};

}  // namespace cpufree::channel
