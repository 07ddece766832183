"""Reductions of a map over its whole reduced space: per-thread register accumulation with one combine per output
(per warp where a warp shares an output), and grid-wide reductions with one atomic per warp."""

from __future__ import annotations

from dace.sdfg import nodes

from dace_cpufree.cpp import INDEX_T, indent

from .expressions import wcr_op
from .loops import decode_params, extent_lines, grid_stride, nested_loops
from .scopes import ScopeWriter


def register_reduction_body(ctx, state, entry, outputs, par, red, local) -> list[str]:
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


def register_reduction(ctx, state, entry, outputs, par, red, local, per_warp: bool) -> list[str]:
    """Outputs indexed by ``par`` only: parallel over ``par``, sequential over ``red`` in registers.

    When the reduced parameters index the contiguous dimension of the inputs (a matrix-vector
    row, softmax's last axis), a warp owns each output and its lanes stride over the reduced space
    (coalesced), combining with shuffles; otherwise a thread owns each output.
    """
    params, ranges = list(entry.map.params), list(entry.map.range)
    dividers = ctx.loop_dividers(state)
    if not per_warp:
        inner = register_reduction_body(ctx, state, entry, outputs, par, red, local)
        return grid_stride(par, [ranges[params.index(p)] for p in par], inner, spread=True, dividers=dividers)
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
    inner = extent_lines(red_ranges, "r") + ["bool __has = false;"] + load
    inner.append(f"for ({INDEX_T} __g = threadIdx.x % warpSize; __g < __nr; __g += warpSize) {{")
    inner += indent(decode_params("__g", red, red_ranges, "r", dividers) + body + ["__has = true;"]) + ["}"] + combine
    return grid_stride(par, [ranges[params.index(p)] for p in par], inner, per_warp=per_warp, dividers=dividers)


def contiguous_in_reduced(ctx, state, entry, par, red) -> bool:
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


def grid_reduction(ctx, state, entry, outputs, local, owned=()) -> list[str]:
    """Outputs that depend on no map parameter: split the space over the grid, combine atomically. The map's
    other outputs (locations that the parameters ``owned`` determine) are written as usual."""
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
    body = local + ScopeWriter(ctx, state, list(owned), sinks).scope(entry) + ["__has = true;"]
    return grid_stride(params, ranges, body, prologue=decl, epilogue=flush, dividers=ctx.loop_dividers(state))
