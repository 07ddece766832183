// Race checking for the host emulation (-DCPUFREE_EMULATE -DCPUFREE_RACE_CHECK, compile(..., race_check=...)).
//
// The kernel runs as CPUFREE_RACE_BLOCKS blocks of CPUFREE_RACE_THREADS threads, each virtual thread an OS
// thread, but only one of them runs at a time: a thread runs until it reaches a grid sync, a block barrier, a wait
// for a signal, a PE barrier or its end, then hands the turn to another runnable thread chosen by the order
// (forward: the lowest number, reverse: the highest, shuffle: a seeded random one). Between barriers the threads'
// work is therefore interleaved in an adversarial but reproducible order, and the checker's own bookkeeping needs no
// locks. Block-part barriers (runtime.cuh's part_sync) are barriers among the threads of a range of blocks.
//
// Several PEs (a program that communicates, emulated with compile(..., pes=P)) run their kernels under one checker:
// the virtual threads of PE p are numbered p * (blocks * threads) + ..., a grid sync orders the threads of its own PE
// only, and the other orderings between PEs come from synchronisation (racecheck_clocks.h): a signal (a put with
// signal, a signal op) observed by a wait orders the signaller's earlier accesses, the put's writes included, before
// the waiter's later ones; a PE barrier or a collective reduction orders everything before it on every PE before
// everything after it.
//
// Every element access through a kernel array (the generator declares them as race::ptr in this mode) is
// recorded with the thread, its block, the step and the synchronisation epochs. Two accesses of one element by
// different threads conflict when at least one writes, they are not both atomic, and nothing orders them:
// no grid sync between them, no block barrier either when they are in the same block, no block-part barrier
// that both blocks took part in, the first block after its access and the second before its own, and no chain of
// barriers and signals (the vector clocks). Tiles are one thread in the emulation, so tile barriers order nothing
// that the checker could see. A barrier or a wait that can never complete (some threads wait at it while the
// others have ended or wait elsewhere) is reported as a hang.
#pragma once
#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "racecheck_clocks.h"

#ifndef CPUFREE_RACE_BLOCKS
#define CPUFREE_RACE_BLOCKS 3
#endif
#ifndef CPUFREE_RACE_THREADS
#define CPUFREE_RACE_THREADS 4
#endif
#ifndef CPUFREE_RACE_ORDER  // the order of a launch unless cpufree_race_order chose another
#define CPUFREE_RACE_ORDER 2
#endif

