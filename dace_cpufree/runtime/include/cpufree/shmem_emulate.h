// The NVSHMEM subset that generated programs call, on the host: several PEs of one program in one process
// (compile(..., backend="emulate", pes=P), run.on_pes([...])). shmem.cuh includes it instead of nvshmem.h under
// CPUFREE_EMULATE.
//
// Each PE runs its own copy of the program's library in a thread of its own (the copies' statics are theirs, as a
// GPU's are); they share one World (shmem_world.h: the symmetric heap, the PE barrier, the reductions' slots, the
// waits). The bootstrap is NVSHMEM's unique-id one: PE 0's nvshmemx_get_uniqueid makes the World (and the race
// checker all PEs share), whose address is the id, and every copy's nvshmemx_init_attr joins it as its PE.
//
// What a call does: a put copies its elements into the target PE's buffer at once (_nbi or not; the block and warp
// forms by one thread of the group, between barriers of the block), a signal sets the target's flag, a wait blocks
// its thread until the flag satisfies the comparison, quiet and fence have nothing left to do, a reduction meets the
// other PEs and combines their values in PE order, barrier_all meets them. With the race checker (racecheck.h) every
// element a put reads or writes is an access of the calling thread, a signal releases and the wait that sees it
// acquires, and barriers and reductions order all PEs; waits give up their turn and a wait that nobody will ever
// signal is reported as a hang. Without it a wait blocks on the World, which reports a hang when every PE waits.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "shmem_world.h"

