"""CPU tests: GPU-initiated communication, from the Python call to the generated CUDA and HIP text.

One program per expansion choice (``shmem_programs.py``): contiguous, signalled, strided, non-blocking
vs blocking, concurrent blocks; plus the flag-to-region guards, symmetric placement and the errors.
"""

import inspect

import dace
import numpy as np
import pytest
import shmem_programs as sp
from dace_cpufree.codegen import ir
from dace_cpufree.frontend import Putmem, SignalWait
from dace_cpufree.frontend.putmem import put_layout
from dace_cpufree.transformations import PrepareCommunication
from dace_cpufree.transformations.communication import mark_hidden, relax_ordering
from dace_cpufree.transformations.symmetric import SYMMETRIC_STORAGE
from kernel_copies import shmem_jacobi_2d, shmem_jacobi_3d
from kernel_steps import items, put_forms

import dace_cpufree
from dace_cpufree import nvshmem
from dace_cpufree.facts import CpufreeTasklet
from dace_cpufree.vocabulary import PutForm


@pytest.fixture(autouse=True)
def _nvshmem_calls(monkeypatch):
    """These tests read NVSHMEM's own calls (transport "proxy", asked for here through the environment; the
    default "auto" is "p2p" on one node); the direct-store transport ("p2p") has its tests at the end,
    which ask for it explicitly."""
    monkeypatch.setenv("DACE_CPUFREE_SHMEM_TRANSPORT", "proxy")


def _kernel(program, backend="cuda") -> str:
    code = dace_cpufree.generate_code(program, backend=backend)
    return code[: code.index("// ---- host launcher")]


def _tasklets(program, backend="cuda"):
    sdfg = dace_cpufree.persistent_sdfg(program, backend=backend)
    return [n for n, _ in sdfg.all_nodes_recursive() if isinstance(n, CpufreeTasklet)]


def _puts_and_blocking(program):
    sdfg = program.to_sdfg(simplify=True)
    relax_ordering(sdfg)
    return [n.blocking for n, _ in sdfg.all_nodes_recursive() if isinstance(n, Putmem)]


@pytest.mark.parametrize(
    "backend, expected",
    [
        ("cuda", "nvshmemx_putmem_block(_dest, _src, (size_t)(M) * sizeof(double), (int)("),
        ("hip", "rocshmem_putmem_wg(_dest, _src, (size_t)(M) * sizeof(double), (int)("),
    ],
)
def test_contiguous_put_rewritten_source_is_blocking(backend, expected):
    assert put_forms(sp.contiguous, backend=backend) == [PutForm.CONTIGUOUS]
    assert _puts_and_blocking(sp.contiguous) == [True]
    assert expected in _kernel(sp.contiguous, backend)  # text under test: each library's blocking call


@pytest.mark.parametrize(
    "backend, put, wait",
    [
        (
            "cuda",
            "nvshmemx_putmem_signal_nbi_block(_dest, _src, (size_t)(M) * sizeof(double), _flag, (uint64_t)(1), "
            "NVSHMEM_SIGNAL_SET, (int)(py_mod((__cpufree_pe + 1), __cpufree_npes)));",
            "nvshmem_signal_wait_until(_flag, NVSHMEM_CMP_GE, (uint64_t)(1));",
        ),
        (
            "hip",
            "rocshmem_putmem_signal_nbi_wg(_dest, _src, (size_t)(M) * sizeof(double), _flag, (uint64_t)(1), "
            "ROCSHMEM_SIGNAL_SET, (int)(py_mod((__cpufree_pe + 1), __cpufree_npes)));",
            "rocshmem_ulonglong_wait_until((unsigned long long *)_flag, ROCSHMEM_CMP_GE, (uint64_t)(1));",
        ),
    ],
)
def test_signalled_put_never_rewritten_is_nonblocking(backend, put, wait):
    assert put_forms(sp.signalled_once, backend=backend) == [PutForm.CONTIGUOUS]
    assert _puts_and_blocking(sp.signalled_once) == [False]
    labels = [label for label, _, _ in dace_cpufree.kernel_source(sp.signalled_once, backend=backend).steps]
    assert labels.index("tasklet putmem") < labels.index("tasklet signal_wait")
    assert not any(label.startswith("tasklet quiet") for label in labels)  # the end of the kernel completes it
    kernel = _kernel(sp.signalled_once, backend)
    assert put in kernel and wait in kernel  # text under test: each library's signalled put and wait


