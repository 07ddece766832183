"""SplitForEarlyPuts: the plain Jacobi forms compute their edge cells, put them (into staging buffers),
compute the interior while the data travels, wait, unpack. CPU tests of the SDFG and the kernel IR;
the results on GPUs are in test_multigpu.py (plain forms on 2 and 4 GPUs against NumPy)."""

import dace
import pytest
import sympy
from dace_cpufree.codegen.syncs import _apart, _disjoint
from dace_cpufree.frontend import Putmem
from dace_cpufree.transformations.early_puts import _pieces
from kernel_copies import shmem_jacobi_2d, shmem_jacobi_3d
from kernel_steps import hidden, items, puts, steps, top_maps

import dace_cpufree
from dace_cpufree import nvshmem
from dace_cpufree.bounds import at_least

N = dace.symbol("N")


@dace.program
def _one_face(A: dace.float64[N], B: dace.float64[N], flags: dace.uint64[2], T: dace.int64):
    me, npes = nvshmem.my_pe(), nvshmem.n_pes()
    for t in range(1, T + 1):
        B[1:-1] = 0.5 * (A[:-2] + A[2:])
        if me > 0:
            nvshmem.Putmem(B[N - 1 : N], B[1:2], me - 1, flags[0], t)
        if me < npes - 1:
            nvshmem.SignalWait(flags[0], t)
        A[1:-1] = B[1:-1]


@dace.program
def _interior_reads_landing(A: dace.float64[N], B: dace.float64[N], flags: dace.uint64[2], T: dace.int64):
    """The put lands in A[5], which the interior of B's map reads: moving it past the put would let a
    neighbour overwrite A[5] while this PE still reads it."""
    me, npes = nvshmem.my_pe(), nvshmem.n_pes()
    for t in range(1, T + 1):
        B[1:-1] = 0.5 * (A[:-2] + A[2:])
        if me > 0:
            nvshmem.Putmem(A[5:6], B[1:2], me - 1, flags[0], t)
        if me < npes - 1:
            nvshmem.SignalWait(flags[0], t)


@dace.program
def _put_of_everything(
    A: dace.float64[N], B: dace.float64[N], C: dace.float64[N], flags: dace.uint64[2], T: dace.int64
):
    """The put reads every cell the map writes: there is no interior to compute later."""
    me, npes = nvshmem.my_pe(), nvshmem.n_pes()
    for t in range(1, T + 1):
        B[1:-1] = 0.5 * (A[:-2] + A[2:])
        if me > 0:
            nvshmem.Putmem(C[1:-1], B[1:-1], me - 1, flags[0], t)
        if me < npes - 1:
            nvshmem.SignalWait(flags[0], t)


def _destinations(sdfg) -> list[tuple[str, str]]:
    """Where each put of a prepared SDFG stores: (container, subset)."""
    return [
        (e.data.data, str(e.data.subset))
        for t in puts(sdfg)
        for e in _state_of(sdfg, t).out_edges(t)
        if e.src_conn == "_dest"
    ]


def _state_of(sdfg, node):
    return next(st for n, st in sdfg.all_nodes_recursive() if n is node)


def _regions(item) -> set[tuple[str, str, str]]:
    return {(c, mode, str(subset)) for c, mode, subset in item.regions}


def test_a_map_followed_by_a_put_of_its_edge_is_split_and_the_put_staged():
    """The face (i = 0) before the put, the interior (1 .. N-3) after it; the put goes into a contiguous
    buffer of its own, copied into B[N-1] right after the wait, which now guards the buffer: a block barrier
    between them, no grid sync (sizes compiled in, so that the regions can be told apart)."""
    sdfg = dace_cpufree.persistent_sdfg(_one_face, shmem_transport="p2p")
    assert top_maps(sdfg) == ["0", "1:N - 2"]  # the face, the interior (the copy A <- B is no map)
    assert _destinations(sdfg) == [("__cpufree_halo_B", "0")]
    src = dace_cpufree.kernel_source(_one_face, shmem_transport="p2p", symbols=dict(N=34))
    assert steps(src) == ["GRID", "map", "GRID", "put", "map", "wait", "unpack", "GRID"]
    step = {i.label: i for i in items(src)}
    wait, unpack = step["tasklet signal_wait"], step["copy __cpufree_halo_B -> B"]
    assert ("__cpufree_halo_B", "W", "0") in _regions(wait)  # the wait guards the buffer
    assert _regions(unpack) == {("__cpufree_halo_B", "R", "0"), ("B", "W", "33")}
    assert unpack.bar_before and not unpack.sync_before


