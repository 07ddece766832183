"""Loops of element-wise in-place updates move into the map (transformations/loop_into_map.py): each map point runs
the loop nest on its own elements, with no grid step and sync per iteration. Loops whose iterations read other
points' elements stay loops. Results against NumPy, under the race checker, nvcc, and on a GPU."""

import dace
import numpy as np
import pytest
from builds import BACKENDS
from dace.sdfg import nodes
from dace_cpufree.codegen import ir
from dace_cpufree.transformations import owned_blocks
from kernel_copies import conv2d_bias

import dace_cpufree
from dace_cpufree.runtime import build

N = dace.symbol("N")
K = dace.symbol("K")


@dace.program
def rows_added(A: dace.float64[K, N], out: dace.float64[N]):
    for k in range(K):
        out[:] = out * 0.5 + A[k, :]


@dace.program
def smoothing(A: dace.float64[N], T: dace.int64):
    for _ in range(T):
        A[1:-1] = 0.5 * (A[:-2] + A[2:])  # reads the neighbours' elements: iterations depend on each other


@dace.program
def row_by_row(A: dace.float64[K, N], out: dace.float64[K, N]):
    for k in range(1, K):
        out[k, :] = out[k - 1, :] + A[k, :]  # the element written depends on the loop variable


def _loops(program) -> list:
    root = dace_cpufree.kernel_source(program).kernel_ir
    return [c for seq in ir.seqs(root) for c in seq.children if isinstance(c, ir.Loop)]


def test_a_convolution_runs_its_whole_loop_nest_on_each_output_element():
    source = dace_cpufree.kernel_source(conv2d_bias.program)
    assert _loops(conv2d_bias.program) == []  # the three loops are each thread's now
    assert source.grid_syncs == 1  # the bias before the sums; none per (p, q, c) any more
    nsdfg = next(
        n
        for n, _ in dace_cpufree.persistent_sdfg(conv2d_bias.program).all_nodes_recursive()
        if isinstance(n, nodes.NestedSDFG)
    )
    element = [
        name for name, desc in nsdfg.sdfg.arrays.items() if desc.transient and isinstance(desc, dace.data.Scalar)
    ]
    assert any(name.startswith("cpufree_element") for name in element)  # the sum lives in a register
    data = conv2d_bias.initialize(**conv2d_bias.PRESETS["small"])
    want = conv2d_bias.reference(data["input"], data["weights"], data["bias"])
    for race in (False, "forward", "shuffle"):
        got = dace_cpufree.compile(conv2d_bias.program, backend="emulate", race_check=race)(
            input=data["input"], weights=data["weights"], bias=data["bias"]
        )
        np.testing.assert_allclose(got, want, rtol=1e-5)


def test_an_update_with_read_only_operands_indexed_by_the_loop_variable_moves():
    assert _loops(rows_added) == []
    A, out = np.random.default_rng(0).random((9, 33)), np.random.default_rng(1).random(33)
    want = out.copy()
    for k in range(9):
        want = want * 0.5 + A[k]
    dace_cpufree.compile(rows_added, backend="emulate", race_check="reverse")(A=A, out=out)
    np.testing.assert_allclose(out, want)


@dace.program
def five_channels(A: dace.float64[N, 8], w: dace.float64[K, 5], out: dace.float64[N, 5]):
    for k in range(K):
        out[:] = out + A[:, k, np.newaxis] * w[k, :]


def _nested(program):
    sdfg = dace_cpufree.persistent_sdfg(program)
    return next((n, s) for n, s in sdfg.all_nodes_recursive() if isinstance(n, nodes.NestedSDFG))


def _sums(nsdfg) -> list[str]:
    return [
        n for n, d in nsdfg.sdfg.arrays.items() if n.startswith("cpufree_element") and isinstance(d, dace.data.Scalar)
    ]


def test_a_convolution_point_takes_a_block_of_output_channels():
    nsdfg, state = _nested(conv2d_bias.program)
    assert state.entry_node(nsdfg).map.range[-1][2] == owned_blocks.FACTOR  # C_out is a symbol
    assert len(_sums(nsdfg)) == owned_blocks.FACTOR  # a register per channel of the block
    run = dace_cpufree.compile(conv2d_bias.program, backend="emulate", race_check="shuffle")
    for c_out in (1, 3, 8, 9, 13, 16):  # blocks cut short at the end: the copies past it clamped to the last channel
        data = conv2d_bias.initialize(N=2, C_in=2, C_out=c_out, K=3, H=7, W=6)
        want = conv2d_bias.reference(data["input"], data["weights"], data["bias"])
        got = run(input=data["input"], weights=data["weights"], bias=data["bias"])
        np.testing.assert_allclose(got, want, rtol=1e-5, err_msg=f"C_out={c_out}")


def test_a_known_extent_is_taken_whole():
    nsdfg, state = _nested(five_channels)
    assert state.entry_node(nsdfg).map.range[-1][2] == 5 and len(_sums(nsdfg)) == 5
    rng = np.random.default_rng(4)
    A, w, out = rng.random((6, 8)), rng.random((4, 5)), rng.random((6, 5))
    want = out + A[:, :4] @ w
    dace_cpufree.compile(five_channels, backend="emulate", race_check="reverse")(A=A, w=w, out=out)
    np.testing.assert_allclose(out, want)


def test_a_point_index_that_reaches_the_nest_otherwise_is_seen():
    nsdfg, state = _nested(conv2d_bias.program)
    param = state.entry_node(nsdfg).map.params[-1]
    assert not owned_blocks._enters_otherwise(state, nsdfg, param, param)
    nsdfg.symbol_mapping["shifted"] = dace.symbol(param) + 1  # the copies would not shift it: no block
    assert owned_blocks._enters_otherwise(state, nsdfg, param, param)


def test_a_point_with_nothing_to_share_keeps_one_element():
    nsdfg, state = _nested(rows_added)  # A[k, i]: every read depends on the point's index
    assert state.entry_node(nsdfg).map.range[-1][2] == 1 and len(_sums(nsdfg)) == 1


@pytest.mark.parametrize("program", [smoothing, row_by_row])
def test_loops_whose_iterations_read_other_points_elements_stay_loops(program):
    assert len(_loops(program)) == 1


def test_a_stencil_time_loop_keeps_its_result():
    A = np.random.default_rng(2).random(40)
    want = A.copy()
    for _ in range(5):
        want[1:-1] = 0.5 * (want[:-2] + want[2:])
    dace_cpufree.compile(smoothing, backend="emulate", race_check="shuffle")(A=A, T=5)
    np.testing.assert_allclose(A, want)


@pytest.mark.compile
@pytest.mark.parametrize("backend", BACKENDS)
def test_compiles_the_moved_loop_nest(backend):
    source = dace_cpufree.kernel_source(conv2d_bias.program, backend=backend)
    assert build(source.code, "nvcc_loop_into_map", backend).exists()


@pytest.mark.gpu
@pytest.mark.parametrize("c_out", [16, 13])
def test_gpu_convolution_against_numpy(c_out):
    data = conv2d_bias.initialize(N=4, C_in=3, C_out=c_out, K=7, H=96, W=80)
    want = conv2d_bias.reference(data["input"], data["weights"], data["bias"])
    got = dace_cpufree.compile(conv2d_bias.program)(input=data["input"], weights=data["weights"], bias=data["bias"])
    np.testing.assert_allclose(got, want, rtol=1e-4)
