"""Jacobi 3-D on a PX x PY x PZ process grid (``npbench_runs/multigpu/jacobi_3d_grid.py``).

CPU: the decomposition helpers; the exchange read from the SDFG (every put, wait and unpacking, with its guard,
target PE, regions and flag) checked for 1, 2, 4 and 8 PEs in global coordinates; the host emulation of one PE
against NumPy on the global domain; the generated code (6 puts and 6 waits per half-step, how each face layout is
put); nvcc builds device-linked against NVSHMEM for sm_90. GPU (``multigpu``): 2, 4 and 8 PEs against NumPy.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from functools import cache
from itertools import product

import numpy as np
import pytest
from dace.sdfg import nodes
from dace.sdfg.state import ConditionalBlock
from dace_cpufree.frontend import Putmem, SignalWait
from kernel_steps import put_forms

import dace_cpufree
from dace_cpufree.options import env
from dace_cpufree.runtime import build, gpu_count
from dace_cpufree.vocabulary import PutForm
from npbench_runs.multigpu import FORMS, PROGRAMS, scaling
from npbench_runs.multigpu import jacobi_3d_grid as grid

PE_COUNTS = (1, 2, 4, 8)


# ---- decomposition ---------------------------------------------------------------------------------------------


def test_process_grid_is_the_most_cubic_with_the_leading_axis_split_most():
    assert [grid.process_grid(p) for p in PE_COUNTS] == [(1, 1, 1), (2, 1, 1), (2, 2, 1), (2, 2, 2)]
    assert grid.process_grid(12) == (3, 2, 2) and grid.process_grid(6) == (3, 2, 1)
    for p in range(1, 33):
        px, py, pz = grid.process_grid(p)
        assert px * py * pz == p and px >= py >= pz


@pytest.mark.parametrize("npes", PE_COUNTS)
def test_blocks_cover_the_global_domain(npes):
    n, nx = 2 + 4 * 2, 2 + 6 * 2
    grid.check_size(n, npes, nx)
    glob = grid.initialize(n, nx)[0]
    out = glob.copy()
    out[1:-1, 1:-1, 1:-1] = np.nan
    seen = set()
    for pe in range(npes):
        local = grid.tile(glob, pe, npes)
        assert local.shape == grid.local_shape(n, npes, nx)
        seen.add(grid.coords(pe, npes))
        grid.place(out, local, pe, npes)
    assert np.array_equal(out, glob)
    assert len(seen) == npes


def test_sizes_that_do_not_divide_are_refused():
    with pytest.raises(ValueError, match="2x2x2 process grid"):
        grid.check_size(11, 8)  # 9 interior cells on 2 PEs
    with pytest.raises(ValueError, match=">= 4 cells"):
        grid.check_size(8, 8)  # 3 cells per block


# ---- the exchange, read from the SDFG ------------------------------------------------------------------------


def _guard(state) -> str:
    """The condition of the one-branch conditional around ``state`` ("True" outside one)."""
    region = state.parent_graph
    while region is not None and not isinstance(region, ConditionalBlock):
        region = region.parent_graph
    if region is None:
        return "True"
    (cond, _), *others = region.branches
    assert not others, "a put, wait or unpacking in a conditional with several branches"
    return cond.as_string


def _memlet(state, node, conn: str, out: bool):
    edges = state.out_edges_by_connector(node, conn) if out else state.in_edges_by_connector(node, conn)
    return next(iter(edges)).data


@cache
def _plan(program):
    """The SDFG's puts ``(guard, pe, src, dest, flag)``, waits ``(guard, flag, guarded regions)`` and copies
    ``(guard, src, dest)`` from a halo buffer (regions as ``(container, subset)``, flags as indices)."""
    sdfg = program.to_sdfg(simplify=True)
    puts, waits, copies = [], [], []
    for node, state in sdfg.all_nodes_recursive():
        if isinstance(node, Putmem):
            src, dest = _memlet(state, node, "_src", False), _memlet(state, node, "_dest", True)
            flag = _memlet(state, node, "_flag", True).subset.min_element()[0]
            puts.append((_guard(state), str(node.pe), (src.data, src.subset), (dest.data, dest.subset), flag))
        elif isinstance(node, SignalWait):
            flag = _memlet(state, node, "_flag", False).subset.min_element()[0]
            guarded = [(e.data.data, e.data.subset) for e in state.out_edges(node) if e.src_conn.startswith("_guard")]
            waits.append((_guard(state), flag, guarded))
        elif isinstance(node, nodes.AccessNode) and node.data.startswith("h"):
            for e in state.out_edges(node):
                if isinstance(e.dst, nodes.AccessNode) and e.dst.data in ("A", "B"):
                    copies.append((_guard(state), (node.data, e.data.src_subset), (e.dst.data, e.data.dst_subset)))
    return puts, waits, copies


def _value(expr, env: dict) -> int:
    return int(eval(str(expr), {"PyMod": lambda a, b: a % b, "Mod": lambda a, b: a % b}, dict(env)))


def _cells(subset, env: dict) -> list[range]:
    return [range(_value(b, env), _value(e, env) + 1, _value(s, env)) for b, e, s in subset.ndrange()]


def _global(region, pe: int, npes: int, env: dict) -> set[tuple]:
    """The global cells of a region of PE ``pe``'s block (``A``/``B``)."""
    offsets = [c * (env[s] - 2) for c, s in zip(grid.coords(pe, npes), ("LX", "LY", "LZ"))]
    return {tuple(o + i for o, i in zip(offsets, cell)) for cell in product(*_cells(region[1], env))}


