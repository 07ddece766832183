// Race checking for the host emulation (-DCPUFREE_EMULATE -DCPUFREE_RACE_CHECK, compile(..., race_check=...)).
//
// The kernel runs as CPUFREE_RACE_BLOCKS blocks of CPUFREE_RACE_THREADS threads, each virtual thread an OS
// thread, but only one of them runs at a time: a thread runs until it reaches a grid sync, a block barrier or
// its end, then hands the turn to another runnable thread chosen by the order (forward: the lowest number,
// reverse: the highest, shuffle: a seeded random one). Between barriers the threads' work is therefore
// interleaved in an adversarial but reproducible order, and the checker's own bookkeeping needs no locks.
// Block-part barriers (runtime.cuh's part_sync) are barriers among the threads of a range of blocks.
//
// Every element access through a kernel array (the generator declares them as race::ptr in this mode) is
// recorded with the thread, its block, the step and the synchronisation epochs. Two accesses of one element by
// different threads conflict when at least one writes, they are not both atomic, and no barrier orders them:
// no grid sync between them, no block barrier either when they are in the same block, and no block-part barrier
// that both blocks took part in, the first block after its access and the second before its own. Tiles are one thread
// in the emulation, so tile barriers order nothing that the checker could see. A barrier that can never
// complete (some threads wait at it while the others have ended or wait at another) is reported as a hang.
#pragma once
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
    int thread = -1, block = -1;
    std::uint64_t grid_epoch = 0, block_epoch = 0;
    const char *step = "";
    bool atomic = false;
    std::uint64_t parts = 0;  // the block-part barriers completed in the launch before the access
};

struct Shadow {
    Access write;            // the last write (thread -1: none yet)
    std::vector<Access> reads;  // reads since then that not every later access is ordered after
};

struct Array {
    std::string name;
    std::size_t element;
};

// Thrown in the virtual threads that wait at a barrier that can never complete: unwinds the kernel.
struct Abandoned {};

