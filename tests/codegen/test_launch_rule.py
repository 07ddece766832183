"""The launcher's choice between a kernel's two builds (``cpufree::take_bounded_build``, cpufree/launch.h), run on
the host for the cases no emulated device reports: a bounded build that spills, grids capped by the user, products
of few tiles. The device facts below are an H100's (132 multiprocessors; two blocks of the products' 128 threads
per multiprocessor unbounded, three bounded) and the measured kernels they stand for (docs/linear-algebra.md)."""

from __future__ import annotations

import os
import subprocess

import pytest

from dace_cpufree.runtime.build import INCLUDE_DIR

DRIVER = """
#include <cstdio>
#include <cpufree/launch.h>
int main() {
    long long t, s, p, p3, spill, cap;
    while (std::scanf("%lld %lld %lld %lld %lld %lld", &t, &s, &p, &p3, &spill, &cap) == 6)
        std::printf("%d\\n", cpufree::take_bounded_build(cpufree::BuildFacts{t, s, p, p3, spill, cap}) ? 1 : 0);
    return 0;
}
"""

SMS, UNBOUNDED, BOUNDED = 132, 2, 3
# (what the case is, tiles, spill bytes, the user's cap on the grid, bounded build taken)
CASES = [
    ("gemm at paper: spill-free, 1,332 tiles over 264 blocks", 1332, 0, 0, True),
    ("gemm at S: spill-free, 304 tiles, more than the unbounded grid's 264", 304, 0, 0, True),
    ("spill-free, tiles no more than the unbounded grid's blocks", 264, 0, 0, False),
    ("k3mm at S: spills 104 bytes, 208 tiles fit one wave of 396", 208, 104, 0, True),
    ("covariance at paper: spills 120 bytes, 361 tiles in one wave", 361, 120, 0, True),
    ("spills a little, tiles exactly one wave of the bounded grid", 396, 48, 0, True),
    ("k2mm at paper: spills 48 bytes, 3,600 tiles over many waves", 3600, 48, 0, False),
    ("spills more than kBoundedSpillBytes", 300, 257, 0, False),
    ("spills exactly kBoundedSpillBytes, one wave", 300, 256, 0, True),
    ("doitgen at S: 114 tiles, fewer than multiprocessors", 114, 0, 0, False),
    ("tiles equal to the multiprocessors", 132, 0, 0, False),
    ("a grid capped at the unbounded grid's blocks", 1332, 0, 264, False),
    ("a grid capped below the unbounded grid", 1332, 0, 200, False),
    ("a cap above the unbounded grid leaves room for the third block", 1332, 0, 300, True),
    ("spilling, a cap of 300 blocks holds 290 tiles in one wave", 290, 64, 300, True),
    ("spilling, a cap of 300 blocks does not hold 350 tiles in one wave", 350, 64, 300, False),
]


@pytest.fixture(scope="module")
def rule(tmp_path_factory):
    folder = tmp_path_factory.mktemp("launch_rule")
    source, exe = folder / "rule.cpp", folder / "rule"
    source.write_text(DRIVER)
    cxx = os.environ.get("CXX", "g++")
    subprocess.run([cxx, "-std=c++17", "-O1", f"-I{INCLUDE_DIR}", str(source), "-o", str(exe)], check=True)

    def decide(cases: list[tuple[int, int, int, int, int, int]]) -> list[bool]:
        lines = "".join(" ".join(map(str, c)) + "\n" for c in cases)
        out = subprocess.run([str(exe)], input=lines, capture_output=True, text=True, check=True).stdout
        return [line == "1" for line in out.split()]

    return decide


def test_the_bounded_build_is_taken_where_a_third_block_pays(rule):
    got = rule([(tiles, SMS, UNBOUNDED, BOUNDED, spill, cap) for _, tiles, spill, cap, _ in CASES])
    wrong = [(what, want) for (what, *_, want), taken in zip(CASES, got, strict=True) if taken != want]
    assert not wrong, wrong


def test_a_bounded_build_that_fits_no_more_blocks_is_never_taken(rule):
    # no spill, thousands of tiles: still unbounded where the bounded build fits as few blocks, or was not queried
    assert rule([(5000, SMS, 2, 2, 0, 0), (5000, SMS, 2, 0, 300, 0), (5000, SMS, 3, 2, 0, 0)]) == [False] * 3