def _env(pe: int, npes: int, shape) -> dict:
    return dict(grid.symbols(npes, shape), __cpufree_pe=pe, __cpufree_npes=npes)


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("npes", PE_COUNTS)
def test_every_halo_face_gets_the_neighbours_cells_once_under_a_flag_it_waits_for(form, npes):
    """For every PE of the grid, every half-step: each put that runs goes to a PE that waits on its flag; the
    cells it writes there (through a halo buffer and its unpacking in the overlapped form) are, in global
    coordinates, the cells it reads here; and the halo faces that a PE with neighbours waits for are written
    exactly once, by a put whose flag that wait reads. 6 puts and 6 waits per half-step, flags 0-5 and 6-11."""
    puts, waits, copies = _plan(getattr(grid, form))
    assert len(puts) == len(waits) == 2 * grid.NEIGHBOURS
    assert sorted(p[4] for p in puts) == sorted(w[1] for w in waits) == list(range(grid.FLAGS))
    shape = grid.local_shape(2 + 4 * 2, npes, 2 + 5 * grid.process_grid(npes)[0])
    faces_with_neighbours = runs = 0
    received = {}  # (pe, flag) -> global cells written into pe's halo under that flag
    for pe in range(npes):
        env = _env(pe, npes, shape)
        coords = grid.coords(pe, npes)
        faces_with_neighbours += sum((c > 0) + (c < p - 1) for c, p in zip(coords, grid.process_grid(npes)))
        for guard, target, src, dest, flag in puts:
            if not _value(guard, env):
                continue
            q = _value(target, env)
            assert 0 <= q < npes and q != pe
            if dest[0] in ("A", "B"):  # plain: straight into the halo layer
                assert dest[0] == src[0]
                halo = dest
            else:  # overlapped: into a buffer, unpacked by the target into its halo layer
                env_q = _env(q, npes, shape)
                unpacks = [c for c in copies if c[1][0] == dest[0] and _value(c[0], env_q)]
                unpacks = [c for c in unpacks if _cells(c[1][1], env_q)[0] == _cells(dest[1], env_q)[0]]
                assert len(unpacks) == 1, (pe, q, dest)
                assert unpacks[0][2][0] == src[0] and (flag < grid.NEIGHBOURS) == (src[0] == "B")
                halo = unpacks[0][2]
            sent = _global(src, pe, npes, env)
            assert sent == _global(halo, q, npes, _env(q, npes, shape)), (pe, q, src, halo)
            assert (q, flag) not in received
            received[(q, flag)] = (halo, sent)
            runs += 1
    for pe in range(npes):
        env = _env(pe, npes, shape)
        for guard, flag, guarded in waits:
            if not _value(guard, env):
                assert (pe, flag) not in received  # nobody signals a wait that is skipped
                continue
            halo, sent = received.pop((pe, flag))  # a wait that runs is signalled once
            if form == "plain":
                assert [(d, str(s)) for d, s in guarded] == [(halo[0], str(halo[1]))]  # the wait guards the halo
    assert not received
    assert runs == 2 * faces_with_neighbours  # one put per face with a neighbour, per half-step


