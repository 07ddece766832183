"""Step timing (``compile(..., step_times=True)`` or ``DACE_CPUFREE_STEP_TIMES=1``): marks around every grid sync,
block barrier and step of the kernel, summed per block in shared memory and read back by
``PersistentProgram.step_times()``.

CPU tests: the generated text, the host emulation (the sums against the elapsed time), nvcc (a plain and a
communicating kernel), and the errors. The GPU test checks the sums against the kernel's own elapsed time on
every block of a real grid."""

import re

import numpy as np
import pytest
from helpers import check_against_numpy
from kernel_copies import jacobi_2d, shmem_jacobi_3d

import dace_cpufree
from dace_cpufree.runtime import build

STENCIL = jacobi_2d


@pytest.fixture
def timed(monkeypatch):
    monkeypatch.setenv("DACE_CPUFREE_STEP_TIMES", "1")


def test_off_by_default(monkeypatch):
    monkeypatch.delenv("DACE_CPUFREE_STEP_TIMES", raising=False)
    source = dace_cpufree.kernel_source(STENCIL.program)
    assert source.step_labels is None


def test_the_compile_option_takes_precedence_over_the_environment(monkeypatch):
    monkeypatch.delenv("DACE_CPUFREE_STEP_TIMES", raising=False)
    assert dace_cpufree.kernel_source(STENCIL.program, step_times=True).step_labels
    monkeypatch.setenv("DACE_CPUFREE_STEP_TIMES", "1")
    assert dace_cpufree.kernel_source(STENCIL.program, step_times=False).step_labels is None
    monkeypatch.delenv("DACE_CPUFREE_STEP_TIMES")
    prog = check_against_numpy(STENCIL, "emulate", "test", options=dict(step_times=True))
    assert prog.step_times().us.shape == (1, len(prog.source.step_labels))


def test_every_sync_and_step_is_marked(timed):
    """One segment per grid sync and per step, plus segment 0 (the control flow between steps); each grid sync
    is closed by the mark right after it, each step by the mark after its code."""
    source = dace_cpufree.kernel_source(STENCIL.program)
    labels = source.step_labels
    code = source.code
    assert labels[0] == "between steps"
    syncs = [k for k, label in enumerate(labels) if label.startswith("grid sync before ")]
    assert len(syncs) == source.grid_syncs
    steps = [label for label in labels[1:] if not label.startswith(("grid sync", "block barrier"))]
    assert steps == [label for label, _, _ in source.steps]
    # the marks exist only as the printed calls that close each segment; the IR has no node for them
    marks = [int(m) for m in re.findall(r"__cpufree_times\.mark\((\d+)\);", code)]
    assert set(marks) == set(range(len(labels)))
    assert marks.count(0) >= len(syncs)  # every sync is entered from segment 0's mark
    for k in syncs:  # the mark closing a grid sync comes right after it
        assert re.search(rf"__grid\.sync\(\);\n\s*__cpufree_times\.mark\({k}\);", code)
    n = len(labels)
    # the printed sizes must agree with the segments: the runtime reads them back through cpufree_step_segments
    assert f"__shared__ unsigned long long __cpufree_seg[{n} + 3];" in code
    assert f"cpufree_step_times[CPUFREE_TIMES_BLOCKS][{n} + 2];" in code
    assert f'extern "C" int cpufree_step_segments() {{ return {n}; }}' in code


def test_a_communicating_kernel_marks_each_segment_once(timed):
    """jacobi_3d overlapped (branches around the puts and waits, block barriers before the unpacking): every
    segment but 0 is closed by exactly one mark, and the barriers have segments of their own."""
    source = dace_cpufree.kernel_source(shmem_jacobi_3d.overlapped, symbols=dict(LX=130, N=258), shmem_transport="p2p")
    marks = [int(m) for m in re.findall(r"__cpufree_times\.mark\((\d+)\);", source.code)]  # printed calls only
    assert sorted(k for k in marks if k) == list(range(1, len(source.step_labels)))
    assert any(label.startswith("block barrier before ") for label in source.step_labels)
    assert sum(label.startswith("grid sync before ") for label in source.step_labels) == source.grid_syncs