namespace cpufree::emu {

// This copy's World (nullptr before it joins the PEs).
static World *world = nullptr;

inline World &the_world() {
    if (world == nullptr) {
        std::fprintf(stderr, "dace-cpufree: an emulated SHMEM call before the PEs were set up\n");
        std::abort();
    }
    return *world;
}

inline bool meet_all() { return the_world().meet(pes.pe, "waits at the PE barrier of the launcher"); }

// A put, signal or reduction that names a PE that is not one, or memory that is not symmetric: the run stops.
[[noreturn]] inline void misuse(const std::string &what) {
    the_world().abort("PE " + std::to_string(pes.pe) + ": " + what, true);
    throw Stopped{};
}

// Elements of the pointers that generated code passes: T *, or race::ptr<T> with the race checker.
template <typename P> struct element_of { using type = unsigned char; };
template <typename T> struct element_of<T *> { using type = T; };
template <> struct element_of<void *> { using type = unsigned char; };
template <> struct element_of<const void *> { using type = unsigned char; };
template <typename T> inline T *raw(T *p) { return p; }
#if defined(CPUFREE_RACE_CHECK)
template <typename T> struct element_of<race::ptr<T>> { using type = T; };
template <typename T> inline T *raw(const race::ptr<T> &p) { return p.raw(); }
// An element access of a put, recorded as the calling thread's.
inline void note(const volatile void *p, bool write) {
    race::checker().access(const_cast<const void *>(p), write, false, race::self, race::step);
}
#else
inline void note(const volatile void *, bool) {}
#endif

// The address of symmetric `p` on PE `pe`.
template <typename T> inline T *on_pe(T *p, int pe) {
    void *there = the_world().ptr((const void *)p, pe);
    if (there == nullptr)
        misuse(pe < 0 || pe >= pes.count ? "a put or signal to PE " + std::to_string(pe) + ", which is not a PE (" +
                                               std::to_string(pes.count) + " PEs)"
                                         : std::string("a put or signal to memory that is not symmetric"));
    return static_cast<T *>(there);
}

// Copies `n` elements of this PE's `src` (stride `ss`) to `dest` (stride `ds`) on PE `pe`.
template <typename T> inline void put_elements(T *dest, const T *src, long long ds, long long ss, long long n, int pe) {
    T *there = on_pe(dest, pe);
    for (long long i = 0; i < n; ++i) {
        note(src + i * ss, false);
        note(there + i * ds, true);
        there[i * ds] = src[i * ss];
    }
}
template <typename D, typename S> inline void put_bytes(D dest, S src, std::size_t nbytes, int pe) {
    using T = typename element_of<S>::type;
    put_elements((T *)raw(dest), (const T *)raw(src), 1, 1, (long long)(nbytes / sizeof(T)), pe);
}

inline bool compare(std::uint64_t seen, int cmp, std::uint64_t value) {
    switch (cmp) {
        case 0: return seen == value;
        case 1: return seen != value;
        case 2: return seen > value;
        case 3: return seen <= value;
        case 4: return seen < value;
        default: return seen >= value;
    }
}

// Sets (`add`: adds to) the flag at `flag` on PE `pe`.
inline void signal(volatile std::uint64_t *flag, std::uint64_t value, bool add, int pe) {
    volatile std::uint64_t *there = on_pe(flag, pe);
#if defined(CPUFREE_RACE_CHECK)
    race::checker().signal(race::self, there, value, add);
#else
    the_world().signal(there, value, add);
#endif
}

// Waits until the local flag compares true with `value`.
inline std::uint64_t wait_until(volatile std::uint64_t *flag, int cmp, std::uint64_t value) {
#if defined(CPUFREE_RACE_CHECK)
    race::checker().wait_signal(race::self, flag, [&](std::uint64_t seen) { return compare(seen, cmp, value); }, cmp,
                                value, race::step);
#else
    static const char *const names[] = {"==", "!=", ">", "<=", "<", ">="};
    const std::string what = "waits at a SignalWait until the flag is " + std::string(names[cmp >= 0 && cmp < 6 ? cmp : 5]) +
                             " " + std::to_string(value);
    if (!the_world().wait(pes.pe, [&] { return compare(*flag, cmp, value); }, what, "SignalWait", flag))
        throw Stopped{};
#endif
    return *flag;
}

// The PE barrier of device code: one thread of each PE.
inline void barrier_all() {
#if defined(CPUFREE_RACE_CHECK)
    if (race::inside) {  // the key is the same in every PE's copy of the library
        race::checker().pe_barrier(race::self, reinterpret_cast<const void *>(std::uintptr_t(1)), race::step);
        return;
    }
#endif
    if (!the_world().meet(pes.pe, "waits at a PE barrier (nvshmem_barrier_all)")) throw Stopped{};
}

// A reduction of `n` values over all PEs, in PE order (every PE gets the same bits): each PE's slot holds its
// values between the first meeting and the second.
template <typename T, typename Combine> inline void reduce(T *out, const T *in, std::size_t n, Combine combine) {
    World &w = the_world();
    std::vector<char> &mine = w.slot(pes.pe);
    mine.resize(n * sizeof(T));
    for (std::size_t i = 0; i < n; ++i) {
        note(in + i, false);
        std::memcpy(mine.data() + i * sizeof(T), in + i, sizeof(T));
    }
    barrier_all();
    for (std::size_t i = 0; i < n; ++i) {
        T acc, next;
        std::memcpy(&acc, w.slot(0).data() + i * sizeof(T), sizeof(T));
        for (int p = 1; p < pes.count; ++p) {
            std::memcpy(&next, w.slot(p).data() + i * sizeof(T), sizeof(T));
            acc = combine(acc, next);
        }
        note(out + i, true);
        out[i] = acc;
    }
    barrier_all();  // no PE refills its slot before every PE has read them all
}

// The block-cooperative calls: every thread of the block calls them, one does the work between block barriers.
template <typename F> inline void by_block(F work) {
    __syncthreads();
    if (threadIdx.x == 0) work();
    __syncthreads();
}

// Joins the PEs as PE `rank` of `nranks`: the World and the race checker that PE 0 made.
inline int join(World *shared, void *checker, int rank, int nranks) {
    if (shared == nullptr || !shared->size(nranks) || rank < 0 || rank >= nranks) return 1;
    world = shared;
    pes.pe = rank;
    pes.count = nranks;
    pes.meet = &meet_all;
#if defined(CPUFREE_RACE_CHECK)
    race::shared_checker() = static_cast<race::Checker *>(checker);
#else
    (void)checker;
#endif
    return 0;
}

}  // namespace cpufree::emu

#include "shmem_emulate_api.h"
