"""CPU tests of the thread scheduler: loop structure, tile sizes, tile reductions, results, nvcc.

The scheduler (``ScheduleThreads``) gives each step a tile size; the generator partitions blocks
into tiles (``cg::tiled_partition<T>``), maps the contiguous dimension to the lanes of a tile and
fuses up to three outer dimensions into one tile-stride loop.
"""

import types

import dace
import numpy as np
import programs
import pytest
from builds import BACKENDS
from dace_cpufree.codegen.ir import Form
from helpers import check_against_numpy
from kernel_copies import heat_3d, jacobi_1d, softmax
from kernel_steps import forms, tiles
from programs import SOFTMAX_PAPER, softmax_f64

import dace_cpufree
from dace_cpufree.errors import CpufreeError
from dace_cpufree.runtime import build

N, M, K, L, P = (dace.symbol(s) for s in "NMKLP")


@dace.program
def scale_2d(A: dace.float64[N, M], B: dace.float64[N, M]):
    B[:] = 2.0 * A


@dace.program
def scale_5d(A: dace.float64[N, M, K, L, P], B: dace.float64[N, M, K, L, P]):
    B[:] = A + 1.0


def _kernel(code: str) -> str:
    return code[: code.index("// ---- host launcher")]


def test_softmax_4d_rows_get_tiles_tile_reductions_and_one_fused_row_loop():
    src = dace_cpufree.kernel_source(softmax.program, symbols=SOFTMAX_PAPER)
    assert tiles(src) == {512}  # the static bound: the 512-wide rows
    # all six steps (two initialisations, two reductions, exp, divide) share one tile-stride loop over
    # the three fused outer dimensions: one tile per row, tile reductions (no atomics), no grid.sync() between them
    assert forms(src) == [Form.ROWS] and src.grid_syncs == 0
    (step,) = src.steps
    assert step[0].count("reduce_output") == 2 and "_Sub_" in step[0] and "_Div_" in step[0]
    assert "6 steps fused row by row" in step[1] and "tile-stride loop over fused (__g0, __g1, __g2)" in step[1]
    # text under test: the operator of each reduction (the program's max and sum) printed into its tile reduction
    kernel = _kernel(src.code)
    assert "cpufree::tile_reduce<cpufree::Op::Max>(__tile" in kernel
    assert "cpufree::tile_reduce<cpufree::Op::Sum>(__tile" in kernel


def test_softmax_all_maps_tiled_still_fuses_rows():
    src = dace_cpufree.kernel_source(softmax.program, symbols=SOFTMAX_PAPER, scheduler="all")
    assert src.grid_syncs == 0 and forms(src) == [Form.ROWS] and tiles(src) == {512}


@dace.program
def row_max_then_neighbour_row(x: dace.float64[N, M], out: dace.float64[N, M]):
    m = np.max(x, axis=-1)
    for i, j in dace.map[0:N, 0:M]:
        out[i, j] = x[i, j] - m[N - 1 - i]


def test_row_fusion_refused_when_a_step_reads_another_row():
    src = dace_cpufree.kernel_source(row_max_then_neighbour_row)
    # the reduction and its initialisation share rows; the next step reads row N-1-i of m: not fused
    (label, _, sync) = src.steps[-1]
    assert label.startswith("map ") and sync  # waits for every tile's reduction
    assert src.steps[0][0].startswith("rows ") and "reduce_output" in src.steps[0][0]
    module = types.SimpleNamespace(
        NAME="row_max_then_neighbour_row",
        program=row_max_then_neighbour_row,
        PRESETS={},
        OUTPUTS=["out"],
        RTOL=1e-12,
        ATOL=0.0,
        initialize=lambda N, M: dict(x=np.random.default_rng(1).random((N, M)), out=np.zeros((N, M))),
        reference=lambda x, out: out.__setitem__(slice(None), x - x.max(axis=-1)[::-1, None]),
    )
    check_against_numpy(module, "emulate", dict(N=9, M=13))


def test_heat_3d_fuses_two_outer_dimensions_and_tiles_the_contiguous_one():
    src = dace_cpufree.kernel_source(heat_3d.program, symbols={"N": 40}, scheduler="all")
    assert tiles(src) == {64}  # 38 interior points: the power of two covering them
    assert forms(src) == [Form.TILED_MAP] * 2
    assert all("tile-stride loop over fused (__i0, __i1)" in s for _, s, _ in src.steps)


def test_2d_map_symbolic_extent_picks_the_tile_at_run_time():
    src = dace_cpufree.kernel_source(scale_2d, scheduler="all")
    assert forms(src) == [Form.TILED_MAP] and tiles(src) == {1024}
    assert "extent symbolic" in src.steps[0][1]
    assert tiles(dace_cpufree.kernel_source(scale_2d, symbols={"M": 100}, scheduler="all")) == {128}


