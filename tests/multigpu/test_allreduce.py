"""``nvshmem.Allreduce``: the reduction calls in the generated NVSHMEM and rocSHMEM text, the gather form
(non-blocking, direct stores), the errors, the node DaCe's passes keep. The CG solvers built on it (the suite's
``npbench_runs/solvers``): tests/benchmarks/test_solvers.py.
"""

import dace
import numpy as np
import pytest
import shmem_programs as sp
from dace_cpufree.codegen import ir
from dace_cpufree.frontend import Allreduce
from dace_cpufree.transformations import PrepareCommunication
from kernel_steps import items

import dace_cpufree
from dace_cpufree import nvshmem
from dace_cpufree.errors import CommunicationError
from dace_cpufree.vocabulary import SYMMETRIC_STORAGE

N = dace.symbol("N")


@dace.program
def sum_and_max(A: dace.float64[N], out: dace.float64[2]):
    red = np.zeros((2,), dtype=np.float64)
    red[0] = np.sum(A)
    red[1] = np.max(A)
    nvshmem.Allreduce(red, "sum")
    out[:] = red[:]


@dace.program
def mpi_spelling(A: dace.float32[N], out: dace.float32[1]):
    red = np.zeros((1,), dtype=np.float32)
    red[0] = np.max(A)
    nvshmem.Allreduce(red, "MPI_MAX")
    out[:] = red[:]


@dace.program
def overlapped(A: dace.float64[N], B: dace.float64[N], out: dace.float64[2], T: dace.int64):
    red = np.zeros((2,), dtype=np.float64)
    for _ in range(T):
        red[0] = np.sum(A)
        red[1] = np.sum(A * A)
        nvshmem.Allreduce(red, "sum", nonblocking=True)
        B[:] = A * 2.0
        nvshmem.AllreduceWait(red)
        out[:] = red[:]


def _kernel(program, backend="cuda", **options) -> str:
    code = dace_cpufree.generate_code(program, backend=backend, **options)
    return code[: code.index("// ---- host launcher")]


@pytest.mark.parametrize(
    "program, backend, call",
    [
        (sum_and_max, "cuda", "nvshmemx_double_sum_reduce_block(NVSHMEM_TEAM_WORLD, _out, _in, (size_t)(2));"),
        (
            sum_and_max,
            "hip",
            "rocshmem_ctx_double_sum_reduce_wg(ROCSHMEM_CTX_DEFAULT, cpufree::shmem::team_world(), _out, _in, "
            "(int)(2));",
        ),
        (mpi_spelling, "cuda", "nvshmemx_float_max_reduce_block(NVSHMEM_TEAM_WORLD, _out, _in, (size_t)(1));"),
        (
            mpi_spelling,
            "hip",
            "rocshmem_ctx_float_max_reduce_wg(ROCSHMEM_CTX_DEFAULT, cpufree::shmem::team_world(), _out, _in, "
            "(int)(1));",
        ),
    ],
)
def test_blocking_allreduce_is_the_library_team_reduction(program, backend, call):
    kernel = _kernel(program, backend, shmem_transport="proxy")
    assert kernel.count(call) == 1  # the library's team reduction, as the expansion spells the call
    # in place, by the threads of block 0 (where the scalar work runs): no grid sync between it and the leader's
    # work before it, but one earlier (the reductions of the grid wrote the buffer)
    steps = items(dace_cpufree.kernel_source(program, backend=backend, shmem_transport="proxy"))
    k = next(k for k, i in enumerate(steps) if i.label == "tasklet allreduce")
    assert (steps[k].executor, steps[k].block) == (ir.Executor.BLOCK, 0)
    assert not steps[k].sync_before and any(i.sync_before for i in steps[:k])


def test_reduced_buffer_goes_on_the_symmetric_heap():
    sdfg = dace_cpufree.persistent_sdfg(sum_and_max, shmem_transport="proxy")
    assert sdfg.arrays["red"].storage == SYMMETRIC_STORAGE


