"""The emulation's race checker (``compile(..., backend="emulate", race_check=...)``, ``cpufree/racecheck.h``).

The plain emulation runs one thread, so a missing grid sync or block barrier cannot change its results. The checker
runs the kernel as several blocks of several threads, one at a time between barriers in a forward, reverse or
shuffled order, records every element access and reports two accesses by different threads that no barrier
orders. Shown here: small programs run clean; a grid sync taken out of generated code, or reached by some blocks
only, is reported with the array, the steps and the program lines; the checker's rules for grid syncs and block
barriers on a hand-written kernel. The suite's kernels in the three orders:
tests/benchmarks/test_suite_kernels_race_check.py.
"""

import shutil
import subprocess

import numpy as np
import programs
import pytest
from dace_cpufree.codegen.ir import Form
from kernel_steps import forms

import dace_cpufree
from dace_cpufree.runtime.build import INCLUDE_DIR, build, race_check_flags
from dace_cpufree.runtime.program import PersistentProgram

ORDERS = ("forward", "reverse", "shuffle")


def test_small_programs_have_no_races():
    n = 37
    a = np.random.default_rng(1).random(n)
    b, c, d = np.zeros(n), np.zeros(n), np.zeros(n)
    run = dace_cpufree.compile(programs.independent_then_dependent, backend="emulate", race_check=True)
    run(a, b, c, d)
    np.testing.assert_allclose(d[1:], (a + 1)[:-1] + (a * 2)[1:])
    a2, b2 = a.copy(), np.zeros(n)
    want_a, want_b = a.copy(), np.zeros(n)
    programs.time_loop.f(want_a, want_b, 5)
    dace_cpufree.compile(programs.time_loop, backend="emulate", race_check="reverse")(a2, b2, T=5)
    np.testing.assert_allclose(a2, want_a)
    out = np.zeros(1)
    dace_cpufree.compile(programs.scalar_sum, backend="emulate", race_check="shuffle")(a, out)
    np.testing.assert_allclose(out[0], a.sum())


def _planted(program, edit, name):
    """``program``'s race-checking build with ``edit`` applied to its generated code (a planted bug)."""
    source = dace_cpufree.kernel_source(program, backend="emulate", race_check="forward")
    sdfg = dace_cpufree.persistent_sdfg(program)
    code = edit(source.code)
    assert code != source.code, "the planted change did not apply"
    return PersistentProgram(sdfg, source, build(code, name, "emulate", race_check="forward"), "emulate")


def test_a_missing_grid_sync_is_reported_with_arrays_steps_and_lines():
    run = _planted(programs.independent_then_dependent, lambda c: c.replace("__grid.sync();", "", 1), "planted_no_sync")
    n = 40
    with pytest.raises(dace_cpufree.RaceError) as info:
        run(np.ones(n), np.zeros(n), np.zeros(n), np.zeros(n))
    report = info.value.report
    assert "read after write on 'C' element" in report or "read after write on 'B' element" in report
    assert "programs.py:11)" in report and "programs.py:13)" in report  # the writing and the reading line
    assert "with no grid sync between them" in report


def test_a_grid_sync_that_some_blocks_skip_is_reported_as_a_hang():
    run = _planted(
        programs.time_loop,
        lambda c: c.replace("__grid.sync();", "if (blockIdx.x == 0) __grid.sync();", 1),
        "planted_divergent_sync",
    )
    with pytest.raises(dace_cpufree.RaceError, match="hang: the kernel would never finish"):
        run(np.ones(64), np.zeros(64), T=3)


def test_the_checker_is_off_unless_asked_and_only_in_the_emulation():
    assert "cpufree::race" not in dace_cpufree.generate_code(programs.time_loop)
    checked = dace_cpufree.kernel_source(programs.time_loop, backend="emulate", race_check=True).code
    assert "cpufree::race::ptr<double> A" in checked
    with pytest.raises(dace_cpufree.CpufreeError, match="backend='emulate'"):
        dace_cpufree.compile(programs.time_loop, backend="cuda", race_check=True, load=False)
    with pytest.raises(dace_cpufree.CpufreeError, match="race_check='sideways'"):
        dace_cpufree.compile(programs.time_loop, backend="emulate", race_check="sideways")