def test_strided_put_is_iput_then_quiet_then_signal():
    assert put_forms(sp.strided) == [PutForm.STRIDED]
    kernel = _kernel(sp.strided)
    # text under test: the order of the library calls inside the expansion (the quiet before the signal)
    iput = kernel.index("nvshmem_double_iput(_dest + __do + __lo * (M), _src + __so + __lo * (M), (ptrdiff_t)(M)")
    quiet = kernel.index("nvshmem_quiet();")
    signal = kernel.index("nvshmemx_signal_op(_flag, (uint64_t)(t), NVSHMEM_SIGNAL_SET,")
    assert iput < quiet < signal < kernel.index("nvshmem_signal_wait_until(_flag, NVSHMEM_CMP_GE, (uint64_t)(t));")


def test_strided_put_rocshmem_is_element_puts_then_quiet_then_atomic_signal():
    assert put_forms(sp.strided, backend="hip") == [PutForm.STRIDED]
    kernel = _kernel(sp.strided, "hip")
    # text under test: rocSHMEM has no strided put; element puts, then the quiet, then the signal
    element = kernel.index("rocshmem_double_p((double *)(_dest + __do), (double)_src[__so], (int)(")
    quiet = kernel.index("rocshmem_quiet();")
    signal = kernel.index("rocshmem_uint64_atomic_set(_flag, (uint64_t)(t), (int)(")
    assert element < quiet < signal


def test_concurrent_puts_run_on_different_blocks_block_cooperatively():
    tasklets = _tasklets(sp.concurrent)
    puts = [t for t in tasklets if t.label == "putmem"]
    waits = [t for t in tasklets if t.label == "signal_wait"]
    assert sorted(t.block for t in puts) == [0, 1, 2, 3]
    assert {t.executor for t in puts} == {"block"}
    assert {tuple(t.remote) for t in puts} == {("_dest", "_flag")}
    # every block waits for itself, the four waits on four warps of it (their polls overlap)
    assert [t.block for t in waits] == [0, 1, 2, 3]
    assert {t.executor for t in waits} == {"each"}
    assert sorted(t.put for t in puts) == [PutForm.CONTIGUOUS] * 2 + [PutForm.STRIDED] * 2  # rows, columns


def test_nonblocking_puts_get_a_quiet_on_their_own_block_before_the_source_is_rewritten():
    sdfg = sp.concurrent.to_sdfg(simplify=True)
    assert _puts_and_blocking(sp.concurrent) == [False] * 4
    PrepareCommunication("cuda", "proxy").apply_pass(sdfg, {})
    quiets = [n for n, _ in sdfg.all_nodes_recursive() if isinstance(n, dace.nodes.Tasklet) and "quiet" in n.label]
    puts = [n for n, _ in sdfg.all_nodes_recursive() if isinstance(n, dace.nodes.Tasklet) and n.label == "putmem"]
    assert quiets and all("nvshmem_quiet();" in q.code.as_string for q in quiets)  # text under test: the call
    assert {q.block for q in quiets} == {p.block for p in puts}


def test_wait_writes_the_regions_its_flag_guards():
    sdfg = sp.concurrent.to_sdfg(simplify=True)
    guards = {}
    for node, state in sdfg.all_nodes_recursive():
        if isinstance(node, SignalWait):
            flag = next(iter(state.in_edges_by_connector(node, "_flag"))).data
            outs = {e.src_conn: str(e.data) for e in state.out_edges(node)}
            guards[str(flag)] = sorted(v for k, v in outs.items() if k.startswith("_guard"))
    assert guards == {
        "flags[0]": ["A[0, 1:M - 1]"],
        "flags[1]": ["A[N - 1, 1:M - 1]"],
        "flags[2]": ["A[1:N - 1, 0]"],
        "flags[3]": ["A[1:N - 1, M - 1]"],
    }


