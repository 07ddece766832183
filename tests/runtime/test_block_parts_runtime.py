"""Block parts in the runtime (``cpufree/runtime.cuh``): ``split_blocks`` divides the grid into ranges of
consecutive blocks, ``part_sync`` is a barrier among the blocks of one range.

Shown here: the split on hand-computed cases (host emulation build); the race checker's rules for part barriers
on a hand-written kernel of 3 blocks of 4 threads in the three orders (ordered within a part, not without the
barrier, not with a block outside the part, a hang when a block of the part skips it); and nvcc compiling both
for the GPU.
"""

import re
import shutil
import subprocess

import pytest

from dace_cpufree.runtime import find_nvcc
from dace_cpufree.runtime.build import INCLUDE_DIR, race_check_flags

SPLIT = r"""
#include <cpufree/runtime.cuh>
#include <cstdio>
static void show(const char *name, std::initializer_list<long long> e, bool inferred, unsigned grid, unsigned threads) {
    long long elems[32];
    unsigned lo[32], hi[32];
    int k = 0;
    for (long long v : e) elems[k++] = v;
    cpufree::split_blocks(elems, k, inferred, grid, threads, lo, hi);
    std::printf("%s", name);
    for (int j = 0; j < k; ++j) std::printf(" %u:%u", lo[j], hi[j]);
    std::printf("\n");
}
int main() {
    show("explicit_1_2", {1, 2}, false, 8, 256);
    show("explicit_overshoot", {1, 1, 1}, false, 4, 256);
    show("explicit_zero", {0, 5}, false, 4, 256);
    show("explicit_all_zero", {0, 0}, false, 5, 256);
    show("explicit_large", {1LL << 50, 3LL << 50}, false, 65536, 256);
    show("explicit_near", {(1LL << 40) - 1, 1LL << 40, (1LL << 40) + 1}, false, 65535, 1024);
    show("inferred_small_small_big", {100, 200, 100000}, true, 10, 256);
    show("inferred_threads_is_small", {256, 257}, true, 4, 256);
    show("inferred_all_small", {10, 50, 20}, true, 8, 256);
    show("inferred_overshoot", {1000, 1000, 1000, 5}, true, 5, 256);
    show("grid_below_parts", {1, 2, 3}, false, 2, 256);
    show("grid_below_parts_inferred", {1, 2, 3}, true, 2, 256);
    show("one_part", {7}, true, 6, 256);
    return 0;
}
"""

# Worked by hand from the rule (sizes, then [lo, hi) in index order):
EXPECTED_SPLITS = {
    # E = 3: ceil(8/3) = 3, ceil(16/3) = 6, sum 9 > 8: one block off the largest (part 1)
    "explicit_1_2": [(0, 3), (3, 8)],
    # ceil(4/3) = 2 each, sum 6: off part 0 (tie, lowest index), then part 1 (the largest) -> 1, 1, 2
    "explicit_overshoot": [(0, 1), (1, 2), (2, 4)],
    # part 0 at least 1, part 1 ceil(5*4/5) = 4, sum 5: off part 1
    "explicit_zero": [(0, 1), (1, 4)],
    # E = 0: 1 each, the shortfall 3 to the part of most elements (tie, part 0)
    "explicit_all_zero": [(0, 4), (4, 5)],
    # products of 2^66: 1/4 and 3/4 of 65536 exactly
    "explicit_large": [(0, 16384), (16384, 65536)],
    # 65535 / 3 = 21845: ceil'd 21845, 21845, 21846, sum 65536: off part 2
    "explicit_near": [(0, 21845), (21845, 43690), (43690, 65535)],
    # two small parts of 1 block, the big one the other 8
    "inferred_small_small_big": [(0, 1), (1, 2), (2, 10)],
    # elements == threads is small: 1 block, the other 3 to part 1
    "inferred_threads_is_small": [(0, 1), (1, 4)],
    # 1 each, the 5 left to part 1 (most elements)
    "inferred_all_small": [(0, 1), (1, 7), (7, 8)],
    # part 3 small (1); 4 shared: ceil(4/3) = 2 each, sum 7 > 5: off part 0, then part 1 -> 1, 1, 2, 1
    "inferred_overshoot": [(0, 1), (1, 2), (2, 4), (4, 5)],
    # fewer blocks than parts: the whole grid each
    "grid_below_parts": [(0, 2), (0, 2), (0, 2)],
    "grid_below_parts_inferred": [(0, 2), (0, 2), (0, 2)],
    # a small single part still gets the whole grid
    "one_part": [(0, 6)],
}