namespace cpufree::race {

enum Order { Forward = 0, Reverse = 1, Shuffle = 2 };

struct Access {
    int thread = -1, block = -1, pe = 0;  // block: numbered across the PEs, like the thread
    std::uint64_t grid_epoch = 0, block_epoch = 0;  // grid_epoch: of the thread's own PE
    const char *step = "";
    bool atomic = false;
    std::uint64_t parts = 0;  // the block-part barriers completed in the launch before the access
    std::uint32_t clock = 0;  // the thread's own entry of its vector clock at the access
};

struct Shadow {
    Access write;            // the last write (thread -1: none yet)
    std::vector<Access> reads;  // reads since then that not every later access is ordered after
};

struct Array {
    std::string name;
    std::size_t element;
    int pe;  // the PE whose memory it is (the PE whose kernel named it)
};

// A thread's wait for a signal: the flag, the condition and the step, for the hang report.
struct Wait {
    const volatile std::uint64_t *flag = nullptr;
    int cmp = 0;
    std::uint64_t value = 0;
    const char *step = "";
};

// Thrown in the virtual threads that wait at a barrier that can never complete: unwinds the kernel.
struct Abandoned {};

class Checker {
  public:
    // ---- set-up and results (the launcher's thread, no virtual thread running) ----
    // `pes` kernels of `blocks` blocks of `threads` threads each run under this launch.
    void start(int blocks, int threads, int order, unsigned seed, int pes = 1) {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            blocks = std::max(blocks, offered_);
            offered_ = 0;
        }
        blocks_ = blocks;
        threads_ = threads;
        pes_ = pes;
        per_pe_ = blocks * threads;
        order_ = order;
        rng_.seed(seed);
        state_.assign(pes * per_pe_, Runnable);
        waits_.assign(pes * per_pe_, Wait{});
        block_arrived_.assign(pes * blocks, 0);
        block_epoch_.assign(pes * blocks, 0);
        grid_arrived_.assign(pes, 0);
        grid_epoch_.assign(pes, 0);
        part_waiting_.clear();
        pe_waiting_.clear();
        part_seq_ = 0;
        last_common_.assign((std::size_t)pes * blocks * pes * blocks, 0);
        clocks_.start(pes * per_pe_);
        misuse_.clear();
        running_ = -1;
        abandoned_ = false;
        shadow_.clear();
        conflicts_.clear();
        seen_.clear();
        total_conflicts_ = 0;
        between_pes_ = false;
        hang_.clear();
        stuck_.clear();
    }
    // A PE's launcher's grid, before the checker starts: start() runs the largest one offered (on every PE).
    void offer_blocks(int blocks) {
        std::lock_guard<std::mutex> lock(mutex_);
        offered_ = std::max(offered_, blocks);
    }
    int blocks() const { return blocks_; }
    void set_order(int order, unsigned seed) {
        next_order_ = order;
        next_seed_ = seed;
    }
    int order() const { return next_order_; }
    unsigned seed() const { return next_seed_; }
    std::string report() const {
        std::string out = hang_ + misuse_;
        for (const std::string &c : conflicts_) out += c + "\n";
        if (total_conflicts_ > conflicts_.size())
            out += "... and " + std::to_string(total_conflicts_ - conflicts_.size()) + " more conflicting accesses\n";
        if (between_pes_)
            out += "between PEs: a put may overwrite what its target PE reads only after that PE said it is done "
                   "reading (a signal the putter waits for, or a PE barrier), and a PE may read what a put brings "
                   "only after its SignalWait for the put's signal\n";
        return out;
    }
    // The first thread that waits for a signal or at a PE barrier in a hang, as "pe\tblock\tsite\tstep\n" and the
    // whole hang report after it; empty when the hang (if any) involved no such wait.
    const std::string &stuck() const { return stuck_; }
    void forget_hang() { stuck_.clear(); }
    bool clean() const { return hang_.empty() && misuse_.empty() && total_conflicts_ == 0; }
    int pes() const { return pes_; }

    // ---- virtual threads ----
    void enter(int id) {
        std::unique_lock<std::mutex> lock(mutex_);
        if (running_ < 0 && id == 0) pass(lock);  // the first thread picks who starts
        wait_turn(lock, id);
    }
    void leave(int id) {
        std::unique_lock<std::mutex> lock(mutex_);
        state_[id] = Done;
        pass(lock);
    }
    void grid_barrier(int id) {
        std::unique_lock<std::mutex> lock(mutex_);
        const int pe = id / per_pe_;
        state_[id] = AtGrid;
        if (++grid_arrived_[pe] == per_pe_) {
            grid_arrived_[pe] = 0;
            ++grid_epoch_[pe];
            for (int b = pe * blocks_; b < (pe + 1) * blocks_; ++b) ++block_epoch_[b];
            complete(pe * per_pe_, (pe + 1) * per_pe_);
        }
        pass(lock);
        wait_turn(lock, id);
    }
    void block_barrier(int id) {
        std::unique_lock<std::mutex> lock(mutex_);
        const int b = id / threads_;
        state_[id] = AtBlock;
        if (++block_arrived_[b] == threads_) {
            block_arrived_[b] = 0;
            ++block_epoch_[b];
            complete(b * threads_, (b + 1) * threads_);
        }
        pass(lock);
        wait_turn(lock, id);
    }
    // A barrier among all threads of blocks [lo, hi) of the thread's PE, told apart from others by `key` and the
    // range. Once all have arrived it completes: each of the blocks passes a block barrier, and accesses of any two
    // of them before it are ordered before their accesses after it.
    void part_barrier(int id, const void *key, int lo, int hi) {
        std::unique_lock<std::mutex> lock(mutex_);
        const int local = (id % per_pe_) / threads_, base = (id / per_pe_) * blocks_;
        if (local < lo || local >= hi || lo < 0 || hi > blocks_) {
            if (misuse_.empty())
                misuse_ = "block-part barrier of blocks [" + std::to_string(lo) + ", " + std::to_string(hi) +
                          ") reached by thread " + std::to_string(id % threads_) + " of block " +
                          std::to_string(local) + ", which is not one of them\n";
            return;
        }
        if (hi - lo == 1) {  // one block: a block barrier, as on the device
            lock.unlock();
            block_barrier(id);
            return;
        }
        state_[id] = AtPart;
        const auto at = std::make_tuple(reinterpret_cast<std::uintptr_t>(key), base + lo, base + hi);
        int &arrived = part_waiting_[at];
        if (++arrived == (hi - lo) * threads_) {
            part_waiting_.erase(at);
            const std::uint64_t seq = ++part_seq_;
            for (int x = base + lo; x < base + hi; ++x) {
                ++block_epoch_[x];
                for (int y = base + lo; y < base + hi; ++y) last_common_[(std::size_t)x * all_blocks() + y] = seq;
            }
            complete((base + lo) * threads_, (base + hi) * threads_);
        }
        pass(lock);
        wait_turn(lock, id);
    }