def test_the_sums_add_up_in_emulation(timed):
    """The host emulation (one block, the steady clock for both clocks) runs the timed kernel to the NumPy
    result; the segments' sums make up the block's elapsed time (the marks leave out only the constructor's and
    destructor's own instructions). A size that runs for milliseconds: at the "test" size (microseconds) one
    interruption of the process decided the ratios."""
    prog = check_against_numpy(STENCIL, "emulate", dict(N=160, TSTEPS=10))
    times = prog.step_times()
    assert times.us.shape == (1, len(prog.source.step_labels))
    assert (times.us >= 0).all() and times.elapsed_us[0] > 0
    assert 0.9 * times.elapsed_us[0] <= times.us.sum() <= times.elapsed_us[0] * 1.0001
    maps = [k for k, label in enumerate(times.labels) if label.startswith("map ")]
    assert maps and times.us[0, maps].sum() > 0.5 * times.us.sum()  # the stencil's maps hold the time
    assert times.launch == (1, 1) and "1 of 1 blocks of 1 threads" in times.table(per=10)


def test_an_untimed_build_says_how_to_time_it(monkeypatch):
    monkeypatch.delenv("DACE_CPUFREE_STEP_TIMES", raising=False)
    prog = check_against_numpy(STENCIL, "emulate", "test")
    with pytest.raises(dace_cpufree.CpufreeError, match="DACE_CPUFREE_STEP_TIMES=1"):
        prog.step_times()


def test_a_bad_setting_and_hip_are_named(monkeypatch):
    monkeypatch.setenv("DACE_CPUFREE_STEP_TIMES", "yes")
    with pytest.raises(dace_cpufree.CpufreeError, match="DACE_CPUFREE_STEP_TIMES='yes'"):
        dace_cpufree.generate_code(STENCIL.program)
    monkeypatch.setenv("DACE_CPUFREE_STEP_TIMES", "1")
    with pytest.raises(dace_cpufree.CpufreeError, match="unset DACE_CPUFREE_STEP_TIMES for hip"):
        dace_cpufree.generate_code(STENCIL.program, backend="hip")


@pytest.mark.compile
def test_nvcc_compiles_timed_kernels(timed):
    """A plain kernel and a communicating one (jacobi_3d overlapped, direct stores, linked against NVSHMEM)."""
    source = dace_cpufree.kernel_source(STENCIL.program)
    assert build(source.code, "timed_jacobi_2d", "cuda").stat().st_size > 0
    source = dace_cpufree.kernel_source(shmem_jacobi_3d.overlapped, symbols=dict(LX=130, N=258), shmem_transport="p2p")
    assert source.step_labels and source.shmem
    assert (
        build(source.code, "timed_jacobi_3d_overlapped", "cuda", shmem=source.shmem, full_blocks=source.direct_stores)
        .stat()
        .st_size
        > 0
    )


@pytest.mark.gpu
def test_the_sums_add_up_on_every_block_of_a_gpu(timed):
    """On a GPU: a row per block of the grid; each block's segments sum to its elapsed time (within the
    marks' own cycles), and the elapsed times are close to the kernel's event time."""
    import cupy as cp

    to_dev = lambda args: {k: cp.asarray(v) if hasattr(v, "shape") else v for k, v in args.items()}  # noqa: E731
    prog = check_against_numpy(STENCIL, "cuda", "small", to_device=to_dev, to_host=cp.asnumpy)
    times = prog.step_times()
    assert times.us.shape == (prog.launch_config[0], len(prog.source.step_labels))
    sums = times.us.sum(axis=1)
    assert np.all(sums <= times.elapsed_us * 1.0001) and np.all(sums >= 0.95 * times.elapsed_us)
    assert times.elapsed_us.max() <= 1e3 * prog.last_kernel_ms * 1.01
