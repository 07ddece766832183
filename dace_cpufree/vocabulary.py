"""The words every layer of dace-cpufree shares: the schedule and storage types it registers with DaCe, the PE
symbols, which map parameter walks the contiguous dimension, and small readings of an SDFG (a loop's range, a
one-element container, a tasklet's single assignment). Imports only DaCe, so that the frontend, the
passes, the code generator and the runtime can all use it without importing one another."""

from __future__ import annotations

import ast
from collections import Counter
from dataclasses import dataclass
from enum import Enum

import dace
import dace.library
from dace import data as dt
from dace import dtypes
from dace.sdfg import SDFGState, nodes


def register_enum(enum, name: str, template=None):
    """The member ``name`` of DaCe's extensible ``enum``, registered by this package on first use (with
    ``template``, a dataclass: a member whose instances carry its fields)."""
    if name not in enum.__members__:
        enum.register(name, template)
    return enum[name]


@dataclass(frozen=True)
class PersistentMap:
    """The thread scheduler's choice for a map of a persistent kernel, the attribute of its schedule: ``tile`` a
    static tile, 0 (the tile chosen at run time) or None (the plain grid-stride loop). ``facts.map_tile`` reads
    it."""

    tile: int | None = None


#: A map of a persistent kernel: a grid-stride loop over all threads of the cooperative grid, or with a tile
#: (``PERSISTENT_SCHEDULE(tile=T)``) the tile-mapped loops of the thread scheduler.
PERSISTENT_SCHEDULE = register_enum(dtypes.ScheduleType, "CPUFree_Persistent", PersistentMap)

#: Storage of a container on the symmetric heap (same size and offset on every PE).
SYMMETRIC_STORAGE = register_enum(dtypes.StorageType, "CPUFree_Symmetric")

#: ``my_pe()`` and ``n_pes()`` as symbols; reserved (``__cpufree`` prefix), filled by the runtime, never by the user.
PE_SYMBOL = "__cpufree_pe"
N_PES_SYMBOL = "__cpufree_npes"
PE_SYMBOLS = (PE_SYMBOL, N_PES_SYMBOL)


class PutForm(str, Enum):
    """How a ``Putmem`` expansion moves the data (the tasklet's ``put`` fact, ``facts.CpufreeTasklet``; set by
    the expansion that chooses it: ``frontend/putmem.py``)."""

    CONTIGUOUS = "contiguous"  # one block-cooperative putmem call (dense on both ends)
    ROWS = "rows"  # dense rows shared by the blocks of a lane, one warp-cooperative putmem per row
    STRIDED = "strided"  # the block's threads: strided puts by row (iput), or element puts where there is none
    DIRECT = "direct"  # the kernel's own stores through peer pointers (transport "p2p"), any layout


def loop_range(loop) -> tuple | None:
    """``(start, end, stride)`` of a ``LoopRegion`` (``end`` inclusive) where DaCe's loop analysis finds them, else
    ``None``."""
    from dace.transformation.passes.analysis import loop_analysis

    found = (
        loop_analysis.get_init_assignment(loop),
        loop_analysis.get_loop_end(loop),
        loop_analysis.get_loop_stride(loop),
    )
    return None if any(v is None for v in found) else found


def in_loop(block, across_nested: bool) -> bool:
    """Whether a ``LoopRegion`` repeats the control-flow ``block``: one around it in its SDFG, and with
    ``across_nested`` one around the state of the nested SDFG node that holds that SDFG (and so on outwards)."""
    from dace.sdfg.state import LoopRegion

    while True:
        graph = getattr(block, "parent_graph", None)
        if isinstance(graph, LoopRegion):
            return True
        if graph is None:
            return False
        if isinstance(graph, dace.SDFG):
            if not across_nested or graph.parent_nsdfg_node is None:
                return False
            block = graph.parent  # the state of the nested SDFG's node
        else:
            block = graph


def block_chain(cfg) -> list | None:
    """The blocks of a control-flow region in order when they form one chain (each edge unconditional and without
    assignments, every block on it, the last one without successors), else ``None``."""
    if any(not e.data.is_unconditional() or e.data.assignments for e in cfg.edges()):
        return None
    order = [cfg.start_block]
    while cfg.out_degree(order[-1]) == 1 and len(order) <= cfg.number_of_nodes():
        order.append(cfg.out_edges(order[-1])[0].dst)
    return order if len(order) == cfg.number_of_nodes() and cfg.out_degree(order[-1]) == 0 else None


def block_order(region) -> list:
    """The blocks of a control-flow region in reverse post-order from its start block (unreachable ones dropped):
    program order, each block after those that lead to it."""
    if region.number_of_nodes() == 0:
        return []
    seen, post = set(), []

    def visit(b):
        seen.add(b)
        for s in region.successors(b):
            if s not in seen:
                visit(s)
        post.append(b)

    visit(region.start_block)
    return list(reversed(post))


