"""CPU: unmodified single-GPU programs split over PEs by ``compile(..., distribute={...})``, run on emulated PEs
under the race checker and compared with NumPy on the global arrays.

Shown here: the halo widths follow the stencils' offsets (1 for a 3- or 5-point stencil, 2 for a 4th-order one, one
side only for a one-sided one); the results match NumPy on 2, 3 and 4 PEs, on sizes that do not divide by the PE count
(the last PE owns fewer elements) and with the split along a strided axis, so a wrong halo width, a missing or early
signal, or a boundary element computed by the wrong PE would differ or be reported; each exchange overlaps the rest of
the step that feeds it (faces first, puts, interior, waits); reductions become Allreduce (a
conjugate gradient in plain NumPy, a max-norm); removing a halo wait from the generated kernel is reported as a race;
programs that cannot be split are refused naming the array, the access, its line and the fix. NPBench's own stencils
are in tests/benchmarks/test_distribute_npbench.py.
"""

import inspect
import re

import distribute_programs as dp
import numpy as np
import pytest

import dace_cpufree
from dace_cpufree.cli import main as cli
from dace_cpufree.decomposition import decomposition_of
from dace_cpufree.errors import ArgumentError, CpufreeError, NotPersistableError, RaceError
from dace_cpufree.runtime import build
from dace_cpufree.runtime.distributed import DistributedProgram
from dace_cpufree.runtime.emulated_pes import EmulatedPes


def _halos(program, split) -> dict:
    sdfg = dace_cpufree.persistent_sdfg(program, options=_options(split))
    return {s.array: (s.lower, s.upper) for s in decomposition_of(sdfg).splits if s.named}


def _options(split):
    from dace_cpufree.options import CompileOptions

    return CompileOptions.resolve(backend="emulate", distribute=split)


def test_an_exchange_follows_the_last_write_before_a_halo_read():
    """upwind writes u twice per step (its first row, then the rest) before v reads u's halo: one exchange of u."""
    sdfg = dace_cpufree.persistent_sdfg(dp.upwind, options=_options({"u": 0, "v": 0}))
    assert sorted(e.array for e in decomposition_of(sdfg).exchanges) == ["u", "v"]


def test_each_exchange_overlaps_the_rest_of_the_step_that_feeds_it():
    """jacobi_2d split along its rows: per half-step the two face rows that the puts send are computed first, then the
    puts, the interior while the halos travel, the waits and the unpacking of the halo buffers; two grid syncs per
    half-step (the faces, the rest), none between the disjoint pieces."""
    source = dace_cpufree.kernel_source(dp.jacobi_2d, backend="cuda", distribute={"A": 0, "B": 0})
    labels = [label for label, _, _ in source.steps]
    half = labels[: labels.index("tasklet signal_wait") + 2]
    maps = [k for k, label in enumerate(half) if label.startswith("map ")]
    puts = [k for k, label in enumerate(half) if label == "tasklet putmem"]
    assert len(maps) == 3 and len(puts) == 2 and maps[1] < puts[0] and puts[-1] < maps[2] < len(half) - 2
    assert labels.count("tasklet putmem") == 4
    assert sum(label.startswith("copy __cpufree_halo_") for label in labels) == 4
    assert source.grid_syncs == 4


def test_halo_widths_follow_the_stencils_offsets():
    assert _halos(dp.jacobi_1d, {"A": 0, "B": 0}) == {"A": (1, 1), "B": (1, 1)}
    assert _halos(dp.fourth_order, {"A": 0, "B": 0}) == {"A": (2, 2), "B": (2, 2)}
    assert _halos(dp.upwind, {"u": 0, "v": 0}) == {"u": (0, 1), "v": (1, 0)}
    assert _halos(dp.jacobi_2d, {"A": 1, "B": 1}) == {"A": (1, 1), "B": (1, 1)}


def _check(program, split, arrays: dict, extra: dict, pes_list, race="shuffle"):
    """The program split over each PE count of ``pes_list``, against its NumPy reference on the global arrays."""
    want = {k: v.copy() for k, v in arrays.items()}
    program.f(**want, **extra)
    run = None
    for pes in pes_list:
        run = dace_cpufree.compile(program, backend="emulate", pes=pes, distribute=split, race_check=race)
        assert isinstance(run, DistributedProgram) and run.pes == pes
        got = {k: v.copy() for k, v in arrays.items()}
        run(**got, **extra)
        for name in arrays:
            np.testing.assert_allclose(got[name], want[name], rtol=1e-12, atol=1e-12, err_msg=f"{name} on {pes} PEs")
    return run


