"""How a product's output tiles are shared among the grid's blocks (``cpufree/gemm_schedule.cuh``), run on the host:
every K step of every output tile is taken by exactly one work unit, the split tiles come last and their scaling
covers exactly their elements, and a host run of the schedule's arithmetic (whole tiles written with beta, split
ones scaled first and then added to) matches NumPy. The choice itself at NPBench's sizes: the last wave's tiles split
where it leaves most blocks idle, all tiles where there are fewer tiles than blocks, none where the waves are full,
all tiles' K steps shared out evenly (a stream schedule) where a split of every tile leaves blocks several short
units."""

import ctypes

import numpy as np
import pytest
from helpers import host_library

TM, TN, TK = 64, 64, 16  # the FP64 tile

HOST_SCHEDULE = r"""
#include <cpufree/gemm_schedule.cuh>
#include <vector>
using namespace cpufree::gemm_detail;
constexpr int TM = 64, TN = 64, TK = 16;

// Every element of the split tiles that scale_split_tiles scales, band by band as it takes them: f(row, col).
template <typename F>
void each_scaled(const Schedule &s, long long M, long long N, F f) {
    for (long long u = 0; u < (s.tiles - s.whole) * (TM / kScaleBandRows<TM>); ++u) {
        long long row, col;
        int rows, cols;
        split_band<TM, TN>(s, u, M, N, row, col, rows, cols);
        for (int r = 0; r < rows; ++r)
            for (int c = 0; c < cols; ++c) f(row + r, col + c);
    }
}

// facts: tiles, splits, whole, units, k_tiles_per_split, stream, pieces. Returns 0, or the first check that failed (1:
// a K step of a tile taken twice or never, 2: a split unit before a whole one, 3: a split unit's tile among the whole
// ones, 4: the split tiles' elements not covered exactly once by the scaling, 5: a unit with no K step outside a stream
// schedule, 6: a block of a stream schedule with more than `stream` steps, 7: a block's end (block_end) not exactly
// after its last non-empty unit).
extern "C" int schedule(long long M, long long N, long long K, long long blocks, long long forced, long long *facts) {
    const Schedule s = make_schedule<TM, TN, TK>(M, N, K, blocks, forced);
    facts[0] = s.tiles, facts[1] = s.splits, facts[2] = s.whole, facts[3] = s.units(blocks);
    facts[4] = s.k_tiles_per_split;
    facts[5] = s.stream, facts[6] = s.stream > 0 ? s.pieces() : 0;
    std::vector<int> taken(s.tiles * s.k_tiles, 0);
    const long long nb = blocks > 0 ? blocks : 1;
    std::vector<long long> block_steps(nb, 0);
    std::vector<int> is_split(s.tiles_m * s.tiles_n, 0);
    bool seen_split = false;
    for (long long w = 0; w < s.units(blocks); ++w) {
        const WorkUnit u = work_unit<TM, TN>(s, w, blocks);
        if (seen_split && !u.split) return 2;
        seen_split = seen_split || u.split;
        if (u.count == 0 && s.k_tiles > 0 && s.stream == 0) return 5;
        block_steps[w % nb] += u.count;
        if (s.stream > 0 && block_steps[w % nb] > s.stream) return 6;
        if ((w < s.block_end(w % nb, nb)) != (s.stream == 0 || u.count > 0)) return 7;
        if (s.stream > 0 && u.count == 0) continue;
        const long long tile = (u.m0 / TM) * s.tiles_n + u.n0 / TN;
        is_split[tile] = u.split;
        for (long long k = u.first; k < u.first + u.count; ++k) ++taken[tile * s.k_tiles + k];
    }
    for (int t : taken)
        if (t != 1) return 1;
    long long splits = 0;
    for (int t : is_split) splits += t;
    if (splits != s.tiles - s.whole) return 3;
    std::vector<int> scaled(M * N, 0);
    each_scaled(s, M, N, [&](long long row, long long col) { ++scaled[row * N + col]; });
    for (long long i = 0; i < M * N; ++i)
        if (scaled[i] != is_split[(i / N / TM) * s.tiles_n + (i % N) / TN]) return 4;
    return 0;
}

// C = alpha A B + beta C (row-major, contiguous) as the tile paths compute it under the schedule: split tiles
// scaled by beta first, then every unit's part of K, added (split) or written with beta (whole), each block's units up
// to its block_end.
extern "C" void product(long long M, long long N, long long K, long long blocks, double alpha, const double *A,
                        const double *B, double beta, double *C) {
    const Schedule s = make_schedule<TM, TN, TK>(M, N, K, blocks);
    each_scaled(s, M, N, [&](long long row, long long col) {
        double &x = C[row * N + col];
        x = beta == 0 ? 0 : beta * x;
    });
    for (long long b = 0; b < blocks; ++b)  // as the blocks of the tile loops take them
    for (long long w = b; w < s.block_end(b, blocks); w += blocks) {
        const WorkUnit u = work_unit<TM, TN>(s, w, blocks);
        const KRange k = k_range<TK>(u, K);
        for (long long i = u.m0; i < u.m0 + TM && i < M; ++i)
            for (long long j = u.n0; j < u.n0 + TN && j < N; ++j) {
                double acc = 0;
                for (long long x = k.begin; x < k.end; ++x) acc += A[i * K + x] * B[x * N + j];
                double &c = C[i * N + j];
                c = u.split ? c + alpha * acc : (beta == 0 ? alpha * acc : alpha * acc + beta * c);
            }
    }
}
"""


