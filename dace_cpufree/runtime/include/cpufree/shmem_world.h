// The emulated PEs of one program on the host (compile(..., backend="emulate", pes=P)): what they share.
//
// Every PE runs its own copy of the program's library (its statics, launcher state and __shared__ arrays are its
// own, as a GPU's device memory is) in a thread of its own; the copies share one World, created by PE 0's copy and
// handed to the others through the unique id of the bootstrap (shmem_emulate.h). It holds the symmetric heap (the
// k-th allocation of every PE is one symmetric object: a buffer per PE, all made when the first PE allocates it, so
// that nvshmem_ptr finds a peer's buffer whatever the PEs' pace), the PE barrier, the reduction slots and, without
// the race checker, the waits: a PE that waits tells the World what for, and when every PE waits and none can go
// on, or a wait lasts past the timeout, the World stops the run with a hang report (cpufree_emu_hang).
#pragma once
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace cpufree::emu {

class World {
  public:
    // The number of PEs is set by the first PE that joins (size()).
    World() = default;
    ~World() {
        for (Object &o : objects_)
            for (char *b : o.base) std::free(b);
    }
    int npes() const { return npes_; }
    // Sets the number of PEs once; false where another was set.
    bool size(int npes) {
        std::lock_guard<std::mutex> lock(mutex_);
        if (npes_ == 0 && npes > 0) {
            npes_ = npes;
            next_.assign(npes, 0);
            waiting_.assign(npes, Waiting{});
            slots_.assign(npes, {});
        }
        return npes_ == npes;
    }

    // ---- symmetric heap ----
    void *malloc(int pe, std::size_t n) {
        std::lock_guard<std::mutex> lock(mutex_);
        const std::size_t k = next_[pe]++;
        if (k == objects_.size()) {
            objects_.push_back(Object{n, std::vector<char *>(npes_, nullptr), npes_});
            for (int p = 0; p < npes_; ++p) {
                objects_[k].base[p] = static_cast<char *>(std::calloc(n ? n : 1, 1));
                owner_[reinterpret_cast<std::uintptr_t>(objects_[k].base[p])] = {k, p};
            }
        }
        if (objects_[k].bytes != n) {
            if (failure_.empty())
                failure_ = "PE " + std::to_string(pe) + " allocated " + std::to_string(n) +
                           " bytes where another PE allocated " + std::to_string(objects_[k].bytes) +
                           " (the symmetric heap needs the same sizes on every PE: call every PE with arrays of the "
                           "same shapes)";
            stop_locked();
            return nullptr;
        }
        return objects_[k].base[pe];
    }
    void free(int pe, void *p) {
        std::lock_guard<std::mutex> lock(mutex_);
        auto found = find(p);
        if (!found.first) return;
        Object &o = objects_[found.second.first];
        if (found.second.second != pe || --o.live > 0) return;
        for (char *&b : o.base) {
            owner_.erase(reinterpret_cast<std::uintptr_t>(b));
            std::free(b);
            b = nullptr;
        }
    }
    // The address of symmetric `p` on PE `pe`; nullptr where p is not on the symmetric heap or pe is no PE.
    void *ptr(const void *p, int pe) {
        std::lock_guard<std::mutex> lock(mutex_);
        auto found = find(p);
        if (!found.first || pe < 0 || pe >= npes_) return nullptr;
        const Object &o = objects_[found.second.first];
        const std::size_t offset = static_cast<const char *>(p) - o.base[found.second.second];
        return o.base[pe] + offset;
    }
    // Names a PE's buffer for the reports of the waits (the race checker names every array itself).
    void name(const void *base, const std::string &label, std::size_t element, int pe) {
        std::lock_guard<std::mutex> lock(mutex_);
        names_[reinterpret_cast<std::uintptr_t>(base)] = Name{label, element ? element : 1, pe};
    }
    std::string where(const volatile void *p) const {
        const auto at = reinterpret_cast<std::uintptr_t>(p);
        auto it = names_.upper_bound(at);
        if (it == names_.begin()) return "a flag of the workspace";
        --it;
        return "'" + it->second.label + "' element " + std::to_string((at - it->first) / it->second.element) +
               " of PE " + std::to_string(it->second.pe);
    }

    // ---- one run of the PEs ----
    void reset(double timeout_s) {
        std::lock_guard<std::mutex> lock(mutex_);
        stopped_ = false;
        hang_.clear();
        failure_.clear();
        stuck_.clear();
        arrived_ = 0;
        for (Waiting &w : waiting_) w = Waiting{};
        timeout_s_ = timeout_s;
    }
    // Stops the run: every wait returns false (host) or unwinds its kernel (device). `misuse`: a call that cannot be
    // done (a put to no PE), reported as the run's failure; otherwise the host stopped it (a PE failed there).
    void abort(const std::string &why, bool misuse) {
        std::lock_guard<std::mutex> lock(mutex_);
        if (misuse && failure_.empty() && hang_.empty()) failure_ = why;
        stop_locked();
    }
    std::string failure() {
        std::lock_guard<std::mutex> lock(mutex_);
        return failure_;
    }
    bool stopped() {
        std::lock_guard<std::mutex> lock(mutex_);
        return stopped_;
    }
    // The hang report ("" when none) and, for a wait for a signal, its place: "pe\tblock\tsite\tstep\n" first.
    std::string hang() {
        std::lock_guard<std::mutex> lock(mutex_);
        return stuck_.empty() ? hang_ : stuck_ + hang_;
    }

    // ---- waits without the race checker ----
    // A barrier of all PEs (`what`: where, for a hang report); false where the run stopped.
    bool meet(int pe, const std::string &what) {
        std::unique_lock<std::mutex> lock(mutex_);
        if (stopped_) return false;
        const std::uint64_t generation = generation_;
        if (++arrived_ == npes_) {
            arrived_ = 0;
            ++generation_;
            cv_.notify_all();
            return true;
        }
        return wait_locked(lock, pe, [&] { return generation_ != generation; }, what, "", nullptr);
    }
    // Waits until `ready()` holds (read under the World's lock); `site`: the wait's place for the report, `flag` the
    // flag it polls (nullptr: a barrier). False where the run stopped.
    template <typename Ready>
    bool wait(int pe, Ready ready, const std::string &what, const std::string &site, const volatile void *flag) {
        std::unique_lock<std::mutex> lock(mutex_);
        return wait_locked(lock, pe, ready, what, site, flag);
    }
    // Sets (or adds to) a flag in any PE's memory and wakes the waits.
    void signal(volatile std::uint64_t *flag, std::uint64_t value, bool add) {
        std::lock_guard<std::mutex> lock(mutex_);
        *flag = add ? *flag + value : value;
        cv_.notify_all();
    }
    // PE `pe`'s slot of a reduction (the values it contributes).
    std::vector<char> &slot(int pe) { return slots_[pe]; }

  private:
    struct Object {
        std::size_t bytes;
        std::vector<char *> base;
        int live;  // PEs that have not freed it
    };
    struct Name {
        std::string label;
        std::size_t element;
        int pe;
    };
    struct Waiting {
        std::string what, site;
        const volatile void *flag = nullptr;
        std::function<bool()> ready;  // empty: the PE does not wait
    };

    std::pair<bool, std::pair<std::size_t, int>> find(const void *p) const {
        const auto at = reinterpret_cast<std::uintptr_t>(p);
        auto it = owner_.upper_bound(at);
        if (it == owner_.begin()) return {false, {0, 0}};
        --it;
        const Object &o = objects_[it->second.first];
        if (at - it->first >= (o.bytes ? o.bytes : 1)) return {false, {0, 0}};
        return {true, it->second};
    }

    void stop_locked() {
        stopped_ = true;
        cv_.notify_all();
    }

    template <typename Ready>
    bool wait_locked(std::unique_lock<std::mutex> &lock, int pe, Ready ready, const std::string &what,
                     const std::string &site, const volatile void *flag) {
        if (ready()) return true;
        waiting_[pe] = Waiting{what, site, flag, ready};
        if (none_can_go_on()) stop_hang(false);
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s_);
        while (!ready() && !stopped_)
            if (cv_.wait_until(lock, deadline) == std::cv_status::timeout && !ready() && !stopped_) stop_hang(true);
        waiting_[pe] = Waiting{};
        return ready();
    }

    // Every PE waits, and what each waits for has not come (a PE woken but not yet running is not stuck).
    bool none_can_go_on() const {
        for (const Waiting &w : waiting_)
            if (!w.ready || w.ready()) return false;
        return true;
    }

    // Every PE waits and none can go on (or one waited past the timeout): the report names each PE's wait.
    void stop_hang(bool timed_out) {
        std::string text = timed_out ? "hang: a PE waited more than " + std::to_string((int)timeout_s_) +
                                           " s (DACE_CPUFREE_EMULATE_TIMEOUT):"
                                     : "hang: every PE waits and none can go on:";
        for (int p = 0; p < npes_; ++p) {
            const Waiting &w = waiting_[p];
            if (!w.ready) {
                text += "\n  PE " + std::to_string(p) + " runs";
                continue;
            }
            std::string line = "PE " + std::to_string(p) + " " + w.what;
            if (w.flag)
                line += ": " + where(w.flag) + " is " +
                        std::to_string(*static_cast<const volatile std::uint64_t *>(w.flag)) +
                        (timed_out ? "" : ", and no PE can signal it any more");
            text += "\n  " + line;
            if (w.flag && stuck_.empty()) stuck_ = std::to_string(p) + "\t0\t" + w.site + " on " + where(w.flag) + "\t\n";
        }
        if (hang_.empty() && failure_.empty()) hang_ = text + "\n(race_check=True names the program line of each wait)\n";
        stop_locked();
    }

    int npes_ = 0;
    std::mutex mutex_;
    std::condition_variable cv_;
    std::vector<Object> objects_;
    std::vector<std::size_t> next_;                                   // allocations made by each PE
    std::map<std::uintptr_t, std::pair<std::size_t, int>> owner_;     // buffer -> (object, PE)
    std::map<std::uintptr_t, Name> names_;
    std::vector<Waiting> waiting_;
    std::vector<std::vector<char>> slots_;
    int arrived_ = 0;
    std::uint64_t generation_ = 0;
    bool stopped_ = false;
    double timeout_s_ = 60.0;
    std::string hang_, stuck_, failure_;
};

}  // namespace cpufree::emu