    // ---- between PEs (only the running virtual thread calls these) ----
    // Sets (`add`: adds to) a flag in any PE's memory: a release, which a wait that sees the value acquires.
    void signal(int id, volatile std::uint64_t *flag, std::uint64_t value, bool add) {
        std::unique_lock<std::mutex> lock(mutex_);
        *flag = add ? *flag + value : value;
        clocks_.release(id, flag, add);
        for (std::size_t t = 0; t < state_.size(); ++t)
            if (state_[t] == AtSignal && waits_[t].flag == flag) state_[t] = Runnable;  // it looks again
    }
    // Waits until `ready(*flag)` holds (the condition `cmp` and `value` are for the report), then acquires what the
    // flag's last signal released.
    template <typename Ready>
    void wait_signal(int id, volatile std::uint64_t *flag, Ready ready, int cmp, std::uint64_t value, const char *at) {
        std::unique_lock<std::mutex> lock(mutex_);
        while (!ready(*flag)) {
            state_[id] = AtSignal;
            waits_[id] = Wait{flag, cmp, value, at};
            pass(lock);
            wait_turn(lock, id);
        }
        clocks_.acquire(id, flag);
    }
    // An atomic read-modify-write of a counter that orders (acquire and release) like a signal: the blocks that
    // share a put count themselves done on it, and the last one's signal carries all their puts.
    void count(int id, const volatile void *counter) {
        std::unique_lock<std::mutex> lock(mutex_);
        clocks_.release(id, counter, true);
        clocks_.acquire(id, counter);
    }
    // One thread of every PE meets the others here (`key`: which collective): everything before it on any of them is
    // ordered before everything after it on all of them.
    void pe_barrier(int id, const void *key, const char *at) {
        std::unique_lock<std::mutex> lock(mutex_);
        std::vector<int> &arrived = pe_waiting_[reinterpret_cast<std::uintptr_t>(key)];
        arrived.push_back(id);
        state_[id] = AtPe;
        waits_[id] = Wait{nullptr, 0, 0, at};
        if ((int)arrived.size() == pes_) {
            clocks_.meet(arrived);
            for (int t : arrived) state_[t] = Runnable;
            pe_waiting_.erase(reinterpret_cast<std::uintptr_t>(key));
        }
        pass(lock);
        wait_turn(lock, id);
    }

    // ---- accesses (only the running virtual thread calls these) ----
    void name(const void *base, const char *label, std::size_t element, int id) {
        arrays_[reinterpret_cast<std::uintptr_t>(base)] = Array{label, element, per_pe_ ? id / per_pe_ : 0};
    }
    void access(const void *where, bool write, bool atomic, int id, const char *step) {
        const int b = id / threads_, pe = id / per_pe_;
        const Access now{id, b, pe, grid_epoch_[pe], block_epoch_[b], step, atomic, part_seq_, clocks_.own(id)};
        Shadow &s = shadow_[reinterpret_cast<std::uintptr_t>(where)];
        if (s.write.thread >= 0 && !ordered(s.write, now) && !(atomic && s.write.atomic))
            conflict(where, write ? "write after write" : "read after write", s.write, now);
        if (write) {
            for (const Access &r : s.reads)
                if (!ordered(r, now) && !(atomic && r.atomic)) conflict(where, "write after read", r, now);
            s.reads.clear();
            s.write = now;
            return;
        }
        // keep one read per thread and epoch; reads ordered before this one need not be kept (a later access that
        // they are not ordered before is not ordered after this one either)
        std::size_t keep = 0;
        bool present = false;
        for (const Access &r : s.reads) {
            if (r.pe == pe && r.grid_epoch < now.grid_epoch) continue;
            present |= r.thread == id && r.block_epoch == now.block_epoch && r.clock == now.clock &&
                       r.atomic == atomic;
            s.reads[keep++] = r;
        }
        s.reads.resize(keep);
        if (!present) s.reads.push_back(now);
    }

