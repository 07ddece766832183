"""CPU tests: SDFG structure and generated code text."""

import re

import dace
import pytest
from dace_cpufree.codegen import CUDA, HIP, generate
from dace_cpufree.transformations import PERSISTENT_SCHEDULE, FusePersistentKernel
from programs import independent_then_dependent, scalar_sum, time_loop, two_independent

import dace_cpufree
from npbench_runs.kernels import KERNELS


def _unfused(program) -> dace.SDFG:
    sdfg = program.to_sdfg(simplify=True)
    FusePersistentKernel(fuse_maps=False).apply_pass(sdfg, {})
    return sdfg


def test_schedule_is_registered_enum_member():
    assert dace.dtypes.ScheduleType.CPUFree_Persistent is PERSISTENT_SCHEDULE


def test_every_top_level_map_is_persistent():
    sdfg = dace_cpufree.persistent_sdfg(KERNELS["jacobi_2d"].program)
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
    assert src.code.count("__grid.sync();") == syncs


def test_one_kernel_launched_once_cooperatively():
    code = dace_cpufree.generate_code(KERNELS["jacobi_2d"].program)
    assert len(re.findall(r"__global__ void", code)) == 1
    assert code.count("CPUFREE_LAUNCH_COOPERATIVE(") == 1
    launcher = code[code.index('extern "C" int cpufree_run') :]
    # no host loop around the launch: the time loop is inside the kernel
    assert "for (" not in launcher.split("CPUFREE_LAUNCH_COOPERATIVE(")[0].split("cudaEventRecord(start")[1]
    kernel = code[: code.index("// ---- host launcher")]
    assert re.search(r"for \(t = 0; \(t < TSTEPS\); t = \(t \+ 1\)\)", kernel)
    assert "cudaOccupancyMaxActiveBlocksPerMultiprocessor" in launcher
    assert "cudaDevAttrMultiProcessorCount" in launcher


def test_grid_stride_loop_over_whole_grid_without_scheduler():
    code = dace_cpufree.generate_code(KERNELS["jacobi_2d"].program, scheduler=False)
    assert "for (long long __f = __tid; __f < __n; __f += __nthreads)" in code


def test_while_loop_condition_reads_device_data_after_sync():
    code = dace_cpufree.generate_code(KERNELS["cg_residual"].program)
    kernel = code[: code.index("// ---- host launcher")]
    assert "res_index[0] > tol" in kernel
    lines = kernel.splitlines()
    for k, line in enumerate(lines):
        if "res_index[0] > tol" in line:
            assert lines[k - 1].strip() == "__grid.sync();"
            break
    else:
        pytest.fail("no loop condition reading res")


def test_matmul_becomes_an_in_kernel_product_not_a_host_library_call():
    code = dace_cpufree.generate_code(KERNELS["gemm"].program)
    assert "cublas" not in code.lower()  # no host cuBLAS: the device product of cpufree/gemm.cuh
    assert "cpufree::gemm<double>(" in code


def test_hip_dialect_renames_runtime():
    src = generate(_unfused(time_loop), HIP)
    assert "hipOccupancyMaxActiveBlocksPerMultiprocessor" in src.code
    assert "cudaMalloc" not in src.code


def test_restrict_only_on_arrays_the_kernel_never_writes():
    code = dace_cpufree.generate_code(KERNELS["cg_residual"].program)
    head = code[code.index("__global__ void") : code.index("{")]
    assert "double * __restrict__ b" in head  # read only
    assert "int64_t * it" in head and "double * x" in head  # written: no __restrict__


def test_matrix_vector_rows_use_a_warp_per_output_without_scheduler():
    """A @ x reduces over the contiguous axis: lanes stride over a row, shuffles combine."""
    code = dace_cpufree.generate_code(KERNELS["atax"].program, scheduler=False)
    assert "for (long long __f = __tid / warpSize; __f < __n; __f += __nthreads / warpSize)" in code
    assert "cpufree::warp_reduce<cpufree::Op::Sum>" in code


def test_gemm_keeps_a_thread_per_output():
    """C[i, j] += A[i, k] * B[k, j]: B's contiguous axis is j (an output axis), so a thread owns C[i, j]."""
    code = dace_cpufree.generate_code(KERNELS["gemm"].program)
    assert "warp_reduce" not in code


def test_cli_inspect_prints_code_and_summary(tmp_path, capsys):
    from dace_cpufree.cli import main

    prog = tmp_path / "prog.py"
    prog.write_text(
        "import dace\nN = dace.symbol('N')\n\n@dace.program\ndef f(A: dace.float64[N], B: dace.float64[N]):\n"
        "    B[:] = A * 2.0\n"
    )
    assert main(["inspect", f"{prog}:f"]) == 0
    out = capsys.readouterr().out
    assert "__global__ void" in out and "work items    : 1" in out and "grid.sync()   : 0" in out