# ---- one PE in the host emulation --------------------------------------------------------------------------------


@pytest.mark.parametrize("form", FORMS)
def test_one_pe_emulation_matches_numpy_on_the_global_domain(form):
    """One PE owns the whole (non-cubic) domain: every put and wait is in a branch it does not take, and the
    kernel, run on the host, gives NumPy's result bit for bit (an odd step count: A and B both checked)."""
    n, nx, steps = 10, 12, 3
    A0, B0 = grid.initialize(n, nx)
    ref_a, ref_b = A0.copy(), B0.copy()
    grid.reference(ref_a, ref_b, steps)
    a, b = grid.tile(A0, 0, 1), grid.tile(B0, 0, 1)
    sdfg = grid.one_pe(getattr(grid, form), a.shape)
    assert not {type(n).__name__ for n, _ in sdfg.all_nodes_recursive()} & {"Putmem", "SignalWait"}
    run = dace_cpufree.compile(sdfg, backend="emulate")
    run(a, b, np.zeros(grid.FLAGS, dtype=np.uint64), steps)
    got_a, got_b = A0.copy(), B0.copy()
    grid.place(got_a, a, 0, 1)
    grid.place(got_b, b, 0, 1)
    assert np.array_equal(got_a, ref_a) and np.array_equal(got_b, ref_b)
    assert not np.array_equal(ref_a, A0)  # the steps changed something


def test_reference_is_the_seven_point_average():
    A, B = grid.initialize(7)
    a, b = A.copy(), B.copy()
    grid.reference(a, b, 1)
    i, j, k = 2, 3, 4
    expected = (A[i, j, k] + A[i - 1, j, k] + A[i + 1, j, k] + A[i, j - 1, k] + A[i, j + 1, k] + A[i, j, k - 1]
                + A[i, j, k + 1]) / 7.0  # fmt: skip
    assert b[i, j, k] == pytest.approx(expected, rel=1e-15)
    assert np.array_equal(a[0], A[0]) and np.array_equal(b[:, :, -1], B[:, :, -1])  # the boundary stays


# ---- generated code --------------------------------------------------------------------------------------------

SIZES_8 = grid.symbols(8, grid.local_shape(18, 8))  # 2x2x2 blocks of 8^3 interior cells: LX = LY = LZ = 10


def _kernel(form: str, transport: str, monkeypatch, early_puts: bool = True) -> str:
    monkeypatch.setenv("DACE_CPUFREE_EARLY_PUTS", "1" if early_puts else "0")
    code = dace_cpufree.generate_code(getattr(grid, form), symbols=SIZES_8, shmem_transport=transport)
    return code[: code.index("// ---- host launcher")]


