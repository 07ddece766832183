// The launcher's choices of a kernel's block size and of one of its two builds (codegen/host.py), as functions of the
// facts it queries: plain host C++, so that tests/codegen/test_launch_rule.py runs the rules on the host for cases
// no emulated device reports (a bounded build that spills, a capped grid, few tiles, a block that fills a
// multiprocessor alone).
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

struct BlockFacts {
    int block;        // the occupancy API's block, rounded down to a power of two
    int max_block;    // the device's largest block (cudaDevAttrMaxThreadsPerBlock)
    int per_sm;       // co-resident blocks of that size per multiprocessor
    int per_sm_half;  // of half that size, 0 where not queried
};

// Whether a kernel whose block nothing fixes (no configured size, no library call's block) runs in blocks of half
// the occupancy API's size. The API breaks ties in threads a multiprocessor towards the larger block: where its
// answer is the device's largest block and fills a multiprocessor alone while two halves fit, the halves run as
// many threads a multiprocessor, and a step smaller than the grid spreads over twice as many multiprocessors
// (NPBench's vadv at S: 3,600 points a step on 4 blocks of 1,024 threads or 8 of 512; its kernel 0.599 -> 0.391 ms
// on an H200). Smaller blocks keep the API's size: halving a block of 256 or 512 threads that fills a
// multiprocessor alone was slower on adi, fdtd_2d and atax (docs/results/2026-11-29-H200/launch_block).
inline bool halve_block(const BlockFacts &f) {
    return f.block == f.max_block && f.per_sm == 1 && f.per_sm_half >= 2;
}

}  // namespace cpufree
