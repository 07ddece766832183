"""Tile-local fusion of the steps that work row by row (softmax's max, exp, sum and divide).

A tile reduction gives every output (a *row*: one value of the outer parameters) to one tile of the
grid. When the steps around it cover the same rows, and every container that one of them writes is
touched by all of them only within the row of the current outer index, the grid-wide
synchronisations between them order nothing that the tile does not already own: the steps run one
after the other inside a single tile-stride loop over the rows, separated by tile barriers
(``__tile.sync()``), and the grid synchronises once before and once after the group. The rows' data
stay in L1/L2 between the steps instead of making one trip through device memory per step.

The check is on the memlets inside each map (outer parameters renamed to the group's common row
index): for every container written in the group, each row index must select a distinct element in
some dimension that all the group's accesses index identically, so that two tiles never touch the
same element (see :func:`_row_local`).

A member is one of: a tile reduction over the contiguous dimension (``ScheduleThreads`` gave the map
a tile size; it anchors the group and its contiguous extent picks the tile size), an element-wise
map whose non-contiguous parameters are the rows (the lanes stride over the contiguous one), or a
map over the rows alone (its body runs on lane 0).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import dace
import sympy

from dace_cpufree.cpp import INDEX_T, indent

from . import channel as chan
from . import ir
from .captures import pointers
from .expressions import same_value
from .tiles import extent_decls, layout, tile_stride, with_tile


@dataclass(eq=False)
class RowForm:
    """One way a map runs row by row: ``outer`` are its parameters that index the rows."""

    outer: list[str]
    ranges: list
    lines: Callable[[], list[str]]  # the code one tile runs for the row (outer parameters bound)
    reduction: bool = False
    want: str | None = None  # tile request of a reduction (its contiguous extent)
    bound: int = 0  # tile bound of a reduction (0: symbolic extent, 1024)
    single_lane: bool = False  # lane 0 of the tile runs the whole body
    stored: frozenset = frozenset()  # containers only lane 0 touches: a reduction's outputs that it does not read


@dataclass(eq=False)
class RowCandidate:
    forms: list[RowForm]
    accesses: list = field(default_factory=list)  # (container, subset) of the memlets inside the map
    prelude: list = field(default_factory=list)  # declarations of the views the map uses


def _same_ranges(r1, r2) -> bool:
    return len(r1) == len(r2) and all(all(same_value(x, y) for x, y in zip(a, b)) for a, b in zip(r1, r2))


def _identifies(index, row, rows) -> bool:
    """Whether ``index`` is ``row`` plus terms free of every row index (distinct rows, distinct index)."""
    rest = sympy.expand(index - row)
    return not (rest.free_symbols & set(rows))


def _row_symbols(form: RowForm) -> dict:
    """The form's outer parameters -> the group's row symbols (``__g0``, ``__g1``, ...)."""
    return {dace.symbolic.symbol(p): dace.symbolic.symbol(f"__g{j}") for j, p in enumerate(form.outer)}


def _row_local(members: list[tuple[ir.Item, RowForm]]) -> bool:
    """Whether two tiles (two rows) never touch the same element of a container written in the group.

    For every such container and every row index, some dimension must be indexed by the same point
    expression in all the group's accesses, that expression being the row index plus row-free terms
    (``C[i, row]`` inside a loop over ``i`` qualifies, a whole-range read of the container does not).
    """
    written = set().union(*(item.writes for item, _ in members))
    rows = [dace.symbolic.symbol(f"__g{j}") for j in range(len(members[0][1].outer))]
    found: dict[str, list] = {}
    for item, form in members:
        rename = _row_symbols(form)
        for name, subset in item.row.accesses:
            if name not in written:
                continue
            if subset is None:
                return False  # through a view: its indices are not the container's
            dims = [
                (dace.symbolic.pystr_to_symbolic(b).subs(rename), dace.symbolic.pystr_to_symbolic(e).subs(rename))
                for b, e, _ in subset.ndrange()
            ]
            found.setdefault(name, []).append(dims)
    for accesses in found.values():
        ndims = len(accesses[0])
        if any(len(a) != ndims for a in accesses):
            return False
        keys = [
            accesses[0][d][0]
            for d in range(ndims)
            if all(
                same_value(b, accesses[0][d][0]) and same_value(e, accesses[0][d][0])
                for b, e in (a[d] for a in accesses)
            )
        ]
        if not all(any(_identifies(k, g, rows) for k in keys) for g in rows):
            return False
    return True


def _form(item, ranges) -> RowForm | None:
    row = getattr(item, "row", None)
    if not isinstance(item, ir.Item) or row is None or item.sync_before or item.part is not None:
        return None
    return next((f for f in row.forms if _same_ranges(f.ranges, ranges)), None)


def _groups(children: list) -> list[tuple[int, int, list]]:
    """Maximal groups (start, end, forms) around each tile reduction, left to right, not overlapping."""
    out, floor = [], 0
    i = 0
    while i < len(children):
        item = children[i]
        row = getattr(item, "row", None) if isinstance(item, ir.Item) else None
        anchor = next((f for f in row.forms if f.reduction), None) if row else None
        if anchor is None or i < floor:
            i += 1
            continue
        ranges = anchor.ranges
        members = {i: anchor}
        j = i + 1
        while j < len(children):
            f = _form(children[j], ranges)
            if f is None or not _row_local([(children[k], members[k]) for k in sorted(members)] + [(children[j], f)]):
                break
            members[j] = f
            j += 1
        k = i - 1
        while k >= floor:
            f = _form(children[k], ranges)
            if f is None or not _row_local([(children[k], f)] + [(children[m], members[m]) for m in sorted(members)]):
                break
            members[k] = f
            k -= 1
        start, end = min(members), max(members) + 1
        if end - start >= 2:
            out.append((start, end, [members[m] for m in range(start, end)]))
            floor = end
        i = max(i + 1, floor)
    return out


def _row_point(item: ir.Item, form: RowForm, name: str):
    """The one element of ``name`` that ``item`` touches in a row, as a tuple of indices in the group's row
    symbols, or ``None`` where its accesses are not all that single element."""
    rows = _row_symbols(form)
    points = set()
    for n, subset in item.row.accesses:
        if n != name:
            continue
        if subset is None:
            return None
        point = []
        for b, e, _ in subset.ndrange():
            b, e = (dace.symbolic.pystr_to_symbolic(x).subs(rows) for x in (b, e))
            if not same_value(b, e):
                return None
            point.append(sympy.expand(b))
        points.add(tuple(point))
    return next(iter(points)) if len(points) == 1 else None


def _in_registers(items: list[ir.Item], forms: list[RowForm], ctx, users: dict) -> dict:
    """The containers of a row group that can live in a register of each row's lane 0 (``{name: variable}``):
    transients in device memory that no other step of the kernel touches, whose accesses in the group are all
    the row's one element, made by lane 0 alone, the first of them a write (syr2k's and gesummv's sums of a row,
    handed from one fused step to the next). Their memory would be the only thing that two rows' tiles, or
    one row's tiles in two iterations of a loop, share."""
    viewed = {ctx.root(v) for v in ctx.views}
    out = {}
    for name in sorted(frozenset().union(*(i.writes for i in items))):
        desc = ctx.sdfg.arrays.get(name)
        if desc is None or not desc.transient or name in ctx.views or name in viewed:
            continue
        touching = [(i, f) for i, f in zip(items, forms) if name in i.reads | i.writes]
        if users.get(name, 0) != len(touching) or name in touching[0][0].reads:
            continue
        if not all(f.single_lane or name in f.stored for _, f in touching):
            continue
        points = {_row_point(i, f, name) for i, f in touching}
        if len(points) == 1 and None not in points:
            out[name] = ctx.fresh("row")
    return out