    // The array and element at `where`, with the PE whose memory it is when several PEs run.
    std::string where_text(const void *where) const {
        const auto p = reinterpret_cast<std::uintptr_t>(where);
        auto it = arrays_.upper_bound(p);
        if (it == arrays_.begin()) return "an unnamed location";
        --it;
        std::string text = "'" + it->second.name + "' element " + std::to_string((p - it->first) / it->second.element);
        return pes_ > 1 ? text + " of PE " + std::to_string(it->second.pe) : text;
    }

  private:
    enum State { Runnable, AtGrid, AtBlock, AtPart, AtSignal, AtPe, Done };

    int all_blocks() const { return pes_ * blocks_; }

    // The threads [lo, hi) passed a barrier: all runnable again, each ordered after what any of them did before.
    void complete(int lo, int hi) {
        std::vector<int> members;
        for (int t = lo; t < hi; ++t) {
            state_[t] = Runnable;
            members.push_back(t);
        }
        clocks_.meet(members);
    }

    // `now` is the running thread's access, so a part barrier of both blocks completed after `before` (the
    // latest one's number is past the count at `before`) lies between them. Accesses of other PEs (or ordered
    // through another PE) are compared by their vector clocks.
    bool ordered(const Access &before, const Access &now) const {
        if (before.thread == now.thread) return true;
        if (before.pe == now.pe &&
            (before.grid_epoch < now.grid_epoch ||
             (before.block == now.block && before.block_epoch < now.block_epoch) ||
             last_common_[(std::size_t)before.block * all_blocks() + now.block] > before.parts))
            return true;
        return clocks_.before(before.thread, before.clock, now.thread);
    }

    std::string who(const Access &a) const {
        std::string text = "thread " + std::to_string(a.thread % threads_) + " of block " +
                           std::to_string(a.block % blocks_);
        return pes_ > 1 ? text + " of PE " + std::to_string(a.pe) : text;
    }

    void conflict(const void *where, const char *kind, const Access &a, const Access &b) {
        ++total_conflicts_;
        between_pes_ |= a.pe != b.pe;
        const std::string text = where_text(where);
        const char *missing = a.pe != b.pe ? "signal that the second waited for, PE barrier or collective"
                              : a.block == b.block ? "block barrier or grid sync"
                              : part_seq_       ? "grid sync or block-part barrier of both blocks"
                                                : "grid sync";
        // One line per array, kind, pair of steps and missing synchronisation: a missing grid sync is listed even
        // when the same steps also conflict within a block (whichever the interleaving met first).
        const std::string key =
            text.substr(0, text.find(" element")) + "|" + kind + "|" + a.step + "|" + b.step + "|" + missing;
        if (!seen_.insert({key, true}).second || conflicts_.size() >= 20) return;
        conflicts_.push_back(std::string(kind) + " on " + text + ": " + (a.atomic ? "atomic " : "") + "access by " +
                             who(a) + " in step '" + a.step + "', then by " + who(b) + " in step '" + b.step +
                             "' with no " + missing + " between them");
    }

    int pick() {
        std::vector<int> ready;
        for (int t = 0; t < (int)state_.size(); ++t)
            if (state_[t] == Runnable) ready.push_back(t);
        if (ready.empty()) return -1;
        if (order_ == Forward) return ready.front();
        if (order_ == Reverse) return ready.back();
        return ready[std::uniform_int_distribution<std::size_t>(0, ready.size() - 1)(rng_)];
    }

