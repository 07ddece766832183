"""Tile steps whose runs overlap: block barriers between tiles of different sizes, rows dealt round the grid.

Without a grid sync between two tile steps (two runs of one step in a loop, or two independent steps), the warps of
a block go from one to the next as they finish. A tile of more than a warp synchronises on a named barrier of its
block (``cpufree::BlockTile``: id ``1 +`` its rank, its size as the count); if the next step's tiles have another
size, the warps that went ahead meet the laggards of the previous step at the same barrier id with another count:
undefined on the GPU, an illegal instruction on an H100 (syr2k at paper, tiles of 64 and 128 lanes). So such a step
gets a block barrier before it (``bar_before``) wherever a step of more than a warp per tile may still run in the
block since its last barrier.

Rows. A tile step gives row ``r`` to tile ``r`` modulo the grid's tiles. When the loop around it has no grid sync, the
tiles do not wait for each other between iterations, and a tile that finishes its rows goes on to the next
iteration; with the same first tile in every iteration, though, the first tiles take a row in every iteration and
the last ones only where there are many rows: syr2k's iteration ``i`` has ``i + 1`` rows, so the first tile works
through all 1,200 iterations while the others wait. Here each such step keeps a count of the rows of its earlier runs
(a register of every thread, the same in all of them) and starts the next run at the tile after the last one used:
the rows of all the iterations go round the grid as one sequence. Which tile runs a row never changes a result (a
tile-stride loop's rows are independent); where the loop has grid syncs the tiles stay as they are, each keeping its
rows in every iteration (their data may still be in its multiprocessor's L1).
"""

from __future__ import annotations

from . import ir


def _barriers(node, open_: bool, warp: int, entries: dict) -> bool:
    """Marks a block barrier before the tile steps of more than ``warp`` lanes that may follow another such step
    with no barrier between them in their block; ``open_``: one may be running on entry. Returns the same on exit.
    ``entries``: per loop (``id``), whether one may be running where the loop is entered from outside.
    """
    if isinstance(node, ir.Item):
        if node.sync_before or node.bar_before:
            open_ = False
        if node.tile > warp and node.executor == ir.Executor.GRID:
            if open_:
                node.bar_before = True
            open_ = True
        return open_
    if isinstance(node, ir.Seq):
        for child in node.children:
            open_ = _barriers(child, open_, warp, entries)
        return open_
    if isinstance(node, ir.Loop):
        parts = [p for p in (node.init, node.cond) if p is not None]
        for part in parts:
            open_ = _barriers(part, open_, warp, entries)
        entries[id(node)] = entries.get(id(node), False) or open_
        out = open_
        for _ in range(2):  # the second time with what the back edge brings
            out = _barriers(node.body, out or open_, warp, entries)
            out = _barriers(node.update, out, warp, entries) if node.update else out
            out = _barriers(node.cond, out, warp, entries)
        return out or open_
    if isinstance(node, ir.Branch):
        out = open_ and not any(c is None for c in node.conds)
        for cond, body in zip(node.conds, node.bodies):
            entry = _barriers(cond, open_, warp, entries) if cond is not None else open_
            out = _barriers(body, entry, warp, entries) or out
        return out
    if isinstance(node, ir.Graph):
        for block in node.blocks:
            _barriers(block, True, warp, entries)
        return True
    return open_


def deal_rows(root: ir.Seq, warp: int = 32) -> list[str]:
    """Places the block barriers between tile steps of different runs (``warp``: the largest tile that needs no
    named barrier, ``cpufree::with_tile``'s), then deals the rows of the tile steps in loops without grid syncs
    round the grid (their code replaced by the form that takes a counter); returns the declarations of the
    counters, for the top of the kernel. Run after the grid syncs are placed.

    Where such a step is the loop's only tile step of more than a warp and none runs where the loop is entered,
    only its own previous run can overlap a run: its barrier is taken only when its tile size changes (a
    variable holds the last one; syr2k's tiles change a few times in 1,200 iterations)."""
    entries: dict = {}
    _barriers(root, False, warp, entries)
    declarations = []
    for loop in (c for seq in ir.seqs(root) for c in seq.children if isinstance(c, ir.Loop)):
        parts = [p for p in (loop.init, loop.cond, loop.update) if p is not None]
        if any(i.sync_before or i.part_sync_before for p in [loop.body, *parts] for i in ir.items(p)):
            continue
        tiled = [i for i in ir.items(loop.body) if i.tile > warp and i.executor == ir.Executor.GRID]
        for item in ir.items(loop.body, loops=False):
            if item.dealt is None:
                continue
            n = len(declarations)
            declarations.append(f"    long long __dealt{n} = 0;  // rows of {item.label} so far")
            size = None
            if tiled == [item] and not entries.get(id(loop), True):
                size = f"__tile_size{n}"
                declarations.append(f"    long long {size} = 0;  // its tile size in the last run")
                item.bar_before = False
            item.code = item.dealt(f"__dealt{n}", size)
    return declarations
