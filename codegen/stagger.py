"""Staggering: small grid steps between two grid synchronisations run on different threads.

A grid-stride loop gives its element ``f`` to thread ``f`` (modulo the grid), so consecutive small steps
with no synchronisation between them (the halo unpacking of a Jacobi step: four copies of one line each)
all land on the first threads, hence the first blocks, one after another, while the rest of the grid
waits at the next synchronisation. Here each such step starts at the thread where the steps before it in
the same synchronisation interval ended (``cpufree::rotate``), so they run side by side. It changes
which thread does what, never what is done: a rotation is a permutation of the threads.

Applied to kernels that communicate (there the interval after the waits holds the unpacking);
``DACE_CPUFREE_STAGGER=0`` turns it off.
"""

from __future__ import annotations

from . import ir

_LOOP = "for (long long __f = __tid; "


def _rotate(item: ir.Item, offset: list[str]) -> None:
    line = next(k for k, text in enumerate(item.code) if _LOOP in text)
    off = " + ".join(f"({w})" for w in offset)
    item.code = list(item.code)
    item.code[line] = item.code[line].replace(
        _LOOP, f"for (long long __f = cpufree::rotate(__tid, (long long)({off}), __nthreads); "
    )


def _staggerable(item: ir.Item) -> bool:
    return (
        item.executor == ir.Executor.GRID
        and item.work is not None
        and sum(_LOOP in text for text in item.code) == 1
    )


def _seq(node, offset: list[str]) -> list[str]:
    """Staggers the items under ``node``, starting at ``offset`` (the works of the steps before it in the
    interval); returns the offset after it."""
    if isinstance(node, ir.Item):
        if node.sync_before:
            offset = []
        if node.executor != ir.Executor.GRID:
            return offset
        if not _staggerable(node):
            return []  # where its elements end is not known: the next step starts at thread 0
        if offset:
            _rotate(node, offset)
        return offset + [node.work]
    if isinstance(node, ir.Seq):
        for child in node.children:
            offset = _seq(child, offset)
        return offset
    if isinstance(node, ir.Branch):
        if any(c is not None and c.sync_before for c in node.conds):
            offset = []
        ends = [_seq(body, offset) for body in node.bodies]
        return max(ends, key=len) if len(node.bodies) == 1 else []
    if isinstance(node, ir.Loop):
        _seq(node.body, [])
        return []
    if isinstance(node, ir.Graph):
        for block in node.blocks:
            _seq(block, [])
        return []
    return offset  # a jump


def stagger(root: ir.Seq) -> None:
    """Rotates the grid-stride loops of the small steps in each synchronisation interval (see module doc)."""
    _seq(root, [])
