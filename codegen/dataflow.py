"""Lowering of one SDFG state's dataflow to kernel work items.

Each top-level map becomes a grid-stride loop over the whole grid; each top-level tasklet runs on
the leader thread; each top-level copy becomes a grid-stride copy. Inside a map, the scope runs
sequentially per thread: nested maps are plain loops, tasklets read and write through memlets.

Write-conflict resolution (DaCe WCR) is resolved per case:
- a map whose WCR outputs do not depend on some of its parameters (a reduction: ``C[i, j] +=
  A[i, k] * B[k, j]``) runs in parallel over the output parameters and sequentially over the
  others, accumulating in a register;
- a map whose outputs depend on none of its parameters (a full reduction) splits the reduced
  space over the grid, each thread accumulates, then combines atomically;
- any other WCR write is a plain read-modify-write when the thread owns the location, else atomic.
"""

from __future__ import annotations

import ast

import dace
from dace import dtypes, subsets
from dace.frontend.operations import detect_reduction_type
from dace.sdfg import nodes
from dace.sdfg.propagation import propagate_subset
from dace.sdfg.state import SDFGState

from dace_cpufree import memlets
from dace_cpufree.errors import NotPersistableError
from dace_cpufree.vocabulary import contiguous_param

from .captures import apart
from .context import KernelContext, is_view_edge
from .expressions import INDEX_T, cexpr, range_extents, same_value, tasklet_code
from .ir import Executor, Item
from .loops import decode_flat, indent, nested_loops
from .rows import RowCandidate, RowForm
from .tiles import (
    MAX_FUSED,
    extent_decls,
    lane_loop,
    layout,
    reduction_lanes,
    tiled_columns,
    tiled_map,
    tiled_reduction,
)

_WCR_OPS = {
    dtypes.ReductionType.Sum: "Sum",
    dtypes.ReductionType.Product: "Product",
    dtypes.ReductionType.Min: "Min",
    dtypes.ReductionType.Max: "Max",
}


def wcr_op(wcr: str) -> str:
    kind = detect_reduction_type(wcr)
    if kind not in _WCR_OPS:
        raise NotPersistableError(f"write-conflict resolution '{wcr}' is not a sum, product, min or max.")
    return f"cpufree::Op::{_WCR_OPS[kind]}"