@pytest.fixture(scope="module")
def host(tmp_path_factory):
    lib = host_library(tmp_path_factory.mktemp("schedule"), HOST_SCHEDULE)
    lib.schedule.argtypes = [ctypes.c_longlong] * 5 + [ctypes.c_void_p]
    lib.schedule.restype = ctypes.c_int
    lib.product.argtypes = [ctypes.c_longlong] * 4 + [ctypes.c_double, ctypes.c_void_p, ctypes.c_void_p]
    lib.product.argtypes += [ctypes.c_double, ctypes.c_void_p]
    return lib


def _schedule(host, m, n, k, blocks, forced=0) -> dict:
    facts = np.zeros(7, dtype=np.int64)
    assert host.schedule(m, n, k, blocks, forced, facts.ctypes.data) == 0
    return dict(zip(["tiles", "splits", "whole", "units", "per_split", "stream", "pieces"], facts.tolist()))


SIZES = [  # (M, N, K, blocks)
    (3200, 4400, 3600, 264),  # k3mm's E @ F on an H100 (two blocks on each of 132 multiprocessors): 13 waves + 18
    (3200, 4800, 3600, 264),  # k2mm's second product: 14 waves + 54
    (3200, 3600, 4000, 264),  # k3mm's A @ B: 10 waves + 210, nearly full
    (2000, 2300, 2600, 264),  # gemm: 4 waves + 96
    (55000, 270, 270, 264),  # doitgen
    (200, 130, 5000, 264),  # fewer tiles than blocks
    (1000, 1100, 1200, 132),
    (517, 389, 1201, 80),
    (64, 64 * 31, 2000, 30),  # one wave and one tile
    (1000, 1100, 1200, 396),  # gemm at S on an H200's bounded build (three blocks on each of 132): a stream schedule
    (800, 1000, 850, 396),  # k3mm's second product at S: a stream schedule
    (59, 192, 592, 4),  # three tiles, a stream schedule of two pieces a block
    (7, 5, 3, 8),
    (0, 5, 3, 8),
]


@pytest.mark.parametrize("size", SIZES, ids=lambda s: "x".join(map(str, s)))
def test_every_k_step_of_every_tile_is_taken_once(host, size):
    _schedule(host, *size)
    for forced in (1, 2, 7):
        _schedule(host, *size, forced)


