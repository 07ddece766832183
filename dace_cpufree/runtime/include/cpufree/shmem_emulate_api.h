// The names of the emulated SHMEM API (shmem_emulate.h): NVSHMEM's calls as generated code and the host entry points
// spell them, cpufree::shmem's helpers of shmem.cuh (direct stores, the gather form of Allreduce), and the launcher's
// hooks. Pointers may be T * or, with the race checker, race::ptr<T>: the calls are templates over both.
#pragma once

// ---- NVSHMEM ------------------------------------------------------------------------------------------------
enum { NVSHMEM_CMP_EQ = 0, NVSHMEM_CMP_NE, NVSHMEM_CMP_GT, NVSHMEM_CMP_LE, NVSHMEM_CMP_LT, NVSHMEM_CMP_GE };
enum { NVSHMEM_SIGNAL_SET = 0, NVSHMEM_SIGNAL_ADD = 5 };
typedef int nvshmem_team_t;
#define NVSHMEM_TEAM_WORLD 0
struct nvshmemx_uniqueid_t {
    cpufree::emu::World *world;
    void *checker;
};
#define NVSHMEMX_UNIQUEID_INITIALIZER {nullptr, nullptr}
struct nvshmemx_init_attr_t {
    int rank, nranks;
    nvshmemx_uniqueid_t id;
};
#define NVSHMEMX_INIT_ATTR_INITIALIZER {0, 0, {nullptr, nullptr}}
enum { NVSHMEMX_INIT_WITH_UNIQUEID = 1 };

// PE 0 makes what all PEs share; the id is its address.
inline int nvshmemx_get_uniqueid(nvshmemx_uniqueid_t *id) {
    id->world = new cpufree::emu::World();
#if defined(CPUFREE_RACE_CHECK)
    id->checker = new cpufree::race::Checker();
#else
    id->checker = nullptr;
#endif
    return 0;
}
inline int nvshmemx_set_attr_uniqueid_args(int rank, int nranks, const nvshmemx_uniqueid_t *id,
                                           nvshmemx_init_attr_t *attr) {
    attr->rank = rank;
    attr->nranks = nranks;
    attr->id = *id;
    return 0;
}
inline int nvshmemx_init_attr(unsigned int, nvshmemx_init_attr_t *attr) {
    return cpufree::emu::join(attr->id.world, attr->id.checker, attr->rank, attr->nranks);
}
inline void nvshmem_finalize() {}
inline int nvshmem_my_pe() { return cpufree::emu::pes.pe; }
inline int nvshmem_n_pes() { return cpufree::emu::pes.count; }
inline void *nvshmem_malloc(size_t n) { return cpufree::emu::the_world().malloc(cpufree::emu::pes.pe, n); }
inline void nvshmem_free(void *p) { cpufree::emu::the_world().free(cpufree::emu::pes.pe, p); }
inline void *nvshmem_ptr(const void *p, int pe) { return cpufree::emu::the_world().ptr(p, pe); }
inline void nvshmem_barrier_all() { cpufree::emu::barrier_all(); }
inline void nvshmem_quiet() {}  // a put is complete when it returns
inline void nvshmem_fence() {}
inline void nvshmemx_barrier_all_on_stream(cudaStream_t) { cpufree::emu::barrier_all(); }
inline void nvshmemx_quiet_on_stream(cudaStream_t) {}

// Contiguous puts: the thread's own (nvshmem_putmem), a warp's (one thread in the emulation), a block's.
#define CPUFREE_EMU_PUTMEM(NAME, BY)                                                                      \
    template <typename D, typename S> inline void NAME(D dest, S src, size_t nbytes, int pe) {            \
        BY([&] { cpufree::emu::put_bytes(dest, src, nbytes, pe); });                                       \
    }                                                                                                     \
    template <typename D, typename S, typename F>                                                         \
    inline void NAME##_signal(D dest, S src, size_t nbytes, F flag, uint64_t value, int op, int pe) {      \
        BY([&] {                                                                                          \
            cpufree::emu::put_bytes(dest, src, nbytes, pe);                                               \
            cpufree::emu::signal(cpufree::emu::raw(flag), value, op == NVSHMEM_SIGNAL_ADD, pe);           \
        });                                                                                               \
    }