def test_the_interior_stays_whole_when_it_reads_where_puts_land():
    sdfg = dace_cpufree.persistent_sdfg(_interior_reads_landing, shmem_transport="p2p")
    assert top_maps(sdfg) == ["0:N - 2"]
    assert not any(n.startswith("__cpufree_halo") for n in sdfg.arrays)


def test_a_put_of_more_than_a_face_leaves_the_map_whole():
    sdfg = dace_cpufree.persistent_sdfg(_put_of_everything)
    assert top_maps(sdfg) == ["0:N - 2"]


def test_early_puts_can_be_turned_off(monkeypatch):
    monkeypatch.setenv("DACE_CPUFREE_EARLY_PUTS", "0")
    sdfg = dace_cpufree.persistent_sdfg(shmem_jacobi_3d.plain, symbols=dict(LX=34, N=34))
    assert top_maps(sdfg) == ["0:32, 0:32, 0:32"] * 2
    assert not any(n.startswith("__cpufree_halo") for n in sdfg.arrays)


def test_jacobi_3d_plain_edge_planes_first_interior_while_they_travel():
    """Per half-step: both edge planes as one strided step, a grid sync, the two puts (hidden: other work
    follows them), the interior, each wait followed by its block barrier and unpacking, a grid sync."""
    options = dict(symbols=dict(LX=34, N=34), shmem_transport="p2p")
    src = dace_cpufree.kernel_source(shmem_jacobi_3d.plain, **options)
    half = ["GRID", "map", "GRID", "put", "put", "map", "wait", "unpack", "wait", "unpack"]
    assert steps(src) == half * 2
    sdfg = dace_cpufree.persistent_sdfg(shmem_jacobi_3d.plain, **options)
    assert top_maps(sdfg).count("0:32:31, 0:32, 0:32") == 2  # planes 1 and 32: one step from 0 to 31
    assert [hidden(t) for t in puts(sdfg)] == [True] * 4  # other work follows them
    halos = {"__cpufree_halo_A", "__cpufree_halo_A_0", "__cpufree_halo_B", "__cpufree_halo_B_0"}
    assert halos <= {a.name for a in src.args if a.kind == "workspace"}
    unpack = next(i for i in items(src) if i.label.startswith("copy __cpufree_halo"))
    assert unpack.bar_before and not unpack.sync_before  # a block barrier, no sync


def test_jacobi_2d_plain_rows_and_columns_first_without_a_sync_between_them():
    """Rows 1 and LX-2 as one strided step, columns 1 and LY-2 between them as another; no grid sync
    between the two (their strided regions are told apart), one before the four puts."""
    src = dace_cpufree.kernel_source(shmem_jacobi_2d.plain, symbols=dict(LX=66, LY=34, PY=2), shmem_transport="p2p")
    half = ["GRID", "map", "map", "GRID", "put", "put", "put", "put", "map"] + ["wait", "unpack"] * 4
    assert steps(src) == half * 2
    assert src.grid_syncs == 4


def test_symbolic_sizes_keep_opposite_faces_apart():
    """Without sizes the distance between two opposite faces is unknown: two steps, not one strided one."""
    sdfg = dace_cpufree.persistent_sdfg(shmem_jacobi_3d.plain)
    ranges = top_maps(sdfg)
    assert ranges.count("0, 0:N - 2, 0:N - 2") == 2 and ranges.count("LX - 3, 0:N - 2, 0:N - 2") == 2
    assert ranges.count("1:LX - 3, 0:N - 2, 0:N - 2") == 2
    puts = [n for n, _ in sdfg.all_nodes_recursive() if isinstance(n, Putmem)]
    assert puts == []  # expanded


def test_faces_form_an_onion():
    rng = [(0, 9, 1), (0, 5, 1)]  # faces by their inner bound: the last index of a "lo" face, the first of a "hi" one
    faces, inner = _pieces(rng, {(0, "lo"): 0, (0, "hi"): 9, (1, "lo"): 1})
    assert faces == [[(0, 9, 9), (0, 5, 1)], [(1, 8, 1), (0, 1, 1)]]
    assert inner == [(1, 8, 1), (2, 5, 1)]
    cells = {(i, j) for f in faces for i in range(f[0][0], f[0][1] + 1, f[0][2]) for j in range(f[1][0], f[1][1] + 1)}
    assert len(cells) == 10 * 6 - 8 * 4  # disjoint pieces: each cell of the frame once


