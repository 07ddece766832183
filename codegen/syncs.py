"""Placement of ``grid.sync()``: only where a data dependency crosses threads.

A forward data-flow analysis over the kernel IR. The state is the set of accesses to device
memory made since the last grid synchronisation, as ``(container, mode, executor)``. Before an
item, a synchronisation is needed if the item conflicts with a pending access: read-after-write,
write-after-read or write-after-write on the same container, unless both sides run within the same
block (the leader thread, one thread or all threads of one block), where program order and the block
barriers around block-wide items already order them. After a synchronisation the
pending set holds the item's own accesses only. Loops and unstructured regions iterate to a fixed
point; the decisions only ever add synchronisations, so the iteration terminates.

Loops whose variable takes a value of its own in every iteration (``Loop.distinct``) carry what their body
leaves pending into the next iteration with that variable renamed to an *earlier* one: an access at a point
``f(i)`` of some dimension, ``f`` linear in ``i`` with the other symbols the same in every iteration, is apart from
the point ``f(i)`` of the current iteration. A loop whose iterations write disjoint rows then needs no grid sync
between them (syr2k's row updates). On leaving the loop the renaming is undone.

Items run by each block for itself (``Executor.EACH``: a wait that one thread of every block makes) are the
exception: their effect holds in every block once the block's threads have met, so an item that depends on
them alone gets a block barrier (``bar_before``), which retires the pending EACH accesses. Where a barrier
cannot be printed (a loop's condition or update, an unstructured region's edge) it becomes a grid sync.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import dace
import sympy

from dace_cpufree.bounds import disjoint

from . import ir
from .ir import Executor

# frozenset[tuple[container, mode, Executor, block, subset, part key, Earlier | None]]
Pending = frozenset

# Items confined to one block: among those on the same block, program order (and the block barriers
# around BLOCK items) already orders the accesses.
_IN_ONE_BLOCK = (Executor.LEADER, Executor.THREAD, Executor.BLOCK)


@dataclass(frozen=True)
class Earlier:
    """A pending access that an earlier iteration of a loop made: in its subset the loop variable ``var`` is
    renamed ``earlier`` (never equal to ``var``); ``varying`` are the symbols that differ between iterations."""

    var: str
    earlier: str
    varying: frozenset


def _accesses(item: ir.Item) -> Pending:
    key = item.part_key
    if item.regions:
        return frozenset((name, mode, item.executor, item.block, sub, key, None) for name, mode, sub in item.regions)
    acc = {(name, "R", item.executor, item.block, None, key, None) for name in item.reads}
    acc |= {(name, "W", item.executor, item.block, None, key, None) for name in item.writes}
    return frozenset(acc)


def _disjoint(a, b, earlier: Earlier | None = None) -> bool:
    """Whether two subsets of one container provably do not overlap (unknown counts as overlapping); ``a`` is
    another iteration's where ``earlier`` says so."""
    if a is None or b is None:
        return False
    try:
        if dace.subsets.intersects(a, b) is False:
            return True
        ranges = list(zip(a.ndrange(), b.ndrange()))
    except (TypeError, ValueError, NotImplementedError, AttributeError):
        return False
    if len(a) != len(b):
        return False
    if any(_apart(r, q) or (earlier is not None and _other_iteration(r, q, earlier)) for r, q in ranges):
        return True
    return disjoint(a, b)  # clamped ranges (a distributed program's owned parts and halos)


def _other_iteration(r, q, earlier: Earlier) -> bool:
    """Whether the point ``r`` of an earlier iteration differs from the point ``q`` of the current one: their
    difference is ``c * (earlier - var)``, ``c`` a nonzero number, and no other symbol in them varies."""
    (b1, e1, _), (b2, e2, _) = r, q
    try:
        x1, x2 = (dace.symbolic.pystr_to_symbolic(v) for v in (b1, b2))
        if x1 != dace.symbolic.pystr_to_symbolic(e1) or x2 != dace.symbolic.pystr_to_symbolic(e2):
            return False  # not single points
        named = {str(s): s for s in x1.free_symbols | x2.free_symbols}
        if (set(named) - {earlier.var, earlier.earlier}) & earlier.varying:
            return False
        var, prev = named.get(earlier.var), named.get(earlier.earlier)
        if var is None or prev is None:
            return False
        d = sympy.expand(x1 - x2)
        c = sympy.diff(d, prev)
        return bool(c.is_number and c != 0 and sympy.diff(d, prev, 2) == 0 and sympy.expand(d.subs(prev, var)) == 0)
    except (TypeError, ValueError, AttributeError, sympy.SympifyError):
        return False


_ENUMERATED = 4096  # most elements of a strided range that _apart lists one by one