def test_more_than_three_outer_dimensions_run_sequentially_outside_the_fused_loop():
    src = dace_cpufree.kernel_source(scale_5d, scheduler="all")
    assert forms(src) == [Form.TILED_MAP]
    assert "sequential (__i0)" in src.steps[0][1] and "fused (__i1, __i2, __i3)" in src.steps[0][1]


def test_tile_size_override_and_its_errors():
    label = dace_cpufree.kernel_source(scale_2d).steps[0][0].removeprefix("map ")
    src = dace_cpufree.kernel_source(scale_2d, symbols={"M": 100}, tile_sizes={label: 32})  # override: tiled
    assert tiles(src) == {32}
    plain = dace_cpufree.kernel_source(scale_2d, scheduler="all", tile_sizes={label: -1})
    assert not tiles(plain) and forms(plain) == [Form.ELEMENTS]
    with pytest.raises(CpufreeError, match="not a power of two"):
        dace_cpufree.generate_code(scale_2d, tile_sizes={label: 48})
    with pytest.raises(CpufreeError, match="does not have: nope"):
        dace_cpufree.generate_code(scale_2d, tile_sizes={"nope": 64})


def test_scheduler_off_is_the_plain_grid_stride_code():
    src = dace_cpufree.kernel_source(softmax.program, scheduler=False)
    assert not tiles(src) and Form.WARP_PER_OUTPUT in forms(src)


def test_one_dimensional_maps_keep_one_grid_stride_loop():
    src = dace_cpufree.kernel_source(jacobi_1d.program)
    assert set(forms(src)) == {Form.ELEMENTS}


def test_a_product_inside_a_map_is_a_register_reduction_tiled_over_the_output_rows():
    """A batch with a matrix per entry on both sides is DaCe's map of products (whole-matrix products and batches
    sharing one matrix are cpufree::gemm calls instead, tests/transformations/test_gemm.py)."""
    src = dace_cpufree.kernel_source(programs.both_batched, scheduler="all")
    assert Form.TILED_MAP in forms(src)
    assert any("lanes over" in s and "register reduction" in s for _, s, _ in src.steps)


def test_matrix_vector_rows_reduce_inside_a_tile():
    assert Form.ROWS in forms(dace_cpufree.kernel_source(programs.row_sums))  # a tile per row


def test_cli_inspect_reports_tiles(tmp_path, capsys):
    from dace_cpufree.cli import main

    prog = tmp_path / "prog.py"
    prog.write_text(
        "import dace\nN = dace.symbol('N')\nM = dace.symbol('M')\n\n@dace.program\n"
        "def f(A: dace.float64[N, M], B: dace.float64[N, M]):\n    B[:] = A * 2.0\n"
    )
    assert main(["inspect", f"{prog}:f"]) == 0
    out = capsys.readouterr().out
    assert "grid-stride loop" in out  # element-wise maps are not tiled by default


@pytest.mark.parametrize(
    "module, sizes",
    [
        (softmax, dict(N=2, H=3, SM=40)),
        (heat_3d, dict(N=12, TSTEPS=3)),
        (types.SimpleNamespace(**{**vars(softmax), "program": softmax_f64}), dict(N=2, H=2, SM=24)),
    ],
    ids=["softmax", "heat_3d", "softmax_f64"],
)
@pytest.mark.parametrize("specialize", [False, True], ids=["symbolic", "static"])
def test_scheduled_results_match_numpy_in_emulation(module, sizes, specialize):
    options = {"scheduler": "all"}
    if specialize:
        free = {str(s) for s in module.program.to_sdfg().free_symbols}
        options["symbols"] = {k: v for k, v in sizes.items() if k in free}
    dtype = np.float64 if module.program is softmax_f64 else None
    check_against_numpy(module, "emulate", sizes, options=options, dtype=dtype)


def test_five_dimensional_map_matches_numpy_in_emulation():
    A = np.random.default_rng(0).random((2, 3, 4, 5, 6))
    B = np.zeros_like(A)
    dace_cpufree.compile(scale_5d, backend="emulate", scheduler="all")(A=A, B=B)
    np.testing.assert_array_equal(B, A + 1.0)


@pytest.mark.compile
@pytest.mark.parametrize("which", ["softmax_paper", "softmax_f64_paper", "heat_3d", "scale_5d"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_compiles_scheduled_code(which, backend):
    program, symbols = {
        "softmax_paper": (softmax.program, SOFTMAX_PAPER),
        "softmax_f64_paper": (softmax_f64, dict(N=64, M=16, K=512)),
        "heat_3d": (heat_3d.program, {"N": 40}),
        "scale_5d": (scale_5d, None),
    }[which]
    source = dace_cpufree.kernel_source(program, symbols=symbols, scheduler="all", backend=backend)
    library = build(source.code, f"nvcc_sched_{which}", backend)
    assert library.exists() and library.stat().st_size > 0