class ScopeWriter:
    """Writes the sequential code of a scope's contents for one thread.

    :param owned: map parameters that the enclosing grid-stride loop distributes over threads;
                  a WCR write to a location that determines all of them is owned by this thread.
    :param sinks: WCR outputs redirected to register accumulators, ``{(tasklet, conn): (var, op, flag)}``;
                  with a flag, the update takes the value as is while the flag is false.
    """

    def __init__(self, ctx: KernelContext, state: SDFGState, owned: list[str], sinks=None):
        self.ctx = ctx
        self.state = state
        self.sdict = state.scope_dict()
        self.owned = owned
        self.sinks = sinks or {}

    def scope(self, entry: nodes.MapEntry | None) -> list[str]:
        lines = []
        for node in _topological(self.state, self.sdict, entry):
            if isinstance(node, nodes.Tasklet):
                lines += self.tasklet(node)
            elif isinstance(node, nodes.MapEntry):
                lines += self.sequential_map(node)
            elif isinstance(node, nodes.AccessNode):
                # Copies into this node (from a container or from outside the scope) and out of the scope.
                for edge in self.state.in_edges(node):
                    if is_view_edge(self.ctx.sdfg, self.state, edge):
                        continue
                    if isinstance(edge.src, (nodes.AccessNode, nodes.MapEntry)) and not edge.data.is_empty():
                        lines += sequential_copy(self.ctx, self.state, edge, self.owned)
                for edge in self.state.out_edges(node):
                    if isinstance(edge.dst, nodes.MapExit) and not edge.data.is_empty():
                        lines += sequential_copy(self.ctx, self.state, edge, self.owned)
            elif isinstance(node, nodes.MapExit):
                continue
            else:
                raise NotPersistableError(
                    f"node '{node}' ({type(node).__name__}) inside map '{entry}' cannot run in a persistent kernel."
                )
        return lines

    def sequential_map(self, entry: nodes.MapEntry) -> list[str]:
        return nested_loops(entry.map.params, list(entry.map.range), self.scope(entry))

    def tasklet(self, node: nodes.Tasklet) -> list[str]:
        ctx, state = self.ctx, self.state
        pre, post, defined = [], [], {}
        for edge in state.in_edges(node):
            if edge.data.is_empty() or edge.dst_conn is None:
                continue
            ctype = node.in_connectors[edge.dst_conn]
            defined[edge.dst_conn] = ctype
            pre.append(self._bind_input(edge, ctype))
        for edge in state.out_edges(node):
            if edge.data.is_empty() or edge.src_conn is None:
                continue
            conn, ctype = edge.src_conn, node.out_connectors[edge.src_conn]
            defined[conn] = ctype
            if _is_pointer(ctype):
                target = ctx.access(edge.data.data, edge.data.subset)
                if _assigned_as_value(node, conn, edge.data):
                    # a conditional write (``A[A <= t] = v``: DaCe gives the dynamic output a pointer type while
                    # the code assigns the element): a reference makes the assignment store to the element
                    pre.append(f"{ctype.base_type.ctype} &{conn} = {target};")
                else:
                    pre.append(f"{ctype.ctype} {conn} = &{target};")
                continue
            pre.append(f"{ctype.ctype} {conn};")
            post.append(self._write_output(node, edge, conn))
        body = tasklet_code(node, defined).splitlines()
        return ["{"] + indent(pre + body + post) + ["}"]

    def _bind_input(self, edge, ctype) -> str:
        memlet = edge.data
        target = self.ctx.access(memlet.data, memlet.subset)
        if _is_pointer(ctype):
            return f"{ctype.ctype} {edge.dst_conn} = &{target};"
        return f"const {ctype.ctype} {edge.dst_conn} = {target};"

    def _write_output(self, node, edge, conn: str) -> str:
        memlet = edge.data
        if (node, conn) in self.sinks:
            var, op, started = self.sinks[(node, conn)]
            update = f"cpufree::combine<{op}>({var}, {conn})"
            return f"{var} = {started} ? {update} : {conn};" if started else f"{var} = {update};"
        target = self.ctx.access(memlet.data, memlet.subset)
        if memlet.wcr is None:
            return f"{target} = {conn};"
        op = wcr_op(memlet.wcr)
        if memlet.data in self.ctx.local or owns(memlet.subset, self.owned):
            return f"{target} = cpufree::combine<{op}>({target}, {conn});"
        return f"cpufree::atomic_combine<{op}>(&{target}, {conn});"


def _assigned_as_value(node: nodes.Tasklet, conn: str, memlet) -> bool:
    """Whether a Python tasklet writes its one-element output ``conn`` by plain assignment (never indexes it)."""
    if node.language != dtypes.Language.Python or memlet.subset is None or memlet.subset.num_elements() != 1:
        return False
    tree = node.code.code if isinstance(node.code.code, list) else [node.code.code]
    for stmt in tree:
        for sub in ast.walk(stmt):
            if isinstance(sub, ast.Subscript) and isinstance(sub.value, ast.Name) and sub.value.id == conn:
                return False
    return True


def owns(subset: subsets.Subset, params: list[str]) -> bool:
    """Whether each value of ``params`` writes a distinct location of ``subset`` (each is a dim index)."""
    dims = [rb for rb, _, _ in subset.ndrange()]
    for p in params:
        sym = dace.symbolic.symbol(p)
        if not any((d - sym).free_symbols.isdisjoint(set(map(dace.symbolic.symbol, params))) for d in dims):
            return False
    return True


def _is_pointer(ctype) -> bool:
    return isinstance(ctype, dace.pointer)


def _topological(state: SDFGState, sdict, entry):
    return [n for n in dace.sdfg.utils.dfs_topological_sort(state) if sdict[n] is entry]


def _decode(index: str, params: list[str], ranges: list, tag: str = "") -> list[str]:
    """Turn one flat index into map parameters, last parameter fastest (contiguous).

    Extents are the variables ``__e{tag}{k}`` declared by :func:`_extents`.
    """
    return decode_flat(index, f"__r{tag}", params, ranges, [f"__e{tag}{k}" for k in range(len(params))])


def _extents(ranges, tag: str = "") -> list[str]:
    extents = range_extents(subsets.Range(ranges))
    lines = [f"const {INDEX_T} __e{tag}{k} = {e};" for k, e in enumerate(extents)]
    lines.append(f"const {INDEX_T} __n{tag} = " + " * ".join(f"__e{tag}{k}" for k in range(len(ranges))) + ";")
    return lines