def test_direct_stores_gather_through_symmetric_slots():
    """shmem_transport="p2p": no NVSHMEM collective in the kernel; this PE's values go into its slot of every PE
    (stores through nvshmem_ptr), flags per parity and PE, combined in PE order."""
    kernel = _kernel(sum_and_max, shmem_transport="p2p")
    # the calls the expansion chose for this transport: no library collective, the gather's own
    assert "_reduce_block" not in kernel
    assert "cpufree::shmem::gather_begin(_slots, _round, _in, __cpufree_pe, __cpufree_npes, 2);" in kernel
    assert "cpufree::shmem::p2p::gather_send(_slots, _flags, __round, __cpufree_pe, __cpufree_npes, 2);" in kernel
    assert "cpufree::shmem::gather_combine<cpufree::Op::Sum>(_out, _slots, __round, __cpufree_npes, 2);" in kernel
    sdfg = dace_cpufree.persistent_sdfg(sum_and_max, shmem_transport="p2p")
    slots, flags = sdfg.arrays["__cpufree_red_slots"], sdfg.arrays["__cpufree_red_flags"]
    assert [str(s) for s in slots.shape] == ["2", "__cpufree_npes", "2"] and slots.storage == SYMMETRIC_STORAGE
    assert [str(s) for s in flags.shape] == ["2", "__cpufree_npes"] and flags.dtype == dace.uint64


@pytest.mark.parametrize("transport", ["proxy", "p2p"])
def test_nonblocking_allreduce_overlaps_the_work_between_start_and_wait(transport):
    steps = items(dace_cpufree.kernel_source(overlapped, shmem_transport=transport))
    start = next(k for k, i in enumerate(steps) if i.label == "tasklet allreduce_start")
    # program order kept: the map runs while the values travel
    assert [i.label for i in steps[start : start + 3]] == [
        "tasklet allreduce_start",
        "map _Mult__map",
        "tasklet allreduce_wait",
    ]
    assert not any(i.sync_before for i in steps[start + 1 : start + 3])  # nothing waits before the wait itself


def test_nonblocking_allreduce_rocshmem_text():
    kernel = _kernel(overlapped, "hip")
    # the ROC_SHMEM build's calls, as the expansion spells them
    assert "cpufree::shmem::gather_send(_slots, _flags, __round, __cpufree_pe, __cpufree_npes, 2);" in kernel
    assert "cpufree::shmem::gather_receive(_flags, __round, __cpufree_pe, __cpufree_npes);" in kernel


@dace.program
def bad_op(A: dace.float64[N]):
    red = np.zeros((1,), dtype=np.float64)
    red[0] = np.sum(A)
    nvshmem.Allreduce(red, "xor")


@dace.program
def bad_dtype(A: dace.complex128[N]):
    red = np.zeros((1,), dtype=np.complex128)
    red[0] = np.sum(A)
    nvshmem.Allreduce(red, "sum")


@dace.program
def bad_strided(A: dace.float64[N, 4]):
    nvshmem.Allreduce(A[:, 0], "sum")


@dace.program
def bad_scalar(A: dace.float64[N]):
    s = np.sum(A)
    nvshmem.Allreduce(s, "sum")


@dace.program
def bad_wait(A: dace.float64[N]):
    nvshmem.AllreduceWait(A)


@dace.program
def bad_twice(A: dace.float64[N]):
    nvshmem.Allreduce(A, "sum", nonblocking=True)
    nvshmem.Allreduce(A, "sum", nonblocking=True)
    nvshmem.AllreduceWait(A)


@dace.program
def bad_unwaited(A: dace.float64[N]):
    nvshmem.Allreduce(A, "sum", nonblocking=True)


@pytest.mark.parametrize(
    "program, match",
    [
        (bad_op, r"unsupported reduction operator 'xor'.*Fix: use one of 'sum', 'max', 'min', 'prod'"),
        (bad_dtype, r"dtype complex128.*Fix: use one of float64"),
        (bad_strided, r"not contiguous in memory.*Fix: reduce a contiguous 1-D array"),
        (bad_scalar, r"is a scalar.*Fix: use a one-element array"),
        (bad_wait, r"no non-blocking Allreduce of 'A' to wait for.*Fix:"),
        (bad_twice, r"still in flight.*Fix: call nvshmem.AllreduceWait\(A\)"),
        (bad_unwaited, r"never completed.*Fix: call nvshmem.AllreduceWait"),
    ],
)
def test_errors_name_the_problem_and_the_fix(program, match):
    with pytest.raises(CommunicationError, match=match):
        dace_cpufree.generate_code(program, shmem_transport="p2p")


def test_calling_from_python_is_an_error():
    with pytest.raises(CommunicationError, match="inside a @dace.program"):
        nvshmem.Allreduce(np.zeros(2), "sum")


def test_one_pe_refuses_a_put_to_itself():
    sdfg = sp.signalled_once.to_sdfg(simplify=True)
    with pytest.raises(CommunicationError, match="host emulation cannot run"):
        PrepareCommunication("emulate").apply_pass(sdfg, {})


def test_allreduce_node_is_a_collective():
    """DaCe's passes must neither remove it (dead dataflow) nor fuse its state with independent work."""
    assert Allreduce("r").has_side_effects(None)