def test_plain_proxy_puts_each_face_layout_its_own_way(monkeypatch):
    """NVSHMEM's calls, the plain form as written: the two leading-axis faces (planes of dense rows, 10 apart)
    and the two middle-axis faces (dense rows, 100 apart) as warp puts of 8-element rows shared by the blocks of
    a lane; the two last-axis faces (elements 10 apart) as strided iputs by one block, then quiet and signal.
    Straight from the block into the neighbour's halo layer: no packing map, no staging buffer."""
    monkeypatch.setenv("DACE_CPUFREE_EARLY_PUTS", "0")
    assert sorted(put_forms(grid.plain, symbols=SIZES_8, shmem_transport="proxy")) == sorted(
        [PutForm.ROWS] * 8 + [PutForm.STRIDED] * 4
    )
    # text under test: each face's call and its target PE, the flags and the guards as printed
    kernel = _kernel("plain", "proxy", monkeypatch, early_puts=False)
    warp = "nvshmemx_putmem_nbi_warp(_dest + __do, _src + __so, (size_t)(8) * sizeof(double), (int)((__cpufree_pe "
    assert kernel.count(warp) == 8  # 4 faces x 2 half-steps
    for target in ("- 4", "+ 4", "- 2", "+ 2"):
        assert kernel.count(f"{warp}{target})));") == 2
    iput = "nvshmem_double_iput(_dest + __do + __lo * (10), _src + __so + __lo * (10), (ptrdiff_t)(10), (ptrdiff_t)(10)"
    assert kernel.count(iput) == 4
    assert "__so += __i * (100); __do += __i * (100);" in kernel  # the iput's rows: one per leading-axis index
    flags = re.findall(r"uint64_t\* _flag = &flags\[\(?(\d+)\)?\];", kernel)
    assert sorted(map(int, flags)) == sorted(2 * list(range(grid.FLAGS)))  # each flag: one put, one wait
    # the guards: the grid coordinates from the PE number, PX from the PE count (PY = PZ = 2 compiled in)
    for guard in (
        "if ((py_floor(__cpufree_pe, (2 * 2)) > 0)) {",
        "if ((py_floor(__cpufree_pe, (2 * 2)) < (py_floor(__cpufree_npes, (2 * 2)) - 1))) {",
        "if ((py_mod(py_floor(__cpufree_pe, 2), 2) > 0)) {",
        "if ((py_mod(py_floor(__cpufree_pe, 2), 2) < (2 - 1))) {",
        "if ((py_mod(__cpufree_pe, 2) > 0)) {",
        "if ((py_mod(__cpufree_pe, 2) < (2 - 1))) {",
    ):
        assert kernel.count(guard) == 4  # a put and a wait per half-step


def test_hip_puts_dense_rows_by_wavefront_and_strided_faces_by_element_puts(monkeypatch):
    """ROC_SHMEM has no strided put: the last-axis faces become element puts by the work-group's threads."""
    monkeypatch.setenv("DACE_CPUFREE_EARLY_PUTS", "0")
    assert sorted(put_forms(grid.plain, backend="hip", symbols=SIZES_8)) == sorted(
        [PutForm.ROWS] * 8 + [PutForm.STRIDED] * 4
    )
    # text under test: ROC_SHMEM's calls for the two forms
    code = dace_cpufree.generate_code(grid.plain, backend="hip", symbols=SIZES_8)
    assert code.count("rocshmem_putmem_nbi_wave(_dest + __do, _src + __so,") == 8
    assert code.count("rocshmem_double_p((double *)(_dest + __do), (double)_src[__so],") == 4


def test_plain_is_split_into_edges_puts_interior_waits(monkeypatch):
    """The default build (SplitForEarlyPuts): edge cells first, the 6 faces put into staging buffers on the
    neighbours, the interior while they travel, then per face the wait and the unpacking; 2 grid syncs per
    half-step."""
    source = dace_cpufree.kernel_source(grid.plain, symbols=SIZES_8, shmem_transport="p2p")
    labels = [label for label, _, _ in source.steps]
    first = labels[: labels.index("tasklet signal_wait") + 1]
    assert first.count("tasklet putmem") == 6
    maps = [k for k, label in enumerate(first) if label.startswith("map ")]
    puts = [k for k, label in enumerate(first) if label == "tasklet putmem"]
    assert maps[0] < puts[0] and puts[-1] < maps[-1]  # edge maps, puts, interior map
    assert labels.count("tasklet putmem") == 12 and labels.count("tasklet signal_wait") == 12
    assert sum(label.startswith("copy __cpufree_halo_") for label in labels) == 12
    assert source.grid_syncs == 4


