"""The tile of a row reduction (``cpufree::reduction_tile``, runtime.cuh), computed on the host for chosen grids:
the lanes each row gets from its length, the number of rows and the grid's threads."""

import shutil
import subprocess

import pytest

from dace_cpufree.runtime.build import INCLUDE_DIR

# (extent, rows, grid threads, warp) -> lanes
CASES = {
    (1000, 600, 270336, 32): 256,  # syr2k at paper, an early row: few rows share the grid, ~4 elements a lane
    (1000, 1200, 270336, 32): 128,  # its last row: twice the rows, half the lanes
    (1000, 0, 270336, 32): 64,  # rows unknown: about sixteen elements a lane
    (1000, 100000, 270336, 32): 64,  # rows enough for the grid
    (11200, 11200, 270336, 32): 32,  # gesummv at paper: long rows, a warp each
    (2000, 2000, 270336, 32): 128,  # gesummv at S: 2000 x 256 lanes would exceed the grid
    (200, 10, 270336, 32): 64,  # short rows: lanes while each keeps two or more elements
    (40, 3, 270336, 32): 32,  # and never less than a warp
    (1 << 20, 1, 270336, 32): 1 << 16,  # one long row: the sixteen-element tile (the launch caps it at the block)
    (1000, 600, 270336, 64): 256,  # a 64-lane wavefront
}

PROGRAM = r"""
#include <cpufree/runtime.cuh>
#include <cstdio>
int main() {
    long long e, r, t, w;
    while (std::scanf("%lld %lld %lld %lld", &e, &r, &t, &w) == 4)
        std::printf("%lld\n", cpufree::reduction_tile(e, r, t, w));
}
"""


def test_rows_get_lanes_from_their_length_their_number_and_the_grid(tmp_path):
    cxx = shutil.which("g++") or pytest.skip("no g++")
    src, exe = tmp_path / "tile.cpp", tmp_path / "tile"
    src.write_text(PROGRAM)
    cmd = [cxx, "-std=c++17", "-O1", "-DCPUFREE_EMULATE", f"-I{INCLUDE_DIR}", str(src), "-o", str(exe)]
    subprocess.run(cmd, check=True, capture_output=True)
    given = "".join(" ".join(map(str, k)) + "\n" for k in CASES)
    out = subprocess.run([str(exe)], input=given, capture_output=True, text=True, timeout=60, check=True).stdout
    assert dict(zip(CASES, (int(v) for v in out.split()))) == CASES
