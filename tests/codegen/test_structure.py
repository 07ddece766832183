"""CPU tests: SDFG structure and generated code text."""

import re

import dace
import pytest
from dace_cpufree.codegen import CUDA, HIP, generate, ir
from dace_cpufree.codegen.ir import Form
from dace_cpufree.transformations import PERSISTENT_SCHEDULE, FusePersistentKernel
from kernel_copies import cg_residual, gemm, jacobi_2d, shmem_jacobi_2d, shmem_jacobi_3d, softmax
from kernel_steps import forms, items
from programs import column_sums, independent_then_dependent, row_sums, scalar_sum, time_loop, two_independent

import dace_cpufree


def _unfused(program) -> dace.SDFG:
    sdfg = program.to_sdfg(simplify=True)
    FusePersistentKernel(fuse_maps=False).apply_pass(sdfg, {})
    return sdfg


def test_every_top_level_map_is_persistent():
    sdfg = dace_cpufree.persistent_sdfg(jacobi_2d.program)
    top = [
        n for s in sdfg.states() for n in s.nodes() if isinstance(n, dace.nodes.MapEntry) and s.entry_node(n) is None
    ]
    assert top and all(m.map.schedule == PERSISTENT_SCHEDULE for m in top)
    assert not any(isinstance(n, dace.nodes.LibraryNode) for n, _ in sdfg.all_nodes_recursive())


@pytest.mark.parametrize(
    "program, fused, syncs",
    [
        (independent_then_dependent, False, 1),  # two independent maps share a step, the third needs a sync
        (two_independent, False, 0),
        # unfused, each stencil update is two maps through a temporary: 4 syncs per step
        (time_loop, False, 4),
        # fused: B-update, sync, A-update, sync (before the next step's B-update)
        (time_loop, True, 2),
        # accumulator init, sync, grid-wide reduction (atomics), sync, copy into out[0]
        (scalar_sum, False, 2),
    ],
)
def test_grid_syncs_only_where_dependencies_cross(program, fused, syncs):
    src = dace_cpufree.kernel_source(program) if fused else generate(_unfused(program), CUDA)
    assert src.grid_syncs == syncs
    assert src.code.count("__grid.sync();") == syncs  # text under test: the printer's count is what it printed


def test_one_kernel_launched_once_cooperatively():
    src = dace_cpufree.kernel_source(jacobi_2d.program)
    # the time loop is inside the kernel: a loop of the kernel IR around the stencil steps
    loops = [c for seq in ir.seqs(src.kernel_ir) for c in seq.children if isinstance(c, ir.Loop)]
    assert [loop.cond.code for loop in loops] == [["(t < TSTEPS)"]]
    assert all(i in list(ir.items(loops[0])) for i in items(src) if i.label.startswith("map "))
    # text under test: one kernel and one cooperative launch in the library the builder compiles
    assert len(re.findall(r"__global__ void", src.code)) == 1
    assert src.code.count("CPUFREE_LAUNCH_COOPERATIVE(") == 1


def test_grid_stride_loop_over_whole_grid_without_scheduler():
    src = dace_cpufree.kernel_source(jacobi_2d.program, scheduler=False)
    assert set(forms(src)) == {Form.ELEMENTS} and not any(i.tile for i in items(src))


def test_while_loop_condition_reads_device_data_after_sync():
    src = dace_cpufree.kernel_source(cg_residual.program)
    # every thread evaluates the condition's value (an interstate assignment) after the grid sync
    readers = [i for i in items(src) if "res_index" in i.reads and i.executor == ir.Executor.EVERY]
    assert readers and all(i.sync_before for i in readers)


def test_matmul_becomes_an_in_kernel_product_not_a_host_library_call():
    src = dace_cpufree.kernel_source(gemm.program)
    assert [i.label for i in items(src) if i.collective] == ["tasklet _MatMult_gemm"]  # every thread of the grid
    assert "cublas" not in src.code.lower()  # text under test: no host cuBLAS call anywhere in the library