def test_communicated_arrays_are_placed_on_the_symmetric_heap():
    sdfg = dace_cpufree.persistent_sdfg(sp.concurrent)
    assert sdfg.arrays["A"].storage == SYMMETRIC_STORAGE
    assert sdfg.arrays["flags"].storage == SYMMETRIC_STORAGE


def test_pe_numbers_are_symbols_of_the_kernel():
    source = dace_cpufree.kernel_source(sp.concurrent)
    assert {"__cpufree_pe", "__cpufree_npes"} <= {a.name for a in source.args if a.kind == "symbol"}


@pytest.mark.parametrize("backend", ["cuda", "hip"], ids=["nvshmem", "rocshmem"])  # "hip" alone would be a marker
def test_launcher_initialises_shmem_and_launches_collectively(backend):
    # text under test: the include and the entry points that the build links and the runtime loads (the link
    # itself: tests/runtime/test_nvshmem_compile.py)
    code = dace_cpufree.generate_code(sp.strided, backend=backend)
    assert "#include <cpufree/runtime.cuh>\n#include <cpufree/shmem.cuh>" in code
    for entry in ("cpufree_shmem_init", "cpufree_shmem_finalize", "cpufree_shmem_malloc", "cpufree_shmem_my_pe"):
        assert f"{entry}(" in code
    assert "CPUFREE_WORKSPACE_MALLOC(&cpufree_state.workspace, cpufree_need)" in code
    assert "CPUFREE_BEFORE_LAUNCH(" in code and "CPUFREE_AFTER_LAUNCH()" in code
    assert ("hipMemcpy(dst, src, n, hipMemcpyDefault)" in code) == (backend == "hip")  # the dialect's renaming


@dace.program
def _plain(A: dace.float64[10]):
    A[:] = A + 1.0


def test_programs_without_communication_are_unchanged():
    code = dace_cpufree.generate_code(_plain)
    # text under test: a kernel without communication builds without the SHMEM header and entry points
    assert "<cpufree/shmem.cuh>" not in code and "cpufree_shmem_init" not in code


def test_debug_wait_is_in_the_text_and_enabled_by_the_environment(monkeypatch):
    kernel = _kernel(sp.strided)
    # text under test: the wait's debug form is compiled in or out by the macro the builder defines (after the
    # channel's form, which a build with the channel selects)
    assert '#elif defined(CPUFREE_WAIT_TIMEOUT_NS)\ncpufree::shmem::wait_or_trap(_flag, (uint64_t)(t), "flags[1]"' in (
        "\n".join(line.strip() for line in kernel.splitlines())
    )
    from dace_cpufree.runtime.shmem_build import shmem_flags

    monkeypatch.setenv("DACE_CPUFREE_WAIT_TIMEOUT_MS", "500")
    flags, _ = shmem_flags("cuda")
    assert "-DCPUFREE_WAIT_TIMEOUT_NS=500000000ull" in flags and "-rdc=true" in flags


@pytest.mark.parametrize(
    "program, match",
    [
        (sp.bad_shape, r"'src' A\[1, 0:M\] has shape \(M,\) but 'dest' A\[0, 1:M\] has shape \(M - 1,\)"),
        (sp.bad_dtype, r"'src' B\[1, 0:M\] is float32? but 'dest' A\[0, 0:M\] is float64?|'src' .* is float"),
        (sp.bad_flag_dtype, r"flag 'flags\[0\]' has dtype int64.*Fix: declare 'flags' as dace.uint64"),
        (sp.bad_flag_scalar, r"flag 'flag' is not in symmetric memory.*Fix: make the flag an array"),
    ],
)
def test_bad_arguments_name_the_problem_and_the_fix(program, match):
    with pytest.raises(dace_cpufree.CommunicationError, match=match):
        program.to_sdfg()


def test_errors_name_the_call_by_file_and_line():
    """The call's own line in the user's file, as DaCe's frontend parses it (not a state's label)."""
    line = inspect.getsourcelines(sp.bad_shape.f)[1] + 2
    with pytest.raises(dace_cpufree.CommunicationError, match=rf"^Putmem \(shmem_programs.py:{line}\): "):
        sp.bad_shape.to_sdfg()