def test_overlapped_p2p_puts_strided_faces_into_contiguous_buffers(monkeypatch):
    """Direct stores, the overlapped form: every face is one copy loop from the block's face (decoded per
    element with its strides) into the neighbour's contiguous halo buffer; the waits, then the unpacking of the
    6 buffers into the halo layers after a block barrier."""
    assert put_forms(grid.overlapped, symbols=SIZES_8, shmem_transport="p2p") == [PutForm.DIRECT] * 12
    # text under test: each face's size and strides as the copy loop decodes them
    kernel = _kernel("overlapped", "p2p", monkeypatch)
    assert kernel.count("const long long __n = 64;") == 12  # 8 x 8 cells per face
    assert kernel.count("__so += __i * (10); __do += __i * (1);") == 4  # last-axis face: source stride 10
    assert kernel.count("__so += __i * (100); __do += __i * (8);") == 8  # middle- and last-axis faces' rows
    assert kernel.count("blocks_for(__n, __parts, CPUFREE_P2P_PER_THREAD_HIDDEN);") == 12  # the core hides them
    for buffer in ("hx_lo", "hx_hi", "hy_lo", "hy_hi", "hz_lo", "hz_hi"):
        assert kernel.count(f"// copy {buffer} -> ") == 2


@pytest.mark.parametrize("form, syncs", [("plain", 4), ("overlapped", 5)])
def test_grid_syncs_per_step_with_sizes_compiled_in(form, syncs):
    """As the 1-D and 2-D decompositions: per half-step one after the edge cells and one after the unpacking
    (overlapped: + the barrier after the buffers' initialisation)."""
    assert dace_cpufree.kernel_source(getattr(grid, form), symbols=SIZES_8).grid_syncs == syncs


# ---- nvcc: build and device link against NVSHMEM for sm_90 --------------------------------------------------------


@pytest.mark.compile
@pytest.mark.parametrize("form, transport", list(product(FORMS, ("p2p", "proxy"))))
def test_builds_and_device_links_against_nvshmem_for_sm_90(form, transport, monkeypatch):
    """The 2x2x2 configuration (sizes compiled in, as run.py builds it), linked against libnvshmem_device.a."""
    monkeypatch.setenv("DACE_CPUFREE_CUDA_ARCH", "sm_90")
    source = dace_cpufree.kernel_source(getattr(grid, form), symbols=SIZES_8, shmem_transport=transport)
    library = build(source.code, f"jacobi_3d_grid_{form}_{transport}", "cuda", shmem=True,
                    full_blocks=source.direct_stores)  # fmt: skip
    defined = subprocess.run(["nm", "-D", "--defined-only", str(library)], capture_output=True, text=True, check=True)
    for entry in ("nvshmemi_init_thread", "cpufree_shmem_init", "cpufree_shmem_finalize", "cpufree_run"):
        assert entry in defined.stdout
    assert source.direct_stores == (transport == "p2p")


# ---- GPUs --------------------------------------------------------------------------------------------------------

TIMEOUT = env("DACE_CPUFREE_MULTIGPU_TIMEOUT")


@pytest.mark.multigpu
@pytest.mark.nvshmem
@pytest.mark.parametrize("gpus", [2, 4, 8])
@pytest.mark.parametrize("form", FORMS)
def test_distributed_grid_stencil_matches_numpy(form, gpus):
    """``mpirun -np <gpus>`` (2x1x1, 2x2x1, 2x2x2 blocks) on a 26 x 18 x 18 domain (odd steps), every PE's block
    gathered and compared with NumPy on the global domain."""
    if gpu_count() < gpus:
        pytest.skip(f"needs {gpus} GPUs, {gpu_count()} present")
    if shutil.which("mpirun") is None:
        pytest.skip("needs mpirun")
    args = ["--program", "jacobi_3d_grid", "--form", form, "--n", "18", "--nx", "26", "--steps", "21"]
    proc, report = scaling.mpirun_job(gpus, args, TIMEOUT)
    assert proc.returncode not in scaling.TIMED_OUT, f"killed after {TIMEOUT} s (hang?):\n{proc.stderr[-3000:]}"
    assert proc.returncode == 0 and report, f"rc={proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"
    assert report["gpus"] == gpus and report["local_shape"] == list(grid.local_shape(18, gpus, 26))
    assert report["valid"] and report["max_abs_error"] <= 1e-12, report