def _kernel_text(program, **options) -> str:
    code = dace_cpufree.generate_code(program, **options)
    return code[code.index("__global__") : code.index("// ---- host launcher")]


def test_loop_steps_of_communicating_kernels_run_apart():
    """In a kernel with SHMEM calls every grid step of the time loop is its own function (cpufree::apart,
    by-value captures); kernels without communication keep their steps inline (faster there: see
    codegen/kernel.py)."""
    from npbench_runs.multigpu import jacobi_2d

    sizes = dict(symbols=dict(LX=66, LY=34, PY=2))
    step_apart = re.compile(r"// map [^\n]*\n\s*cpufree::apart\(\[=\]\(double \* [AB]")
    kernel = _kernel_text(jacobi_2d.plain, **sizes)
    assert len(step_apart.findall(kernel)) >= 2  # the two half-steps' stencils
    assert kernel.index("cpufree::apart([=](") > kernel.index("// loop")
    assert "cpufree::apart" not in _kernel_text(KERNELS["jacobi_2d"].program)  # no communication: inline


def test_step_functions_take_the_kernel_pointers_as_parameters():
    """A tile step copies the scalars it uses (by reference, every global store could alias them: gesummv's
    warp step reloaded them 71 times) and gets the kernel's pointers as parameters declared like the kernel's
    (captured, nvcc saw struct members: generic loads and stores, no __restrict__)."""
    kernel = _kernel_text(KERNELS["gesummv"].program)
    assert "[&]" not in kernel
    header = re.search(r"auto __step = \[=\]\(auto __tile, ([^)]*)\) \{", kernel)
    params = dict(reversed(p.rsplit(" ", 1)) for p in header.group(1).split(", "))
    assert params["A"] == "double * __restrict__" and params["B"] == "double * __restrict__"  # read only
    assert params["alpha_A_matmul_x_unscaled"] == "double *"  # written: no __restrict__, as in the kernel's signature
    call = re.search(r"cpufree::with_tile<\d+>\(.*, __step, ([^;]*)\);", kernel)
    assert call.group(1).split(", ") == list(params)  # passed in the same order
    # read-only arrays load through __ldg in the step (nvcc cannot prove them read-only there); written ones not
    assert "= __ldg(&B[(__i0) * (N) + (__i1)]);" in kernel and "= __ldg(&x[(__i1)]);" in kernel
    assert "__ldg(&beta_B_matmul_x_unscaled" not in kernel and "__ldg" not in _kernel_text(
        KERNELS["gesummv"].program, scheduler=False
    )
    # communicating kernels: steps apart take theirs the same way, SHMEM tasklets too
    from npbench_runs.multigpu import jacobi_2d

    kernel = _kernel_text(jacobi_2d.plain, symbols=dict(LX=66, LY=34, PY=2))
    assert "cpufree::apart([=]() {" not in kernel
    assert re.search(r"cpufree::apart\(\[=\]\(double \* A, double \* B\) \{", kernel)
    assert re.search(r"\}, B, flags, __cpufree_halo_B(_\d+)?\);", kernel)  # a put into its staging buffer


def test_column_reductions_split_the_reduced_dimension_over_the_warps_of_a_tile():
    """mvt's ``y_2 @ A`` (outputs along the contiguous dimension): a warp's width of outputs per tile, the
    tile's warps (slices) stride over the rows, then combine in shared memory; slice 0 stores."""
    src = dace_cpufree.kernel_source(KERNELS["mvt"].program)
    kernel = _kernel_text(KERNELS["mvt"].program)
    assert "cpufree::with_tile<1024>(cpufree::tile_for_columns(__x___i0, __x___i1), __step, A, y_2, y_2_matmul_A);" in (
        kernel
    )
    assert "for (long long __l = __slice; __l < __x___i1; __l += __slices) {" in kernel
    assert "__acc1 = cpufree::column_reduce<cpufree::Op::Sum>(__tile, __acc1);" in kernel
    assert "if (__slice == 0 && __c < __cols) y_2_matmul_A[(__i0)] = " in kernel
    assert "#pragma unroll 2" in kernel
    assert any("the tile's warps split (__i1), shared-memory combine" in s for _, s, _ in src.steps)
    assert "tile_for_columns" not in _kernel_text(KERNELS["mvt"].program, scheduler=False)


def test_thread_per_output_reductions_spread_their_warps_over_the_blocks():
    """mvt's column sums (a thread per output): warps numbered block-fastest, lanes consecutive."""
    kernel = _kernel_text(KERNELS["mvt"].program, scheduler=False)
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
    from npbench_runs.multigpu import jacobi_3d

    kernel = _kernel_text(jacobi_3d.overlapped, symbols=dict(LX=34, N=34))
    start = kernel.index("// copy lo_buf -> B")
    copy = kernel[start : kernel.index("}", kernel.index("= lo_buf[", start))]
    assert "(long long)((unsigned)__s % (unsigned)(32))" in copy
    assert "__d" not in copy and "__s /= " not in copy