def test_wait_inside_a_map_is_rejected():
    with pytest.raises(dace_cpufree.NotPersistableError, match=r"inside map .* Fix: call nvshmem.SignalWait"):
        dace_cpufree.persistent_sdfg(sp.wait_in_map)


def test_expansion_outside_a_persistent_kernel_is_rejected():
    sdfg = sp.signalled_once.to_sdfg(simplify=True)
    node, state = next((n, s) for n, s in sdfg.all_nodes_recursive() if isinstance(n, SignalWait))
    with pytest.raises(dace_cpufree.NotPersistableError, match=r"only run inside a persistent kernel"):
        node.expand(state)


def test_calling_from_python_is_an_error():
    with pytest.raises(dace_cpufree.CommunicationError, match="inside a @dace.program"):
        nvshmem.Putmem(np.zeros(2), np.zeros(2), 0)


def test_emulation_refuses_communicating_programs():
    with pytest.raises(dace_cpufree.CpufreeError, match="host emulation cannot run"):
        dace_cpufree.compile(sp.strided, backend="emulate")


STENCILS = {"jacobi_2d": shmem_jacobi_2d, "jacobi_3d": shmem_jacobi_3d}


def _jacobi(program, backend="cuda", **symbols):
    return dace_cpufree.kernel_source(program, backend=backend, symbols=symbols or None)


def test_quiets_run_whichever_waits_are_skipped():
    """The quiet of a non-blocking put sits after the wait's conditional, not inside it: on a PE where
    ``if pi > 0: SignalWait(...)`` is skipped the puts must still be completed before the source is reused."""
    sdfg = dace_cpufree.persistent_sdfg(shmem_jacobi_2d.overlapped, symbols=dict(LX=66, LY=34, PY=2))
    quiets = [(n, s) for n, s in sdfg.all_nodes_recursive() if isinstance(n, dace.nodes.Tasklet) and "quiet" in n.label]
    assert len(quiets) == 8  # 4 puts per half-step
    for _, state in quiets:
        region = state.parent_graph
        while region is not None and not isinstance(region, dace.sdfg.state.ConditionalBlock):
            region = region.parent_graph
        assert region is None, f"quiet in {state.label} is inside a conditional"


def test_buffers_initialised_in_the_kernel_are_fenced_before_the_first_put():
    """hn = np.zeros(...) inside the program: a PE-wide barrier (with a grid.sync on each side) before the
    time loop, or a fast neighbour's first put may land before the zeros."""
    src = _jacobi(shmem_jacobi_2d.overlapped, LX=66, LY=34, PY=2)
    work = items(src)
    barrier = next(k for k, i in enumerate(work) if i.label == "tasklet barrier_received")
    assert any("he" in i.writes for i in work[:barrier]) and work[barrier].sync_before  # after the zeros
    assert work[barrier].executor == ir.Executor.THREAD and work[barrier].block == 0
    loops = [c for seq in ir.seqs(src.kernel_ir) for c in seq.children if isinstance(c, ir.Loop)]
    assert loops and all(work[barrier] not in list(ir.items(loop)) for loop in loops)  # before the time loop
    assert next(i for i in work[barrier + 1 :] if i.executor != ir.Executor.EVERY).sync_before  # and after it
    assert ("tasklet barrier_received", "thread 0 of block 0 (modulo the grid)", True) in src.steps
    hip = dace_cpufree.generate_code(shmem_jacobi_2d.overlapped, backend="hip", symbols=dict(LX=66, LY=34, PY=2))
    assert "rocshmem_barrier_all();" in hip  # text under test: ROC_SHMEM's barrier call
    plain = _jacobi(shmem_jacobi_2d.plain, LX=66, LY=34, PY=2)  # the user's arrays: copied in before the launch
    assert "tasklet barrier_received" not in [label for label, _, _ in plain.steps]