# The checker's rules on a hand-written kernel: 2 blocks of 4 threads; each thread writes X[t] and then reads a
# neighbour's element: in its own block after a block barrier (ordered), in the other block after a block barrier
# only (a race), or after a grid sync (ordered); atomics from every thread on one element do not conflict.
RULES = r"""
#include <cpufree/runtime.cuh>
#include <cstdio>
__global__ void rules(cpufree::race::ptr<double> X, cpufree::race::ptr<double> Y, int mode) {
    cpufree::race::name(X, "X");
    cpufree::race::name(Y, "Y");
    const int t = blockIdx.x * blockDim.x + threadIdx.x, n = gridDim.x * blockDim.x;
    cpufree::race::at(mode == 0 ? "same block after a barrier" : mode == 1 ? "other block after a barrier" :
                      mode == 2 ? "other block after a grid sync" : "atomics");
    X[t] = t;
    if (mode == 0) { __syncthreads(); Y[t] = X[blockIdx.x * blockDim.x + (threadIdx.x + 1) % blockDim.x]; }
    if (mode == 1) { __syncthreads(); Y[t] = X[(t + blockDim.x) % n]; }
    if (mode == 2) { cg::this_grid().sync(); Y[t] = X[(t + blockDim.x) % n]; }
    if (mode == 3) cpufree::atomic_combine<cpufree::Op::Sum>(&Y[0], 1.0);
}
int main() {
    double x[8] = {0}, y[8] = {0};
    for (int mode = 0; mode < 4; ++mode) {
        double *px = x, *py = y;
        void *args[] = {&px, &py, &mode};
        cudaError_t e = CPUFREE_LAUNCH_COOPERATIVE(rules, dim3(2), dim3(4), args, 0, 0);
        std::printf("mode %d: %s\n%s", mode, e == cudaSuccess ? "clean" : "conflicts", cpufree_race_report());
    }
    return 0;
}
"""


def test_the_rules_of_grid_syncs_and_block_barriers(tmp_path):
    cxx = shutil.which("g++") or pytest.skip("no g++")
    src, exe = tmp_path / "rules.cpp", tmp_path / "rules"
    src.write_text(RULES)
    flags = ["-std=c++17", "-DCPUFREE_EMULATE", f"-I{INCLUDE_DIR}", *race_check_flags("shuffle")]
    subprocess.run([cxx, *flags, str(src), "-o", str(exe)], check=True, capture_output=True)
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True, timeout=60).stdout
    parts = {int(p.split(":")[0]): p for p in out.split("mode ")[1:]}
    assert parts[0].startswith("0: clean")
    assert parts[1].startswith("1: conflicts") and "after write on 'X' element" in parts[1]
    assert "with no grid sync between them" in parts[1]
    assert parts[2].startswith("2: clean")
    assert parts[3].startswith("3: clean")


def test_a_sum_beside_an_update_is_one_atomic_per_warp_and_race_free():
    """A map that writes an element per thread and sums over all of them (CG's update and dot product): the sum
    goes through a register and one warp-combined atomic (an atomic per element on one address took 59 ms per
    iteration of a 4096^2 CG on an H100), and the checker sees no conflict."""
    source = dace_cpufree.kernel_source(programs.update_and_dot)
    assert any("sums in registers" in strategy for _, strategy, _ in source.steps)
    assert Form.GRID_SUMS in forms(source)
    x = np.random.default_rng(3).random(1000)
    y, out = np.zeros(1000), np.zeros(1)
    for order in ORDERS:
        out[0] = 0.0
        dace_cpufree.compile(programs.update_and_dot, backend="emulate", race_check=order)(x, y, out)
        np.testing.assert_allclose(y, 2 * x)
        np.testing.assert_allclose(out[0], np.dot(x, x))
