// The launcher's choice between a kernel's two builds (codegen/host.py, kernel_builds), as a function of the facts
// it queries: plain host C++, so that tests/codegen/test_launch_rule.py runs the rule on the host for cases no
// emulated device reports (a bounded build that spills, a capped grid, few tiles).
#pragma once

namespace cpufree {

// Local memory a thread of the bounded build may use and still be taken: the spilled values are reloaded in every
// output tile, which lost over many waves of tiles (k2mm, k3mm at paper) and won within one (k2mm, k3mm at S,
// covariance at paper; docs/linear-algebra.md).
constexpr long long kBoundedSpillBytes = 256;

struct BuildFacts {
    long long tiles;           // output tiles of the kernel's largest product
    long long sms;             // multiprocessors of the device
    long long per_sm;          // co-resident blocks per multiprocessor of the unbounded build
    long long per_sm_bounded;  // of the bounded build (three blocks of the products' size), 0 where not queried
    long long spill_bytes;     // local memory per thread of the bounded build (cudaFuncAttributes::localSizeBytes)
    long long max_blocks;      // the user's cap on the grid, 0 for none
};

// Whether the bounded build (a third block per multiprocessor) runs the kernel: it must fit more blocks than the
// unbounded one, the grid must not be capped at or below the unbounded one's, and the largest product must have
// more tiles than multiprocessors (with fewer, every tile has a multiprocessor to itself either way, and a third
// block only adds blocks to every grid sync). Then a spill-free bounded build pays where the tiles are more than
// the unbounded grid has blocks, and one that spills a little (at most kBoundedSpillBytes) only where one wave of
// its own grid, capped or not, holds every tile.
inline bool take_bounded_build(const BuildFacts &f) {
    const long long unbounded_grid = f.per_sm * f.sms;
    if (f.max_blocks > 0 && f.max_blocks <= unbounded_grid) return false;
    if (f.spill_bytes > kBoundedSpillBytes || f.per_sm_bounded <= f.per_sm || f.tiles <= f.sms) return false;
    if (f.spill_bytes == 0) return f.tiles > unbounded_grid;
    long long bounded_grid = f.per_sm_bounded * f.sms;
    if (f.max_blocks > 0 && f.max_blocks < bounded_grid) bounded_grid = f.max_blocks;
    return f.tiles <= bounded_grid;
}

}  // namespace cpufree