def test_plane_rows_are_warp_puts_shared_by_the_blocks_of_a_lane():
    """A 3-D halo plane's interior: its rows dealt out over every second block of the grid (two puts run at
    once), one warp-cooperative putmem_nbi per row, each block's quiet, and the flag set once, by the last
    block to finish (a counter that wraps for the next step)."""
    sizes = dict(LX=34, N=34)
    assert put_forms(shmem_jacobi_3d.plain, symbols=sizes) == [PutForm.ROWS] * 4
    src = _jacobi(shmem_jacobi_3d.plain, **sizes)
    puts = [i for i in items(src) if i.label == "tasklet putmem"]
    assert [(i.executor, i.block) for i in puts] == [(ir.Executor.BLOCKS, 0), (ir.Executor.BLOCKS, 1)] * 2
    # every block completes its own rows: no quiet tasklet later, and the put is listed as over its lane
    assert not any(label.startswith("tasklet quiet") for label, _, _ in src.steps)
    assert ("tasklet putmem", "lane 1 of 2: blocks b with b % 2 == 1 share the work", False) in src.steps
    # text under test: the order of the library calls inside the expansion (the last block signals)
    kernel = src.code[: src.code.index("// ---- host launcher")]
    warp_put = kernel.index("nvshmemx_putmem_nbi_warp(_dest + __do, _src + __so, (size_t)(32) * sizeof(double), ")
    quiet = kernel.index("nvshmem_quiet();", warp_put)
    signal = kernel.index(
        "if (cpufree::shmem::last_of(&__arrived, __use)) nvshmemx_signal_op(_flag, (uint64_t)(t), NVSHMEM_SIGNAL_SET,",
        quiet,
    )
    assert warp_put < quiet < signal
    hip = dace_cpufree.generate_code(shmem_jacobi_3d.plain, backend="hip", symbols=sizes)
    assert "rocshmem_putmem_nbi_wave(_dest + __do, _src + __so," in hip  # ROC_SHMEM's per-wavefront call
    assert "if (cpufree::shmem::last_of(&__arrived, __use)) rocshmem_uint64_atomic_set(_flag, (uint64_t)(t)," in hip


@pytest.mark.parametrize(
    "program, syncs",
    [("jacobi_2d.plain", 4), ("jacobi_2d.overlapped", 5), ("jacobi_3d.plain", 4), ("jacobi_3d.overlapped", 5)],
)
def test_grid_syncs_per_step_with_sizes_compiled_in(program, syncs):
    """Per half-step: plain = after its edge cells (the puts read them; SplitForEarlyPuts) and after the
    unpacking (the next edge cells read the interior and the halo); overlapped = after the edge lines (the
    puts read them) and after the unpacking (the next edge lines read the halo ring); + the barrier after the
    buffer initialisation. Every block waits for itself, so what reads the halo after the waits needs a block
    barrier only. Halo rows, edge lines and the interior are told apart by their regions (no sync between
    them)."""
    name, form = program.split(".")
    sizes = dict(LX=66, LY=34, PY=2) if name == "jacobi_2d" else dict(LX=34, N=34)
    assert _jacobi(getattr(STENCILS[name], form), **sizes).grid_syncs == syncs


def test_every_block_waits_for_itself_and_the_unpacking_needs_only_a_block_barrier():
    """The overlapped form: the four waits on warps 0-3 of every block; between the last wait and the first
    unpacking a block barrier, no grid sync (each block saw the flags itself); the grid sync after the
    unpacking stays (the next edge lines read the halo ring that other blocks wrote)."""
    src = dace_cpufree.kernel_source(
        shmem_jacobi_2d.overlapped, symbols=dict(LX=66, LY=34, PY=2), shmem_transport="p2p"
    )
    work = [i for i in items(src) if i.executor != ir.Executor.EVERY]
    waits = [i for i in work if i.label == "tasklet signal_wait"]
    assert [(i.executor, i.block) for i in waits] == [(ir.Executor.EACH, w) for w in range(4)] * 2
    assert [i.label for i in work if i.executor == ir.Executor.THREAD] == ["tasklet barrier_received"]
    every = items(src)  # the branches around the unpacking carry the barrier before it
    for half in (1, 0):
        last_wait = [k for k, i in enumerate(every) if i.label == "tasklet signal_wait"][4 * half + 3]
        unpack = next(k for k, i in enumerate(every) if k > last_wait and i.label.startswith("copy hn -> "))
        between = every[last_wait + 1 : unpack + 1]
        assert sum(i.bar_before for i in between) == 1 and not any(i.sync_before for i in between)
    after = next(i for i in every[unpack:] if i.label.startswith("map "))
    assert after.sync_before  # before the next edge lines (the first half-step's; the second's wraps around)
    assert ("tasklet signal_wait", "warp 3 of every block, for its own block", False) in src.steps


