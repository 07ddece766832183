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


def register_enum(enum, name: str):
    """The member ``name`` of DaCe's extensible ``enum``, registered by this package on first use."""
    if name not in enum.__members__:
        enum.register(name)
    return enum[name]


#: A map of a persistent kernel: a grid-stride loop over all threads of the cooperative grid.
PERSISTENT_SCHEDULE = register_enum(dtypes.ScheduleType, "CPUFree_Persistent")

#: Storage of a container on the symmetric heap (same size and offset on every PE).
SYMMETRIC_STORAGE = register_enum(dtypes.StorageType, "CPUFree_Symmetric")

#: ``my_pe()`` and ``n_pes()`` as symbols; reserved (``__cpufree`` prefix), filled by the runtime, never by the user.
PE_SYMBOL = "__cpufree_pe"
N_PES_SYMBOL = "__cpufree_npes"
PE_SYMBOLS = (PE_SYMBOL, N_PES_SYMBOL)


class PutForm(str, Enum):
    """How a ``Putmem`` expansion moves the data, in the tasklet's ``location["cpufree_put"]`` (set by the
    expansion that chooses it: ``frontend/putmem.py``)."""

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
    """The SHMEM collectives of a prepared SDFG that every PE must enter (tasklets marked ``cpufree_collective``:
    what it is, with its program line where known)."""
    return sorted(
        {
            node.location["cpufree_collective"]
            for node, _ in sdfg.all_nodes_recursive()
            if isinstance(node, nodes.Tasklet) and (node.location or {}).get("cpufree_collective")
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


@dataclass(frozen=True)
class BlockPart:
    """A block function's share of the grid (``@mapgridscope``): part ``index`` of ``count`` in block scope
    ``scope`` (one per call of a grid function). ``elems``: the elements of its declared range, or with
    ``inferred`` the work it does (iterations of its maps and copies), a symbolic expression of the program's
    symbols; the kernel splits its blocks by these at launch (``cpufree::split_blocks``). ``name``: the grid and
    block function, ``grid__block``.

    The frontend puts it on the block function's nested SDFG (``node_location``, strings as DaCe's code nodes
    keep them); flattening moves it to the states of the function (``state_location``)."""

    scope: int
    index: int
    count: int
    elems: str
    inferred: bool
    name: str
    #: what the sizes must satisfy for the scope's block functions to touch no common element, where the
    #: frontend could not decide it for every size (Python syntax, ``and``/``or``; on part 0; checked before
    #: each launch: ``runtime.program``); ``""``: nothing to check
    requires: str = ""
    #: a step of an automatic scope (independent steps side by side, ``codegen/concurrency.py``): its share is
    #: computed where it runs, and only when the scope's steps have fewer elements than the grid has threads
    automatic: bool = False
    scope_elems: tuple = ()  # automatic: the element counts of every step of the scope, in part order

    _KEYS = ("cpufree_scope", "cpufree_part", "cpufree_parts", "cpufree_elems", "cpufree_inferred")

    def node_location(self) -> dict:
        values = (self.scope, self.index, self.count, self.elems, int(self.inferred))
        loc = {k: str(v) for k, v in zip(self._KEYS, values)}
        if self.requires:
            loc["cpufree_requires"] = self.requires
        return loc

    def renamed(self, scope: int, symbols: dict) -> BlockPart:
        """The part in scope ``scope`` with its expressions in the caller's symbols (``symbols``: a nested SDFG's
        symbol mapping)."""
        import dataclasses

        def subs(text: str) -> str:
            if not text or not symbols:
                return text
            expr = dace.symbolic.pystr_to_symbolic(text)
            mapping = {dace.symbolic.symbol(k): dace.symbolic.pystr_to_symbolic(str(v)) for k, v in symbols.items()}
            return dace.symbolic.symstr(expr.subs(mapping)) if expr.free_symbols else text

        return dataclasses.replace(self, scope=scope, elems=subs(self.elems), requires=subs(self.requires))

    def state_location(self) -> dict:
        import sympy

        loc = {k: dace.symbolic.pystr_to_symbolic(v) for k, v in self.node_location().items() if k in self._KEYS}
        loc["cpufree_part_name"] = sympy.Symbol(self.name)
        if self.requires:  # kept as text: a condition is not an expression DaCe's location holds
            loc["cpufree_requires"] = sympy.Symbol(self.requires)
        return loc

    @classmethod
    def from_node(cls, node) -> BlockPart | None:
        loc = getattr(node, "location", None) or {}
        if "cpufree_part" not in loc:
            return None
        return cls._parse(loc, node.label)

    @classmethod
    def from_state(cls, state) -> BlockPart | None:
        loc = state.location or {}
        if "cpufree_part" not in loc:
            return None
        return cls._parse(loc, str(loc.get("cpufree_part_name", state.label)))

    @classmethod
    def _parse(cls, loc: dict, name: str) -> BlockPart:
        scope, index, count, elems, inferred = (str(loc[k]) for k in cls._KEYS)
        requires = str(loc.get("cpufree_requires", ""))
        return cls(int(scope), int(index), int(count), elems, inferred == "1", name, requires)


def control_reads(sdfg: dace.SDFG) -> set[str]:
    """The names the control flow of ``sdfg`` (not its nested SDFGs) reads: its blocks' code (branch and loop
    conditions, loop statements) and its interstate edges."""
    names = {str(x) for edge in sdfg.all_interstate_edges() for x in edge.data.read_symbols()}
    for block in sdfg.all_control_flow_blocks():
        for code in block.get_meta_codeblocks() if hasattr(block, "get_meta_codeblocks") else ():
            names |= {str(x) for x in code.get_free_symbols()}
    return names
