"""A top-level map as a kernel work item: the grid-stride loop over its iteration space, or one of the scheduled
forms (tiles per output row, register reductions, grid reductions with one atomic per warp), and the regions it
reads and writes for the synchronisation analysis.

Write-conflict resolution (DaCe WCR) is resolved per case:
- a map whose WCR outputs do not depend on some of its parameters (a reduction: ``C[i, j] +=
  A[i, k] * B[k, j]``) runs in parallel over the output parameters and sequentially over the
  others, accumulating in a register;
- a map whose outputs depend on none of its parameters (a full reduction) splits the reduced
  space over the grid, each thread accumulates, then combines atomically;
- any other WCR write is a plain read-modify-write when the thread owns the location, else atomic.
"""

import dace
from dace import subsets
from dace.sdfg import nodes
from dace.sdfg.propagation import propagate_subset
from dace.sdfg.state import SDFGState

from dace_cpufree.cpp import cexpr, indent
from dace_cpufree.errors import NotPersistableError
from dace_cpufree.facts import map_tile
from dace_cpufree.vocabulary import contiguous_param

from .captures import pointers
from .context import KernelContext
from .expressions import range_extents, wcr_op
from .ir import Executor, Form, Item
from .loops import grid_stride
from .reductions import contiguous_in_reduced, grid_reduction, register_reduction, register_reduction_body
from .rows import RowCandidate, RowForm
from .scopes import ScopeWriter, scope_accesses
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
    reads, writes = scope_accesses(ctx, state, entry)
    # a tile step is a function of its own: it takes the pointers of the containers its scope names (a view's
    # own name: its declaration stays outside the step, see dataflow._through_views)
    passed = pointers(ctx, reads | writes)
    scheduled = _scheduled_map(ctx, state, entry, outputs, par, red, bool(reducible), local, passed)
    row, tile = None, 0
    if scheduled is not None:
        code, work, strategy, row, form, tile = scheduled
    elif not reducible and _grid_sums(state, entry, outputs):
        # element-wise outputs and sums over the whole map (a dot product computed beside an update, as in CG):
        # the sums in registers, one warp-combined atomic per warp at the end instead of one per element
        code = grid_reduction(ctx, state, entry, _grid_sums(state, entry, outputs), local, params)
        work = _work(ctx, ranges)
        strategy = f"grid-stride loop, a thread per element of {dims(params)}, sums in registers, one atomic per warp"
        form = Form.GRID_SUMS
    elif not reducible:
        body = local + ScopeWriter(ctx, state, params).scope(entry)
        code = grid_stride(params, ranges, body, dividers=ctx.loop_dividers(state))
        work = _work(ctx, ranges)
        strategy = f"grid-stride loop, a thread per element of {dims(params)}"
        form = Form.ELEMENTS
    elif par:
        per_warp = contiguous_in_reduced(ctx, state, entry, par, red)
        code = register_reduction(ctx, state, entry, outputs, par, red, local, per_warp)
        work = _work(ctx, [ranges[params.index(p)] for p in par])
        if per_warp:
            work = None if work is None else f"({work}) * cpufree_warp"
            strategy = f"a warp per output {dims(par)}, lanes over {dims(red)}, shuffle reduction"
        else:
            strategy = f"a thread per output {dims(par)}, register reduction over {dims(red)}"
        form = Form.WARP_PER_OUTPUT if per_warp else Form.THREAD_PER_OUTPUT
    else:
        code = grid_reduction(ctx, state, entry, outputs, local)
        work = _work(ctx, ranges)
        strategy = f"grid-wide reduction over {dims(red)}: warp shuffles, one atomic per warp"
        form = Form.GRID_REDUCTION
    code = ["{"] + indent(code) + ["}"]
    item = Item(f"map {entry.map.label}", code, reads, writes, Executor.GRID, work, strategy=strategy, form=form)
    item.tile = tile
    busy = [ranges[params.index(p)] for p in par] if reducible and par else ranges
    item.elements = str(subsets.Range(busy).num_elements()) if busy else "1"
    read_memlets = [(e.data, "R") for e in state.in_edges(entry)]
    item.regions = _outer_regions(ctx, reads, writes, read_memlets + _written(ctx, entry, outputs))
    if row is None and not reducible and not any(e.data.wcr is not None for e in outputs):
        row = _row_forms(ctx, state, entry, local)
    item.row = _row_candidate(ctx, state, entry, row)
    return item