def _random(*shape, seed=0):
    return np.random.default_rng(seed).random(shape)


@pytest.mark.parametrize(
    "program, split, shape, pes",
    [
        (dp.jacobi_1d, {"A": 0, "B": 0}, (41,), (2, 3, 4)),  # 41 = 11 + 11 + 11 + 8 on 4 PEs
        (dp.fourth_order, {"A": 0, "B": 0}, (30,), (2, 3)),
        (dp.jacobi_2d, {"A": 1, "B": 1}, (7, 13), (2, 3)),  # the strided axis
    ],
)
def test_stencils_split_over_pes_match_numpy(program, split, shape, pes):
    names = list(split)
    arrays = {n: _random(*shape, seed=k) for k, n in enumerate(names)}
    _check(program, split, arrays, {"T": 3}, pes)


def test_one_sided_stencils_keep_the_edges_the_first_pe_sets():
    _check(dp.upwind, {"u": 0, "v": 0}, {"u": _random(11, 5), "v": _random(11, 5, seed=1)}, {"T": 3}, (3, 4))


def test_reductions_over_split_arrays_become_allreduce():
    """A conjugate gradient in plain NumPy (np.sum, np.dot, the norm at the end), np.max, np.linalg.norm, np.min."""
    n = 30
    b = _random(n)
    b[0] = b[-1] = 0.0
    arrays = {"x": np.zeros(n), "b": b, "r": np.zeros(n), "p": np.zeros(n), "q": np.zeros(n), "res": np.zeros(1)}
    run = _check(dp.cg, {k: 0 for k in "xbrpq"}, arrays, {"iters": 5}, (2, 3))
    ops = sorted(r.op for r in run.decomposition.reductions)
    assert ops == ["sum", "sum", "sum"], ops
    run = _check(dp.norms, {"A": 0}, {"A": _random(23) - 0.5, "out": np.zeros(3)}, {}, (3,))
    assert sorted(r.op for r in run.decomposition.reductions) == ["max", "min", "sum"]
    a = _random(17)
    run = dace_cpufree.compile(dp.total, backend="emulate", pes=3, distribute={"A": 0}, race_check="shuffle")
    np.testing.assert_allclose(run(a), np.sum(a[1:] * a[:-1]), rtol=1e-12)  # the program's return value


def test_accumulating_into_an_array_counts_its_earlier_value_once():
    a, s = _random(19), np.array([5.0, 7.0])
    want = s + [a.sum(), (a * a).sum()]
    for pes in (2, 3):
        got = s.copy()
        run = dace_cpufree.compile(dp.accumulate, backend="emulate", pes=pes, distribute={"A": 0}, race_check="shuffle")
        run(a, got)
        np.testing.assert_allclose(got, want, rtol=1e-12, err_msg=f"on {pes} PEs")


def test_a_missing_halo_wait_is_reported_as_a_race():
    """The generated kernel with its first halo wait removed: the race checker reports the halo read before the
    signal, naming the array (or the buffer its halo arrives in) and the program line of the exchange."""
    opts = _options({"A": 0, "B": 0})
    split = {"A": 0, "B": 0}
    source = dace_cpufree.kernel_source(dp.jacobi_1d, backend="emulate", race_check="forward", distribute=split)
    sdfg = dace_cpufree.persistent_sdfg(dp.jacobi_1d, options=opts)
    code, count = re.subn(r"cpufree::shmem::\w+::wait_until_ge\([^;]*\);", ";", source.code, count=1)
    assert count == 1, "the planted change did not apply"
    library = build(code, "distributed_no_wait", "emulate", shmem=True, race_check="forward")
    run = DistributedProgram(sdfg, EmulatedPes(sdfg, source, library, 2), 2)
    with pytest.raises(RaceError) as info:
        run(_random(20), _random(20, seed=1), T=2)
    assert re.search(r"'(__cpufree_halo_)?[AB]' element", info.value.report), info.value.report
    assert "site-packages" not in info.value.report, info.value.report  # the program's lines, not DaCe's