def _grid_stride(
    params, ranges, body: list[str], prologue=(), epilogue=(), per_warp: bool = False, spread: bool = False
) -> list[str]:
    """``for`` over the product of ``ranges``, distributed over every thread (or warp) of the grid.

    ``spread``: the warps of the grid are numbered block-fastest (warp ``w`` of block ``b`` is warp
    ``w * gridDim.x + b``), so that fewer iterations than threads still land on every block, hence every
    SM, and not on the first blocks alone (mvt's column sums: 16000 long loops on 32 of 396 blocks when
    numbered thread-fastest). Lanes stay consecutive: accesses along the iteration stay coalesced."""
    if not params:
        return ["if (__tid == 0) {"] + indent(list(prologue) + body + list(epilogue)) + ["}"]
    lines = _extents(ranges) + list(prologue)
    if per_warp:
        lines.append(f"for ({INDEX_T} __f = __tid / warpSize; __f < __n; __f += __nthreads / warpSize) {{")
    elif spread:
        lines.append(  # a permutation of the threads when blocks are whole warps; else thread-fastest
            f"const {INDEX_T} __spread = blockDim.x % warpSize ? __tid : "
            "((long long)(threadIdx.x / warpSize) * gridDim.x + blockIdx.x) * warpSize + threadIdx.x % warpSize;"
        )
        lines.append(f"for ({INDEX_T} __f = __spread; __f < __n; __f += __nthreads) {{")
    else:
        lines.append(f"for ({INDEX_T} __f = __tid; __f < __n; __f += __nthreads) {{")
    lines += indent(_decode("__f", params, ranges) + body)
    lines.append("}")
    lines += list(epilogue)
    return lines


def _locals(ctx: KernelContext, state: SDFGState, entry) -> list[str]:
    names = sorted({n.data for n in state.scope_subgraph(entry).data_nodes() if n.data in ctx.local})
    decls = []
    for name in names:
        desc = ctx.sdfg.arrays[name]
        size = desc.total_size
        if dace.symbolic.issymbolic(size):
            raise NotPersistableError(f"thread-local array '{name}' has a symbolic size {size}.")
        decls.append(f"{desc.dtype.ctype} {name}[{cexpr(size)}];")
    return decls


def _work(ctx: KernelContext, ranges) -> str | None:
    """Host-computable iteration count of a grid-stride loop, if it only uses kernel arguments."""
    rng = subsets.Range(ranges)
    known = {a.name for a in ctx.args if a.kind in ("symbol", "scalar")}
    if not {str(s) for s in rng.free_symbols} <= known:
        return None
    return " * ".join(f"({e})" for e in range_extents(rng)) if ranges else "1"


def map_item(ctx: KernelContext, state: SDFGState, entry: nodes.MapEntry) -> Item:
    """A top-level map as a grid-stride loop (with register reductions where it reduces)."""
    exit_node = state.exit_node(entry)
    params, ranges = list(entry.map.params), list(entry.map.range)
    outputs = [e for e in state.in_edges(exit_node) if not e.data.is_empty()]
    used = set()
    for e in outputs:
        used |= {str(s) for s in e.data.subset.free_symbols}
    par = [p for p in params if p in used]
    red = [p for p in params if p not in used]
    reducible = (
        red
        and outputs
        and all(e.data.wcr is not None and isinstance(e.src, nodes.Tasklet) for e in outputs)
        and all(state.scope_dict()[e.src] is entry for e in outputs)
    )
    local = _locals(ctx, state, entry)
    dims = lambda ps: "(" + ", ".join(ps) + ")"  # noqa: E731
    scheduled = _scheduled_map(ctx, state, entry, outputs, par, red, bool(reducible), local)
    row = None
    if scheduled is not None:
        code, work, strategy, row = scheduled
    elif not reducible:
        body = local + ScopeWriter(ctx, state, params).scope(entry)
        code = _grid_stride(params, ranges, body)
        work = _work(ctx, ranges)
        strategy = f"grid-stride loop, a thread per element of {dims(params)}"
    elif par:
        per_warp = _contiguous_in_reduced(ctx, state, entry, par, red)
        code = _register_reduction(ctx, state, entry, outputs, par, red, local, per_warp)
        work = _work(ctx, [ranges[params.index(p)] for p in par])
        if per_warp:
            work = None if work is None else f"({work}) * warp"
            strategy = f"a warp per output {dims(par)}, lanes over {dims(red)}, shuffle reduction"
        else:
            strategy = f"a thread per output {dims(par)}, register reduction over {dims(red)}"
    else:
        code = _grid_reduction(ctx, state, entry, outputs, local)
        work = _work(ctx, ranges)
        strategy = f"grid-wide reduction over {dims(red)}: warp shuffles, one atomic per warp"
    reads, writes = scope_accesses(ctx, state, entry)
    code = ["{"] + indent(code) + ["}"]
    item = Item(f"map {entry.map.label}", code, reads, writes, Executor.GRID, work, strategy=strategy)
    read_memlets = [(e.data, "R") for e in state.in_edges(entry)]
    item.regions = _outer_regions(ctx, reads, writes, read_memlets + _written(ctx, entry, outputs))
    if row is None and not reducible and not any(e.data.wcr is not None for e in outputs):
        row = _row_forms(ctx, state, entry, local)
    item.row = _row_candidate(ctx, state, entry, row)
    return item


