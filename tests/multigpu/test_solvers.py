"""``nvshmem.Allreduce`` and the CG solvers built on it (``npbench_runs/solvers``).

CPU: the reduction calls in the generated NVSHMEM and rocSHMEM text, the gather form (non-blocking, direct stores),
the errors, CG / pipelined CG / CSR CG in the host emulation (one PE: the reduction is the identity) against NumPy,
and nvcc builds device-linked against NVSHMEM (``compile``). GPU: the three solvers on one PE against NumPy.
"""

import dace
import numpy as np
import pytest
import shmem_programs as sp
from dace_cpufree.codegen import ir
from dace_cpufree.frontend import Allreduce
from dace_cpufree.transformations import PrepareCommunication
from kernel_steps import items, puts

import dace_cpufree
from dace_cpufree import nvshmem
from dace_cpufree.errors import CommunicationError
from dace_cpufree.vocabulary import SYMMETRIC_STORAGE
from npbench_runs.solvers import PROGRAMS, csr, one_pe, poisson, poisson3d

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


def test_one_pe_makes_the_reduction_the_identity_and_drops_the_halo_branches():
    sdfg = one_pe(poisson.cg_poisson_2d)
    kinds = {type(n).__name__ for n, _ in sdfg.all_nodes_recursive()}
    assert not kinds & {"Allreduce", "Putmem", "SignalWait"}
    assert not {"__cpufree_pe", "__cpufree_npes"} & {str(s) for s in sdfg.free_symbols}


def test_one_pe_refuses_a_put_to_itself():
    sdfg = sp.signalled_once.to_sdfg(simplify=True)
    with pytest.raises(CommunicationError, match="host emulation cannot run"):
        PrepareCommunication("emulate").apply_pass(sdfg, {})