def test_puts_hidden_by_later_work_take_fewer_blocks():
    """The overlapped form computes the inner cells between its puts and its waits: the puts are hidden, and
    their elements are dealt out 4 per thread (fewer blocks pay a fence); the plain form waits right after."""
    for name in ("jacobi_2d", "jacobi_3d"):
        for form, hidden in (("plain", False), ("overlapped", True)):
            sdfg = getattr(STENCILS[name], form).to_sdfg(simplify=True)
            mark_hidden(sdfg)
            puts = [n for n, _ in sdfg.all_nodes_recursive() if isinstance(n, Putmem)]
            assert puts and {p.hidden for p in puts} == {hidden}, (name, form)
    code = dace_cpufree.generate_code(
        shmem_jacobi_2d.overlapped, symbols=dict(LX=66, LY=34, PY=2), shmem_transport="p2p"
    )
    # text under test: the expansion prints Putmem.hidden as the per-thread count the runtime header defines
    assert code.count("blocks_for(__n, __parts, CPUFREE_P2P_PER_THREAD_HIDDEN);") == 8


def test_block_barrier_only_for_what_each_block_did_itself():
    """The analysis on a hand-built IR: a reader of what an EACH item wrote gets a block barrier, one that also
    reads a grid item's write gets a grid sync, and a barrier that a loop header would need becomes a grid sync."""
    from dace_cpufree.codegen import ir
    from dace_cpufree.codegen.syncs import place_grid_syncs

    def item(label, executor, reads=(), writes=()):
        return ir.Item(label, [], frozenset(reads), frozenset(writes), executor)

    wait = item("wait", ir.Executor.EACH, ["flags"], ["halo"])
    unpack = item("unpack", ir.Executor.GRID, ["halo"], ["B"])
    stencil = item("stencil", ir.Executor.GRID, ["B"], ["A"])
    assert place_grid_syncs(ir.Seq([wait, unpack, stencil])) == 1
    assert unpack.bar_before and not unpack.sync_before
    assert stencil.sync_before  # B was written by all blocks
    cond = item("t < T", ir.Executor.EVERY, ["halo"])
    wait2 = item("wait", ir.Executor.EACH, ["flags"], ["halo"])
    loop = ir.Loop("loop", None, cond, None, ir.Seq([wait2]))
    place_grid_syncs(ir.Seq([loop]))
    assert cond.sync_before  # the condition is printed in the loop header: no room for a barrier


