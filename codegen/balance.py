"""Grid steps that follow work on some blocks only take their indices in chunks, first come, first served.

A put (``Executor.BLOCKS``/``BLOCK``) keeps the blocks that issue it busy for its stores and its fence; the
grid-stride loop after it gives every thread the same share, so those blocks finish late and the next grid
sync waits for them (the overlapped stencils: the interior after the halo puts). Such a map is printed in its
balanced form instead (``Item.balanced``, ``cpufree::balanced`` in ``runtime.cuh``): the blocks take chunks
of consecutive indices from a counter as they become free, so the putting blocks take fewer.

The counter is reset by the last ask of a round, which is only safe when no block can start the step's next
round before every block has finished this one: a grid sync must separate two runs of the step. It does
when the sequence holding the step also holds a grid sync of its own (before an item or a branch) and no
jump (``break``, ``continue``, ``return``) can skip it.

``DACE_CPUFREE_BALANCE=0`` keeps every step in its grid-stride form.
"""

from __future__ import annotations

import os

from . import ir
from .ir import Executor

ENV = "DACE_CPUFREE_BALANCE"

#: Items that occupy some blocks of the grid only (block-cooperative SHMEM calls).
_PARTIAL = (Executor.BLOCK, Executor.BLOCKS)


def enabled() -> bool:
    return os.environ.get(ENV, "1") != "0"


def _has_jump(node) -> bool:
    if isinstance(node, ir.Jump):
        return True
    if isinstance(node, ir.Seq):
        return any(_has_jump(c) for c in node.children)
    if isinstance(node, ir.Branch):
        return any(_has_jump(b) for b in node.bodies)
    if isinstance(node, ir.Loop):
        return _has_jump(node.body)
    if isinstance(node, ir.Graph):
        return True  # gotos
    return False


def _syncs_first(child) -> bool:
    """Whether a grid sync is printed right before ``child``, every time the sequence reaches it."""
    if isinstance(child, ir.Item):
        return child.sync_before
    if isinstance(child, ir.Branch):
        return any(c is not None and c.sync_before for c in child.conds)
    return False


def _flat(seq: ir.Seq) -> list:
    """The children of ``seq`` in program order, nested sequences (a state's items) spliced in."""
    out = []
    for child in seq.children:
        out += _flat(child) if isinstance(child, ir.Seq) else [child]
    return out


def _nested(node):
    """The sequences directly inside ``node`` (branch and loop bodies, an unstructured region's blocks)."""
    if isinstance(node, ir.Branch):
        return list(node.bodies)
    if isinstance(node, ir.Loop):
        return [node.body]
    if isinstance(node, ir.Graph):
        return list(node.blocks)
    return []


def _balance_seq(seq: ir.Seq) -> int:
    count = 0
    children = _flat(seq)
    separated = any(_syncs_first(c) for c in children) and not _has_jump(seq)
    partial = False
    for child in children:
        if _syncs_first(child):
            partial = False
        if isinstance(child, ir.Item):
            if child.executor in _PARTIAL:
                partial = True
            elif partial and separated and child.balanced is not None and child.executor == Executor.GRID:
                child.code, child.balanced = child.balanced, None
                child.strategy += "; chunks taken by the blocks as they ask (after work on some blocks)"
                count += 1
        else:
            partial = partial or any(i.executor in _PARTIAL for i in ir.items(child))
        for inner in _nested(child):
            count += _balance_seq(inner)
    return count


def balance_steps(root: ir.Seq) -> int:
    """Prints the grid steps that follow block-occupying work in their balanced form (see the module's
    docstring); returns how many. Call after :func:`syncs.place_grid_syncs`."""
    return _balance_seq(root) if enabled() else 0