def test_split_blocks_follows_the_rule(tmp_path):
    cxx = shutil.which("g++") or pytest.skip("no g++")
    src, exe = tmp_path / "split.cpp", tmp_path / "split"
    src.write_text(SPLIT)
    subprocess.run(
        [cxx, "-std=c++17", "-DCPUFREE_EMULATE", f"-I{INCLUDE_DIR}", str(src), "-o", str(exe)],
        check=True,
        capture_output=True,
    )
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True, timeout=60).stdout
    got = {}
    for line in out.splitlines():
        name, *ranges = line.split()
        got[name] = [tuple(int(v) for v in r.split(":")) for r in ranges]
    assert got == EXPECTED_SPLITS


# 3 blocks of 4 threads; the part is blocks [0, 2) (block 2 is outside it). Each mode is one rule:
# 0: write X, part barrier, read the other block's element of the part (ordered);
# 1: the same without the barrier (a race);
# 2: read block 2's element after the part barrier only (a race: block 2 took no part in it);
# 3: block 1 skips the barrier (a hang);
# 4: parts [0, 1) and [1, 3) each loop over write / barrier / read within the part / barrier, then a grid sync
#    and a read across the parts (ordered; a 1-block part's barrier is a block barrier);
# 5: the barrier first, then write and read across the part (a race: the barrier orders only what came before);
# 6: block 2 calls the part's barrier too (reported: it is not one of the part's blocks).
RULES = r"""
#include <cpufree/runtime.cuh>
#include <cstdio>
__device__ cpufree::PartBarrier bars[2];
__global__ void parts(cpufree::race::ptr<double> X, cpufree::race::ptr<double> Y, int mode) {
    cpufree::race::name(X, "X");
    cpufree::race::name(Y, "Y");
    const int t = blockIdx.x * blockDim.x + threadIdx.x, n = gridDim.x * blockDim.x;
    const int in_part = blockIdx.x < 2;
    cpufree::race::at(mode == 0 ? "within the part after its barrier" : mode == 1 ? "within the part, no barrier" :
                      mode == 2 ? "outside the part" : mode == 3 ? "skipped barrier" : mode == 4 ? "two parts" :
                      mode == 5 ? "write after the barrier" : "a block outside calls it");
    if (mode < 3) {
        X[t] = t;
        if (!in_part) return;
        if (mode != 1) cpufree::part_sync(&bars[0], 0, 2);
        Y[t] = mode == 2 ? X[2 * blockDim.x + threadIdx.x] : X[(t + blockDim.x) % (2 * blockDim.x)];
    } else if (mode == 3) {
        X[t] = t;
        if (blockIdx.x == 0) cpufree::part_sync(&bars[0], 0, 2);
    } else if (mode == 5) {
        if (!in_part) return;
        cpufree::part_sync(&bars[0], 0, 2);
        X[t] = t;
        Y[t] = X[(t + blockDim.x) % (2 * blockDim.x)];
    } else if (mode == 6) {
        cpufree::part_sync(&bars[0], 0, 2);
    } else {
        const unsigned lo = blockIdx.x < 1 ? 0 : 1, hi = blockIdx.x < 1 ? 1 : 3, p = blockIdx.x < 1 ? 0 : 1;
        const int size = (hi - lo) * blockDim.x, first = lo * blockDim.x;
        for (int it = 0; it < 3; ++it) {
            X[t] = t + it;
            cpufree::part_sync(&bars[p], lo, hi);
            Y[t] = X[first + (t - first + 1) % size];
            cpufree::part_sync(&bars[p], lo, hi);
        }
        cg::this_grid().sync();
        Y[t] = X[(t + blockDim.x) % n];
    }
}
int main() {
    double x[12] = {0}, y[12] = {0};
    for (int order = 0; order < 3; ++order) {
        for (int mode = 0; mode < 7; ++mode) {
            cpufree_race_order(order, 7);
            double *px = x, *py = y;
            void *args[] = {&px, &py, &mode};
            cudaError_t e = CPUFREE_LAUNCH_COOPERATIVE(parts, dim3(3), dim3(4), args, 0, 0);
            std::printf("case %d %d: %s\n%s", order, mode, e == cudaSuccess ? "clean" : "conflicts",
                        cpufree_race_report());
        }
    }
    return 0;
}
"""


