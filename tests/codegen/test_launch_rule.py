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


def _host_rule(tmp_path_factory, name: str, driver: str):
    """``driver`` built on the host; returns a function that feeds it cases (tuples of integers, one a line) and
    reads back its decisions (1 a true one)."""
    folder = tmp_path_factory.mktemp(name)
    source, exe = folder / "rule.cpp", folder / "rule"
    source.write_text(driver)
    cxx = os.environ.get("CXX", "g++")
    subprocess.run([cxx, "-std=c++17", "-O1", f"-I{INCLUDE_DIR}", str(source), "-o", str(exe)], check=True)

    def decide(cases: list[tuple[int, ...]]) -> list[bool]:
        lines = "".join(" ".join(map(str, c)) + "\n" for c in cases)
        out = subprocess.run([str(exe)], input=lines, capture_output=True, text=True, check=True).stdout
        return [line == "1" for line in out.split()]

    return decide


@pytest.fixture(scope="module")
def rule(tmp_path_factory):
    return _host_rule(tmp_path_factory, "launch_rule", DRIVER)


def test_the_bounded_build_is_taken_where_a_third_block_pays(rule):
    got = rule([(tiles, SMS, UNBOUNDED, BOUNDED, spill, cap) for _, tiles, spill, cap, _ in CASES])
    wrong = [(what, want) for (what, *_, want), taken in zip(CASES, got, strict=True) if taken != want]
    assert not wrong, wrong


def test_a_bounded_build_that_fits_no_more_blocks_is_never_taken(rule):
    # no spill, thousands of tiles: still unbounded where the bounded build fits as few blocks, or was not queried
    assert rule([(5000, SMS, 2, 2, 0, 0), (5000, SMS, 2, 0, 300, 0), (5000, SMS, 3, 2, 0, 0)]) == [False] * 3


BLOCK_DRIVER = """
#include <cstdio>
#include <cpufree/launch.h>
int main() {
    int block, max_block, per_sm, per_sm_half;
    while (std::scanf("%d %d %d %d", &block, &max_block, &per_sm, &per_sm_half) == 4)
        std::printf("%d\\n", cpufree::halve_block(cpufree::BlockFacts{block, max_block, per_sm, per_sm_half}) ? 1 : 0);
    return 0;
}
"""

# (what the case is, the API's block, the device's largest, blocks a multiprocessor of it and of half of it,
# halved); the first three with the facts their launches on an H200 showed (docs/results/2026-11-29-H200/launch_block)
BLOCK_CASES = [
    ("vadv at S: 64 registers, 1,024 threads fill a multiprocessor, two halves fit", 1024, 1024, 1, 2, True),
    ("adi at S: 256 threads alone on a multiprocessor, kept (halving was slower)", 256, 1024, 1, 3, False),
    ("fdtd_2d at S: 512 threads alone on a multiprocessor, kept (halving was slower)", 512, 1024, 1, 2, False),
    ("two blocks of 512 a multiprocessor (softmax's grid at S; the half's count assumed)", 512, 1024, 2, 4, False),
    ("the largest block, two of them a multiprocessor", 1024, 1024, 2, 4, False),
    ("the largest block alone, its halves fit once too (shared memory)", 1024, 1024, 1, 1, False),
    ("the half not queried (a configured block or a library call's)", 1024, 1024, 1, 0, False),
    ("a device whose largest block is 512 threads", 512, 512, 1, 2, True),
]


@pytest.fixture(scope="module")
def block_rule(tmp_path_factory):
    return _host_rule(tmp_path_factory, "block_rule", BLOCK_DRIVER)


def test_the_block_is_halved_only_where_the_largest_block_fills_a_multiprocessor_alone(block_rule):
    got = block_rule([case[1:5] for case in BLOCK_CASES])
    assert len(got) == len(BLOCK_CASES)
    wrong = [(what, want) for (what, *_, want), halved in zip(BLOCK_CASES, got, strict=True) if halved != want]
    assert not wrong, wrong


def test_the_launcher_asks_the_block_rule_with_the_devices_facts():
    """The printed launcher (CUDA and HIP) reads the device's largest block, queries the half-size block's occupancy
    only where nothing fixes the block (no configured size, no library call's block) and the rule may apply, asks
    ``halve_block`` and then launches the halves with their count a multiprocessor."""
    from programs import time_loop

    import dace_cpufree

    for backend, attribute in (
        ("cuda", "cudaDevAttrMaxThreadsPerBlock"),
        ("hip", "hipDeviceAttributeMaxThreadsPerBlock"),
    ):
        code = dace_cpufree.generate_code(time_loop, backend=backend)
        dialect = "hip" if backend == "hip" else "cuda"
        rule = f"""\
        int cpufree_max_block = 0, cpufree_per_sm_half = 0;
        CPUFREE_CHECK({dialect}DeviceGetAttribute(&cpufree_max_block, {attribute}, cpufree_dev));
        if (cpufree_state.block <= 0 && cpufree_need_block <= 0 && cpufree_per_sm == 1 &&
            cpufree_block == cpufree_max_block && cpufree_block >= 2 * cpufree_warp)
            CPUFREE_CHECK({dialect}OccupancyMaxActiveBlocksPerMultiprocessor(&cpufree_per_sm_half, cpufree_kfn,
                                                                        cpufree_block / 2, cpufree_dynamic_shared));
        if (cpufree::halve_block(cpufree::BlockFacts{{cpufree_block, cpufree_max_block, cpufree_per_sm,
                                                     cpufree_per_sm_half}})) {{
            cpufree_block /= 2;
            cpufree_per_sm = cpufree_per_sm_half;
        }}
"""
        assert code.count(rule) == 1, backend
        assert code.index(rule) < code.index("cpufree_state.block_chosen = cpufree_block;")