def _regions(items: list[ir.Item], private: dict) -> tuple:
    """The members' regions together, where each member states its own (else whole containers)."""
    if not all(i.regions for i in items):
        return ()
    return tuple(r for i in items for r in i.regions if r[0] not in private)


def _fused_item(items: list[ir.Item], forms: list[RowForm], ctx, channel, users: dict) -> ir.Item:
    anchor = next(f for f in forms if f.reduction)
    rows = [f"__g{j}" for j in range(len(anchor.outer))]
    label = "rows " + " + ".join(i.label.removeprefix("map ") for i in items)
    private = _in_registers(items, forms, ctx, users)
    body = [f"{ctx.sdfg.arrays[n].dtype.ctype} {v};  // {n}: the row's element, lane 0's" for n, v in private.items()]
    ctx.private = private
    try:
        for n, (item, form) in enumerate(zip(items, forms)):
            if n:
                body.append(chan.tile_sync(channel, f"before {item.label} in {label}", item.source))
            alias = [f"const {INDEX_T} {p} = {g};" for p, g in zip(form.outer, rows) if p != g]
            body += [f"{{  // {item.label}"] + indent(item.row.prelude + alias + form.lines()) + ["}"]
    finally:
        ctx.private = {}
    bound = max((f.bound or 1024) if f.reduction else 0 for f in forms)
    reads = frozenset().union(*(i.reads for i in items)) - set(private)
    writes = frozenset().union(*(i.writes for i in items)) - set(private)
    # the step names what the steps' declarations of their views alias (their preludes are inside it)
    passed = pointers(ctx, reads | writes)

    def code(start: str | None = None, size: str | None = None) -> list[str]:
        out = extent_decls(rows, anchor.ranges, "r")
        if size:  # a block barrier where this run's tile size is not the last run's (overlap.py)
            barrier = chan.sync_lines(channel, f"{label} (its tile size changed)", grid=False)
            out += [f"const {INDEX_T} __tile_now = cpufree::tile_size<{bound}>({anchor.want});"]
            out += ["if (__tile_now != " + size + ") {"] + indent(barrier + [f"{size} = __tile_now;"]) + ["}"]
        out += with_tile(bound, anchor.want, tile_stride(rows, anchor.ranges, "r", body, start=start), passed)
        out += [f"{start} += {' * '.join(f'__xr_{p}' for p in rows)};"] if start else []
        return ["{"] + indent(out) + ["}"]

    strategy = (
        f"{len(items)} steps fused row by row ({', '.join(i.label for i in items)}): a tile per row "
        f"({layout(rows)}; tile size from {anchor.want}, bound {bound}), tile barriers between the steps, "
        "no grid.sync() inside"
    )
    work = next(i.work for i, f in zip(items, forms) if f is anchor)
    return ir.Item(
        label,
        code(),
        reads,
        writes,
        ir.Executor.GRID,
        work,
        strategy=strategy,
        form=ir.Form.ROWS,
        tile=bound,
        regions=_regions(items, private),
        dealt=code,
    )


