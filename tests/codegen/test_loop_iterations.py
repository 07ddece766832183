"""Grid syncs between the iterations of a loop only where one iteration's accesses meet another's
(codegen/syncs.py): a loop whose variable takes a value of its own in every iteration compares the accesses of
an earlier iteration, its variable renamed, with the current one's. Rows written per iteration need no sync
(syr2k, whose row sums pass from step to step in lane 0's registers: codegen/rows.py); a row that reads the one
before it, a row chosen by a non-linear index, or a symbol set inside the loop keep it. Results against NumPy
under the race checker, an nvcc build."""

import copy

import dace
import numpy as np
import pytest
from builds import BACKENDS
from dace import subsets
from dace_cpufree.codegen import ir, syncs
from dace_cpufree.codegen.overlap import deal_rows
from dace_cpufree.codegen.syncs import Earlier, _disjoint
from kernel_copies import syr2k

import dace_cpufree
from dace_cpufree.errors import RaceError
from dace_cpufree.runtime import build

N = dace.symbol("N")
M = dace.symbol("M")


@dace.program
def even_rows(a: dace.float64[N, M], out: dace.float64[N, M]):
    for i in range(N // 2):
        out[2 * i, :] += 2.0 * a[i, :]


@dace.program
def chained_rows(a: dace.float64[N, M]):
    for i in range(1, N):
        a[i, 1:] += a[i - 1, :-1]


@dace.program
def halved_rows(a: dace.float64[N, M], out: dace.float64[N, M]):
    for i in range(N):
        out[i // 2, i % 2 :] += a[i, i % 2 :]


@dace.program
def shifted_rows(a: dace.float64[N, M], out: dace.float64[N, M], shift: dace.int64[N]):
    for i in range(N - 1):
        s = shift[i]
        out[i + s, :] += a[i, :]


@dace.program
def normalise_rows(a: dace.float64[N, M]):
    for _ in range(3):
        s = np.sum(a, axis=1)
        a[:] = a / s[:, None]


def _loop_syncs(program) -> list[str]:
    """The labels of the items inside the kernel's loops that get a grid sync before them."""
    root = dace_cpufree.kernel_source(program).kernel_ir
    loops = [n for n in _nodes(root) if isinstance(n, ir.Loop)]
    assert loops, "no loop in the kernel"
    return [i.label for loop in loops for i in ir.items(loop.body) if i.sync_before]


def _nodes(node):
    yield node
    children = []
    if isinstance(node, ir.Seq):
        children = node.children
    elif isinstance(node, ir.Loop):
        children = [node.body]
    elif isinstance(node, ir.Branch):
        children = node.bodies
    for child in children:
        yield from _nodes(child)


def test_rows_of_their_own_need_no_sync_between_iterations():
    assert _loop_syncs(syr2k.program) == []
    assert _loop_syncs(even_rows) == []


def test_row_sums_live_in_registers():
    source = dace_cpufree.kernel_source(syr2k.program)
    rows = [i for i in ir.items(source.kernel_ir) if i.form == ir.Form.ROWS]
    assert len(rows) == 1
    # the two matrix-vector products' results no longer pass through device memory
    assert rows[0].reads == {"A", "B", "C"} and rows[0].writes == {"C"}, (rows[0].reads, rows[0].writes)
    assert sum("the row's element, lane 0's" in line for line in source.code.splitlines()) == 2


def test_rows_are_dealt_round_the_grid_where_iterations_overlap():
    """Without a grid sync in the loop, each run of the row step starts at the tile after the last one used."""
    [syr2k_rows] = [i for i in ir.items(dace_cpufree.kernel_source(syr2k.program).kernel_ir) if i.form == ir.Form.ROWS]
    code = "\n".join(syr2k_rows.code)
    assert "__dealt0 % __tilesr" in code and "__dealt0 += __xr___g0;" in code
    assert "long long __dealt0 = 0;" in dace_cpufree.kernel_source(syr2k.program).code
    source = dace_cpufree.kernel_source(normalise_rows)
    [rows] = [i for i in ir.items(source.kernel_ir) if i.form == ir.Form.ROWS]
    assert rows.sync_before and "__dealt" not in source.code  # a sync each iteration: each tile keeps its rows


def _tile_item(label: str, tile: int, sync: bool = False) -> ir.Item:
    return ir.Item(label, [], frozenset(), frozenset({label}), ir.Executor.GRID, tile=tile, sync_before=sync)


def test_a_block_barrier_parts_tile_steps_of_different_runs():
    """Two tile steps of more than a warp with no barrier between them: the second waits for its block (the
    laggards of the first would meet its warps at a named barrier of another size)."""
    first, second, warp_tiles, after_sync = (
        _tile_item("a", 128),
        _tile_item("b", 64),
        _tile_item("c", 32),
        _tile_item("d", 256, sync=True),
    )
    deal_rows(ir.Seq([first, second, warp_tiles, after_sync]))
    assert [i.bar_before for i in (first, second, warp_tiles, after_sync)] == [False, True, False, False]

    body = _tile_item("rows", 1024)
    loop = ir.Loop("loop", None, ir.Item("cond", ["i < N"]), None, ir.Seq([body]))
    deal_rows(ir.Seq([loop]))
    assert body.bar_before  # its run of the previous iteration
    # syr2k's row step is its loop's only tile step: a barrier only where its tile size changes
    source = dace_cpufree.kernel_source(syr2k.program)
    [rows] = [i for i in ir.items(source.kernel_ir) if i.form == ir.Form.ROWS]
    assert not rows.bar_before and "long long __tile_size0 = 0;" in source.code
    lines = [line.strip() for line in rows.code]
    assert any(line.startswith("const long long __tile_now = cpufree::tile_size<1024>(") for line in lines)
    assert "if (__tile_now != __tile_size0) {" in lines


@pytest.mark.parametrize("program", [chained_rows, halved_rows, shifted_rows], ids=lambda p: p.name)
def test_iterations_that_meet_keep_their_sync(program):
    assert _loop_syncs(program), "a grid sync between iterations is needed"


def test_points_of_two_iterations():
    earlier = Earlier("i", "__earlier_i", frozenset({"i", "k"}))

    def apart(before: str, now: str) -> bool:
        a = subsets.Range.from_string(before)
        a.replace({dace.symbol("i"): dace.symbol("__earlier_i")})
        return _disjoint(a, subsets.Range.from_string(now), earlier)

    assert apart("i, 0:N", "i, 0:N")
    assert apart("2*i + 1, 0:i", "2*i + 1, 0:i")
    assert not apart("i + 1, 0:N", "i, 0:N")  # the earlier iteration i - 1 touches row i
    assert not apart("k + i, 0:N", "k + i, 0:N")  # k changes between iterations
    assert not apart("0:i, 0:N", "0:i, 0:N")  # ranges, not points
    assert not _disjoint(subsets.Range.from_string("i, 0:N"), subsets.Range.from_string("i, 0:N"), None)


@pytest.mark.parametrize("order", ["forward", "reverse", "shuffle"])
def test_results_under_the_race_checker(order):
    args = syr2k.initialize(**syr2k.PRESETS["S"])
    ref = copy.deepcopy(args)
    syr2k.reference(**ref)
    dace_cpufree.compile(syr2k.program, backend="emulate", race_check=order)(**args)
    np.testing.assert_allclose(args["C"], ref["C"], rtol=1e-12)

    rng = np.random.default_rng(3)
    a, out = rng.standard_normal((9, 33)), rng.standard_normal((9, 33))
    want = out.copy()
    for i in range(9 // 2):
        want[2 * i] += 2.0 * a[i]
    dace_cpufree.compile(even_rows, backend="emulate", race_check=order)(a=a, out=out)
    np.testing.assert_allclose(out, want, rtol=1e-12)

    # two iterations write a row with different threads (test_the_checker_sees_a_sync_wrongly_taken_out)
    a, out = rng.standard_normal((11, 17)), np.zeros((11, 17))
    want = out.copy()
    for i in range(11):
        want[i // 2, i % 2 :] += a[i, i % 2 :]
    dace_cpufree.compile(halved_rows, backend="emulate", race_check=order)(a=a, out=out)
    np.testing.assert_allclose(out, want, rtol=1e-12)

    a = rng.random((13, 21)) + 0.5
    want = a.copy()
    for _ in range(3):
        want /= want.sum(axis=1)[:, None]
    dace_cpufree.compile(normalise_rows, backend="emulate", race_check=order)(a=a)
    np.testing.assert_allclose(a, want, rtol=1e-12)

    a = rng.standard_normal((11, 17))
    want = a.copy()
    for i in range(1, 11):
        want[i, 1:] += want[i - 1, :-1]
    dace_cpufree.compile(chained_rows, backend="emulate", race_check=order)(a=a)
    np.testing.assert_allclose(a, want, rtol=1e-12)


def test_the_checker_sees_a_sync_wrongly_taken_out(monkeypatch):
    """With every pair of points taken as apart, the programs above lose the sync between iterations, and the race
    checker reports them: the results test would catch a wrong rule."""
    monkeypatch.setattr(syncs, "_other_iteration", lambda r, q, earlier: True)
    assert _loop_syncs(halved_rows) == [] and _loop_syncs(chained_rows) == []
    rng = np.random.default_rng(4)
    with pytest.raises(RaceError, match="unsynchronised accesses"):
        dace_cpufree.compile(halved_rows, backend="emulate", race_check="forward")(
            a=rng.standard_normal((11, 17)), out=np.zeros((11, 17))
        )
    with pytest.raises(RaceError, match="unsynchronised accesses"):
        dace_cpufree.compile(chained_rows, backend="emulate", race_check="forward")(a=rng.standard_normal((11, 17)))


@pytest.mark.compile
@pytest.mark.parametrize("backend", BACKENDS)
def test_builds(backend):
    source = dace_cpufree.kernel_source(syr2k.program, backend=backend)
    assert build(source.code, "loop_iterations_syr2k", backend).stat().st_size > 0


@pytest.mark.gpu
def test_matches_numpy_on_gpu():
    args = syr2k.initialize(**syr2k.PRESETS["paper"])
    ref = copy.deepcopy(args)
    syr2k.reference(**ref)
    dace_cpufree.compile(syr2k.program)(**args)
    np.testing.assert_allclose(args["C"], ref["C"], rtol=1e-11)

    rng = np.random.default_rng(8)
    a, out = rng.standard_normal((4001, 3001)), rng.standard_normal((4001, 3001))
    want = out.copy()
    want[0 : 2 * (4001 // 2) : 2] += 2.0 * a[: 4001 // 2]
    dace_cpufree.compile(even_rows)(a=a, out=out)
    np.testing.assert_allclose(out, want, rtol=1e-14)

    a, out = rng.standard_normal((2001, 3001)), np.zeros((2001, 3001))
    want = out.copy()
    for i in range(2001):
        want[i // 2, i % 2 :] += a[i, i % 2 :]
    dace_cpufree.compile(halved_rows)(a=a, out=out)
    np.testing.assert_allclose(out, want, rtol=1e-14)