def _written(ctx: KernelContext, entry, outputs) -> list:
    """What a map writes, output by output: each write propagated over the map's range on its own, not
    DaCe's bounding box of them all (the two edge rows of a stencil, not every row between them)."""
    out = []
    for e in outputs:
        try:
            m = propagate_subset([e.data], ctx.sdfg.arrays[e.data.data], list(entry.map.params), entry.map.range)
        except Exception:  # noqa: BLE001 - DaCe's propagation raises various errors; fall back to "all of it"
            return [(dace.Memlet(e.data.data), "W")]
        out.append((m, "W"))
    return out


def _outer_regions(ctx: KernelContext, reads, writes, outer) -> tuple:
    """``(container, mode, subset)`` of a grid-wide item from its outer memlets (DaCe's propagated subsets,
    over-approximations), so that the synchronisation analysis can tell steps on disjoint parts of one
    container apart (a halo row and the interior). Empty, i.e. whole containers, unless the memlets cover
    every container the item touches."""
    regions = [
        (m.data, mode, m.subset)
        for m, mode in outer
        if not m.is_empty() and m.data in ctx.device and m.subset is not None
    ]
    covered = {mode: {n for n, m, _ in regions if m == mode} for mode in ("R", "W")}
    if not reads <= covered["R"] or not writes <= covered["W"]:
        return ()
    return tuple(regions)


def _row_forms(ctx, state, entry, local) -> list[RowForm]:
    """The ways a map without write conflicts runs within a row (for :mod:`rows`): lanes over its
    contiguous parameter, the others indexing the row; or lane 0 alone, all its parameters the row."""
    params, ranges = list(entry.map.params), list(entry.map.range)

    def body():
        return local + ScopeWriter(ctx, state, params).scope(entry)

    forms = [RowForm(params, ranges, lambda: ["if (__tile.thread_rank() == 0) {"] + indent(body()) + ["}"])]
    contiguous = contiguous_param(state, entry)
    if contiguous is not None and len(params) >= 2:
        lane = [ranges[params.index(contiguous)]]

        def lanes():
            return extent_decls([contiguous], lane, "") + lane_loop([contiguous], lane, body())

        outer = [p for p in params if p != contiguous]
        forms.insert(0, RowForm(outer, [r for p, r in zip(params, ranges) if p != contiguous], lanes))
    return forms


def _row_candidate(ctx, state, entry, forms) -> RowCandidate | None:
    """``forms`` with the device accesses inside the map (a view's as its container's, subset unknown:
    it may be read, not written, by a row group), or ``None`` with copies that have two subsets."""
    if not forms:
        return None
    accesses = []
    for e in state.scope_subgraph(entry).edges():
        memlet = e.data
        if memlet.is_empty() or memlet.data is None or memlet.data not in ctx.device:
            continue
        if memlet.other_subset is not None:
            return None
        if memlet.data in ctx.views:
            accesses.append((ctx.root(memlet.data), None))
        else:
            accesses.append((memlet.data, memlet.subset))
    return RowCandidate(forms, accesses)


def _tile_accumulators(ctx, outputs, reduce: str, storer: str):
    """``(sinks, prologue, epilogue)`` of a reduction inside a tile: a register per output starting at the
    operator's identity, combined across the tile by ``cpufree::<reduce>`` and added to the output by the
    threads for which ``storer`` holds."""
    sinks, prologue, epilogue = {}, [], []
    for e in outputs:
        var = ctx.fresh("acc")
        op = wcr_op(e.data.wcr)
        ctype = ctx.sdfg.arrays[e.data.data].dtype.ctype
        target = ctx.access(e.data.data, e.data.subset)
        sinks[(e.src, e.src_conn)] = (var, op, None)
        prologue.append(f"{ctype} {var} = cpufree::identity<{op}, {ctype}>();")
        epilogue.append(f"{var} = cpufree::{reduce}<{op}>(__tile, {var});")
        epilogue.append(f"if ({storer}) {target} = cpufree::combine<{op}>({target}, {var});")
    return sinks, prologue, epilogue