def scalar_like(desc: dt.Data) -> bool:
    """A scalar, or an array of one element in one dimension (how DaCe often keeps a Python scalar)."""
    return isinstance(desc, dt.Scalar) or (isinstance(desc, dt.Array) and tuple(desc.shape) == (1,))


def assigned_value(code: str) -> ast.expr | None:
    """The right-hand side of tasklet code that is one assignment to one target (``out = ...``), else ``None``."""
    try:
        body = ast.parse(code).body
    except SyntaxError:
        return None
    if len(body) != 1 or not isinstance(body[0], ast.Assign) or len(body[0].targets) != 1:
        return None
    return body[0].value


def is_symmetric(desc: dt.Data) -> bool:
    """Whether a container lives on the symmetric heap."""
    return desc.storage == SYMMETRIC_STORAGE


def has_symmetric(sdfg: dace.SDFG) -> bool:
    """Whether a prepared SDFG has containers on the symmetric heap (what its puts and waits touch)."""
    return any(is_symmetric(d) for d in sdfg.arrays.values())


def communicates(sdfg: dace.SDFG) -> bool:
    """Whether a prepared SDFG communicates: symmetric containers or the PE symbols."""
    return any(is_symmetric(d) for d in sdfg.arrays.values()) or any(s in sdfg.free_symbols for s in PE_SYMBOLS)


def collectives(sdfg: dace.SDFG) -> list[str]:
    """The SHMEM collectives of a prepared SDFG that every PE must enter: the ``collective`` fact of its tasklets
    (``facts.CpufreeTasklet``: what each is, with its program line where known)."""
    return sorted(
        {
            node.collective
            for node, _ in sdfg.all_nodes_recursive()
            if isinstance(node, nodes.Tasklet) and getattr(node, "collective", "")
        }
    )


def contiguous_param(state: SDFGState, entry: nodes.MapEntry, candidates: list[str] | None = None) -> str | None:
    """The map parameter that indexes the contiguous (last) dimension of the containers the map
    accesses most often, among ``candidates`` (default: all parameters); ``None`` if none does."""
    params = list(entry.map.params)
    candidates = params if candidates is None else candidates
    votes = Counter()
    for edge in state.scope_subgraph(entry).edges():
        memlet = edge.data
        if memlet.is_empty() or memlet.data is None or not memlet.subset.dims():
            continue
        desc = state.sdfg.arrays[memlet.data]
        if desc.transient and isinstance(desc, dace.data.Scalar):
            continue
        if len(desc.strides) and desc.strides[-1] != 1:
            continue
        last = {str(s) for s in memlet.subset.ndrange()[-1][0].free_symbols}
        for p in candidates:
            if p in last:
                votes[p] += 1
    if not votes:
        return None
    best = max(votes.values())
    # ties: the innermost parameter of the map
    return [p for p in params if votes.get(p) == best][-1]


class _HeadersOnly:
    """The fields DaCe asks of an environment, empty: what the kernels of ours need is a header of
    ``cpufree/`` (``kernel_headers``, included by codegen/kernel.py) and at most compile flags."""

    cmake_minimum_version = None
    cmake_packages = []
    cmake_variables = {}
    cmake_includes = []
    cmake_libraries = []
    cmake_compile_flags = []
    cmake_link_flags = []
    cmake_files = []
    headers = []
    kernel_headers = []
    state_fields = []
    init_code = ""
    finalize_code = ""
    dependencies = []


@dace.library.environment
class CPUFreeMathDx(_HeadersOnly):
    """NVIDIA cuBLASDx (the ``nvidia-mathdx`` wheel, headers only): the block-level products of ``cpufree::gemm``,
    which the expansion of matrix products declares (transformations/gemm.py). The generator includes its
    ``kernel_headers``; the builder adds the wheel's include folders (dace_cpufree/runtime/mathdx.py)."""

    cmake_compile_flags = ["--expt-relaxed-constexpr"]
    headers = ["cpufree/gemm.cuh"]
    kernel_headers = ["cpufree/gemm.cuh"]


#: The name of the matrix products' environment in a tasklet's ``environments`` (DaCe records the class path).
MATHDX_ENVIRONMENT = CPUFreeMathDx.full_class_path()


@dace.library.environment
class CPUFreeMatVec(_HeadersOnly):
    """``cpufree::gemv_pair`` and ``gemv_chain`` (``cpufree/gemv.cuh``, no library): two matrix-vector products over
    one matrix in one call (transformations/matvec_pairs.py)."""

    headers = ["cpufree/gemv.cuh"]
    kernel_headers = ["cpufree/gemv.cuh"]


def control_reads(sdfg: dace.SDFG) -> set[str]:
    """The names the control flow of ``sdfg`` (not its nested SDFGs) reads: its blocks' code (branch and loop
    conditions, loop statements) and its interstate edges."""
    names = {str(x) for edge in sdfg.all_interstate_edges() for x in edge.data.read_symbols()}
    for block in sdfg.all_control_flow_blocks():
        for code in block.get_meta_codeblocks() if hasattr(block, "get_meta_codeblocks") else ():
            names |= {str(x) for x in code.get_free_symbols()}
    return names