def test_direct_store_transport_writes_through_peer_pointers(monkeypatch):
    """shmem_transport="p2p": puts, quiets, signals and waits are the kernel's own stores, fences and loads
    (cpufree::shmem::p2p); no NVSHMEM call that carries the proxy transport is left in the kernel. Every put,
    rows and strided columns alike, is one copy loop dealt out over the blocks of its lane (4 puts at once: 4
    lanes), each block fences, the last one signals, and the block goes on without waiting for its fence.
    The plain form as written (DACE_CPUFREE_EARLY_PUTS=0): puts into the strided halo ring itself."""
    monkeypatch.setenv("DACE_CPUFREE_EARLY_PUTS", "0")
    sizes = dict(LX=66, LY=34, PY=2)
    assert put_forms(shmem_jacobi_2d.plain, symbols=sizes, shmem_transport="p2p") == [PutForm.DIRECT] * 8
    sdfg = dace_cpufree.persistent_sdfg(shmem_jacobi_2d.plain, symbols=sizes, shmem_transport="p2p")
    puts = [n for n, _ in sdfg.all_nodes_recursive() if isinstance(n, dace.nodes.Tasklet) and n.label == "putmem"]
    # no block barrier after the put: the stores have read the source once they are issued
    assert {n.exit_barrier for n in puts} == {False}
    # per half-step: rows of LY - 2 (32) dense on both ends, columns of LX - 2 (64) with the row stride
    unexpanded = shmem_jacobi_2d.plain.to_sdfg(simplify=True)
    layouts = [put_layout(n, st, st.sdfg) for n, st in unexpanded.all_nodes_recursive() if isinstance(n, Putmem)]
    assert (
        sorted((str(lay.count), lay.contiguous) for lay in layouts) == [("LX - 2", False)] * 4 + [("LY - 2", True)] * 4
    )
    src = dace_cpufree.kernel_source(shmem_jacobi_2d.plain, symbols=sizes, shmem_transport="p2p")
    assert src.direct_stores
    work = items(src)
    lanes = [i.block for i in work if i.label == "tasklet putmem"]
    assert [i.executor for i in work if i.label == "tasklet putmem"] == [ir.Executor.BLOCKS] * 8
    assert sorted(lanes) == sorted(list(range(4)) * 2)  # 4 puts at once: 4 lanes
    assert not any(i.label.startswith("tasklet quiet") for i in work)  # each block's own quiet
    assert [i.label for i in work].count("tasklet signal_wait") == 8
    # text under test: no NVSHMEM call that carries the proxy transport is printed into the kernel
    code = dace_cpufree.generate_code(shmem_jacobi_2d.plain, symbols=sizes, shmem_transport="p2p")
    kernel = code[code.index("__global__") : code.index("// ---- host launcher")]
    for call in ("nvshmemx_putmem", "nvshmem_double_iput", "nvshmem_quiet", "nvshmemx_signal_op", "signal_wait_until"):
        assert call not in kernel
    assert "cpufree_shmem_unreachable_pe" in code  # the launcher's reachability check
    # text under test: full blocks, registers capped (NVSHMEM's library code, which sets them with "proxy", is
    # not linked in); the builder reads KernelSource.direct_stores for the same
    assert "__global__ void CPUFREE_FULL_BLOCKS cpufree_kernel_copies_shmem_jacobi_2d_plain_kernel(" in kernel
    proxy = dace_cpufree.kernel_source(shmem_jacobi_2d.plain, symbols=sizes)
    assert not proxy.direct_stores and PutForm.DIRECT not in put_forms(shmem_jacobi_2d.plain, symbols=sizes)
    assert "__global__ void cpufree_kernel_copies_shmem_jacobi_2d_plain_kernel(" in proxy.code


def test_transport_choice_follows_the_option_the_environment_and_the_launcher():
    from dace_cpufree.frontend.shmem_api import implementation

    from dace_cpufree.errors import CommunicationError, CpufreeError
    from dace_cpufree.options import CompileOptions

    def transport(environ, **given):
        return CompileOptions.resolve(environ, **given).shmem_transport

    assert transport({}) == "p2p"  # default "auto": no launcher says several nodes
    assert transport({}, shmem_transport="proxy") == "proxy"
    assert transport({}, backend="hip") == "proxy"  # ROC_SHMEM has its calls only
    assert transport({"DACE_CPUFREE_SHMEM_TRANSPORT": "proxy"}) == "proxy"
    assert transport({"DACE_CPUFREE_SHMEM_TRANSPORT": "proxy"}, shmem_transport="p2p") == "p2p"
    two_nodes = {"OMPI_COMM_WORLD_SIZE": "8", "OMPI_COMM_WORLD_LOCAL_SIZE": "4"}
    assert transport(two_nodes) == "proxy"
    assert transport({**two_nodes, "OMPI_COMM_WORLD_LOCAL_SIZE": "8"}) == "p2p"  # one node
    assert transport({"SLURM_JOB_NUM_NODES": "2"}) == "proxy"
    with pytest.raises(CpufreeError, match="Fix: use one of auto, p2p, proxy"):
        transport({}, shmem_transport="nvlink")
    assert implementation("cuda", "proxy") == "NVSHMEM" and implementation("cuda", "p2p") == "NVSHMEM_P2P"
    assert implementation("hip", "proxy") == "ROCSHMEM"
    with pytest.raises(CommunicationError, match="NVSHMEM only"):
        implementation("hip", "p2p")