def fuse_rows(node, ctx, channel=None, users: dict | None = None) -> int:
    """Fuses the row-local groups under ``node`` (the kernel IR of ``ctx``, a ``KernelContext``) in place; returns
    how many groups it made. ``channel``: the kernel's channel facts (its tile barriers in debug mode); ``users``:
    how many items of the kernel touch each container (counted here from ``node``, the root, when not given)."""
    if users is None:
        users = {}
        for item in ir.items(node):
            for name in item.reads | item.writes:
                users[name] = users.get(name, 0) + 1
    made = 0
    if isinstance(node, ir.Seq):
        children = ir.flatten(node)
        groups = _groups(children)
        if groups:
            out, pos = [], 0
            for start, end, forms in groups:
                out += children[pos:start]
                out.append(_fused_item(children[start:end], forms, ctx, channel, users))
                pos = end
            node.children = out + children[pos:]
            made += len(groups)
        for child in node.children:
            if not isinstance(child, ir.Item):
                made += fuse_rows(child, ctx, channel, users)
    elif isinstance(node, ir.Loop):
        made += fuse_rows(node.body, ctx, channel, users)
    elif isinstance(node, ir.Branch):
        made += sum(fuse_rows(b, ctx, channel, users) for b in node.bodies)
    elif isinstance(node, ir.Graph):
        made += sum(fuse_rows(b, ctx, channel, users) for b in node.blocks)
    return made