    // What a thread waits for in a hang: its place and the wait.
    std::string waiting_text(int t) const {
        const Wait &w = waits_[t];
        std::string text = "thread " + std::to_string(t % threads_) + " of block " +
                           std::to_string((t % per_pe_) / threads_) + " of PE " + std::to_string(t / per_pe_);
        if (state_[t] == AtPe) return text + " waits at a PE barrier or collective in step '" + w.step + "'";
        return text + " waits in step '" + w.step + "' for " + where_text((const void *)w.flag) + " to be " +
               (w.cmp == 5 ? ">= " : "compared with ") + std::to_string(w.value) + " (it is " +
               std::to_string(*w.flag) + "), which no PE will signal any more";
    }

    // The hang report: what the threads wait at; with waits for signals or PE barriers, the first one's place
    // (stuck_) for the host's KernelHang.
    void report_hang() {
        int grid = 0, block = 0, part = 0, signal = 0, pe = 0, done = 0;
        for (State s : state_)
            (s == AtGrid ? grid : s == AtBlock ? block : s == AtPart ? part : s == AtSignal ? signal
                                                                     : s == AtPe     ? pe
                                                                                     : done)++;
        hang_ = "hang: the kernel would never finish: " + std::to_string(grid) + " threads wait at a grid sync, " +
                std::to_string(block) + " at a block barrier, " +
                (part ? std::to_string(part) + " at a block-part barrier, " : std::string()) +
                (signal ? std::to_string(signal) + " for a signal, " : std::string()) +
                (pe ? std::to_string(pe) + " at a PE barrier, " : std::string()) + std::to_string(done) +
                " have ended (every thread of the grid must reach each grid sync, every thread of a block each "
                "block barrier" +
                (part ? ", every thread of a part's blocks each of its barriers" : "") +
                (signal || pe ? ", every wait for a signal needs a PE that signals it, every PE each PE barrier"
                              : "") +
                ")\n";
        int shown = 0;
        for (int t = 0; t < (int)state_.size() && shown < 8; ++t) {
            if (state_[t] != AtSignal && state_[t] != AtPe) continue;
            const std::string line = waiting_text(t);
            hang_ += "  " + line + "\n";
            if (stuck_.empty()) {
                const std::string site = state_[t] == AtPe ? "a PE barrier"
                                                           : "SignalWait on " + where_text((const void *)waits_[t].flag);
                stuck_ = std::to_string(t / per_pe_) + "\t" + std::to_string((t % per_pe_) / threads_) + "\t" + site +
                         "\t" + waits_[t].step + "\n" + line;
            }
            ++shown;
        }
    }

    // Hands the turn to the next runnable thread; with none, either every thread has ended or the barriers
    // and waits they are at can never complete.
    void pass(std::unique_lock<std::mutex> &) {
        running_ = pick();
        if (running_ < 0) {
            bool waiting = false;
            for (State s : state_) waiting |= s != Done;
            if (waiting && !abandoned_) {
                abandoned_ = true;
                report_hang();
            }
        }
        cv_.notify_all();
    }

    void wait_turn(std::unique_lock<std::mutex> &lock, int id) {
        cv_.wait(lock, [&] { return running_ == id || abandoned_; });
        if (abandoned_) throw Abandoned{};
    }

    int offered_ = 0;  // the largest grid offered for the next start
    int blocks_ = 1, threads_ = 1, pes_ = 1, per_pe_ = 1, order_ = Forward, next_order_ = CPUFREE_RACE_ORDER;
    unsigned next_seed_ = 1;
    std::mt19937 rng_;
    std::mutex mutex_;
    std::condition_variable cv_;
    std::vector<State> state_;
    std::vector<Wait> waits_;
    std::vector<int> block_arrived_;
    std::vector<std::uint64_t> block_epoch_;
    std::vector<int> grid_arrived_;
    std::vector<std::uint64_t> grid_epoch_;
    std::map<std::tuple<std::uintptr_t, int, int>, int> part_waiting_;  // arrivals at each pending part barrier
    std::map<std::uintptr_t, std::vector<int>> pe_waiting_;              // arrivals at each pending PE barrier
    std::uint64_t part_seq_ = 0;              // part barriers completed in the launch
    std::vector<std::uint64_t> last_common_;  // [a * blocks + b]: the latest of them that blocks a and b took part in
    Clocks clocks_;
    std::string misuse_;
    int running_ = -1;
    bool abandoned_ = false;
    std::unordered_map<std::uintptr_t, Shadow> shadow_;
    std::map<std::uintptr_t, Array> arrays_;
    std::vector<std::string> conflicts_;
    std::unordered_map<std::string, bool> seen_;
    std::size_t total_conflicts_ = 0;
    bool between_pes_ = false;  // a conflict of two PEs' accesses
    std::string hang_, stuck_;
};