def _apart(r, q) -> bool:
    """Whether two ranges ``(lo, hi, step)`` of one dimension share no index, when their bounds are numbers.
    DaCe's ``intersects`` does not decide strided ranges (the two opposite edge rows of a stencil as one
    step, ``1:LX-1:LX-3``, against the columns between them)."""
    try:
        (lo1, hi1, s1), (lo2, hi2, s2) = ([int(v) for v in x] for x in (r, q))
    except TypeError:
        return False
    if max(lo1, lo2) > min(hi1, hi2):
        return True
    if (hi1 - lo1) // s1 > (hi2 - lo2) // s2:
        (lo1, hi1, s1), (lo2, hi2, s2) = (lo2, hi2, s2), (lo1, hi1, s1)
    if (hi1 - lo1) // s1 >= _ENUMERATED:
        return False
    return not any(lo2 <= x <= hi2 and (x - lo2) % s2 == 0 for x in range(lo1, hi1 + 1, s1))


def _item_regions(item: ir.Item, name: str) -> list:
    return [(mode, sub) for n, mode, sub in item.regions if n == name] if item.regions else []


# What orders an item after the pending accesses: nothing, a block barrier, a barrier of the blocks of the item's
# block function (both accesses in that function), a grid sync.
NONE, BAR, PART, GRID = 0, 1, 2, 3


def conflicts(pending: Pending, item: ir.Item) -> int:
    """What ``item`` needs before it: ``GRID`` if it may touch memory that another block touched since the last
    sync, ``PART`` if all such accesses were made in the item's own block function (its blocks alone),
    ``BAR`` if its only conflicts are with items that every block ran for itself (EACH), else ``NONE``. Block
    numbers of items in block functions count from the function's first block: the same number in two
    functions is two blocks."""
    need = NONE
    key = item.part_key
    for name, mode, executor, block, sub, part, earlier in pending:
        if name not in item.reads and name not in item.writes:
            continue
        if mode == "R" and name not in item.writes:
            continue  # read after read
        same_part = part == key
        if part is not None and key is not None and part[0] == key[0] and not same_part:
            continue  # two block functions of one scope: independent (frontend check; sizes checked at launch)
        if executor in _IN_ONE_BLOCK and item.executor in _IN_ONE_BLOCK and block == item.block and same_part:
            continue  # same block: program order and block barriers
        mine = _item_regions(item, name)
        mine = [other for m, other in mine if m == "W" or mode == "W"]
        if sub is not None and mine and all(_disjoint(sub, other, earlier) for other in mine):
            continue  # e.g. a put reading the edge rows, a wait writing the halo ring
        if not same_part:
            return GRID
        if executor == Executor.EACH:
            need = max(need, BAR)
        elif key is None:
            return GRID
        else:
            need = PART
    return need


def _order(item: ir.Item, need: int, pending: Pending) -> Pending:
    """Marks ``need`` (a grid sync or a block barrier) before ``item``; returns what stays pending after it: a
    barrier retires the accesses of EACH items (``executor`` is the third field), a grid sync all of them."""
    if need == GRID:
        item.sync_before = True
        return frozenset()
    if need == PART:  # every block of the part meets: its own accesses are ordered (each block's too)
        item.part_sync_before = True
        return frozenset(p for p in pending if p[5] != item.part_key)
    if need == BAR:
        item.bar_before = True
        return frozenset(p for p in pending if p[2] != Executor.EACH or p[5] != item.part_key)
    return pending


def _flow(node, pending: Pending) -> Pending:
    if node is None or isinstance(node, ir.Jump):
        return pending
    if isinstance(node, ir.Item):
        if not node.reads and not node.writes:
            return pending
        # from an earlier iteration
        marked = GRID if node.sync_before else PART if node.part_sync_before else BAR if node.bar_before else NONE
        return _order(node, max(marked, conflicts(pending, node)), pending) | _accesses(node)
    if isinstance(node, ir.Seq):
        for child in node.children:
            pending = _flow(child, pending)
        return pending
    if isinstance(node, ir.Loop):
        return _flow_loop(node, pending)
    if isinstance(node, ir.Branch):
        # A sync that the first item of some branch needs goes before the branch: then the other
        # branches (and the path through none, e.g. a put skipped at a domain edge) start clean too.
        firsts = [next(iter(ir.items(body)), None) for body in node.bodies]
        if node.conds and node.conds[0] is not None:
            need = max((conflicts(pending, f) for f in firsts if f is not None and (f.reads or f.writes)), default=NONE)
            pending = _order(node.conds[0], need, pending)
        out = frozenset()
        has_else = False
        for cond, body in zip(node.conds, node.bodies):
            if cond is None:
                has_else = True
            else:
                pending = _flow(cond, pending)
            out |= _flow(body, pending)
        return out if has_else else out | pending
    if isinstance(node, ir.Graph):
        return _flow_graph(node, pending)
    raise TypeError(f"unknown IR node {node!r}")


