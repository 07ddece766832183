"""Lowering of one SDFG state's dataflow to kernel work items.

Each top-level map becomes a work item over the whole grid (:mod:`.maps`); each top-level tasklet runs on the
thread or blocks its placement names (the leader thread by default); each top-level copy becomes a grid-stride
copy. Inside a map the scope runs sequentially per thread (:mod:`.scopes`).
"""

import dace
from dace.sdfg import nodes
from dace.sdfg.state import SDFGState

from dace_cpufree import memlets
from dace_cpufree.cpp import INDEX_T, indent
from dace_cpufree.errors import NotPersistableError
from dace_cpufree.facts import CpufreeTasklet, facts_of

from .captures import apart, pointers
from .context import KernelContext, is_view_edge
from .ir import Executor, Item
from .maps import map_item
from .scopes import ScopeWriter, copy_body, topological, whole_run_copy


def tasklet_item(ctx: KernelContext, state: SDFGState, node: nodes.Tasklet) -> Item:
    """A tasklet outside any map: scalar work done by the leader thread.

    A tasklet of ours (:class:`~dace_cpufree.facts.CpufreeTasklet`) may ask for other executors:
    ``executor`` = ``"grid"`` (every thread of the grid: a collective call such as a matrix product),
    ``"block"`` (all threads of one block, for block-cooperative calls) or
    ``"thread"`` (thread 0 of one block), on block ``block`` modulo the grid size, ``"each"`` (in every
    block, thread ``block * warpSize`` modulo the block: a wait that each block makes for itself), or
    ``"blocks"``: every block ``b`` with ``b % L == block % L``, ``L`` = min(``lanes``, grid)
    (the grid's blocks dealt out over ``lanes`` concurrent items); the code sees its part
    ``__part`` of ``__parts``. Block-wide items are fenced by block barriers so that program order holds
    within the block; ``exit_barrier`` = False leaves out the one after a ``"blocks"`` item (its
    code promises that nothing after it in the block depends on its threads having finished).
    A ``"grid"`` call states what it needs of the launch (``launch``, :class:`~dace_cpufree.facts.LaunchNeeds`).
    """
    code = ScopeWriter(ctx, state, []).tasklet(node)
    facts = facts_of(node)
    reads, writes, regions, far = _accesses(ctx, state, node, set(facts.remote))
    kind, block = facts.executor, facts.block
    if kind == "grid":  # a collective device-library call that every thread makes (a matrix product)
        item = Item(
            f"tasklet {node.label}", code, reads, writes, Executor.GRID, strategy="every thread of the grid", remote=far
        )
        item.regions = tuple(regions)
        item.collective = True
        need = facts.launch
        if need is not None:
            item.block_threads, item.block_fits, item.tiles = need.block_threads, need.block_fits, need.tiles
            item.dynamic_shared, item.tile_symbols = need.dynamic_shared, frozenset(need.tile_symbols)
        return item
    if kind == "leader" and block == 0:
        return Item(
            f"tasklet {node.label}",
            ["if (__tid == 0) {"] + indent(code) + ["}"],
            reads,
            writes,
            Executor.LEADER,
            remote=far,
        )
    # Library calls on a block or thread: their registers apart from the kernel's loops (see cpufree::apart); the
    # function takes the pointers of the containers its connectors name (views are declared around it).
    code = apart(code, pointers(ctx, reads | writes | far))
    code, strategy, executor = _placed(node, code, facts)
    item = Item(f"tasklet {node.label}", code, reads, writes, executor, strategy=strategy, block=block, remote=far)
    item.regions = tuple(regions)
    return item


def _accesses(ctx: KernelContext, state: SDFGState, node: nodes.Tasklet, remote: set[str]) -> tuple:
    """``(reads, writes, regions, far)`` of a tasklet: the device containers it reads and writes through its
    connectors, their regions, and ``far``, the containers of its ``remote`` connectors."""
    # Connectors that address another PE's memory (a put's destination, a signal's flag): bound as
    # pointers, but no access to this PE's copy, so no synchronisation on them.
    reads, writes, regions, far = set(), set(), [], set()  # far: the containers of remote connectors
    edges = [(e, e.dst_conn, reads, "R") for e in state.in_edges(node)]
    for e, conn, accessed, mode in edges + [(e, e.src_conn, writes, "W") for e in state.out_edges(node)]:
        if e.data.is_empty() or e.data.data not in ctx.device:
            continue
        if conn in remote:
            far.add(e.data.data)
            continue
        accessed.add(e.data.data)
        regions.append((e.data.data, mode, e.data.subset))
    return frozenset(reads), frozenset(writes), regions, frozenset(far)