// The checker of this library, or the one that every PE of a multi-PE emulation shares (shared_checker(), set when
// the library joins the PEs: each PE's kernel is a copy of the library of its own, as each GPU has its own device
// memory, and their threads are scheduled by one checker).
inline Checker *&shared_checker() {
    static Checker *shared = nullptr;
    return shared;
}
inline Checker &checker() {
    static Checker own;
    return shared_checker() ? *shared_checker() : own;
}

// The virtual thread running on this OS thread, and the step it is in (set by the generated code).
inline thread_local int self = 0;
inline thread_local const char *step = "kernel start";
inline thread_local bool inside = false;  // this OS thread is a virtual thread (not a launcher's)

inline void at(const char *label) { step = label; }

// An element of a kernel array: reading it (conversion to T) and writing it (assignment) are recorded.
template <typename T> class ptr;
template <typename T> class ref {
  public:
    explicit ref(T *p) : p_(p) {}
    operator T() const {
        checker().access(p_, false, false, self, step);
        return *p_;
    }
    ref &operator=(const T &v) {
        checker().access(p_, true, false, self, step);
        *p_ = v;
        return *this;
    }
    ref &operator=(const ref &o) { return *this = T(o); }
    template <typename U> ref &operator+=(const U &v) { return *this = T(*this) + v; }
    template <typename U> ref &operator-=(const U &v) { return *this = T(*this) - v; }
    template <typename U> ref &operator*=(const U &v) { return *this = T(*this) * v; }
    template <typename U> ref &operator/=(const U &v) { return *this = T(*this) / v; }
    template <typename U> ref &operator%=(const U &v) { return *this = T(*this) % v; }
    template <typename U> ref &operator|=(const U &v) { return *this = T(*this) | v; }
    template <typename U> ref &operator&=(const U &v) { return *this = T(*this) & v; }
    template <typename U> ref &operator^=(const U &v) { return *this = T(*this) ^ v; }
    ref &operator++() { return *this = T(*this) + T(1); }
    ref &operator--() { return *this = T(*this) - T(1); }
    T operator++(int) { T old = *this; *this = old + T(1); return old; }
    T operator--(int) { T old = *this; *this = old - T(1); return old; }
    ptr<T> operator&() const { return ptr<T>(p_); }
    T *raw() const { return p_; }

  private:
    T *p_;
};

// A kernel array in race-checking mode: indexing yields recorded elements; arithmetic keeps the checking.
template <typename T> class ptr {
  public:
    ptr(T *p = nullptr) : p_(p) {}
    ref<T> operator[](long long i) const { return ref<T>(p_ + i); }
    ref<T> operator*() const { return ref<T>(p_); }
    ptr operator+(long long i) const { return ptr(p_ + i); }
    ptr operator-(long long i) const { return ptr(p_ - i); }
    long long operator-(const ptr &o) const { return p_ - o.p_; }
    explicit operator bool() const { return p_ != nullptr; }
    T *raw() const { return p_; }

  private:
    T *p_;
};

template <typename T> inline void name(const ptr<T> &p, const char *label) {
    checker().name(p.raw(), label, sizeof(T), self);
}

// A read-modify-write that the device does atomically: atomic accesses conflict only with plain ones.
template <typename T, typename F> inline void atomic_update(const ptr<T> &p, F update) {
    checker().access(p.raw(), true, true, self, step);
    *p.raw() = update(*p.raw());
}

// Kernel arguments: the launcher passes raw pointers, the kernel takes race::ptr.
template <typename A> struct argument {
    static A get(void *p) { return *static_cast<A *>(p); }
};
template <typename T> struct argument<ptr<T>> {
    static ptr<T> get(void *p) { return ptr<T>(*static_cast<T **>(p)); }
};

}  // namespace cpufree::race

template <typename T> inline T __ldg(cpufree::race::ptr<T> p) { return p[0]; }
