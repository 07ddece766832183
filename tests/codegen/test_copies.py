"""Copies between two regions of one array (``p[0, :] = p[1, :]``): the direction DaCe records on the memlet.

Such a copy's memlet names one container at both ends; which of its two subsets is the source is recorded by
DaCe on the memlet (``src_subset``/``dst_subset``). Reading ``subset`` as the source copies the wrong way round
(row 0 into row 1): NPBench's cavity_flow boundary conditions were silently wrong that way.
"""

import dace
import numpy as np
import pytest
from dace_cpufree.transformations.program_order import accesses
from kernel_steps import items
from programs import boundary_copies

import dace_cpufree
from dace_cpufree.memlets import ends

N = dace.symbol("N")


@dace.program
def boundary_copies_in_a_loop(u: dace.float64[N, N], v: dace.float64[N, N], T: dace.int64):
    for _ in range(T):
        v[1:-1, 1:-1] = 0.25 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:])
        v[0, :] = v[1, :]
        v[:, -1] = v[:, -2]
        u[:] = v


# NumPy's answer: the programs' own Python functions run on NumPy arrays
_numpy_boundary_copies = boundary_copies.f
_numpy_loop = boundary_copies_in_a_loop.f


def _same_array_copies(sdfg):
    for state in sdfg.states():
        for e in state.edges():
            if isinstance(e.src, dace.nodes.AccessNode) and isinstance(e.dst, dace.nodes.AccessNode):
                if e.src.data == e.dst.data:
                    yield state, e


def test_copy_ends_follow_the_recorded_direction():
    sdfg = boundary_copies.to_sdfg(simplify=True)
    found = list(_same_array_copies(sdfg))
    assert found, "the frontend no longer makes same-array copies: the test needs another program"
    rows = set()
    for state, e in found:
        src, src_sub, dst, dst_sub = ends(state, e)
        assert src == dst == "p"
        assert src_sub == e.data.get_src_subset(e, state) and dst_sub == e.data.get_dst_subset(e, state)
        rows.add((str(src_sub), str(dst_sub)))
    assert ("1, 0:N", "0, 0:N") in rows  # p[0, :] = p[1, :] reads row 1, writes row 0


def test_state_accesses_read_the_source_region():
    """The ordering passes compare what states read and write: the read of a same-array copy is its source."""
    sdfg = boundary_copies.to_sdfg(simplify=True)
    state, e = next(iter(_same_array_copies(sdfg)))
    listed = [(name, mode, str(sub)) for name, mode, sub in accesses(state) if name == "p"]
    src, src_sub, dst, dst_sub = ends(state, e)
    assert ("p", "R", str(src_sub)) in listed and ("p", "W", str(dst_sub)) in listed
    assert str(src_sub) != str(dst_sub)


@pytest.mark.parametrize("n", [6, 33])
def test_boundary_copies_match_numpy_in_the_emulation(n):
    rng = np.random.default_rng(1)
    p = rng.random((n, n))
    want = p.copy()
    _numpy_boundary_copies(want)
    dace_cpufree.compile(boundary_copies, backend="emulate")(p)
    np.testing.assert_array_equal(p, want)


def test_boundary_copies_in_a_time_loop_match_numpy_in_the_emulation():
    rng = np.random.default_rng(2)
    u, v = rng.random((12, 12)), rng.random((12, 12))
    wu, wv = u.copy(), v.copy()
    _numpy_loop(wu, wv, 4)
    dace_cpufree.compile(boundary_copies_in_a_loop, backend="emulate")(u, v, 4)
    np.testing.assert_allclose(u, wu, rtol=1e-14)
    np.testing.assert_allclose(v, wv, rtol=1e-14)


@pytest.mark.gpu
def test_boundary_copies_match_numpy_on_gpu():
    rng = np.random.default_rng(3)
    u, v = rng.random((200, 200)), rng.random((200, 200))
    wu, wv = u.copy(), v.copy()
    _numpy_loop(wu, wv, 5)
    dace_cpufree.compile(boundary_copies_in_a_loop, backend="cuda")(u, v, 5)
    np.testing.assert_allclose(u, wu, rtol=1e-14)
    np.testing.assert_allclose(v, wv, rtol=1e-14)


@dace.program
def block_copies(a: dace.float64[N, N, N], b: dace.float64[N, N, N], c: dace.float64[N, N]):
    b[1:3, :, :] = a[0:2, :, :]  # whole planes: one run of memory at both ends
    c[:, 1:3] = a[0, :, 0:2]  # two columns: strided at both ends
    b[0] = c  # a plane from a whole matrix


