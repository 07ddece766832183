// Vector clocks of the race checker (racecheck.h): the happens-before order between virtual threads that
// synchronise through barriers, signals and collectives, within a PE and between PEs.
//
// Thread t keeps a clock vc[t] with an entry per thread: vc[t][u] is the last step of thread u that t has
// synchronised with. An access of t is stamped with vc[t][t]; an earlier access of u stamped c is ordered before t's
// current one when c <= vc[t][u]. A barrier (grid sync, block barrier, block-part barrier, PE barrier, collective)
// gives every member the join of all members' clocks, then advances each member's own entry; a signal stores the
// signaller's clock on the flag (a release: set replaces, add joins) and advances its own entry; a wait that sees the
// flag's value joins the flag's clock into its own (an acquire).
#pragma once
#include <cstdint>
#include <unordered_map>
#include <vector>

namespace cpufree::race {

class Clocks {
  public:
    void start(int threads) {
        vc_.assign(threads, std::vector<std::uint32_t>(threads, 0));
        for (int t = 0; t < threads; ++t) vc_[t][t] = 1;
        flags_.clear();
    }
    std::uint32_t own(int t) const { return vc_[t][t]; }
    // Whether thread u's access stamped `clock` is ordered before thread t's next access.
    bool before(int u, std::uint32_t clock, int t) const { return clock <= vc_[t][u]; }
    // The members passed a barrier together.
    void meet(const std::vector<int> &members) {
        if (members.empty()) return;
        std::vector<std::uint32_t> all(vc_.size(), 0);
        for (int m : members) join(all, vc_[m]);
        for (int m : members) {
            vc_[m] = all;
            ++vc_[m][m];
        }
    }
    // Thread t signals on `flag`: `add` keeps what earlier signals released (a read-modify-write), a set replaces it.
    void release(int t, const volatile void *flag, bool add) {
        std::vector<std::uint32_t> &f = flags_[key(flag)];
        if (add && !f.empty())
            join(f, vc_[t]);
        else
            f = vc_[t];
        ++vc_[t][t];
    }
    // Thread t saw the value of `flag`.
    void acquire(int t, const volatile void *flag) {
        auto it = flags_.find(key(flag));
        if (it != flags_.end()) join(vc_[t], it->second);
    }

  private:
    static std::uintptr_t key(const volatile void *p) { return reinterpret_cast<std::uintptr_t>(p); }
    static void join(std::vector<std::uint32_t> &into, const std::vector<std::uint32_t> &from) {
        for (std::size_t i = 0; i < into.size(); ++i)
            if (from[i] > into[i]) into[i] = from[i];
    }

    std::vector<std::vector<std::uint32_t>> vc_;
    std::unordered_map<std::uintptr_t, std::vector<std::uint32_t>> flags_;
};

}  // namespace cpufree::race
