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

from dace_cpufree.cpp import indent

from . import ir

_SCALAR = (ir.Executor.LEADER, ir.Executor.EVERY)


def is_serial(loop: ir.Loop) -> bool:
    """Whether ``loop`` holds scalar work only, some of it the leader's, and no ``return``."""
    found = list(ir.items(loop))
    scalar = all(
        i.executor in _SCALAR and i.part is None and not i.collective and i.block_threads is None for i in found
    )
    leader = any(i.executor == ir.Executor.LEADER for i in found)
    returns = any(isinstance(c, ir.Jump) and c.kind == "return" for seq in ir.seqs(loop.body) for c in seq.children)
    return scalar and leader and not returns


def broadcast_name(loop: ir.Loop, symbol: str) -> str:
    label = "".join(c if c.isalnum() else "_" for c in loop.label)
    return f"__cpufree_serial_{label}_{symbol}"


def collapse(root: ir.Seq, print_node: Callable[[ir.Loop], list[str]], ctype: Callable[[str], str]) -> list[str]:
    """Replaces every outermost serial loop under ``root`` by a leader item and an item of every thread that reads
    the symbols back; ``print_node`` prints a loop as C++, ``ctype`` gives a symbol's C++ type. Returns the
    declarations of the device variables, for the file's globals."""
    declarations: list[str] = []
    for seq in ir.seqs(root):  # a collapsed loop leaves the children before the walk would enter it
        children = []
        for child in seq.children:
            serial = isinstance(child, ir.Loop) and is_serial(child)
            children += _collapsed(child, print_node, ctype, declarations) if serial else [child]
        seq.children = children
    return declarations


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