def test_hip_dialect_renames_runtime():
    src = generate(_unfused(time_loop), HIP)
    # text under test: the dialect renames the runtime's calls in the printed text
    assert "hipOccupancyMaxActiveBlocksPerMultiprocessor" in src.code
    assert "cudaMalloc" not in src.code
    # device attributes have their own HIP names (hipDeviceAttributeWarpSize, not hipDevAttrWarpSize)
    assert "hipDeviceAttributeWarpSize" in src.code and "hipDeviceAttributeCooperativeLaunch" in src.code
    assert "DevAttr" not in src.code


def test_restrict_only_on_arrays_the_kernel_never_writes():
    src = dace_cpufree.kernel_source(cg_residual.program)
    written = {a.name: a.written for a in src.args if a.kind == "array"}
    assert not written["b"] and written["it"] and written["x"]
    # text under test: the declarations nvcc sees follow the fact
    head = src.code[src.code.index("__global__ void") : src.code.index("{")]
    assert "double * __restrict__ b" in head  # read only
    assert "int64_t * it" in head and "double * x" in head  # written: no __restrict__


def test_matrix_vector_rows_use_a_warp_per_output_without_scheduler():
    """A @ x reduces over the contiguous axis: lanes stride over a row, shuffles combine."""
    src = dace_cpufree.kernel_source(row_sums, scheduler=False)
    assert Form.WARP_PER_OUTPUT in forms(src)


def test_gemm_keeps_a_thread_per_output():
    """C[i, j] += A[i, k] * B[k, j]: B's contiguous axis is j (an output axis), so a thread owns C[i, j]."""
    assert Form.WARP_PER_OUTPUT not in forms(dace_cpufree.kernel_source(gemm.program))


def test_cli_inspect_prints_code_and_summary(tmp_path, capsys):
    from dace_cpufree.cli import main

    prog = tmp_path / "prog.py"
    prog.write_text(
        "import dace\nN = dace.symbol('N')\n\n@dace.program\ndef f(A: dace.float64[N], B: dace.float64[N]):\n"
        "    B[:] = A * 2.0\n"
    )
    assert main(["inspect", f"{prog}:f"]) == 0
    out = capsys.readouterr().out  # text under test: what the command prints
    assert "__global__ void" in out and "work items    : 1" in out and "grid.sync()   : 0" in out


def _kernel_text(program, **options) -> str:
    code = dace_cpufree.generate_code(program, **options)
    return code[code.index("__global__") : code.index("// ---- host launcher")]


def test_loop_steps_of_communicating_kernels_run_apart():
    """In a kernel with SHMEM calls every grid step of the time loop is its own function (cpufree::apart,
    by-value captures); kernels without communication keep their steps inline (faster there: see
    codegen/kernel.py)."""
    sizes = dict(symbols=dict(LX=66, LY=34, PY=2))
    assert dace_cpufree.kernel_source(shmem_jacobi_2d.plain, **sizes).steps_apart
    assert not dace_cpufree.kernel_source(jacobi_2d.program).steps_apart  # no communication: inline
    # text under test: the two half-steps' stencils printed as functions of their own, inside the time loop
    step_apart = re.compile(r"// map [^\n]*\n\s*cpufree::apart\(\[=\]\(double \* [AB]")
    kernel = _kernel_text(shmem_jacobi_2d.plain, **sizes)
    assert len(step_apart.findall(kernel)) >= 2 and kernel.index("cpufree::apart([=](") > kernel.index("// loop")