def test_the_race_checker_rules_of_part_barriers(tmp_path):
    cxx = shutil.which("g++") or pytest.skip("no g++")
    src, exe = tmp_path / "parts.cpp", tmp_path / "parts"
    src.write_text(RULES)
    flags = ["-std=c++17", "-DCPUFREE_EMULATE", f"-I{INCLUDE_DIR}", *race_check_flags("forward")]
    subprocess.run([cxx, *flags, str(src), "-o", str(exe)], check=True, capture_output=True)
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True, timeout=60).stdout
    cases = {}
    for chunk in out.split("case ")[1:]:
        head, _, body = chunk.partition(": ")
        order, mode = map(int, head.split())
        cases[order, mode] = body
    assert len(cases) == 21
    for order in range(3):
        assert cases[order, 0].startswith("clean"), cases[order, 0]
        racy = cases[order, 1]
        assert racy.startswith("conflicts"), racy
        assert re.search(r"(read after write|write after read) on 'X' element [0-7]:", racy), racy
        bad = cases[order, 2]
        assert bad.startswith("conflicts") and re.search(r"on 'X' element (8|9|10|11):", bad), bad
        assert "of block 2" in bad and "with no grid sync or block-part barrier of both blocks between them" in bad
        hang = cases[order, 3]
        assert hang.startswith("conflicts") and "hang: the kernel would never finish" in hang, hang
        assert "4 at a block-part barrier" in hang and "8 have ended" in hang, hang
        assert cases[order, 4].startswith("clean"), cases[order, 4]
        late = cases[order, 5]
        assert late.startswith("conflicts"), late
        assert re.search(r"(read after write|write after read) on 'X' element [0-7]:", late), late
        outside = cases[order, 6]
        assert outside.startswith("conflicts"), outside
        assert re.search(
            r"block-part barrier of blocks \[0, 2\) reached by thread \d of block 2, which is not", outside
        )


KERNEL = r"""
#include <cpufree/runtime.cuh>
__device__ cpufree::PartBarrier bars[3];
__global__ void parts(const long long *elems, double *x, int steps) {
    unsigned lo[3], hi[3];
    cpufree::split_blocks(elems, 3, true, gridDim.x, blockDim.x, lo, hi);
    for (int j = 0; j < 3; ++j) {
        if (blockIdx.x < lo[j] || blockIdx.x >= hi[j]) continue;
        for (int s = 0; s < steps; ++s) {
            for (long long i = (blockIdx.x - lo[j]) * blockDim.x + threadIdx.x; i < elems[j];
                 i += (hi[j] - lo[j]) * blockDim.x)
                x[i] += 1.0;
            cpufree::part_sync(&bars[j], lo[j], hi[j]);
        }
    }
}
"""


@pytest.mark.compile
@pytest.mark.parametrize("arch", ["sm_90", "sm_80"])
def test_nvcc_compiles_split_blocks_and_part_sync(tmp_path, arch):
    nvcc = find_nvcc()
    assert nvcc, "nvcc is missing"
    src, ptx, obj = tmp_path / "parts.cu", tmp_path / "parts.ptx", tmp_path / "parts.o"
    src.write_text(KERNEL)
    base = [nvcc, "-std=c++17", f"-arch={arch}", f"-I{INCLUDE_DIR}", str(src)]
    subprocess.run([*base, "-ptx", "-o", str(ptx)], check=True, capture_output=True, text=True)
    text = ptx.read_text()
    assert "atom.global.add.u32" in text and "nanosleep" in text  # the instructions part_sync must compile to
    subprocess.run([*base, "-c", "-o", str(obj)], check=True, capture_output=True, text=True)
    assert obj.stat().st_size > 0