def test_the_last_partial_wave_is_split_where_it_leaves_most_blocks_idle(host):
    e_f = _schedule(host, 3200, 4400, 3600, 264)
    assert (e_f["tiles"], e_f["whole"], e_f["splits"]) == (3450, 13 * 264, 14)
    second = _schedule(host, 3200, 4800, 3600, 264)
    assert (second["tiles"], second["whole"], second["splits"]) == (3750, 14 * 264, 4)
    assert _schedule(host, 3200, 4800, 3600, 264)["units"] == 14 * 264 + 54 * 4
    gemm = _schedule(host, 2000, 2300, 2600, 264)  # NPBench's gemm: 4 waves + 96, as short as every tile split in two
    assert (gemm["tiles"], gemm["whole"], gemm["splits"]) == (1152, 4 * 264, 2)
    full = _schedule(host, 3200, 3600, 4000, 264)  # 210 of 264 blocks busy in the last wave: nothing split
    assert (full["whole"], full["splits"]) == (full["tiles"], 1)
    few = _schedule(host, 200, 130, 5000, 264)  # 12 tiles: every tile split, none whole
    assert few["whole"] == 0 and few["splits"] * few["tiles"] >= 7 * 264 // 8
    doitgen = _schedule(host, 55000, 270, 270, 264)  # 16 waves + 76 of 17 K steps: the saving would not repay
    assert (doitgen["tiles"], doitgen["whole"], doitgen["splits"]) == (4300, 4300, 1)
    for size in [(634, 1342, 1602, 100), (635, 1341, 1601, 100)]:  # test_gemm.py's GPU test of split last waves
        capped = _schedule(host, *size)
        assert (capped["tiles"], capped["whole"], capped["splits"]) == (210, 200, 10)
    short_k = _schedule(host, 3200, 4400, 64, 264)  # K too short to split
    assert (short_k["whole"], short_k["splits"]) == (short_k["tiles"], 1)


def test_a_stream_schedule_replaces_a_split_of_every_tile_where_the_longest_block_gets_shorter(host):
    """Where every tile is split, the split is weighed against sharing all tiles' K steps evenly (kUnitSteps a unit):
    NPBench's gemm at S on 396 blocks splits its 288 tiles four ways, three units of 19 steps a block (69 with the
    units' cost), against one run of 55 steps in two pieces (63); k3mm's second product five ways, three units of 11
    (45), against 29 steps in two pieces (37). Its first and third products split two ways, one unit of 29 and 32
    steps a block, stay so (a run of 27 or 32 steps would take two pieces)."""
    gemm = _schedule(host, 1000, 1100, 1200, 396)
    assert (gemm["tiles"], gemm["whole"], gemm["stream"], gemm["pieces"], gemm["units"]) == (288, 0, 55, 2, 792)
    second = _schedule(host, 800, 1000, 850, 396)
    assert (second["tiles"], second["whole"], second["stream"], second["pieces"]) == (208, 0, 29, 2)
    for size in [(800, 850, 900, 396), (800, 950, 1000, 396)]:
        kept = _schedule(host, *size)
        assert (kept["whole"], kept["splits"], kept["stream"]) == (0, 2, 0)
    few = _schedule(host, 200, 130, 5000, 264)  # 12 tiles in 20 K ranges of 16 steps, one a block: kept
    assert (few["stream"], few["splits"]) == (0, 20)
    for size in [(3200, 4400, 3600, 264), (2000, 2300, 2600, 264), (1000, 1100, 1200, 264)]:  # whole tiles: none
        assert _schedule(host, *size)["stream"] == 0
    assert _schedule(host, 1000, 1100, 1200, 396, 4)["stream"] == 0  # nor where the split is forced


@pytest.mark.parametrize(
    "size",
    [(300, 120, 630, 3), (200, 130, 700, 64), (64 * 9 - 10, 64, 400, 8), (59, 192, 592, 4), (200, 802, 900, 100)],
)
@pytest.mark.parametrize("beta", [0.0, -0.5])
def test_the_schedules_arithmetic_matches_numpy(host, size, beta):
    m, n, k, blocks = size
    facts = _schedule(host, *size)
    assert facts["whole"] < facts["tiles"], "each size splits some tiles"
    assert facts["whole"] > 0 or size != (300, 120, 630, 3), "the first splits only its last wave"
    assert (facts["stream"] > 0) == (size[-1] in (4, 100)), "the last two take stream schedules"
    rng = np.random.default_rng(m + n + k)
    A, B, C = rng.standard_normal((m, k)), rng.standard_normal((k, n)), rng.standard_normal((m, n))
    want = 1.5 * A @ B + beta * C
    host.product(m, n, k, blocks, 1.5, A.ctypes.data, B.ctypes.data, beta, C.ctypes.data)
    np.testing.assert_allclose(C, want, rtol=1e-12, atol=1e-12)