def _scheduled_map(ctx, state, entry, outputs, par, red, reducible: bool, local):
    """A map that :class:`ScheduleThreads` gave a tile size, as tile-mapped loops.

    Returns ``(code, work, strategy)``, or ``None`` when the map keeps the plain grid-stride loop:
    no tile size (scheduler off), a one-dimensional parallel space whose contiguous dimension is
    not reduced (one grid-stride loop is already ideal there), or a full reduction.
    """
    size = entry.map.gpu_block_size
    if not size:
        return None
    tile = int(size[0])
    params, ranges = list(entry.map.params), list(entry.map.range)
    rng = dict(zip(params, ranges))
    space = par if reducible else params
    if not space:
        return None
    contiguous = contiguous_param(state, entry)
    if contiguous is None:
        return None
    bound = tile or 1024
    tile_txt = (
        f"tiles of up to {bound} threads ({'static bound' if tile else 'extent symbolic'}; "
        "the power of two picked at run time from the contiguous extent)"
    )
    dims = lambda ps: "(" + ", ".join(ps) + ")"  # noqa: E731

    if reducible and contiguous in red:
        sinks, prologue, epilogue = _tile_accumulators(ctx, outputs, "tile_reduce", "__tile.thread_rank() == 0")
        body = local + ScopeWriter(ctx, state, par, sinks).scope(entry)
        red_order = [p for p in red if p != contiguous] + [contiguous]
        red_ranges = [rng[p] for p in red_order]
        row_lines = extent_decls(red_order, red_ranges, "") + reduction_lanes(
            red_order, red_ranges, prologue, body, epilogue
        )
        extent = range_extents(subsets.Range([rng[contiguous]]))[0]
        rows = " * ".join(f"({e})" for e in range_extents(subsets.Range([rng[p] for p in par]))) if par else "1"
        row = [
            RowForm(
                list(par),
                [rng[p] for p in par],
                lambda: row_lines,
                reduction=True,
                want=f"cpufree::tile_for_reduction({extent}, {rows})",
                bound=tile,
            )
        ]
        code, want = tiled_reduction(
            par,
            [rng[p] for p in par],
            red_order,
            [rng[p] for p in red_order],
            contiguous,
            tile,
            prologue,
            body,
            epilogue,
        )
        strategy = (
            f"{tile_txt}, a tile per output {dims(par)} ({layout(par)}), lanes over {dims(red_order)}, tile reduction"
        )
        outer_work = _work(ctx, [rng[p] for p in par[-MAX_FUSED:]])
        work_ranges = [rng[p] for p in par[-MAX_FUSED:]] + [rng[contiguous]]
    elif reducible and par == [contiguous]:  # outputs along the contiguous dimension alone: columns
        sinks, prologue, epilogue = _tile_accumulators(ctx, outputs, "column_reduce", "__slice == 0 && __c < __cols")
        body = local + ScopeWriter(ctx, state, par, sinks).scope(entry)
        code, want = tiled_columns(par, [rng[p] for p in par], red, [rng[p] for p in red], prologue, body, epilogue)
        strategy = (
            f"tiles of up to 1024 threads (picked at run time), a lane per output {dims(par)} (a warp's width of "
            f"them per tile), the tile's warps split {dims(red)}, shared-memory combine"
        )
        outer_work = _work(ctx, [rng[p] for p in par])
        return code, (None if outer_work is None else f"({outer_work}) * warp"), strategy, None
    elif len(space) >= 2 and contiguous in space:
        row = None
        if reducible:
            code_inner = _register_reduction_body(ctx, state, entry, outputs, par, red, local)
            what = f", register reduction over {dims(red)}"
        else:
            code_inner = local + ScopeWriter(ctx, state, params).scope(entry)
            what = ""
        code, want = tiled_map(space, [rng[p] for p in space], contiguous, tile, code_inner)
        outer = [p for p in space if p != contiguous]
        strategy = f"{tile_txt}, lanes over {contiguous} in tile-sized chunks, {layout(outer)}{what}"
        outer_work = _work(ctx, [rng[p] for p in outer[-MAX_FUSED:]])
        work_ranges = [rng[p] for p in outer[-MAX_FUSED:]] + [rng[contiguous]]
    else:
        return None
    known = _work(ctx, work_ranges)
    work = None
    if known is not None and outer_work is not None:
        lanes = str(tile) if tile else f"cpufree::pow2_at_least({range_extents(subsets.Range([rng[contiguous]]))[0]})"
        work = f"({outer_work}) * ({lanes})"
    return code, work, strategy, row