def test_step_functions_take_the_kernel_pointers_as_parameters():
    """A tile step copies the scalars it uses (by reference, every global store could alias them: gesummv's
    warp step reloaded them 71 times) and gets the kernel's pointers as parameters declared like the kernel's
    (captured, nvcc saw struct members: generic loads and stores, no __restrict__). Text under test: the capture
    and parameter forms nvcc compiles (tests/transformations/test_scheduler.py builds gesummv-like steps)."""
    kernel = _kernel_text(softmax.program)
    assert "[&]" not in kernel
    header = re.search(r"auto __step = \[=\]\(auto __tile, ([^)]*)\) \{", kernel)
    params = dict(reversed(p.rsplit(" ", 1)) for p in header.group(1).split(", "))
    assert params["x"] == "float * __restrict__"  # read only
    assert params["__return"] == "float *"  # written: no __restrict__, as in the kernel's signature
    call = re.search(r"cpufree::with_tile<\d+>\(.*, __step, ([^;]*)\);", kernel)
    assert call.group(1).split(", ") == list(params)  # passed in the same order
    # read-only arrays load through __ldg in the step (nvcc cannot prove them read-only there); written ones not
    assert "= __ldg(&x[(__i0) * (((H * SM) * SM)) + (__i1) * ((SM * SM)) + (__i2) * (SM) + (__i3)]);" in kernel
    assert "__ldg(&__return" not in kernel and "__ldg" not in _kernel_text(softmax.program, scheduler=False)
    # communicating kernels: steps apart take theirs the same way, SHMEM tasklets too
    kernel = _kernel_text(shmem_jacobi_2d.plain, symbols=dict(LX=66, LY=34, PY=2))
    assert "cpufree::apart([=]() {" not in kernel
    assert re.search(r"cpufree::apart\(\[=\]\(double \* A, double \* B\) \{", kernel)
    assert re.search(r"\}, B, flags, __cpufree_halo_B(_\d+)?\);", kernel)  # a put into its staging buffer


def test_column_reductions_split_the_reduced_dimension_into_ranges_over_the_tiles():
    """``y_2 @ A`` alone (mvt's second product; outputs along the contiguous dimension): a lane per output, the
    rows split into ranges over the grid's tiles; the ranges' sums meet in atomic adds only where there are several."""
    src = dace_cpufree.kernel_source(column_sums)
    assert [(i.form, i.tile) for i in items(src) if i.form == Form.TILE_COLUMNS] == [(Form.TILE_COLUMNS, 1024)]
    assert any("split into ranges over the tiles" in s for _, s, _ in src.steps)
    assert Form.TILE_COLUMNS not in forms(dace_cpufree.kernel_source(column_sums, scheduler=False))
    # text under test: the store that is atomic only where the rows are split (one range: deterministic sums)
    kernel = _kernel_text(column_sums)
    assert (
        "if (__c < __cols) { if (__chunks > 1) cpufree::atomic_combine<cpufree::Op::Sum>(&y_2_matmul_A[(__i0)], "
        "__acc1); else y_2_matmul_A[(__i0)] = " in kernel
    )


def test_thread_per_output_reductions_spread_their_warps_over_the_blocks():
    """Column sums of ``y_2 @ A`` (a thread per output): warps numbered block-fastest, lanes consecutive."""
    src = dace_cpufree.kernel_source(column_sums, scheduler=False)
    assert forms(src).count(Form.THREAD_PER_OUTPUT) == 1
    # text under test: the numbering of the thread-per-output step, and the element-wise steps' own
    kernel = _kernel_text(column_sums, scheduler=False)
    spread = (
        "const long long __spread = blockDim.x % warpSize ? __tid : "
        "((long long)(threadIdx.x / warpSize) * __blocks + __block) * warpSize + threadIdx.x % warpSize;"
    )
    assert kernel.count(spread) == 1
    assert "for (long long __f = __spread; __f < __n; __f += __nthreads) {" in kernel
    # element-wise maps keep thread-fastest numbering
    assert "for (long long __f = __tid; __f < __n; __f += __nthreads) {" in kernel


def test_copies_decode_once_in_32_bits_when_sizes_are_constants():
    """An unpacking copy (halo buffer -> plane) of constant size: one 32-bit decode serves both ends."""
    kernel = _kernel_text(shmem_jacobi_3d.overlapped, symbols=dict(LX=34, N=34))
    start = kernel.index("// copy lo_buf -> B")  # text under test: the printed index arithmetic
    copy = kernel[start : kernel.index("}", kernel.index("= lo_buf[", start))]
    assert "(long long)((unsigned)__s % (unsigned)(32))" in copy
    assert "__d" not in copy and "__s /= " not in copy