namespace cpufree::emu {
template <typename F> inline void by_thread(F work) { work(); }
}  // namespace cpufree::emu
#define CPUFREE_EMU_PUTMEM_FORMS(PREFIX, SUFFIX, BY)              \
    CPUFREE_EMU_PUTMEM(PREFIX##putmem##SUFFIX, BY)                \
    CPUFREE_EMU_PUTMEM(PREFIX##putmem_nbi##SUFFIX, BY)
CPUFREE_EMU_PUTMEM_FORMS(nvshmem_, , cpufree::emu::by_thread)
CPUFREE_EMU_PUTMEM_FORMS(nvshmemx_, _warp, cpufree::emu::by_thread)
CPUFREE_EMU_PUTMEM_FORMS(nvshmemx_, _block, cpufree::emu::by_block)
#undef CPUFREE_EMU_PUTMEM_FORMS
#undef CPUFREE_EMU_PUTMEM
// NVSHMEM spells the signalling forms nvshmemx_putmem_signal[_nbi]_block: the names above end in _signal
// (nvshmem_putmem_signal, the thread's own, is one of them).
#define CPUFREE_EMU_SIGNAL_NAME(NAME, FORM)                                                              \
    template <typename... A> inline void NAME(A... a) { FORM##_signal(a...); }
CPUFREE_EMU_SIGNAL_NAME(nvshmem_putmem_signal_nbi, nvshmem_putmem_nbi)
CPUFREE_EMU_SIGNAL_NAME(nvshmemx_putmem_signal_warp, nvshmemx_putmem_warp)
CPUFREE_EMU_SIGNAL_NAME(nvshmemx_putmem_signal_nbi_warp, nvshmemx_putmem_nbi_warp)
CPUFREE_EMU_SIGNAL_NAME(nvshmemx_putmem_signal_block, nvshmemx_putmem_block)
CPUFREE_EMU_SIGNAL_NAME(nvshmemx_putmem_signal_nbi_block, nvshmemx_putmem_nbi_block)
#undef CPUFREE_EMU_SIGNAL_NAME

template <typename F> inline void nvshmemx_signal_op(F flag, uint64_t value, int op, int pe) {
    cpufree::emu::signal(cpufree::emu::raw(flag), value, op == NVSHMEM_SIGNAL_ADD, pe);
}
template <typename F> inline uint64_t nvshmem_signal_wait_until(F flag, int cmp, uint64_t value) {
    return cpufree::emu::wait_until(cpufree::emu::raw(flag), cmp, value);
}

// Typed strided puts and element puts, and the reductions, of every type NVSHMEM names.
#define CPUFREE_EMU_TYPED(NAME, T)                                                                           \
    template <typename D, typename S>                                                                        \
    inline void nvshmem_##NAME##_iput(D dest, S src, ptrdiff_t dst, ptrdiff_t sst, size_t n, int pe) {       \
        cpufree::emu::put_elements((T *)cpufree::emu::raw(dest), (const T *)cpufree::emu::raw(src), dst, sst, \
                                   (long long)n, pe);                                                        \
    }                                                                                                        \
    template <typename D, typename S> inline void nvshmem_##NAME##_put(D dest, S src, size_t n, int pe) {   \
        cpufree::emu::put_elements((T *)cpufree::emu::raw(dest), (const T *)cpufree::emu::raw(src), 1, 1,    \
                                   (long long)n, pe);                                                        \
    }                                                                                                        \
    template <typename D> inline void nvshmem_##NAME##_p(D dest, T value, int pe) {                          \
        cpufree::emu::put_elements((T *)cpufree::emu::raw(dest), &value, 1, 1, 1, pe);                      \
    }                                                                                                        \
    CPUFREE_EMU_REDUCE(NAME, T, sum, cpufree::Op::Sum)                                                       \
    CPUFREE_EMU_REDUCE(NAME, T, max, cpufree::Op::Max)                                                       \
    CPUFREE_EMU_REDUCE(NAME, T, min, cpufree::Op::Min)                                                       \
    CPUFREE_EMU_REDUCE(NAME, T, prod, cpufree::Op::Product)
#define CPUFREE_EMU_REDUCE(NAME, T, OP, COMBINE)                                                             \
    template <typename D, typename S>                                                                        \
    inline int nvshmemx_##NAME##_##OP##_reduce_block(nvshmem_team_t, D dest, S src, size_t n) {              \
        cpufree::emu::by_block([&] {                                                                         \
            cpufree::emu::reduce((T *)cpufree::emu::raw(dest), (const T *)cpufree::emu::raw(src), n,         \
                                 [](T a, T b) { return cpufree::combine<COMBINE>(a, b); });                  \
        });                                                                                                  \
        return 0;                                                                                            \
    }                                                                                                        \
    template <typename D, typename S>                                                                        \
    inline int nvshmem_##NAME##_##OP##_reduce(nvshmem_team_t, D dest, S src, size_t n) {                     \
        cpufree::emu::reduce((T *)cpufree::emu::raw(dest), (const T *)cpufree::emu::raw(src), n,             \
                             [](T a, T b) { return cpufree::combine<COMBINE>(a, b); });                      \
        return 0;                                                                                            \
    }
