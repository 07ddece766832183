"""Sequential loops of scalar work on one thread.

A loop whose body holds only scalar work (leader items: single-element tasklets and copies) and control flow
(conditions and interstate assignments, which every thread runs) would otherwise pay a grid synchronisation
wherever an interstate symbol or a condition reads what the leader wrote in the same iteration: NPBench's
mandelbrot2 filters its points with three such loops, 2-3 grid syncs per point. Such a loop runs on the leader
thread alone, from its first iteration to its last, as one leader item; the symbols it assigns are then handed to
every thread through device variables (one grid sync after the loop, placed by the sync analysis like any
other read of the leader's writes).

Loops that contain work of the whole grid or of a block, a library call, a block function's step or a
``return`` keep the ordinary lowering. The channel's cancel points are grid-wide, so with the channel on no loop
is collapsed.
"""

from __future__ import annotations

from collections.abc import Callable

from . import ir
from .loops import indent

_SCALAR = (ir.Executor.LEADER, ir.Executor.EVERY)


def _jumps(node) -> list[ir.Jump]:
    if isinstance(node, ir.Jump):
        return [node]
    if isinstance(node, ir.Seq):
        return [j for c in node.children for j in _jumps(c)]
    if isinstance(node, ir.Loop):
        return _jumps(node.body)
    if isinstance(node, ir.Branch):
        return [j for b in node.bodies for j in _jumps(b)]
    if isinstance(node, ir.Graph):
        return [j for b in node.blocks for j in _jumps(b)]
    return []


def is_serial(loop: ir.Loop) -> bool:
    """Whether ``loop`` holds scalar work only, some of it the leader's, and no ``return``."""
    found = list(ir.items(loop))
    scalar = all(
        i.executor in _SCALAR and i.part is None and not i.collective and i.block_threads is None for i in found
    )
    leader = any(i.executor == ir.Executor.LEADER for i in found)
    return scalar and leader and not any(j.kind == "return" for j in _jumps(loop.body))


def broadcast_name(loop: ir.Loop, symbol: str) -> str:
    label = "".join(c if c.isalnum() else "_" for c in loop.label)
    return f"__cpufree_serial_{label}_{symbol}"


def collapse(root: ir.Seq, print_node: Callable[[ir.Loop], list[str]], ctype: Callable[[str], str]) -> list[str]:
    """Replaces every outermost serial loop under ``root`` by a leader item and an item of every thread that reads
    the symbols back; ``print_node`` prints a loop as C++, ``ctype`` gives a symbol's C++ type. Returns the
    declarations of the device variables, for the file's globals."""
    declarations: list[str] = []
    _walk(root, print_node, ctype, declarations)
    return declarations


def _walk(node, print_node, ctype, declarations: list[str]) -> None:
    if isinstance(node, ir.Seq):
        children = []
        for child in node.children:
            if isinstance(child, ir.Loop) and is_serial(child):
                children += _collapsed(child, print_node, ctype, declarations)
            else:
                _walk(child, print_node, ctype, declarations)
                children.append(child)
        node.children = children
    elif isinstance(node, ir.Loop):
        _walk(node.body, print_node, ctype, declarations)
    elif isinstance(node, ir.Branch):
        for body in node.bodies:
            _walk(body, print_node, ctype, declarations)
    elif isinstance(node, ir.Graph):
        for block in node.blocks:
            _walk(block, print_node, ctype, declarations)


def _collapsed(loop: ir.Loop, print_node, ctype, declarations: list[str]) -> list[ir.Item]:
    found = list(ir.items(loop))
    symbols = sorted(loop.assigned)
    names = {s: broadcast_name(loop, s) for s in symbols}
    declarations += [f"__device__ {ctype(s)} {names[s]};" for s in symbols]
    code = ["if (__tid == 0) {"] + indent(print_node(loop) + [f"{names[s]} = {s};" for s in symbols]) + ["}"]
    run = ir.Item(
        f"serial loop {loop.label}",
        code,
        frozenset().union(*(i.reads for i in found)),
        frozenset().union(*(i.writes for i in found)) | frozenset(names.values()),
        ir.Executor.LEADER,
        strategy="one thread",
        source=next((i.source for i in found if i.source), ""),
    )
    if not symbols:
        return [run]
    back = ir.Item(
        f"symbols of {loop.label}",
        [f"{s} = {names[s]};" for s in symbols],
        frozenset(names.values()),
        executor=ir.Executor.EVERY,
    )
    return [run, back]