def test_too_many_pes_for_the_domain_is_refused():
    run = dace_cpufree.compile(dp.fourth_order, backend="emulate", pes=4, distribute={"A": 0, "B": 0})
    with pytest.raises(ArgumentError, match="fewer PEs or a larger domain"):
        run(np.zeros(13), np.zeros(13), T=1)  # 4 + 4 + 4 + 1: the last PE owns less than the halo of 2


def _line(program, text: str) -> str:
    """``distribute_programs.py:N`` of the first line of ``program`` that holds ``text``."""
    lines, first = inspect.getsourcelines(program.f)
    return f"distribute_programs.py:{first + next(k for k, line in enumerate(lines) if text in line)}"


@pytest.mark.parametrize(
    "program, split, words, line",
    [
        (dp.reversed_index, {"A": 0, "B": 0}, ("'A'", "'N - i - 1'", "Fix:"), "dace.map"),
        (dp.indirect_index, {"A": 0, "B": 0}, ("'A'", "data-dependent", "Fix:"), "dace.map"),
        (dp.product, {"A": 0, "y": 0}, ("'A'", "MatMul", "product over the split axis"), "A @ x"),
        (dp.unsplit_output, {"A": 0}, ("'B'", "not split itself", "add 'B'"), "B[1:-1]"),
        (dp.in_place, {"u": 0}, ("'u'", "still reads it", "into a second array"), "u[1:-1]"),
        (dp.longer_temporary, {"B": 0}, ("beyond the split axis", "no PE would compute", "Fix: also name"), "t = "),
    ],
)
def test_programs_that_cannot_be_split_are_refused(program, split, words, line):
    """The error names the array, what is wrong, the fix, and the program line (of the map for a map's access)."""
    with pytest.raises(NotPersistableError) as info:
        dace_cpufree.kernel_source(program, distribute=split)
    for word in (*words, _line(program, line)):
        assert word in str(info.value), str(info.value)


def test_bad_distribute_arguments_name_the_fix():
    with pytest.raises(CpufreeError, match="no array argument.*Fix: name some of A, B"):
        dace_cpufree.kernel_source(dp.jacobi_1d, distribute={"C": 0})
    with pytest.raises(CpufreeError, match="has 1 axes.*axis from 0 to 0"):
        dace_cpufree.kernel_source(dp.jacobi_1d, distribute={"A": 1, "B": 0})
    with pytest.raises(CpufreeError, match="dict of array name -> axis"):
        dace_cpufree.kernel_source(dp.jacobi_1d, distribute=["A"])


def test_inspect_shows_each_arrays_local_shape_halos_and_exchanges(tmp_path, capsys):
    program = tmp_path / "prog.py"
    program.write_text("from distribute_programs import jacobi_2d\n")
    assert cli(["inspect", f"{program}:jacobi_2d", "--distribute", "A:0,B:0", "--pes", "4"]) == 0
    out = capsys.readouterr().out
    assert "A: axis 0 split, local shape (__cpufree_local + 2, M), halo 1 below / 1 above (named)" in out
    assert re.search(r"exchange of B after step .*distribute_programs.py:\d+\): edges up .* and down", out)
    assert "tasklet putmem" in out and "tasklet signal_wait" in out


@pytest.mark.compile
def test_nvcc_builds_a_distributed_program_linked_against_nvshmem():
    source = dace_cpufree.kernel_source(dp.jacobi_2d, distribute={"A": 0, "B": 0})
    assert "cpufree_shmem" in source.code or "nvshmem" in source.code
    library = build(source.code, "distributed_jacobi_2d", "cuda", shmem=True, full_blocks=source.direct_stores)
    assert library.stat().st_size > 0


@pytest.mark.gpu
@pytest.mark.nvshmem
def test_a_distributed_program_runs_on_one_gpu_as_one_pe():
    """One process (no launcher): PE 0 of 1 owns the whole domain; its halo exchanges go to itself."""
    A, B = _random(40, 33), _random(40, 33, seed=1)
    want_a, want_b = A.copy(), B.copy()
    dp.jacobi_2d.f(want_a, want_b, 7)
    run = dace_cpufree.compile(dp.jacobi_2d, distribute={"A": 0, "B": 0})
    assert run.pes == 1
    run(A, B, T=7)
    np.testing.assert_allclose(A, want_a, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(B, want_b, rtol=1e-12, atol=1e-12)