CPUFREE_EMU_TYPED(double, double)
CPUFREE_EMU_TYPED(float, float)
CPUFREE_EMU_TYPED(int64, int64_t)
CPUFREE_EMU_TYPED(int32, int32_t)
CPUFREE_EMU_TYPED(int16, int16_t)
CPUFREE_EMU_TYPED(int8, int8_t)
CPUFREE_EMU_TYPED(uint64, uint64_t)
CPUFREE_EMU_TYPED(uint32, uint32_t)
CPUFREE_EMU_TYPED(uint16, uint16_t)
CPUFREE_EMU_TYPED(uint8, uint8_t)
#undef CPUFREE_EMU_TYPED
#undef CPUFREE_EMU_REDUCE

// ---- cpufree::shmem: the helpers of shmem.cuh ------------------------------------------------------------
namespace cpufree {
namespace shmem {

template <typename F> inline void wait_or_trap(F flag, uint64_t expected, const char *, unsigned long long) {
    emu::wait_until(emu::raw(flag), NVSHMEM_CMP_GE, expected);
}

// The last of `n` blocks to count itself done on `counter` (see shmem.cuh); the count orders like a signal.
inline bool last_of(unsigned int *counter, unsigned int n) {
    if (n == 1) return true;
#if defined(CPUFREE_RACE_CHECK)
    race::checker().count(race::self, counter);
#endif
    const bool last = ++*counter == n;
    if (last) *counter = 0;
    return last;
}

template <typename P> inline P gather_slot(P slots, uint64_t round, int pe, int npes, long long n) {
    return slots + ((long long)(round & 1) * npes + pe) * n;
}
template <typename P, typename R, typename I>
inline uint64_t gather_begin(P slots, R round, I in, int me, int npes, long long n) {
    using T = typename emu::element_of<P>::type;
    const uint64_t r = (uint64_t)++*round;
    P mine = gather_slot(slots, r, me, npes, n);
    for (long long i = 0; i < n; ++i) mine[i] = T(in[i]);
    return r;
}
template <Op op, typename O, typename P> inline void gather_combine(O out, P slots, uint64_t round, int npes, long long n) {
    using T = typename emu::element_of<P>::type;
    for (long long i = 0; i < n; ++i) {
        T acc = T(gather_slot(slots, round, 0, npes, n)[i]);
        for (int p = 1; p < npes; ++p) acc = combine<op>(acc, T(gather_slot(slots, round, p, npes, n)[i]));
        out[i] = acc;
    }
}
// The library's form of the gather: a put with signal to every other PE, then the waits for theirs.
template <typename P, typename F> inline void gather_send(P slots, F flags, uint64_t round, int me, int npes, long long n) {
    using T = typename emu::element_of<P>::type;
    P mine = gather_slot(slots, round, me, npes, n);
    F flag = flags + (long long)((round & 1) * npes + me);
    for (int p = 0; p < npes; ++p)
        if (p != me) nvshmem_putmem_signal_nbi(mine, mine, n * sizeof(T), flag, round, NVSHMEM_SIGNAL_SET, p);
}
template <typename F> inline void gather_receive(F flags, uint64_t round, int me, int npes) {
    for (int p = 0; p < npes; ++p)
        if (p != me) nvshmem_signal_wait_until(flags + (long long)((round & 1) * npes + p), NVSHMEM_CMP_GE, round);
}

// Direct stores (shmem_transport="p2p"): the kernel's own stores through the peer's address.
namespace p2p {
template <typename T> inline T *peer(T *symmetric, int pe) { return emu::on_pe(symmetric, pe); }
#if defined(CPUFREE_RACE_CHECK)
template <typename T> inline race::ptr<T> peer(const race::ptr<T> &symmetric, int pe) {
    return race::ptr<T>(emu::on_pe(symmetric.raw(), pe));
}
#endif
#ifndef CPUFREE_P2P_PER_THREAD
#define CPUFREE_P2P_PER_THREAD 1
#endif
#ifndef CPUFREE_P2P_PER_THREAD_HIDDEN
#define CPUFREE_P2P_PER_THREAD_HIDDEN 4
#endif
inline unsigned int blocks_for(long long n, unsigned int parts, int per_thread) {
    const long long per_block = (long long)per_thread * blockDim.x;
    return (unsigned int)min_<long long>(parts, max_<long long>(1, (n + per_block - 1) / per_block));
}
template <typename F> inline void wait_until_ge(F flag, uint64_t value) {
    emu::wait_until(emu::raw(flag), NVSHMEM_CMP_GE, value);
}
inline void quiet() {}
// `flag` is this PE's address of the flag; the signal goes to its copy on PE `pe`.
template <typename F> inline void signal_set(F flag, uint64_t value, int pe) {
    emu::signal(emu::raw(flag), value, false, pe);
}
template <typename D, typename S, typename At>
inline void copy(D dest, S src, long long first, long long end, long long step, At at) {
    for (long long k = first; k < end; k += step) {
        long long from, to;
        at(k, from, to);
        dest[to] = src[from];
    }
}
template <typename P, typename F> inline void gather_send(P slots, F flags, uint64_t round, int me, int npes, long long n) {
    P mine = gather_slot(slots, round, me, npes, n);
    for (int p = 0; p < npes; ++p) {
        if (p == me) continue;
        P there = peer(mine, p);
        for (long long i = 0; i < n; ++i) there[i] = mine[i];
    }
    F flag = flags + (long long)((round & 1) * npes + me);
    for (int p = 0; p < npes; ++p)
        if (p != me) signal_set(flag, round, p);
}
template <typename F> inline void gather_receive(F flags, uint64_t round, int me, int npes) {
    for (int p = 0; p < npes; ++p)
        if (p != me) wait_until_ge(flags + (long long)((round & 1) * npes + p), round);
}
}  // namespace p2p

}  // namespace shmem
}  // namespace cpufree