def _register_reduction_body(ctx, state, entry, outputs, par, red, local) -> list[str]:
    """Per output: load into registers, reduce sequentially over ``red``, store."""
    params, ranges = list(entry.map.params), list(entry.map.range)
    sinks, load, store = {}, [], []
    for e in outputs:
        var = ctx.fresh("acc")
        target = ctx.access(e.data.data, e.data.subset)
        ctype = ctx.sdfg.arrays[e.data.data].dtype.ctype
        sinks[(e.src, e.src_conn)] = (var, wcr_op(e.data.wcr), None)
        load.append(f"{ctype} {var} = {target};")
        store.append(f"{target} = {var};")
    body = local + ScopeWriter(ctx, state, par, sinks).scope(entry)
    return load + nested_loops(red, [ranges[params.index(p)] for p in red], body) + store


def _register_reduction(ctx, state, entry, outputs, par, red, local, per_warp: bool) -> list[str]:
    """Outputs indexed by ``par`` only: parallel over ``par``, sequential over ``red`` in registers.

    When the reduced parameters index the contiguous dimension of the inputs (a matrix-vector
    row, softmax's last axis), a warp owns each output and its lanes stride over the reduced space
    (coalesced), combining with shuffles; otherwise a thread owns each output.
    """
    params, ranges = list(entry.map.params), list(entry.map.range)
    if not per_warp:
        inner = _register_reduction_body(ctx, state, entry, outputs, par, red, local)
        return _grid_stride(par, [ranges[params.index(p)] for p in par], inner, spread=True)
    sinks, load, combine = {}, [], []
    for e in outputs:
        var = ctx.fresh("acc")
        op = wcr_op(e.data.wcr)
        target = ctx.access(e.data.data, e.data.subset)
        ctype = ctx.sdfg.arrays[e.data.data].dtype.ctype
        sinks[(e.src, e.src_conn)] = (var, op, "__has")
        load.append(f"{ctype} {var}{{}};")
        combine.append(f"if (cpufree::warp_reduce<{op}>({var}, __has) && threadIdx.x % warpSize == 0)")
        combine.append(f"    {target} = cpufree::combine<{op}>({target}, {var});")
    red_ranges = [ranges[params.index(p)] for p in red]
    body = local + ScopeWriter(ctx, state, par, sinks).scope(entry)
    inner = _extents(red_ranges, "r") + ["bool __has = false;"] + load
    inner.append(f"for ({INDEX_T} __g = threadIdx.x % warpSize; __g < __nr; __g += warpSize) {{")
    inner += indent(_decode("__g", red, red_ranges, "r") + body + ["__has = true;"]) + ["}"] + combine
    return _grid_stride(par, [ranges[params.index(p)] for p in par], inner, per_warp=per_warp)


def _contiguous_in_reduced(ctx, state, entry, par, red) -> bool:
    """Whether the inputs' contiguous (last) dimension is indexed by reduced parameters only."""
    par_syms, red_syms = set(par), set(red)
    found = False
    for e in state.scope_subgraph(entry).edges():
        if e.data.is_empty() or e.data.data not in ctx.device or not isinstance(e.dst, nodes.Tasklet):
            continue
        last = {str(s) for s in e.data.subset.ndrange()[-1][0].free_symbols} if e.data.subset.dims() else set()
        if last & par_syms:
            return False
        found = found or bool(last & red_syms)
    return found


