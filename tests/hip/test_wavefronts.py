"""AMD's wavefronts: the tile arithmetic for 32- and 64-lane wavefronts on the host, the scheduler's tile reductions
built by hipcc for a CDNA (64 lanes) and an RDNA (32 lanes) target, and a compile check that fails where it should."""

import re
import subprocess
from pathlib import Path

import programs
import pytest
from builds import built

import dace_cpufree
from dace_cpufree.errors import BuildError
from dace_cpufree.runtime import build
from dace_cpufree.runtime.build import INCLUDE_DIR

# For every wavefront size, block size and tile bound: the tile taken on AMD (no named barriers) fits in a wavefront,
# the tiles partition the block, every tile lies in one wavefront, the butterfly partners of a tile reduction stay in
# the tile, and the scheduler's reduction tile is a whole number of wavefronts.
HOST_CHECK = r"""
#include <cstdio>
#include <set>
#include <utility>
#include "cpufree/runtime.cuh"
using namespace cpufree;
int main() {
    int bad = 0;
    for (unsigned long long warp : {32ull, 64ull})
        for (unsigned long long block : {warp, 2 * warp, 256ull, 1024ull})
            for (unsigned long long bound = 1; bound <= 1024; bound *= 2) {
                const unsigned long long size = within_wavefront(bound, warp);
                if (size > warp || size > bound || (size & (size - 1)) || (bound >= warp && size != warp)) ++bad;
                if (tile_groups(block, size) * size != block) ++bad;
                std::set<std::pair<unsigned long long, unsigned long long>> seen;
                for (unsigned long long t = 0; t < block; ++t) {
                    const unsigned long long g = tile_group(t, size), r = tile_rank(t, size);
                    if (!seen.insert({g, r}).second || g * size + r != t) ++bad;
                    if ((g * size) / warp != (g * size + size - 1) / warp) ++bad;  // one wavefront
                    for (unsigned long long off = size / 2; off > 0; off /= 2)
                        if (tile_group(t ^ off, size) != g) ++bad;  // shuffle partner in the tile
                }
            }
    for (long long warp : {32ll, 64ll})
        for (long long extent : {1ll, 7ll, 100ll, 5000ll, 100000ll})
            for (long long rows : {1ll, 64ll, 100000ll}) {
                const long long t = reduction_tile(extent, rows, 132ll * 1024, warp);
                if (t < warp || t % warp || (t & (t - 1))) ++bad;
            }
    std::printf("%d\n", bad);
    return bad != 0;
}
"""


def test_tile_arithmetic_holds_for_32_and_64_lane_wavefronts(tmp_path):
    source, binary = tmp_path / "lanes.cpp", tmp_path / "lanes"
    source.write_text(HOST_CHECK)
    subprocess.run(
        ["g++", "-std=c++17", "-DCPUFREE_EMULATE", f"-I{INCLUDE_DIR}", str(source), "-o", str(binary)], check=True
    )
    run = subprocess.run([str(binary)], capture_output=True, text=True)
    assert run.returncode == 0 and run.stdout.strip() == "0", run.stdout + run.stderr


@pytest.mark.hip
def test_tile_reductions_build_for_64_and_32_lane_targets():
    library = built(programs.softmax_f64, "wavefront_softmax", "hip", scheduler="all")
    objects = library.read_bytes()
    for target in ("gfx90a", "gfx1030"):  # one code object per target, each compiled for its own wavefront
        assert re.search(rb"amdgcn-amd-amdhsa--" + target.encode(), objects), target


@pytest.mark.hip
def test_a_misspelled_intrinsic_fails_the_build():
    code = dace_cpufree.kernel_source(programs.time_loop, backend="hip").code
    assert "cg::this_grid()" in code
    broken = code.replace("cg::this_grid()", "cg::this_grid_()")
    with pytest.raises(BuildError, match="this_grid_"):
        build(broken, "broken_intrinsic", "hip")


def test_hip_output_includes_no_cuda_header():
    code = dace_cpufree.kernel_source(programs.time_loop, backend="hip").code
    headers = re.findall(r"#include\s*<([^>]+)>", code)
    assert not [h for h in headers if h.startswith(("cuda", "cooperative_groups"))], headers
    assert Path(INCLUDE_DIR / "cpufree" / "runtime.cuh").read_text().count("hip/hip_cooperative_groups.h") == 1