def _copy_lines(code: str) -> dict[str, list[str]]:
    """The element assignment of each copy of ``block_copies``'s kernel, by its ends (``a -> b``)."""
    lines = [line.strip() for line in code.splitlines()]
    found = {}
    for src, dst in (("a", "b"), ("a", "c"), ("c", "b")):
        found[f"{src} -> {dst}"] = [x for x in lines if x.startswith(f"{dst}[") and f" = {src}[" in x]
    return found


def test_copies_of_one_run_of_memory_are_one_call_of_every_thread():
    """A copy whose ends are each one run of memory in row-major order (two different containers) is one
    ``cpufree::copy_run`` from the ends' first elements (16-byte vectors, several loads in flight per thread); only a
    strided end keeps the element loop with its index decoded (a division per dimension). Under the race checker
    every copy keeps the element loop, each access recorded, indexed at an offset plus the flat index."""
    code = dace_cpufree.kernel_source(block_copies).code
    runs = [line.strip() for line in code.splitlines() if "cpufree::copy_run(" in line]
    assert len(runs) == 2, runs
    assert any(r.startswith("cpufree::copy_run(b + (") and ", a + (" in r for r in runs), runs
    assert any(r.startswith("cpufree::copy_run(b + (") and ", c + (" in r for r in runs), runs
    copies = _copy_lines(code)
    assert copies["a -> b"] == [] and copies["c -> b"] == []
    assert len(copies["a -> c"]) == 1 and "__f" not in copies["a -> c"][0] and "__s0" in copies["a -> c"][0]
    assert code.count("__s = __s / (") == 2  # the strided copy's source decoded: three dimensions

    checked = dace_cpufree.kernel_source(block_copies, backend="emulate", race_check=True).code
    assert "cpufree::copy_run(" not in checked
    for name, lines in _copy_lines(checked).items():
        assert len(lines) == 1, (name, lines)
        if name != "a -> c":
            assert lines[0].count("+ __f]") == 2, lines


L = dace.symbol("L")


@dace.program
def offset_copies(a: dace.float32[L], b: dace.float32[L], c: dace.float64[L], d: dace.float64[L]):
    b[3 : L - 2] = a[3 : L - 2]  # both ends 12 bytes past a 16-byte boundary: one element before the vectors
    d[1 : L - 4] = c[1 : L - 4]  # 8 bytes past
    b[0:2] = a[5:7]  # ends of different alignment: element by element


def test_offset_copies_are_runs_and_match_numpy_in_the_emulation():
    code = dace_cpufree.kernel_source(offset_copies).code
    assert code.count("cpufree::copy_run(") == 3
    _offset_copies_match(7, "emulate")


def _offset_copies_match(n, backend):
    rng = np.random.default_rng(n)
    a, c = rng.random(n).astype(np.float32), rng.random(n)
    b, d = np.full(n, -1.0, np.float32), np.full(n, -1.0)
    want_b, want_d = b.copy(), d.copy()
    want_b[3 : n - 2] = a[3 : n - 2]
    want_d[1 : n - 4] = c[1 : n - 4]
    want_b[0:2] = a[5:7]
    dace_cpufree.compile(offset_copies, backend=backend)(a, b, c, d)
    np.testing.assert_array_equal(b, want_b)
    np.testing.assert_array_equal(d, want_d)


@pytest.mark.gpu
@pytest.mark.parametrize("n", [7, 8, 1000, 100003, 2_000_001])
def test_offset_copies_match_numpy_on_gpu(n):
    """Vectors with a head element, tails of every length, runs shorter and longer than the grid's threads."""
    _offset_copies_match(n, "cuda")


@pytest.mark.parametrize("backend", ["emulate", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_block_copies_match_numpy(backend):
    n = 5 if backend == "emulate" else 37
    rng = np.random.default_rng(4)
    a, b, c = rng.random((n, n, n)), rng.random((n, n, n)), rng.random((n, n))
    want_b, want_c = b.copy(), c.copy()
    block_copies.f(a.copy(), want_b, want_c)
    dace_cpufree.compile(block_copies, backend=backend)(a, b, c)
    np.testing.assert_array_equal(b, want_b)
    np.testing.assert_array_equal(c, want_c)


@dace.program
def fixed_and_sized_copies(A: dace.float64[N], B: dace.float64[N], C: dace.float64[16]):
    C[:] = A[0:16]
    B[:] = A


def test_a_copy_of_a_fixed_count_sizes_the_grid_and_a_symbolic_one_does_not():
    """A copy whose element count is a number hands it on as the step's work (the launcher sizes the grid by it);
    one whose count depends on a size symbol hands on none (read off the symbolic count, not the printed code)."""
    copies = [i for i in items(dace_cpufree.kernel_source(fixed_and_sized_copies)) if i.label.startswith("copy ")]
    works = {i.label.split(" -> ")[1]: i.work for i in copies}
    assert works == {"C": "16", "B": None}, works