@pytest.mark.multigpu
@pytest.mark.nvshmem
@pytest.mark.parametrize("form", FORMS)
def test_distributed_grid_stencil_on_a_domain_whose_trailing_axes_differ(form):
    """4 GPUs (2x2x1) on a 26 x 34 x 18 domain: the middle axis split in two, the last one not."""
    if gpu_count() < 4:
        pytest.skip(f"needs 4 GPUs, {gpu_count()} present")
    if shutil.which("mpirun") is None:
        pytest.skip("needs mpirun")
    args = ["--program", "jacobi_3d_grid", "--form", form, "--n", "18", "--nx", "26", "--ny", "34", "--steps", "21"]
    proc, report = scaling.mpirun_job(4, args, TIMEOUT)
    assert proc.returncode not in scaling.TIMED_OUT, f"killed after {TIMEOUT} s (hang?):\n{proc.stderr[-3000:]}"
    assert proc.returncode == 0 and report, f"rc={proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"
    assert report["ny"] == 34 and report["local_shape"] == [14, 18, 18]
    assert report["valid"] and report["max_abs_error"] <= 1e-12, report


def test_weak_scaling_keeps_the_one_gpu_block_on_every_process_grid(capsys):
    """Every PE keeps the 1-GPU block: on 4 GPUs (2x2x1) the global domain is NX x NY x N with NY != N; the blocks
    cover it once; sizes the grid does not divide are refused; --ny is jacobi_3d_grid's alone."""
    from npbench_runs.multigpu import run

    assert scaling.weak_n("jacobi_3d_grid", 4, 130) == (130, 258, 258)
    assert [c[2:] for c in scaling._configs(["jacobi_3d_grid"], [1, 2, 4, 8], ("weak",), {"jacobi_3d_grid": 34})] == [
        (1, 34, 34, None),
        (2, 34, 66, None),
        (4, 34, 66, 66),
        (8, 66, 66, None),
    ]
    n, nx, ny = 34, 66, 66
    grid.check_size(n, 4, nx, ny=ny)
    assert grid.local_shape(n, 4, nx, ny=ny) == (34, 34, 34)
    A, _ = grid.initialize(n, nx, ny=ny)
    assert A.shape == (nx, ny, n)
    rebuilt = A.copy()
    rebuilt[1:-1, 1:-1, 1:-1] = 0.0
    for pe in range(4):
        block = grid.tile(A, pe, 4)
        assert block.shape == (34, 34, 34)
        grid.place(rebuilt, block, pe, 4)
    np.testing.assert_array_equal(rebuilt, A)
    with pytest.raises(ValueError, match="2x2x1 process grid"):
        grid.check_size(n, 4, nx, ny=67)
    assert run.domain_extents("jacobi_3d_grid", 66) == {"ny": 66} and run.domain_extents("jacobi_2d", None) == {}
    with pytest.raises(ValueError, match="--ny: jacobi_2d has no middle extent"):
        run.domain_extents("jacobi_2d", 66)
    with pytest.raises(SystemExit):
        run.main(["--program", "jacobi_3d", "--ny", "66"])
    assert "--ny: jacobi_3d has no middle extent" in capsys.readouterr().err


def test_registered_with_the_runners():
    assert PROGRAMS["jacobi_3d_grid"] is grid
    assert scaling.weak_n("jacobi_3d_grid", 8) == (258, 258, None)
    assert scaling.weak_n("jacobi_3d_grid", 2) == (130, 258, None)
    assert grid.symbols(8) == {"PY": 2, "PZ": 2}  # PX = n_pes() // (PY * PZ) in the program
    assert {"LX", "LY", "LZ", "PY", "PZ"} <= {str(s) for s in grid.plain.to_sdfg(simplify=True).free_symbols}
