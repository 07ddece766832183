"""Independent steps side by side: consecutive grid-wide steps of the kernel with no data dependency between them
run on disjoint sets of the grid's blocks instead of one after another on all of them.

A run of such steps becomes an automatic block scope: each step a part (:class:`~dace_cpufree.facts.BlockPart`
with ``automatic``): one block plus a share of the rest in proportion to its elements. The split is computed where
the steps run, from their element counts at that point (``cpufree::auto_share``, a few multiplications): when
together they have at least as many elements as the grid has threads, every step runs on the whole grid as before,
so large steps lose nothing; when they are smaller (edge cells, halo copies, small vectors), they run at the same
time. Two steps of one scope are
independent by construction (no read-after-write, write-after-read or write-after-write between them), so the
sync analysis places nothing between them.
"""

from __future__ import annotations

from dace_cpufree.facts import BlockPart

from . import ir
from .syncs import NONE, _accesses, conflicts


def split_independent(root, first_scope: int) -> int:
    """Marks runs of independent grid steps under ``root`` as automatic scopes numbered from ``first_scope``;
    returns how many."""
    scope = first_scope
    for seq in ir.seqs(root):
        run = []
        for child in [*seq.children, None]:
            if _candidate(child):
                run.append(child)
                continue
            scope = _assign(run, scope)
            run = []
    return scope - first_scope


def _candidate(node) -> bool:
    return (
        isinstance(node, ir.Item)
        and node.executor == ir.Executor.GRID
        and node.part is None
        and not node.collective
        and node.elements is not None
        and bool(node.reads or node.writes)
    )


def _independent(a: ir.Item, b: ir.Item) -> bool:
    return conflicts(_accesses(a), b) == NONE and conflicts(_accesses(b), a) == NONE


def _assign(run: list, scope: int) -> int:
    groups, group = [], []
    for item in run:
        if group and not all(_independent(other, item) for other in group):
            groups.append(group)
            group = []
        group.append(item)
    groups.append(group)
    for group in groups:
        if len(group) < 2:
            continue
        counts = tuple(item.elements for item in group)
        for index, item in enumerate(group):
            item.part = BlockPart(
                scope, index, len(group), item.elements, True, item.label, automatic=True, scope_elems=counts
            )
        scope += 1
    return scope