def _flow_loop(loop: ir.Loop, pending: Pending) -> Pending:
    """Iterates the body until what the back edge carries is stable. Each round decides the body's
    synchronisations afresh from that round's head, which only grows: the last round's decisions hold
    for every iteration, and none is kept that only an earlier, smaller head asked for (the sync that
    what comes before the loop needs goes to the body's first item that touches it, not later)."""
    pending = _flow(loop.init, pending)
    back = frozenset()
    seen = frozenset()
    earlier = Earlier(loop.distinct, f"__earlier_{loop.distinct}", loop.varying) if loop.distinct else None
    while True:
        head = pending | back
        for part in (loop.cond, loop.body, loop.update):
            for item in ir.items(part) if part is not None else ():
                item.sync_before = item.bar_before = item.part_sync_before = False
        if loop.inverted:
            body_out = _flow(loop.body, head)
            if loop.update_before_condition:
                tail = _flow(loop.cond, _flow(loop.update, body_out))
            else:
                tail = _flow(loop.update, _flow(loop.cond, body_out))
        else:
            body_out = _flow(loop.body, _flow(loop.cond, head))
            tail = _flow(loop.update, body_out)
        seen |= head | body_out | tail
        carried = _carried(tail, head, earlier)
        if carried <= back:
            return _restored(seen, earlier)  # superset of what any exit (also a break) can leave pending
        back |= carried


def _carried(tail: Pending, head: Pending, earlier: Earlier | None) -> Pending:
    """What the back edge hands to the next iteration: the accesses this iteration made with the loop variable
    renamed to an earlier one (what came in at the head, from before the loop or already renamed, as it is)."""
    if earlier is None:
        return tail
    out = set()
    for entry in tail:
        sub = None if entry in head else _renamed(entry[4], earlier.var, earlier.earlier)
        out.add(entry if sub is None else entry[:4] + (sub, entry[5], earlier))
    return frozenset(out)


def _restored(pending: Pending, earlier: Earlier | None) -> Pending:
    """``pending`` after the loop: the renamed accesses with the loop variable's name again (its value after the
    loop may be one an iteration had, after a ``break``)."""
    if earlier is None:
        return pending
    return frozenset(
        entry[:4] + (_renamed(entry[4], earlier.earlier, earlier.var), entry[5], None) if entry[6] == earlier else entry
        for entry in pending
    )


def _renamed(sub, old: str, new: str):
    """A copy of the subset ``sub`` with the symbol called ``old`` renamed ``new`` (``None``: ``old`` is not in it)."""
    if sub is None:
        return None
    found = [s for dim in sub.ndrange() for x in dim for s in dace.symbolic.pystr_to_symbolic(x).free_symbols]
    symbol = next((s for s in found if str(s) == old), None)
    if symbol is None:
        return None
    sub = copy.deepcopy(sub)
    sub.replace({symbol: dace.symbolic.symbol(new, symbol.dtype)})
    return sub


def _flow_graph(graph: ir.Graph, pending: Pending) -> Pending:
    n = len(graph.blocks)
    inputs = [frozenset() for _ in range(n)]
    inputs[0] = pending
    out = frozenset()
    changed = True
    while changed:
        changed = False
        for i, block in enumerate(graph.blocks):
            block_out = _flow(block, inputs[i])
            exits = [e for e in graph.edges if e.src == i]
            if not exits or any(e.cond is not None for e in exits):
                out |= block_out
            for edge in exits:
                edge_out = _flow(edge.assign, _flow(edge.cond, block_out))
                if not edge_out <= inputs[edge.dst]:
                    inputs[edge.dst] |= edge_out
                    changed = True
    return out


def _unprintable_bars(node):
    """Items whose ``bar_before`` the printer cannot honour: a loop's init, condition and update (printed
    inside the ``for`` header) and the conditions and assignments on an unstructured region's edges."""
    if isinstance(node, ir.Seq):
        for child in node.children:
            yield from _unprintable_bars(child)
    elif isinstance(node, ir.Loop):
        yield from (part for part in (node.init, node.cond, node.update) if part is not None)
        yield from _unprintable_bars(node.body)
    elif isinstance(node, ir.Branch):
        for body in node.bodies:
            yield from _unprintable_bars(body)
    elif isinstance(node, ir.Graph):
        for block in node.blocks:
            yield from _unprintable_bars(block)
        for edge in node.edges:
            yield from (part for part in (edge.cond, edge.assign) if part is not None)


def place_grid_syncs(root: ir.Seq) -> int:
    """Marks the items that need a grid synchronisation (or a block barrier) before them; returns how many
    grid synchronisations."""
    _flow(root, frozenset())
    for item in _unprintable_bars(root):
        if item.bar_before:
            item.sync_before = True  # a grid sync orders all that a barrier would
    return sum(1 for item in ir.items(root) if item.sync_before)