def _grid_reduction(ctx, state, entry, outputs, local) -> list[str]:
    """Outputs that depend on no map parameter: split the space over the grid, combine atomically."""
    params, ranges = list(entry.map.params), list(entry.map.range)
    sinks, decl, flush = {}, ["bool __has = false;"], []
    for e in outputs:
        var = ctx.fresh("acc")
        op = wcr_op(e.data.wcr)
        ctype = ctx.sdfg.arrays[e.data.data].dtype.ctype
        target = ctx.access(e.data.data, e.data.subset)
        # A thread's first contribution initialises its accumulator: no identity element is needed.
        sinks[(e.src, e.src_conn)] = (var, op, "__has")
        decl.append(f"{ctype} {var}{{}};")
        flush.append(f"cpufree::warp_atomic_combine<{op}>(&{target}, {var}, __has);")
    body = local + ScopeWriter(ctx, state, [], sinks).scope(entry) + ["__has = true;"]
    return _grid_stride(params, ranges, body, prologue=decl, epilogue=flush)


def scope_accesses(ctx: KernelContext, state: SDFGState, node) -> tuple[frozenset, frozenset]:
    """Device containers read and written by a top-level node (a map scope, a tasklet)."""
    if isinstance(node, nodes.MapEntry):
        exit_node = state.exit_node(node)
        edges = list(state.in_edges(node)) + state.scope_subgraph(node).edges() + list(state.out_edges(exit_node))
    else:
        edges = state.all_edges(node)
    reads, writes = set(), set()
    for e in edges:
        if e.data.is_empty():
            continue
        if isinstance(e.src, nodes.AccessNode) and isinstance(e.dst, nodes.AccessNode):
            reads.add(e.src.data)
            writes.add(e.dst.data)
        elif isinstance(e.dst, (nodes.AccessNode, nodes.MapExit)) or (
            e.src is node and isinstance(node, nodes.Tasklet)
        ):
            writes.add(e.data.data)
        else:
            reads.add(e.data.data)
    device = ctx.device
    return frozenset(reads & device), frozenset(writes & device)


def tasklet_item(ctx: KernelContext, state: SDFGState, node: nodes.Tasklet) -> Item:
    """A tasklet outside any map: scalar work done by the leader thread.

    A library expansion may ask for other executors through the tasklet's ``location``:
    ``cpufree_executor`` = ``"block"`` (all threads of one block, for block-cooperative calls) or
    ``"thread"`` (thread 0 of one block), on block ``cpufree_block`` modulo the grid size, ``"each"`` (in every
    block, thread ``cpufree_block * warpSize`` modulo the block: a wait that each block makes for itself), or
    ``"blocks"``: every block ``b`` with ``b % L == cpufree_block % L``, ``L`` = min(``cpufree_lanes``, grid)
    (the grid's blocks dealt out over ``cpufree_lanes`` concurrent items); the code sees its part
    ``__part`` of ``__parts``. Block-wide items are fenced by block barriers so that program order holds
    within the block; ``cpufree_exit_barrier`` = ``"no"`` leaves out the one after a ``"blocks"`` item (its
    code promises that nothing after it in the block depends on its threads having finished).
    """
    code = ScopeWriter(ctx, state, []).tasklet(node)
    location = node.location or {}
    # Connectors that address another PE's memory (a put's destination, a signal's flag): bound as
    # pointers, but no access to this PE's copy, so no synchronisation on them.
    remote = {c for c in str(location.get("cpufree_remote", "")).split(",") if c}
    reads, writes, regions = set(), set(), []
    for e in state.in_edges(node):
        if not e.data.is_empty() and e.dst_conn not in remote and e.data.data in ctx.device:
            reads.add(e.data.data)
            regions.append((e.data.data, "R", e.data.subset))
    for e in state.out_edges(node):
        if not e.data.is_empty() and e.src_conn not in remote and e.data.data in ctx.device:
            writes.add(e.data.data)
            regions.append((e.data.data, "W", e.data.subset))
    reads, writes = frozenset(reads), frozenset(writes)
    kind = str(location.get("cpufree_executor", "leader"))
    block = int(str(location.get("cpufree_block", 0)))
    if kind == "leader" and block == 0:
        return Item(
            f"tasklet {node.label}", ["if (__tid == 0) {"] + indent(code) + ["}"], reads, writes, Executor.LEADER
        )
    # Library calls on a block or thread: their registers apart from the kernel's loops (see cpufree::apart).
    code = apart(code)
    on_block = f"blockIdx.x == {block} % gridDim.x"
    if kind == "blocks":
        lanes = int(str(location.get("cpufree_lanes", 1)))
        code = [
            "{",
            f"    const unsigned int __lanes = cpufree::min_<unsigned int>({lanes}u, gridDim.x);",
            f"    if (blockIdx.x % __lanes == {block}u % __lanes) {{",
            f"        const unsigned int __parts = (gridDim.x - 1 - {block}u % __lanes) / __lanes + 1;",
            "        const unsigned int __part = cpufree::lane_part(blockIdx.x / __lanes, __parts);",
            "        __syncthreads();",
            *indent(indent(code)),
            *(["        __syncthreads();"] if location.get("cpufree_exit_barrier") != "no" else []),
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
            f"tasklet '{node.label}' asks for executor '{kind}'. Fix: use 'blocks', 'block', 'each', 'thread' or "
            "'leader'."
        )
    item = Item(f"tasklet {node.label}", code, reads, writes, executor, strategy=strategy, block=block)
    item.regions = tuple(regions)
    return item


