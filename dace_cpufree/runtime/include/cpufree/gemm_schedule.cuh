// How the grid's blocks share a product's output tiles (gemm.cuh's tile paths): plain C++ that kernels and host
// programs share (tests/transformations/test_gemm_schedule.py runs it on the host: every K step of every output tile
// taken once, split tiles last, the choice at NPBench's sizes).
//
// Blocks take work units w = blockIdx.x, blockIdx.x + gridDim.x, ... A unit is an output tile with all of K (a whole
// tile) or one of `splits` K ranges of it (a split tile, added atomically into C, which is scaled by beta first). Where
// the tiles leave the last wave of blocks mostly idle, the tiles of that wave alone are split (the others stay whole:
// no atomics for them); where there are fewer tiles than blocks, every tile is. Where every tile is split, the K steps
// of all tiles, one after the other, may be shared out evenly instead (a stream schedule: each block one run of
// `stream` steps, cut at tile boundaries into at most `pieces()` units, all added atomically), where that shortens the
// longest block: at NPBench's S sizes where the split left each block three short units.
#pragma once

#include "host_device.h"

namespace cpufree {
namespace gemm_detail {

// Counts as int: a product whose tiles or K steps passed 2^31 would need terabytes of operands. 64-bit fields and
// arithmetic here cost the bounded build's CUTLASS tile (168 registers) 100 more bytes of spills in k3mm's kernel.
struct Schedule {
    int tiles_m, tiles_n, tiles;
    int k_tiles;            // TileK steps in all of K
    int splits;             // K ranges per split tile (1: no split-K)
    int k_tiles_per_split;  // TileK steps per K range of a split tile
    int whole;              // tiles run with all of K: the first `whole` in visiting order; the rest are split
    int stream;             // a stream schedule's TileK steps per block (0: not one)
    // A stream schedule's units per block (some empty: count 0): stream_pieces(stream, k_tiles, tiles). Worked out
    // where asked, not kept: every field is live in the tile loops.
    CPUFREE_HD int pieces() const;
    // Work units in all, on the `blocks` the schedule was made for.
    CPUFREE_HD long long units(long long blocks) const {
        return stream > 0 ? pieces() * blocks : whole + (long long)(tiles - whole) * splits;
    }
    // Where block `b`'s units end (it takes w = b, b + blocks, ... below it): units(blocks), but for a stream
    // schedule the pieces up to its run's last tile, so that no block iterates over empty ones.
    CPUFREE_HD long long block_end(long long b, long long blocks) const {
        if (stream == 0) return units(blocks);
        const long long total = (long long)tiles * k_tiles, begin = b * stream;
        if (begin >= total) return b;
        const long long end = begin + stream < total ? begin + stream : total;
        return b + ((end - 1) / k_tiles - begin / k_tiles + 1) * blocks;
    }
};

// The most units a stream schedule's run of `per` steps takes, a bound on the tiles it touches: exact where `per` is
// a multiple of k_tiles; where gcd(per, k_tiles) > 1 no run may start at the offset that touches the most, and the
// bound (and the cost rule with it) can count one unit too many.
CPUFREE_HD inline int stream_pieces(long long per, int k_tiles, int tiles) {
    const long long most = per % k_tiles == 0 ? per / k_tiles : (per - 1) / k_tiles + 2;
    return int(most < tiles ? most : tiles);
}
CPUFREE_HD inline int Schedule::pieces() const { return stream_pieces(stream, k_tiles, tiles); }

// Fewest TileK steps a K range keeps when split: below this, the atomics cost more than the extra blocks win.
constexpr long long kMinKTilesPerSplit = 8;
// Output tiles are visited in bands of this many tile rows, column by column inside a band, so the
// blocks running at once share A rows and B columns in L2.
constexpr long long kBandTileRows = 8;
// Splitting only the last wave's tiles where no tile is split otherwise must save at least this many TileK steps of
// one block's time: it adds a grid sync, the scaling of those tiles of C and their atomics, a fixed cost that a short K
// does not repay (doitgen's 55000 x 270 x 270 on an H200: 17 steps a tile, 0.5 tile saved, 1-2 % slower).
constexpr long long kTailMinSaving = 32;
// What one work unit costs beyond its TileK steps (filling the pipeline, writing or adding the tile), in TileK steps:
// FP64 64x64x16 tiles on an H200 at NPBench's S sizes took ~1 us a step and ~5 us a unit (k3mm's three products:
// one unit of 29 steps, 35 us; three of 11, 50 us). The stream schedule is weighed against a split of every tile with
// it. Below the measured ~5, it favours the schedule with fewer units a block: the split where that is one wave and the
// stream has two pieces, the stream (two pieces against three waves) at NPBench's S sizes.
constexpr long long kUnitSteps = 4;

// The schedule of an M x N x K product on `blocks` blocks, in TileM x TileN x TileK tiles. `forced` > 0 splits every
// tile that many ways, fewer where the rounding of K ranges would leave empty ones (the tile benchmark measures the
// policy against fixed splits). Otherwise, in units of one whole tile's time: splitting every tile k ways takes
// waves(k) / k (the fewest k whose units fill the waves to 7/8, else the best fill within the depth limit); splitting
// the r tiles of a partial last wave after q full ones s ways (s r <= blocks, s <= k_tiles / kMinKTilesPerSplit) takes
// q + 1 / s. The second where it is no longer than the first with split tiles, or kTailMinSaving TileK steps shorter
// than the first without. Where every tile stays split, a stream schedule (per = ceil(tiles k_tiles / blocks) steps a
// block) replaces it where its longest block, kUnitSteps a unit, is shorter, per >= kMinKTilesPerSplit (its pieces,
// cut at tile boundaries, can be shorter) and its work units' int arithmetic fits.
template <int TileM, int TileN, int TileK>
CPUFREE_HD inline Schedule make_schedule(long long M, long long N, long long K, long long blocks,
                                         long long forced = 0) {
    Schedule s;
    s.tiles_m = int((M + TileM - 1) / TileM);
    s.tiles_n = int((N + TileN - 1) / TileN);
    s.tiles = s.tiles_m * s.tiles_n;
    s.k_tiles = int((K + TileK - 1) / TileK);
    s.splits = 1;
    s.whole = 0;
    s.stream = 0;
    long long most = s.k_tiles / kMinKTilesPerSplit;
    if (most > blocks) most = blocks;
    double uniform = 1.0;  // waves(splits) / splits, in whole-tile times
    if (forced > 0) {
        s.splits = int(forced);
    } else if (s.tiles > 0 && blocks > 0) {
        double best = 0.0;
        for (long long k = 1; k <= most; ++k) {
            const long long units = s.tiles * k, waves = (units + blocks - 1) / blocks;
            const double fill = double(units) / double(waves * blocks);
            if (fill > best + 1e-9) best = fill, s.splits = int(k), uniform = double(waves) / double(k);
            if (8 * units >= 7 * waves * blocks) break;
        }
        const long long full = s.tiles / blocks, rest = s.tiles % blocks;
        long long tail = rest > 0 ? blocks / rest : 1;
        if (tail > most) tail = most;
        // Against a split of every tile, at least as short (its atomics are a subset); against none, kTailMinSaving
        // steps shorter.
        const double shorter = uniform - (double(full) + 1.0 / double(tail));
        const double need = s.splits > 1 ? -1e-9 : double(kTailMinSaving) / double(s.k_tiles);
        if (full > 0 && tail >= 2 && shorter >= need) {
            s.splits = int(tail);
            s.whole = int(full * blocks);
        }
    }
    s.k_tiles_per_split = (s.k_tiles + s.splits - 1) / s.splits;
    // the ranges the rounding leaves: no empty one (it would add a tile of zeros atomically)
    if (s.k_tiles_per_split > 0) s.splits = (s.k_tiles + s.k_tiles_per_split - 1) / s.k_tiles_per_split;
    if (s.splits == 1) s.whole = s.tiles;
    if (forced <= 0 && s.splits > 1 && s.whole == 0) {  // every tile split: C is scaled and added to either way
        const long long steps = (long long)s.tiles * s.k_tiles, per = (steps + blocks - 1) / blocks;
        const long long waves = ((long long)s.tiles * s.splits + blocks - 1) / blocks;
        const long long split_cost = waves * (s.k_tiles_per_split + kUnitSteps);
        // work_unit's int arithmetic reaches blocks * per + 3 k_tiles < steps + blocks + 3 k_tiles: below 2^31
        const bool fits_int = steps + blocks + 3LL * s.k_tiles < (1LL << 31);
        const long long stream_cost = per + stream_pieces(per, s.k_tiles, s.tiles) * kUnitSteps;
        if (per >= kMinKTilesPerSplit && fits_int && stream_cost < split_cost)
            s.stream = int(per);
    }
    return s;
}

// Tile index -> (tile row, tile column), banded for L2 reuse (see kBandTileRows).
CPUFREE_HD inline void tile_coords(const Schedule &s, long long tile, long long &tm, long long &tn) {
    constexpr int kBand = int(kBandTileRows);
    const int band_size = kBand * s.tiles_n;
    const int band = int(tile) / band_size;
    const int first_row = band * kBand;
    const int rows = s.tiles_m - first_row < kBand ? s.tiles_m - first_row : kBand;
    const int in_band = int(tile) - band * band_size;
    tm = first_row + in_band % rows;
    tn = in_band / rows;
}

// Work unit `w` of a schedule made for `blocks` blocks: its output tile's first row and column, its range of TileK
// steps (`count` steps from step `first`), and whether it is one K range of a split tile (its part is added
// atomically).
struct WorkUnit {
    long long m0, n0, first, count;
    bool split;
};
// Piece w / blocks of block w % blocks's run of a stream schedule's steps; count 0 past the run's last tile
// (Schedule::block_end stops the tile loops before those).
template <int TileM, int TileN>
CPUFREE_HD inline WorkUnit stream_unit(const Schedule &s, long long w, long long blocks) {
    WorkUnit u;
    const int b = int(w % blocks), begin = b * s.stream, total = s.tiles * s.k_tiles;
    const int end = begin + s.stream < total ? begin + s.stream : total;
    const int tile = begin / s.k_tiles + int(w / blocks), first = tile * s.k_tiles;
    const int lo = begin > first ? begin : first, hi = end < first + s.k_tiles ? end : first + s.k_tiles;
    long long tm = 0, tn = 0;
    if (tile < s.tiles) tile_coords(s, tile, tm, tn);
    u.m0 = tm * TileM;
    u.n0 = tn * TileN;
    u.first = lo - first;
    u.count = tile < s.tiles && hi > lo ? hi - lo : 0;
    u.split = true;
    return u;
}
template <int TileM, int TileN>
CPUFREE_HD inline WorkUnit work_unit(const Schedule &s, long long w, long long blocks) {
    WorkUnit u;
    if (s.stream > 0) return stream_unit<TileM, TileN>(s, w, blocks);
    u.split = w >= s.whole;
    const int v = u.split ? int(w - s.whole) : 0;
    const int tile = u.split ? s.whole + v / s.splits : int(w);
    long long tm, tn;
    tile_coords(s, tile, tm, tn);
    u.m0 = tm * TileM;
    u.n0 = tn * TileN;
    const int first = u.split ? (v % s.splits) * s.k_tiles_per_split : 0;
    int end = u.split ? first + s.k_tiles_per_split : s.k_tiles;
    if (end > s.k_tiles) end = s.k_tiles;
    u.first = first;
    u.count = end > first ? end - first : 0;
    return u;
}

// A work unit's elements of K: [begin, end), end clipped to K.
struct KRange {
    long long begin, end;
};
template <int TileK>
CPUFREE_HD inline KRange k_range(const WorkUnit &u, long long K) {
    const long long end = (u.first + u.count) * TileK;
    return {u.first * TileK, end < K ? end : K};
}

// The split tiles' rows are scaled in bands of this many rows (scale_split_tiles): enough bands to share among the
// blocks, few enough that a band's place is worked out once for many elements.
template <int TileM> constexpr int kScaleBandRows = TileM % 16 == 0 ? 16 : TileM;

// Band u of the split tiles (u < (tiles - whole) * TileM / kScaleBandRows; the split tiles come after the whole ones
// in visiting order, each in TileM / kScaleBandRows bands): its first row and column in C and how many of its rows and
// columns lie inside the M x N matrix (rows <= 0: none).
template <int TileM, int TileN>
CPUFREE_HD inline void split_band(const Schedule &s, long long u, long long M, long long N, long long &row,
                                  long long &col, int &rows, int &cols) {
    constexpr int kRows = kScaleBandRows<TileM>, kBands = TileM / kRows;
    long long tm, tn;
    tile_coords(s, s.whole + u / kBands, tm, tn);
    row = tm * TileM + (u % kBands) * kRows;
    col = tn * TileN;
    rows = int(M - row < kRows ? M - row : kRows);
    cols = int(N - col < TileN ? N - col : TileN);
}

}  // namespace gemm_detail
}  // namespace cpufree