class Checker {
  public:
    // ---- set-up and results (the launcher's thread, no virtual thread running) ----
    void start(int blocks, int threads, int order, unsigned seed) {
        blocks_ = blocks;
        threads_ = threads;
        order_ = order;
        rng_.seed(seed);
        state_.assign(blocks * threads, Runnable);
        block_arrived_.assign(blocks, 0);
        block_epoch_.assign(blocks, 0);
        grid_arrived_ = 0;
        grid_epoch_ = 0;
        part_waiting_.clear();
        part_seq_ = 0;
        last_common_.assign((std::size_t)blocks * blocks, 0);
        misuse_.clear();
        running_ = -1;
        abandoned_ = false;
        shadow_.clear();
        conflicts_.clear();
        seen_.clear();
        total_conflicts_ = 0;
        hang_.clear();
    }
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
        return out;
    }
    bool clean() const { return hang_.empty() && misuse_.empty() && total_conflicts_ == 0; }

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
        state_[id] = AtGrid;
        if (++grid_arrived_ == (int)state_.size()) {
            grid_arrived_ = 0;
            ++grid_epoch_;
            for (auto &e : block_epoch_) ++e;
            for (auto &s : state_) s = Runnable;
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
            for (int t = b * threads_; t < (b + 1) * threads_; ++t) state_[t] = Runnable;
        }
        pass(lock);
        wait_turn(lock, id);
    }
    // A barrier among all threads of blocks [lo, hi), told apart from others by `key` and the range. Once all
    // have arrived it completes: each of the blocks passes a block barrier, and accesses of any two of them
    // before it are ordered before their accesses after it.
    void part_barrier(int id, const void *key, int lo, int hi) {
        std::unique_lock<std::mutex> lock(mutex_);
        const int b = id / threads_;
        if (b < lo || b >= hi || lo < 0 || hi > blocks_) {
            if (misuse_.empty())
                misuse_ = "block-part barrier of blocks [" + std::to_string(lo) + ", " + std::to_string(hi) +
                          ") reached by thread " + std::to_string(id % threads_) + " of block " +
                          std::to_string(b) + ", which is not one of them\n";
            return;
        }
        if (hi - lo == 1) {  // one block: a block barrier, as on the device
            lock.unlock();
            block_barrier(id);
            return;
        }
        state_[id] = AtPart;
        int &arrived = part_waiting_[std::make_tuple(reinterpret_cast<std::uintptr_t>(key), lo, hi)];
        if (++arrived == (hi - lo) * threads_) {
            part_waiting_.erase(std::make_tuple(reinterpret_cast<std::uintptr_t>(key), lo, hi));
            const std::uint64_t seq = ++part_seq_;
            for (int x = lo; x < hi; ++x) {
                ++block_epoch_[x];
                for (int y = lo; y < hi; ++y) last_common_[(std::size_t)x * blocks_ + y] = seq;
            }
            for (int t = lo * threads_; t < hi * threads_; ++t) state_[t] = Runnable;
        }
        pass(lock);
        wait_turn(lock, id);
    }

    // ---- accesses (only the running virtual thread calls these) ----
    void name(const void *base, const char *label, std::size_t element) {
        arrays_[reinterpret_cast<std::uintptr_t>(base)] = Array{label, element};
    }
    void access(const void *where, bool write, bool atomic, int id, const char *step) {
        const int b = id / threads_;
        const Access now{id, b, grid_epoch_, block_epoch_[b], step, atomic, part_seq_};
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
        // keep one read per thread and epoch; reads before the current grid epoch are ordered for everyone
        std::size_t keep = 0;
        bool present = false;
        for (const Access &r : s.reads) {
            if (r.grid_epoch < now.grid_epoch) continue;
            present |= r.thread == id && r.block_epoch == now.block_epoch && r.atomic == atomic;
            s.reads[keep++] = r;
        }
        s.reads.resize(keep);
        if (!present) s.reads.push_back(now);
    }

  private:
    enum State { Runnable, AtGrid, AtBlock, AtPart, Done };

    // `now` is the running thread's access, so a part barrier of both blocks completed after `before` (the
    // latest one's number is past the count at `before`) lies between them.
    bool ordered(const Access &before, const Access &now) const {
        return before.thread == now.thread || before.grid_epoch < now.grid_epoch ||
               (before.block == now.block && before.block_epoch < now.block_epoch) ||
               last_common_[(std::size_t)before.block * blocks_ + now.block] > before.parts;
    }

    std::string where_text(const void *where) const {
        const auto p = reinterpret_cast<std::uintptr_t>(where);
        auto it = arrays_.upper_bound(p);
        if (it == arrays_.begin()) return "an unnamed location";
        --it;
        return "'" + it->second.name + "' element " + std::to_string((p - it->first) / it->second.element);
    }

    void conflict(const void *where, const char *kind, const Access &a, const Access &b) {
        ++total_conflicts_;
        const std::string text = where_text(where);
        const std::string key = text.substr(0, text.find(" element")) + "|" + kind + "|" + a.step + "|" + b.step;
        if (!seen_.insert({key, true}).second || conflicts_.size() >= 20) return;
        conflicts_.push_back(std::string(kind) + " on " + text + ": " + (a.atomic ? "atomic " : "") +
                             "access by thread " + std::to_string(a.thread % threads_) + " of block " +
                             std::to_string(a.block) + " in step '" + a.step + "', then by thread " +
                             std::to_string(b.thread % threads_) + " of block " + std::to_string(b.block) +
                             " in step '" + b.step + "' with no " +
                             (a.block == b.block ? "block barrier or grid sync"
                              : part_seq_ ? "grid sync or block-part barrier of both blocks"
                                          : "grid sync") +
                             " between them");
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

    // Hands the turn to the next runnable thread; with none, either every thread has ended or the barriers
    // they wait at can never complete.
    void pass(std::unique_lock<std::mutex> &) {
        running_ = pick();
        if (running_ < 0) {
            bool waiting = false;
            for (State s : state_) waiting |= s != Done;
            if (waiting && !abandoned_) {
                abandoned_ = true;
                hang_ = "hang: the kernel would never finish: ";
                int grid = 0, block = 0, part = 0, done = 0;
                for (State s : state_) (s == AtGrid ? grid : s == AtBlock ? block : s == AtPart ? part : done)++;
                hang_ += std::to_string(grid) + " threads wait at a grid sync, " + std::to_string(block) +
                         " at a block barrier, " +
                         (part ? std::to_string(part) + " at a block-part barrier, " : std::string()) +
                         std::to_string(done) +
                         " have ended (every thread of the grid must reach each grid sync, every thread of a "
                         "block each block barrier" +
                         (part ? ", every thread of a part's blocks each of its barriers" : "") + ")\n";
            }
        }
        cv_.notify_all();
    }

    void wait_turn(std::unique_lock<std::mutex> &lock, int id) {
        cv_.wait(lock, [&] { return running_ == id || abandoned_; });
        if (abandoned_) throw Abandoned{};
    }

    int blocks_ = 1, threads_ = 1, order_ = Forward, next_order_ = CPUFREE_RACE_ORDER;
    unsigned next_seed_ = 1;
    std::mt19937 rng_;
    std::mutex mutex_;
    std::condition_variable cv_;
    std::vector<State> state_;
    std::vector<int> block_arrived_;
    std::vector<std::uint64_t> block_epoch_;
    int grid_arrived_ = 0;
    std::uint64_t grid_epoch_ = 0;
    std::map<std::tuple<std::uintptr_t, int, int>, int> part_waiting_;  // arrivals at each pending part barrier
    std::uint64_t part_seq_ = 0;              // part barriers completed in the launch
    std::vector<std::uint64_t> last_common_;  // [a * blocks + b]: the latest of them that blocks a and b took part in
    std::string misuse_;
    int running_ = -1;
    bool abandoned_ = false;
    std::unordered_map<std::uintptr_t, Shadow> shadow_;
    std::map<std::uintptr_t, Array> arrays_;
    std::vector<std::string> conflicts_;
    std::unordered_map<std::string, bool> seen_;
    std::size_t total_conflicts_ = 0;
    std::string hang_;
};

inline Checker &checker() {
    static Checker c;
    return c;
}

// The virtual thread running on this OS thread, and the step it is in (set by the generated code).
inline thread_local int self = 0;
inline thread_local const char *step = "kernel start";

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
    checker().name(p.raw(), label, sizeof(T));
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