def _unflatten(tag: str, flat: str, sizes: list) -> list[str]:
    """C++ lines that decode element ``flat`` (row-major) of a box of ``sizes`` into digits ``__{tag}{k}``
    (:func:`decode_flat`: 32-bit when the sizes are constants whose product fits in 31 bits)."""
    digits = [f"__{tag}{k}" for k in range(len(sizes))]
    ranges = [(0, size - 1, 1) for size in sizes]
    return decode_flat(flat, f"__{tag}", digits, ranges, [f"({cexpr(size)})" for size in sizes])


def _index(tag: str, sub: subsets.Subset) -> list:
    """Symbolic indices of ``sub`` from the digits ``__{tag}{k}``."""
    return [dace.symbolic.pystr_to_symbolic(f"({b}) + __{tag}{k} * ({s})") for k, (b, _, s) in enumerate(sub.ndrange())]


def _copy(ctx: KernelContext, state: SDFGState, edge, flat: str, owned: list[str] | None) -> tuple[list[str], str]:
    """Body of an element-wise copy loop over ``flat``, and the element count."""
    src, src_sub, dst, dst_sub = memlets.ends(state, edge)
    n = cexpr(src_sub.num_elements())
    if src_sub.num_elements() == 1 and dst_sub.num_elements() == 1:
        src_expr, dst_expr = ctx.access(src, src_sub), ctx.access(dst, dst_sub)
        lines = []
    else:
        same = len(src_sub) == len(dst_sub) and all(
            same_value(a, b) for a, b in zip(src_sub.size(), dst_sub.size())
        )  # one decode serves both ends
        lines = _unflatten("s", flat, src_sub.size()) + ([] if same else _unflatten("d", flat, dst_sub.size()))
        src_expr = ctx.element(src, _index("s", src_sub))
        dst_expr = ctx.element(dst, _index("s" if same else "d", dst_sub))
    wcr = edge.data.wcr
    if wcr is None:
        return lines + [f"{dst_expr} = {src_expr};"], n
    op = wcr_op(wcr)
    if owned is not None and (dst in ctx.local or owns(dst_sub, owned)):
        return lines + [f"{dst_expr} = cpufree::combine<{op}>({dst_expr}, {src_expr});"], n
    return lines + [f"cpufree::atomic_combine<{op}>(&{dst_expr}, {src_expr});"], n


def sequential_copy(ctx: KernelContext, state: SDFGState, edge, owned: list[str]) -> list[str]:
    body, n = _copy(ctx, state, edge, "__c", owned)
    if n == "1":
        return ["{"] + indent(body) + ["}"]
    return [f"for ({INDEX_T} __c = 0; __c < {n}; ++__c) {{"] + indent(body) + ["}"]


def copy_item(ctx: KernelContext, state: SDFGState, edge) -> Item:
    """A copy between two containers outside any map, as a grid-stride loop."""
    body, n = _copy(ctx, state, edge, "__f", None)
    code = [f"for ({INDEX_T} __f = __tid; __f < {n}; __f += __nthreads) {{"] + indent(body) + ["}"]
    device = ctx.device
    reads = frozenset({edge.src.data} & device)
    writes = frozenset({edge.dst.data} & device)
    item = Item(
        f"copy {edge.src.data} -> {edge.dst.data}",
        ["{"] + indent(code) + ["}"],
        reads,
        writes,
        work=n if not any(c.isalpha() for c in n.replace("long", "")) else None,
    )
    src, ssub, dst, dsub = memlets.ends(state, edge)
    regions = [(src, "R", ssub), (dst, "W", dsub)]
    item.regions = tuple((c, m, sub) for c, m, sub in regions if c in device and sub is not None)
    if len(item.regions) != len(reads) + len(writes):
        item.regions = ()
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
    for node in _topological(state, sdict, None):
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