def _placed(node: nodes.Tasklet, code: list[str], facts: CpufreeTasklet) -> tuple:
    """``(code, strategy, executor)`` of a library call on blocks, a block, each block or a thread (its
    ``executor``, see :func:`tasklet_item`), its ``code`` guarded for the threads that run it."""
    kind, block = facts.executor, facts.block
    on_block = f"__block == {block} % __blocks"
    if kind == "blocks":
        lanes = facts.lanes
        code = [
            "{",
            f"    const unsigned int __lanes = cpufree::min_<unsigned int>({lanes}u, __blocks);",
            f"    if (__block % __lanes == {block}u % __lanes) {{",
            f"        const unsigned int __parts = (__blocks - 1 - {block}u % __lanes) / __lanes + 1;",
            "        const unsigned int __part = cpufree::lane_part(__block / __lanes, __parts);",
            "        __syncthreads();",
            *indent(indent(code)),
            *(["        __syncthreads();"] if facts.exit_barrier else []),
            "    }",
            "}",
        ]
        strategy = f"lane {block} of {lanes}: blocks b with b % {lanes} == {block} share the work"
        executor = Executor.BLOCKS
    elif kind == "block":
        code = [f"if ({on_block}) {{", "    __syncthreads();"] + indent(code) + ["    __syncthreads();", "}"]
        strategy = f"all threads of block {block} (modulo the grid)"
        executor = Executor.BLOCK
    elif kind == "each":
        code = [f"if (threadIdx.x == ({block}u * warpSize) % blockDim.x) {{"] + indent(code) + ["}"]
        strategy = f"warp {block} of every block, for its own block"
        executor = Executor.EACH
    elif kind in ("thread", "leader"):
        code = [f"if ({on_block} && threadIdx.x == 0) {{"] + indent(code) + ["}"]
        strategy = f"thread 0 of block {block} (modulo the grid)"
        executor = Executor.THREAD
    else:
        raise NotPersistableError(
            f"tasklet '{node.label}' asks for executor '{kind}'. Fix: use 'grid', 'blocks', 'block', 'each', "
            "'thread' or 'leader'."
        )
    return code, strategy, executor


def copy_item(ctx: KernelContext, state: SDFGState, edge) -> Item:
    """A copy between two containers outside any map, as a grid-stride loop. A copy of one element runs on thread
    0 alone (the loop's only iteration), so it is a leader item: between it and the scalar tasklets around it
    (also the leader's) program order suffices, and no grid sync is placed."""
    src, ssub, dst, dsub = memlets.ends(state, edge)
    count = ssub.num_elements()
    run = whole_run_copy(ctx, state, edge)
    if run is not None:
        code, n = run
    else:
        body, n = copy_body(ctx, state, edge, "__f", None)
        code = [f"for ({INDEX_T} __f = __tid; __f < {n}; __f += __nthreads) {{"] + indent(body) + ["}"]
    device = ctx.device
    reads = frozenset({edge.src.data} & device)
    writes = frozenset({edge.dst.data} & device)
    item = Item(
        f"copy {edge.src.data} -> {edge.dst.data}",
        ["{"] + indent(code) + ["}"],
        reads,
        writes,
        Executor.LEADER if n == "1" else Executor.GRID,
        work=n if not dace.symbolic.issymbolic(count) else None,  # a number: the launcher sizes the grid by it
    )
    regions = [(src, "R", ssub), (dst, "W", dsub)]
    item.regions = tuple((c, m, sub) for c, m, sub in regions if c in device and sub is not None)
    if len(item.regions) != len(reads) + len(writes):
        item.regions = ()
    if dsub is not None:
        item.elements = str(dsub.num_elements())
    return item


def _through_views(ctx: KernelContext, item: Item) -> Item:
    """Declares the views an item uses (pointers into what they alias) and makes the item's reads and
    writes name the aliased containers, which is what the synchronisation analysis compares."""
    used = {n for n in item.reads | item.writes if n in ctx.views}
    if not used:
        return item
    decls = ctx.view_decls(used)
    # a view's subsets are in its own coordinates: it stands for the whole of what it aliases (None); the
    # item's other containers keep theirs (the edge planes that read a halo buffer through a view)
    item.regions = tuple((ctx.root(n), m, None if n in ctx.views else sub) for n, m, sub in item.regions)
    item.code = ["{"] + indent(decls + item.code) + ["}"]
    if item.row is not None:
        item.row.prelude = decls
    item.reads = frozenset(ctx.root(n) for n in item.reads)
    item.writes = frozenset(ctx.root(n) for n in item.writes)
    return item


def state_items(ctx: KernelContext, state: SDFGState) -> list[Item]:
    """The work items of a state, in a topological order of its top-level nodes."""
    return [_through_views(ctx, item) for item in _state_items(ctx, state)]


def _state_items(ctx: KernelContext, state: SDFGState) -> list[Item]:
    sdict = state.scope_dict()
    out = []
    for node in topological(state, sdict, None):
        if isinstance(node, nodes.MapEntry):
            out.append(_located(map_item(ctx, state, node), node))
        elif isinstance(node, nodes.Tasklet):
            out.append(_located(tasklet_item(ctx, state, node), node))
        elif isinstance(node, nodes.AccessNode):
            out += [
                _located(copy_item(ctx, state, e), node)
                for e in state.in_edges(node)
                if isinstance(e.src, nodes.AccessNode) and not is_view_edge(ctx.sdfg, state, e)
            ]
        elif isinstance(node, nodes.MapExit):
            continue
        else:
            raise NotPersistableError(
                f"node '{node}' ({type(node).__name__}) in state '{state.label}' cannot run inside a persistent "
                "kernel: expand library nodes to device code and inline nested SDFGs first "
                "(dace_cpufree.persistent_sdfg does both)."
            )
    return out


def _located(item: Item, node) -> Item:
    """``item`` with the program line of ``node`` (DaCe's debug information), for messages that point the user
    at their own code."""
    info = getattr(node, "debuginfo", None)
    if info is not None and info.filename and info.start_line:
        item.source = f"{info.filename}:{info.start_line}"
    return item