def _emulate(name: str, n: int, iters: int):
    run = dace_cpufree.compile(one_pe(PROGRAMS[name]), backend="emulate")
    if name == "cg_csr":
        indptr, indices, data, b = csr.initialize(n)
        x, hist = np.zeros_like(b), np.zeros(iters)
        run(indptr, indices, data, b, x, hist, **csr.symbols(indptr))
        return x, hist, csr.reference(indptr, indices, data, b, iters)
    if name == "cg_poisson_3d":
        args = poisson3d.arguments(n // 2, iters)
        run(*args)
        return args[1], args[2], poisson3d.reference_cg(poisson3d.initialize(n // 2), iters)
    args = poisson.arguments(name, n, iters)
    run(*args)
    x, hist = args[1], args[2]
    solve = poisson.reference_pipelined_cg if name.startswith("pipelined") else poisson.reference_cg
    return x, hist, solve(poisson.initialize(n), iters)


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_solvers_in_the_emulation_match_numpy(name):
    x, hist, (x_ref, hist_ref) = _emulate(name, 16, 25)
    assert np.max(np.abs(hist - hist_ref) / hist_ref) <= 1e-10
    assert np.max(np.abs(x - x_ref)) <= 1e-10 * np.max(np.abs(x_ref))


def test_3d_slabs_put_whole_planes_into_the_neighbours_halos():
    """On several PEs each slab's edge planes travel to the neighbours' halo planes; the NumPy reference of the
    slabs glued back is the global one."""
    assert len(puts(dace_cpufree.persistent_sdfg(PROGRAMS["cg_poisson_3d"], shmem_transport="proxy"))) >= 2
    glob = poisson3d.initialize(8)
    parts = [poisson3d.tile(glob, pe, 4) for pe in range(4)]
    assert all(part.shape == (4, 10, 10) for part in parts)
    back = np.zeros_like(glob)
    for pe, part in enumerate(parts):
        poisson3d.place(back, part, pe, 4)
    np.testing.assert_array_equal(back, glob)


def test_pipelined_cg_follows_cg():
    """In exact arithmetic the pipelined recurrences are CG's; ``hist`` of the pipelined form is one behind."""
    _, cg = poisson.reference_cg(poisson.initialize(32), 30)
    _, pipelined = poisson.reference_pipelined_cg(poisson.initialize(32), 31)
    assert np.max(np.abs(pipelined[1:] - cg) / cg) <= 1e-8


@pytest.mark.compile
@pytest.mark.parametrize(
    "name, transport",
    [
        ("cg_poisson_2d", "proxy"),
        ("cg_poisson_2d", "p2p"),
        ("pipelined_cg_poisson_2d", "proxy"),
        ("cg_poisson_3d", "proxy"),
    ],
)
def test_solvers_build_and_device_link_against_nvshmem(name, transport):
    import subprocess

    from dace_cpufree.runtime import build

    source = dace_cpufree.kernel_source(PROGRAMS[name], shmem_transport=transport)
    library = build(
        source.code, f"solver_{name}_{transport}", "cuda", shmem=source.shmem, full_blocks=source.direct_stores
    )
    defined = subprocess.run(["nm", "-D", "--defined-only", str(library)], capture_output=True, text=True).stdout
    assert "nvshmemi_init_thread" in defined and "cpufree_run" in defined


@pytest.mark.gpu
@pytest.mark.parametrize(
    "name, transport",
    [(name, "p2p") for name in sorted(PROGRAMS)] + [("cg_poisson_2d", "proxy"), ("pipelined_cg_poisson_2d", "proxy")],
)
def test_solvers_on_one_gpu_match_numpy(name, transport):
    """One PE (no launcher): NVSHMEM's team reduction (proxy) and the gather form (p2p, and non-blocking) are the
    identity there, the halo branches are not taken."""
    n, iters = 62, 40
    run = dace_cpufree.compile(PROGRAMS[name], shmem_transport=transport)
    if name == "cg_csr":
        indptr, indices, data, b = csr.initialize(n)
        x, hist = np.zeros_like(b), np.zeros(iters)
        run(indptr, indices, data, b, x, hist, **csr.symbols(indptr))
        x_ref, hist_ref = csr.reference(indptr, indices, data, b, iters)
    elif name == "cg_poisson_3d":
        args = poisson3d.arguments(30, iters)
        run(*args)
        x, hist = args[1], args[2]
        x_ref, hist_ref = poisson3d.reference_cg(poisson3d.initialize(30), iters)
    else:
        args = poisson.arguments(name, n, iters)
        run(*args)
        x, hist = args[1], args[2]
        solve = poisson.reference_pipelined_cg if name.startswith("pipelined") else poisson.reference_cg
        x_ref, hist_ref = solve(poisson.initialize(n), iters)
    # the dot products' grid-wide atomics sum in another order than NumPy, and CG carries the rounding on
    assert np.max(np.abs(hist - hist_ref) / hist_ref) <= 1e-6
    assert np.max(np.abs(x - x_ref)) <= 1e-6 * np.max(np.abs(x_ref))


def test_allreduce_node_is_a_collective():
    """DaCe's passes must neither remove it (dead dataflow) nor fuse its state with independent work."""
    assert Allreduce("r").has_side_effects(None)


def test_upstream_dace_baseline_follows_the_same_recurrences(tmp_path, monkeypatch):
    """The upstream DaCe CG of the bench, built by upstream DaCe for the CPU here, gives NumPy's iterates; its
    GPU build without ``auto_optimize`` puts every map on the GPU with 256-thread blocks and the sums on CUB."""
    from dace.libraries.standard.nodes.reduce import Reduce

    from npbench_runs.frameworks import UpstreamDaCeFramework
    from npbench_runs.solvers import upstream

    monkeypatch.setenv("NPBENCH_RUNS_CACHE", str(tmp_path))
    run = UpstreamDaCeFramework("dace_cpu", ("pure",), gpu=False).prepare(upstream)
    n, iters = 14, 12
    b = poisson.initialize(n)
    x, hist = np.zeros_like(b), np.zeros(iters)
    run(b=b, x=x, hist=hist)
    x_ref, hist_ref = poisson.reference_cg(b, iters)
    np.testing.assert_allclose(hist, hist_ref, rtol=1e-12)
    np.testing.assert_allclose(x, x_ref, rtol=1e-12, atol=1e-14)

    sdfg = upstream.sdfg_without_auto_optimize()
    sdfg.validate()
    maps = [n for n, _ in sdfg.all_nodes_recursive() if isinstance(n, dace.nodes.MapEntry)]
    kernels = [m for m in maps if m.map.schedule == dace.ScheduleType.GPU_Device]
    assert kernels and all(m.map.gpu_block_size in ([32, 8, 1], [256, 1, 1]) for m in kernels)
    reductions = [n for n, _ in sdfg.all_nodes_recursive() if isinstance(n, Reduce)]
    assert len(reductions) == 3 and {r.implementation for r in reductions} == {"CUDA (device)"}
    assert all(sdfg.arrays[a].storage == dace.StorageType.GPU_Global for a in ("b", "x", "hist"))