@pytest.mark.parametrize(
    "r, q, apart",
    [
        ((1, 64, 63), (2, 63, 1), True),  # rows 1 and 64 against the rows between them
        ((1, 64, 63), (64, 64, 1), False),
        ((0, 10, 2), (1, 9, 2), True),
        ((0, 10, 2), (4, 4, 1), False),
        ((0, 100000, 3), (1, 1, 1), True),  # the shorter one is listed
        ((0, 100000, 3), (1, 100000, 3), False),  # both too long to list: unknown counts as overlapping
    ],
)
def test_strided_ranges_are_told_apart(r, q, apart):
    assert _apart(r, q) is apart


def test_strided_subsets_disjoint_in_one_dimension():
    rows = dace.subsets.Range([(1, 64, 63), (1, 32, 1)])
    cols = dace.subsets.Range([(2, 63, 1), (1, 32, 31)])
    assert _disjoint(rows, cols)
    assert not _disjoint(rows, dace.subsets.Range([(1, 1, 1), (1, 1, 1)]))


@dace.program
def _two_puts_one_flag(A: dace.float64[N], B: dace.float64[N], flags: dace.uint64[2], T: dace.int64):
    """Both edges signal the same flag: no buffer can be unpacked after a wait of its own."""
    me, npes = nvshmem.my_pe(), nvshmem.n_pes()
    for t in range(1, T + 1):
        B[1:-1] = 0.5 * (A[:-2] + A[2:])
        if me > 0:
            nvshmem.Putmem(B[N - 1 : N], B[1:2], me - 1, flags[0], t)
        if me < npes - 1:
            nvshmem.Putmem(B[0:1], B[N - 2 : N - 1], me + 1, flags[0], t)
        nvshmem.SignalWait(flags[0], t)
        A[1:-1] = B[1:-1]


def test_no_split_when_a_put_cannot_be_staged():
    """Without a buffer the put would store into the halo while the receiver streams its interior (measured
    slow): the map stays whole."""
    sdfg = dace_cpufree.persistent_sdfg(_two_puts_one_flag)
    assert top_maps(sdfg) == ["0:N - 2"]
    assert not any(n.startswith("__cpufree_halo") for n in sdfg.arrays)


def _cells(r, at) -> range:
    return range(int(r[0].subs(at)), int(r[1].subs(at)) + 1)


def test_faces_of_a_clamped_range_are_disjoint_and_cover_it():
    """A distributed program's owned range, ``Max(1, pe * L - 1) .. Min(N - 2, (pe + 1) * L - 2)``, with faces up to
    the put regions' far ends: for every PE and block length the pieces and the interior hold each cell once (also
    where the block is shorter than the two faces, and on the first and last PE where the clamp cuts a face)."""
    pe, L, n = (dace.symbolic.symbol(x) for x in ("pe", "L", "n"))
    lo, hi = sympy.Max(1, pe * L - 1), sympy.Min(n - 2, sympy.Min(n, pe * L + L) - 2)
    faces = {(0, "lo"): pe * L, (0, "hi"): pe * L + L - 3}  # widths 2 and 2, not known numbers against the clamp
    pieces, inner = _pieces([(lo, hi, 1)], faces)
    assert len(pieces) == 2
    for length, pes in ((3, 4), (5, 3), (8, 2), (2, 6)):
        total = length * pes - 1
        for k in range(pes):
            at = {pe: k, L: length, n: total}
            cells = [i for p in pieces for i in _cells(p[0], at)] + list(_cells(inner[0], at))
            assert sorted(cells) == list(_cells((lo, hi), at)), (length, pes, k)


@pytest.mark.parametrize(
    "x, y, proven",
    [
        ("Max(0, L*pe - 1) + 1", "L*pe", True),  # a Max is at least each argument
        ("-L*pe + Max(0, L*pe) + 2", "2", True),  # also as a term of a sum
        ("Min(N - 3, L*pe + L - 3)", "L*pe + L - 3", False),  # a Min is at most its arguments, not at least
        ("L*pe + L", "Min(N, L*pe + L) - 1", True),
        ("Max(0, L*pe)", "L*pe + 1", False),
    ],
)
def test_clamped_bounds_are_ordered_only_when_proven(x, y, proven):
    sym = lambda e: dace.symbolic.pystr_to_symbolic(e)  # noqa: E731
    assert at_least(sym(x), sym(y)) is proven