def _grid_sums(state: SDFGState, entry, outputs) -> list:
    """The WCR outputs of a map's own tasklets whose location depends on no map parameter (sums over the map)."""
    params = set(entry.map.params)
    return [
        e
        for e in outputs
        if e.data.wcr is not None
        and not e.data.dynamic  # written for every element: the register's first value is a contribution
        and isinstance(e.src, nodes.Tasklet)
        and state.scope_dict()[e.src] is entry
        and not {str(s) for s in e.data.subset.free_symbols} & params
    ]


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
    dividers = ctx.loop_dividers(state)

    def body():
        return local + ScopeWriter(ctx, state, params).scope(entry)

    forms = [
        RowForm(params, ranges, lambda: ["if (__tile.thread_rank() == 0) {"] + indent(body()) + ["}"], single_lane=True)
    ]
    contiguous = contiguous_param(state, entry)
    if contiguous is not None and len(params) >= 2:
        lane = [ranges[params.index(contiguous)]]

        def lanes():
            return extent_decls([contiguous], lane, "") + lane_loop([contiguous], lane, body(), "", dividers)

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


def _tile_accumulators(ctx, outputs, reduce: str | None, storer: str, split: str | None = None):
    """``(sinks, prologue, epilogue)`` of a reduction inside a tile: a register per output starting at the
    operator's identity, combined across the tile by ``cpufree::<reduce>`` (``None``: every lane has outputs of its
    own) and added to the output by the threads for which ``storer`` holds, atomically where ``split`` holds (the
    reduced range split over tiles: :func:`tiled_columns`)."""
    sinks, prologue, epilogue = {}, [], []
    for e in outputs:
        var = ctx.fresh("acc")
        op = wcr_op(e.data.wcr)
        ctype = ctx.sdfg.arrays[e.data.data].dtype.ctype
        target = ctx.access(e.data.data, e.data.subset)
        sinks[(e.src, e.src_conn)] = (var, op, None)
        prologue.append(f"{ctype} {var} = cpufree::identity<{op}, {ctype}>();")
        if reduce:
            epilogue.append(f"{var} = cpufree::{reduce}<{op}>(__tile, {var});")
        store = f"{target} = cpufree::combine<{op}>({target}, {var});"
        if split:
            store = f"{{ if ({split}) cpufree::atomic_combine<{op}>(&{target}, {var}); else {store} }}"
        epilogue.append(f"if ({storer}) {store}")
    return sinks, prologue, epilogue


def _scheduled_map(ctx, state, entry, outputs, par, red, reducible: bool, local, passed):
    """A map that :class:`ScheduleThreads` gave a tile size, as tile-mapped loops whose step takes the ``passed``
    pointers.

    Returns ``(code, work, strategy, row, form, tile)`` (``tile``: the largest tile), or ``None`` when the map
    keeps the plain grid-stride loop:
    no tile size (scheduler off), a one-dimensional parallel space whose contiguous dimension is
    not reduced (one grid-stride loop is already ideal there), or a full reduction.
    """
    tile = map_tile(entry)
    if tile is None:
        return None
    dividers = ctx.loop_dividers(state)
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
    if reducible and contiguous in red:
        code, strategy, row, outer_work, work_ranges = _tile_reduction(
            ctx, state, entry, outputs, par, red, local, passed, contiguous, tile, dividers
        )
        strategy = f"{tile_txt}, {strategy}"
        form = Form.TILE_REDUCTION
    elif reducible and par == [contiguous]:  # outputs along the contiguous dimension alone: columns
        return _tile_columns(ctx, state, entry, outputs, par, red, local, passed, dividers)
    elif len(space) >= 2 and contiguous in space:
        row = None
        if reducible:
            code_inner = register_reduction_body(ctx, state, entry, outputs, par, red, local)
            what = f", register reduction over {_dims(red)}"
        else:
            code_inner = local + ScopeWriter(ctx, state, params).scope(entry)
            what = ""
        code, want = tiled_map(space, [rng[p] for p in space], contiguous, tile, code_inner, passed, "", dividers)
        outer = [p for p in space if p != contiguous]
        strategy = f"{tile_txt}, lanes over {contiguous} in tile-sized chunks, {layout(outer)}{what}"
        outer_work = _work(ctx, [rng[p] for p in outer[-MAX_FUSED:]])
        work_ranges = [rng[p] for p in outer[-MAX_FUSED:]] + [rng[contiguous]]
        form = Form.TILED_MAP
    else:
        return None
    known = _work(ctx, work_ranges)
    work = None
    if known is not None and outer_work is not None:
        lanes = str(tile) if tile else f"cpufree::pow2_at_least({range_extents(subsets.Range([rng[contiguous]]))[0]})"
        work = f"({outer_work}) * ({lanes})"
    return code, work, strategy, row, form, bound


