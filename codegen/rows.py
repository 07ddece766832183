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

from . import channel as chan
from . import ir
from .captures import pointers
from .expressions import INDEX_T, same_value
from .loops import indent
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
        rename = {dace.symbolic.symbol(p): g for p, g in zip(form.outer, rows)}
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


def _fused_item(items: list[ir.Item], forms: list[RowForm], ctx, channel) -> ir.Item:
    anchor = next(f for f in forms if f.reduction)
    rows = [f"__g{j}" for j in range(len(anchor.outer))]
    label = "rows " + " + ".join(i.label.removeprefix("map ") for i in items)
    body = []
    for n, (item, form) in enumerate(zip(items, forms)):
        if n:
            body.append(chan.tile_sync(channel, f"before {item.label} in {label}", item.source))
        alias = [f"const {INDEX_T} {p} = {g};" for p, g in zip(form.outer, rows) if p != g]
        body += [f"{{  // {item.label}"] + indent(item.row.prelude + alias + form.lines()) + ["}"]
    bound = max((f.bound or 1024) if f.reduction else 0 for f in forms)
    reads = frozenset().union(*(i.reads for i in items))
    writes = frozenset().union(*(i.writes for i in items))
    code = extent_decls(rows, anchor.ranges, "r")
    # the step names what the steps' declarations of their views alias (their preludes are inside it)
    passed = pointers(ctx, reads | writes)
    code += with_tile(bound, anchor.want, tile_stride(rows, anchor.ranges, "r", body), passed)
    strategy = (
        f"{len(items)} steps fused row by row ({', '.join(i.label for i in items)}): a tile per row "
        f"({layout(rows)}; tile size from {anchor.want}, bound {bound}), tile barriers between the steps, "
        "no grid.sync() inside"
    )
    work = next(i.work for i, f in zip(items, forms) if f is anchor)
    return ir.Item(
        label,
        ["{"] + indent(code) + ["}"],
        reads,
        writes,
        ir.Executor.GRID,
        work,
        strategy=strategy,
        form=ir.Form.ROWS,
        tile=bound,
    )


def fuse_rows(node, ctx, channel=None) -> int:
    """Fuses the row-local groups under ``node`` (the kernel IR of ``ctx``, a ``KernelContext``) in place; returns
    how many groups it made. ``channel``: the kernel's channel facts (its tile barriers in debug mode)."""
    made = 0
    if isinstance(node, ir.Seq):
        children = ir.flatten(node)
        groups = _groups(children)
        if groups:
            out, pos = [], 0
            for start, end, forms in groups:
                out += children[pos:start]
                out.append(_fused_item(children[start:end], forms, ctx, channel))
                pos = end
            node.children = out + children[pos:]
            made += len(groups)
        for child in node.children:
            if not isinstance(child, ir.Item):
                made += fuse_rows(child, ctx, channel)
    elif isinstance(node, ir.Loop):
        made += fuse_rows(node.body, ctx, channel)
    elif isinstance(node, ir.Branch):
        made += sum(fuse_rows(b, ctx, channel) for b in node.bodies)
    elif isinstance(node, ir.Graph):
        made += sum(fuse_rows(b, ctx, channel) for b in node.blocks)
    return made