// ---- launcher hooks (host) ---------------------------------------------------------------------------------
static inline cudaError_t cpufree_shmem_workspace_malloc(void **ptr, size_t n) {
    *ptr = nvshmem_malloc(n ? n : 1);  // every PE allocates the same size, in the same order
    return *ptr ? cudaSuccess : cudaErrorInvalidValue;
}
static inline cudaError_t cpufree_shmem_workspace_free(void *ptr) {
    nvshmem_free(ptr);
    return cudaSuccess;
}
// The workspace zeroed, then every PE meets the others: none signals a flag before its owner has reset it.
static inline cudaError_t cpufree_shmem_before_launch(void *ws, size_t n) {
    if (ws && n) std::memset(ws, 0, n);
    return cpufree::emu::meet_all() ? cudaSuccess : cudaErrorPeStopped;
}
static inline cudaError_t cpufree_shmem_after_launch() {
    return cpufree::emu::meet_all() ? cudaSuccess : cudaErrorPeStopped;
}

#undef CPUFREE_LAUNCH_COOPERATIVE
#define CPUFREE_LAUNCH_COOPERATIVE(kernel, grid, block, args, smem, stream) cpufree::emu::launch(kernel, args, grid, block)
#define CPUFREE_WORKSPACE_MALLOC(ptr, n) cpufree_shmem_workspace_malloc((void **)(ptr), n)
#define CPUFREE_WORKSPACE_FREE(ptr) cpufree_shmem_workspace_free(ptr)
#define CPUFREE_BEFORE_LAUNCH(ws, n) cpufree_shmem_before_launch(ws, n)
#define CPUFREE_AFTER_LAUNCH() cpufree_shmem_after_launch()

// ---- host entry points of the emulation (the Python runtime, runtime/emulated_pes.py) ----------------------
// A new run of the PEs: no hang, `timeout_s` the longest a wait may last.
extern "C" void cpufree_emu_reset(double timeout_s) {
    cpufree::emu::the_world().reset(timeout_s);
#if defined(CPUFREE_RACE_CHECK)
    cpufree::race::checker().forget_hang();
#endif
}
// Stops the run (a PE failed on the host): the waits of the others end.
extern "C" void cpufree_emu_abort() { cpufree::emu::the_world().abort("", false); }
// What made the run stop other than a hang (a put to a PE that is not one; "" when nothing).
extern "C" const char *cpufree_emu_failure() {
    static std::string text;
    text = cpufree::emu::the_world().failure();
    return text.c_str();
}
// Names this PE's buffer `base` (elements of `element` bytes) in the reports of waits.
extern "C" void cpufree_emu_name(const void *base, const char *label, size_t element) {
    cpufree::emu::the_world().name(base, label, element, cpufree::emu::pes.pe);
}
// The hang of the last run ("" when none): for a wait for a signal, "pe\tblock\tsite\tstep\n" first.
extern "C" const char *cpufree_emu_hang() {
    static std::string text;
#if defined(CPUFREE_RACE_CHECK)
    const std::string &stuck = cpufree::race::checker().stuck();
    if (!stuck.empty()) {
        text = stuck + "\n" + cpufree::race::checker().report();
        return text.c_str();
    }
#endif
    text = cpufree::emu::the_world().hang();
    return text.c_str();
}