def _tile_reduction(ctx, state, entry, outputs, par, red, local, passed, contiguous, tile: int, dividers):
    """A scheduled map whose contiguous dimension is reduced: a tile per output, lanes over the reduced dimensions
    (the contiguous one last), a tile reduction. Returns ``(code, strategy after the tile sizes, row form, outer work,
    work ranges)``."""
    rng = dict(zip(list(entry.map.params), list(entry.map.range)))
    red_order = [p for p in red if p != contiguous] + [contiguous]
    red_ranges = [rng[p] for p in red_order]

    def parts():
        sinks, prologue, epilogue = _tile_accumulators(ctx, outputs, "tile_reduce", "__tile.thread_rank() == 0")
        return prologue, local + ScopeWriter(ctx, state, par, sinks).scope(entry), epilogue

    def row_lines():  # printed where the row group is made (a container may live in a register there)
        prologue, body, epilogue = parts()
        return extent_decls(red_order, red_ranges, "") + reduction_lanes(
            red_order, red_ranges, prologue, body, epilogue, "", dividers
        )

    extent = range_extents(subsets.Range([rng[contiguous]]))[0]
    rows = " * ".join(f"({e})" for e in range_extents(subsets.Range([rng[p] for p in par]))) if par else "1"
    inputs = {e.data.data for e in state.in_edges(entry) if not e.data.is_empty()}
    row = [
        RowForm(
            list(par),
            [rng[p] for p in par],
            row_lines,
            reduction=True,
            want=f"cpufree::tile_for_reduction({extent}, {rows})",
            bound=tile,
            stored=frozenset(e.data.data for e in outputs) - inputs,
        )
    ]
    prologue, body, epilogue = parts()
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
        passed,
        dividers=dividers,
    )
    strategy = f"a tile per output {_dims(par)} ({layout(par)}), lanes over {_dims(red_order)}, tile reduction"
    outer_work = _work(ctx, [rng[p] for p in par[-MAX_FUSED:]])
    work_ranges = [rng[p] for p in par[-MAX_FUSED:]] + [rng[contiguous]]
    return code, strategy, row, outer_work, work_ranges


def _tile_columns(ctx, state, entry, outputs, par, red, local, passed, dividers):
    """A scheduled map whose outputs lie along the contiguous dimension alone (columns): a lane per output, the
    reduced dimensions split into ranges over the tiles. Returns what :func:`_scheduled_map` returns."""
    rng = dict(zip(list(entry.map.params), list(entry.map.range)))
    sinks, prologue, epilogue = _tile_accumulators(ctx, outputs, None, "__c < __cols", "__chunks > 1")
    body = local + ScopeWriter(ctx, state, par, sinks).scope(entry)
    code, want = tiled_columns(
        par, [rng[p] for p in par], red, [rng[p] for p in red], prologue, body, epilogue, passed, "", dividers
    )
    strategy = (
        f"tiles of up to 128 threads (picked at run time), a lane per output {_dims(par)}, {_dims(red)} split into "
        "ranges over the tiles, combined by atomic adds where split"
    )
    outer_work = _work(ctx, [rng[p] for p in par])
    work = None if outer_work is None else f"({outer_work}) * cpufree_warp"
    return code, work, strategy, None, Form.TILE_COLUMNS, 1024


def _dims(params) -> str:
    """``(p0, p1, ...)``: a map's parameters as the strategies name them."""
    return "(" + ", ".join(params) + ")"
