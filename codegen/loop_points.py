"""The channel's part in a kernel's loops, settled after the grid syncs are placed: which grid syncs are cancel
points, and how a loop that reports progress shows it.

A cancel point costs a compare and a branch around an out-of-line call before its grid sync and a countdown after
it. In a time loop whose step is a few microseconds that is measurable: with both grid syncs of a Jacobi 2-D step at
NPBench's S size cancel points, the channel build ran 1.018x and 1.032x the plain one on two H100s; with the first
alone 1.009x on the first (docs/channel.md). A stop needs one cancel point per iteration to be seen within an
iteration, so in a loop whose body has a grid sync at its top level (one every iteration reaches, not in a branch)
the first such sync stays a cancel point and the loop's other grid syncs (later in the body, in its branches, before
its condition or update, not those of nested loops, which are their loop's) are plain (``ir.Item.plain_sync``).
Where that sync opens the body, the loop head's cancel point is left out (the sync's does all it does). Every
thread still counts every grid sync, so a stop reports how many it passed. With debug waits every grid sync stays a
cancel point: each reports where it waited.
"""

from __future__ import annotations

from . import ir
from .channel import TICK_COUNTED, ChannelFacts


def settle_loop_points(root, channel: ChannelFacts) -> None:
    for loop in _loops(root):
        if loop.progress:
            _settle_progress(loop)
        if channel.debug_waits is None:
            _settle_cancel_points(loop)


def _loops(root):
    for seq in ir.seqs(root):
        for child in seq.children:
            if isinstance(child, ir.Loop):
                yield child


def _settle_progress(loop: ir.Loop) -> None:
    """A progress loop with a grid sync in its body has its progress shown at the looks of the cancel path (at most
    CPUFREE_CHANNEL_MAX_APART grid syncs apart): read from the loop's variable, passed to every grid sync inside it,
    where DaCe's loop analysis finds its range; else its head counts the iterations begun. A store of its own in the
    loop, however rarely it runs, cost a Jacobi 2-D step at NPBench's S size 0.25 us of its 2.8 us on an H100, the
    count in a register 1 % (docs/channel.md)."""
    head = loop.body.children[0]  # loop_head's item
    parts = [p for p in (loop.cond, loop.body, loop.update) if p is not None]  # not init: it runs once
    synced = [i for p in parts for i in ir.items(p) if i.sync_before]
    if not synced:
        return
    head.head.tick = None if loop.progress_var else TICK_COUNTED
    head.code = head.head.code()
    for item in synced:
        item.progress_at = loop.progress_var or "__cpufree_leader.ticks"


def _settle_cancel_points(loop: ir.Loop) -> None:
    top = ir.flatten(loop.body)
    first = next((c for c in top if isinstance(c, ir.Item) and c.sync_before), None)
    if first is None:
        return
    for part in (loop.cond, loop.body, loop.update):  # not the syncs of nested loops: those are their loop's
        for item in ir.items(part, loops=False):
            if item.sync_before and item is not first:
                item.plain_sync = True
    if len(top) > 1 and top[1] is first:
        # the body starts with its cancel point: the head's own would only repeat it, and kept apart from it by a
        # progress tick it cost a second compare and branch per iteration
        top[0].head.cancel = False
        top[0].code = top[0].head.code()
